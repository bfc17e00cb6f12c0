"""Run `invoke` the way a user does: in a fresh copy of the repository, with the README's command line,
invoke.yaml's defaults and relative paths. Only the kernels directory (and where a test needs it, the
compile cache) is pointed elsewhere, through the documented INVOKE_TRITONFORGE_* overrides."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CACHE = Path(".cache/tritonforge/compile")  # invoke.yaml's cache_dir


def repo_files(root: Path = ROOT) -> list[str]:
    """What a fresh clone holds: tracked files, plus new files not yet committed (not ignored ones)."""
    proc = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                          capture_output=True, check=True)
    return sorted({f for f in proc.stdout.decode().split("\0") if f and (root / f).is_file()})


def fresh_copy(dest: Path, root: Path = ROOT) -> Path:
    """A copy of the repository's files at `dest`, sharing this checkout's .venv (as scripts/setup made it)."""
    for rel in repo_files(root):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, target)
    git = ["git", "-c", "user.name=tritonforge tests", "-c", "user.email=tests@tritonforge.invalid"]
    for argv in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "fresh copy"]):  # a clone is a git repo
        subprocess.run([*git, *argv], cwd=dest, check=True, capture_output=True)
    if (root / ".venv").is_dir():
        (dest / ".venv").symlink_to(root / ".venv")
    return dest


def seed_cache(repo: Path, cache: Path) -> None:
    """Fill the copy's default compile cache from a test build's cache, so a build finds its kernels there."""
    shutil.copytree(cache, repo / DEFAULT_CACHE, dirs_exist_ok=True)


def invoke_argv(repo: Path) -> list[str]:
    """`.venv/bin/invoke`, as the README types it; `python -m invoke` where there is no .venv."""
    exe = repo / ".venv" / "bin" / "invoke"
    return [".venv/bin/invoke"] if exe.exists() else [sys.executable, "-m", "invoke"]


def invoke(repo: Path, *args: str, env: dict | None = None, timeout: int = 900) -> subprocess.CompletedProcess:
    """Run `invoke ARGS` in `repo`; stdout and stderr together in .stdout."""
    return subprocess.run([*invoke_argv(repo), *args], cwd=repo, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=timeout,
                          env={**os.environ, "COLUMNS": "200", **(env or {})})


SMALL = "small-kernels"  # where a copy keeps the small kernel set, named relative to the copy


def user_repo(dest: Path, kernels: Path, root: Path = ROOT) -> tuple[Path, dict]:
    """A fresh copy with the small kernel set at ./small-kernels; returns (copy, env) where env points
    invoke.yaml's kernels_dir there (a relative path, as a user's own config would). The checkout's compiled
    library sources come along where it has them, as a compile cache would: the copy builds the same object."""
    repo = fresh_copy(dest, root)
    shutil.copytree(kernels, repo / SMALL)
    from tritonforge.pipeline.package.ortlib import OBJECTS_DIR

    objects = Path(".cache/tritonforge") / OBJECTS_DIR
    if (root / objects).is_dir():
        shutil.copytree(root / objects, repo / objects, ignore=shutil.ignore_patterns(".cxx-*"))
    return repo, {"INVOKE_TRITONFORGE_KERNELS_DIR": SMALL}


def readme_lines(marker: str, repo: Path | None = None) -> list[str]:
    """The commands of the indented block of the README (or a docs/ page) that holds `marker`, comments
    dropped; in `repo` without a .venv, its python is this one (as invoke_argv does for invoke)."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    blocks = [b for page in pages for b in page.read_text().split("\n\n")]
    indented = [b for b in blocks if all(line.startswith("    ") for line in b.strip("\n").splitlines())]
    block = next(b for b in indented if marker in b)
    lines = [re.sub(r"\s+#.*$", "", line.strip()) for line in block.splitlines() if line.strip()]
    if repo is not None and not (repo / ".venv" / "bin" / "python").exists():
        lines = [line.replace(".venv/bin/python", shlex.quote(sys.executable)) for line in lines]
    return lines


def fresh_venv(dest: Path) -> Path:
    """A new venv (its python returned) that sees this one's third-party packages (onnx, onnxruntime, numpy)
    through a .pth line, but not tritonforge: an editable install's hook is a .pth of its own, which a path
    added that way does not run, and no checkout is on its path."""
    subprocess.run([sys.executable, "-m", "venv", str(dest)], check=True, capture_output=True)
    python = dest / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import site; print(site.getsitepackages()[0])"], check=True,
                          capture_output=True, text=True).stdout.strip()
    ours = subprocess.run([sys.executable, "-c", "import onnx, os; print(os.path.dirname(os.path.dirname("
                           "onnx.__file__)))"], check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "third_party.pth").write_text(ours + "\n")
    return python


def userland_said(stdout: str) -> list[str]:
    """The nodes rewritten in each run `invoke wheel --userland bullseye` printed, having checked what a user is
    promised: a manylinux_2_17 wheel that Debian 11's own pip (glibc 2.31, where a wheel past manylinux_2_31 is
    refused) installs into its Python 3.9 beside onnxruntime's CPU build for it, 1.18.0 (the oldest the README
    promises) and the newest, each importing it, loading the library and running the rewrite like onnxruntime."""
    assert "(auditwheel: manylinux_2_17_x86_64)" in stdout, stdout[-2000:]
    said = re.findall(r"Debian 11 \(glibc 2\.31, Python 3\.9[.\d]*, onnxruntime ([\d.]+) CPU\): installed, "
                      r"imported, library loaded \((\d+) kernels\), (\d+) nodes rewritten, max rel diff (\S+) against",
                      stdout)
    assert [v for v, *_ in said][:1] == ["1.18.0"] and len(said) == 2, stdout[-2000:]
    assert tuple(map(int, said[1][0].split("."))) > (1, 18, 0), said
    for _, kernels, rewritten, diff in said:
        assert int(kernels) > 0 and int(rewritten) > 0 and float(diff) < 1e-4, said
    return [rewritten for *_, rewritten, _ in said]
