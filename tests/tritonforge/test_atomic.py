"""Replacing files and directories: the old or the new, never a half, and nothing left behind."""

from __future__ import annotations

import os

import pytest

from tritonforge import atomic


def leftovers(d):
    return sorted(p.name for p in d.iterdir() if ".tmp-" in p.name or ".old-" in p.name)


def test_write_replaces_a_file_whole(tmp_path):
    path = tmp_path / "sub" / "lock.json"
    atomic.write_text(path, "one")
    atomic.write_bytes(path, b"two")
    assert path.read_text() == "two" and leftovers(path.parent) == []
    assert path.stat().st_mode & 0o777 == 0o666 & ~_umask()  # the usual permissions


def test_a_failed_write_keeps_the_old_file(tmp_path):
    path = tmp_path / "f"
    atomic.write_text(path, "old")
    with pytest.raises(TypeError):
        atomic.write_bytes(path, "not bytes")
    assert path.read_text() == "old" and leftovers(tmp_path) == []


def test_install_files_changes_nothing_unless_every_copy_succeeds(tmp_path):
    a, b = tmp_path / "a.src", tmp_path / "b.src"
    a.write_text("A")
    b.write_text("B")
    dest_a, dest_b = tmp_path / "out" / "a", tmp_path / "elsewhere" / "b"
    atomic.install_files([(a, dest_a), (b, dest_b)])
    assert (dest_a.read_text(), dest_b.read_text()) == ("A", "B")
    a.write_text("A2")
    with pytest.raises(FileNotFoundError):
        atomic.install_files([(a, dest_a), (tmp_path / "missing", dest_b)])
    assert dest_a.read_text() == "A" and leftovers(dest_a.parent) == [] and leftovers(dest_b.parent) == []


def test_replace_dir_swaps_a_directory(tmp_path):
    dest = tmp_path / "dist"
    first = tmp_path / "stage1"
    first.mkdir()
    (first / "x").write_text("1")
    atomic.replace_dir(first, dest)
    second = tmp_path / "stage2"
    second.mkdir()
    (second / "y").write_text("2")
    aside = tmp_path / "trash"
    atomic.replace_dir(second, dest, aside)
    assert sorted(p.name for p in dest.iterdir()) == ["y"] and not first.exists() and not aside.exists()
    assert leftovers(tmp_path) == []


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
