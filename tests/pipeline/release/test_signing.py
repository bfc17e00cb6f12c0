"""Signed manifests, lock files and yanked versions, on the file store and on S3 (SeaweedFS)."""

from __future__ import annotations

import json

import pytest
from tritonforge.pipeline.errors import PipelineError
from tritonforge.pipeline.release.publish import (
    fetch,
    manifest_key,
    publish,
    resolve_version,
    versions,
    yank,
    yanked,
)
from tritonforge.pipeline.release.signing import keygen
from tritonforge.pipeline.release.stores import FileStore

from .test_publish import FULL, add_tune_cache, dist_copy, s3  # noqa: F401 (fixtures)

pytest.importorskip("cryptography", reason="signing needs the cryptography package")
QUIET = lambda _: None  # noqa: E731


@pytest.fixture
def keys(tmp_path):
    """Two key pairs: ("a.key", "a.pub"), ("b.key", "b.pub")."""
    out = {}
    for name in ("a", "b"):
        keygen(tmp_path / f"{name}.key", tmp_path / f"{name}.pub")
        out[name] = (str(tmp_path / f"{name}.key"), str(tmp_path / f"{name}.pub"))
    return out


@pytest.fixture(params=["file", "s3"])
def store(request, tmp_path):
    return FileStore(tmp_path / "store") if request.param == "file" else request.getfixturevalue("s3")


def test_keys_are_new_private_and_never_overwritten(keys, tmp_path):
    private, public = keys["a"]
    assert oct((tmp_path / "a.key").stat().st_mode & 0o777) == "0o600"
    assert "PRIVATE KEY" in open(private).read() and "PUBLIC KEY" in open(public).read()
    before = open(private).read()
    with pytest.raises(PipelineError, match="exists; keys are never overwritten"):
        keygen(private, tmp_path / "c.pub")
    assert open(private).read() == before and not (tmp_path / "c.pub").exists()


def test_signed_round_trip_and_the_three_refusals(store, dist_copy, keys, tmp_path):  # noqa: F811
    publish(store, "1.0.0", dist_copy, None, QUIET, profiles=FULL, sign_key=keys["a"][0])
    got = fetch(store, "1.0.0", "cuda", "sm_90", tmp_path / "ok", QUIET, "full", trust=keys["a"][1])
    want = dist_copy / "full/cuda/sm_90/triton_kernel_infos.a"
    assert (got / "triton_kernel_infos.a").read_bytes() == want.read_bytes()

    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "keep.txt").write_text("from before")
    tune = add_tune_cache(dist_copy, "unsigned")
    publish(store, "2.0.0", dist_copy, tune, QUIET, profiles=FULL)  # no key
    cases = [("2.0.0", keys["a"][1], "unsigned, and a trusted key"),
             ("1.0.0", keys["b"][1], "signed by another key")]
    for version, trust, message in cases:
        with pytest.raises(PipelineError, match=message):
            fetch(store, version, "cuda", "sm_90", dest, QUIET, "full", trust=trust)
    # the manifest changed after it was signed (someone with write access to the store)
    doc = json.loads(store.get(manifest_key("1.0.0")))
    doc["git_commit"] = "0" * 40
    if isinstance(store, FileStore):
        (store.root / manifest_key("1.0.0")).write_text(json.dumps(doc, indent=1) + "\n")
    else:
        store.put(manifest_key("1.0.0"), (json.dumps(doc, indent=1) + "\n").encode())
    with pytest.raises(PipelineError, match="changed after it was signed"):
        fetch(store, "1.0.0", "cuda", "sm_90", dest, QUIET, "full", trust=keys["a"][1])
    assert sorted(p.name for p in dest.iterdir()) == ["keep.txt"]  # every refusal left dest untouched


def test_signing_a_republish_completes_and_a_bad_key_writes_nothing(dist_copy, keys, tmp_path):  # noqa: F811
    store = FileStore(tmp_path / "store")
    (tmp_path / "junk.key").write_text("not a key")
    with pytest.raises(PipelineError, match="not an unencrypted PEM private key"):
        publish(store, "1.0.0", dist_copy, None, QUIET, profiles=FULL, sign_key=str(tmp_path / "junk.key"))
    assert not (tmp_path / "store").exists()
    publish(store, "1.0.0", dist_copy, None, QUIET, profiles=FULL)  # published unsigned...
    assert publish(store, "1.0.0", dist_copy, None, QUIET, profiles=FULL, sign_key=keys["a"][0]) == "identical"
    fetch(store, "1.0.0", "rocm", "gfx942", tmp_path / "got", QUIET, "full", trust=keys["a"][1])  # ...signed since


def test_yank_warns_keeps_and_is_skipped_by_latest(store, dist_copy, tmp_path):  # noqa: F811
    for i, v in enumerate(("1.9.0", "1.10.0", "1.10.1-rc1")):
        publish(store, v, dist_copy, add_tune_cache(dist_copy, f"v{i}"), QUIET, profiles=FULL)
    assert versions(store) == ["1.9.0", "1.10.0", "1.10.1-rc1"]  # numbers compare as numbers
    assert resolve_version(store, "latest") == "1.10.1-rc1"
    doc = yank(store, "1.10.1-rc1", "miscompiles softmax_fp16 on sm_80")
    assert yanked(store, "1.10.1-rc1") == doc and resolve_version(store, "latest") == "1.10.0"
    said = []
    got = fetch(store, "1.10.1-rc1", "cuda", "sm_90", tmp_path / "got", said.append, "full")  # by name: still
    assert (got / "kernels.json").is_file()
    assert any(line.startswith("warning: version 1.10.1-rc1 is yanked") and "miscompiles" in line for line in said)
    with pytest.raises(PipelineError, match="already yanked: miscompiles"):
        yank(store, "1.10.1-rc1", "again")
    with pytest.raises(PipelineError, match="7.0.0 is not published"):
        yank(store, "7.0.0", "never was")
    with pytest.raises(PipelineError, match="needs a reason"):
        yank(store, "1.9.0", "  ")
    assert store.get(manifest_key("1.10.1-rc1")) is not None  # nothing deleted
