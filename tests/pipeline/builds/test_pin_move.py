"""A pin move is proven on real builds: every kernel of the ORT profile described (launch, registers,
spills, size) from the build's own files, and a change to what ORT's launch reads is a failure."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest

pytest.importorskip("triton", reason="the builds are Triton's")

from tritonforge.pipeline.builds import pin_move  # noqa: E402
from tritonforge.pipeline.compile.pin import OLDEST, pin_at_revision, pinned_version  # noqa: E402


@pytest.fixture(scope="module")
def described(built_ort):
    _, out = built_ort
    return {d.parent.name + "/" + d.name: pin_move.describe(d) for d in sorted(out.glob("*/*"))
            if (d / "kernels.json").is_file() and d.name != "multi"}


def test_every_kernel_is_described_from_its_build(described, built_ort):
    _, out = built_ort
    for where, kernels in described.items():
        manifest = json.loads((out / where / "kernels.json").read_text())
        assert set(kernels) == {k["name"] for k in manifest["kernels"]}, where
        for name, k in kernels.items():
            assert k["registers"] and k["registers"] > 0 and k["spills"] >= 0, (where, name)
            assert k["size"] > 0 and k["args_size"] >= 32, (where, name)
            assert [h[0] for h in k["hidden"]] == ["global_scratch", "profile_scratch"], (where, name)


def test_the_same_build_twice_moves_nothing(described):
    for kernels in described.values():
        rows, failures = pin_move.compare(kernels, copy.deepcopy(kernels))
        assert not failures and len(rows) == len(kernels) and not any(r["launch_changed"] for r in rows)


def test_a_change_to_what_orts_launch_reads_fails_the_move(described):
    kernels = next(iter(described.values()))
    ort = next(name for name, k in kernels.items() if k["ort_launchable"])
    moved = copy.deepcopy(kernels)
    name, offset, size = moved[ort]["params"][1]
    moved[ort]["params"][1] = (name, offset + 8, size)
    moved[ort]["hidden"] = [(h, off, 64 if h == "global_scratch" else s) for h, off, s in moved[ort]["hidden"]]
    moved[ort]["registers"] += 8  # reported, not a failure
    gone = next(n for n in kernels if n != ort)
    del moved[gone]
    rows, failures = pin_move.compare(kernels, moved)
    assert any(f.startswith(f"{ort}: ORT's launch changes: hidden ") and "; params [" in f
               and f.endswith("; needs hidden scratch memory ORT does not pass") for f in failures), failures
    assert f"{gone}: only built with the current pin" in failures and len(failures) == 2
    row = next(r for r in rows if r["kernel"] == ort)
    assert row["launch_changed"] == ["hidden", "params"] and row["registers_candidate"] == row["registers_current"] + 8


def test_the_current_pin_is_read_at_a_revision(tmp_path):
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid"]
    (tmp_path / "pins").mkdir()
    (tmp_path / "pins/triton.txt").write_text("# old pin\ntriton==3.5.0\n")
    for argv in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "old"]):
        subprocess.run([*git, *argv], cwd=tmp_path, check=True, capture_output=True)
    (tmp_path / "pins/triton.txt").write_text("triton==3.9.0\n")
    assert pin_at_revision("HEAD", tmp_path) == "3.5.0"
    with pytest.raises(Exception, match="no pins/triton.txt at nowhere"):
        pin_at_revision("nowhere", tmp_path)
    assert pinned_version()  # the checkout's own pin reads too


@pytest.mark.parametrize("platform", ["cuda", "rocm"])
def test_the_move_to_3_9_0_is_proven_for_todays_ort_profile(root, platform):
    """The committed report (invoke pin-move --current 3.5.0 --candidate 3.9.0 --runner local, default archs)
    covers every kernel of the ORT profile as the scripts are now, for each arch, and passes."""
    from tritonforge.pipeline.compile.targets import parse_target
    from tritonforge.pipeline.scripts.profiles import select
    from tritonforge.pipeline.scripts.table import load_table

    stem = root / "docs" / "pin-moves" / f"triton-3.5.0-to-3.9.0-{platform}"
    doc = json.loads(stem.with_name(stem.name + ".json").read_text())
    assert (doc["current"]["triton"], doc["candidate"]["triton"]) == (OLDEST, pinned_version())
    # the verdict from the evidence the report holds, not from its own "passed" and "failures" fields: every
    # kernel the interpreter checked under each Triton came out right, under that Triton
    for side in ("current", "candidate"):
        numerics = doc[side]["numerics"]
        assert numerics["triton"] == doc[side]["triton"] and numerics["checked"], side
        wrong = [c["name"] for c in numerics["checked"] if c["error"] is not None]
        assert not wrong, (side, wrong)
    table = select(load_table(sorted((root / "kernels").glob("*_triton.py"))), "ort")
    assert set(doc["archs"]) >= ({"sm_80", "sm_90"} if platform == "cuda" else {"gfx90a", "gfx942"})
    for arch, rows in doc["archs"].items():
        target = parse_target(arch)
        assert {r["kernel"] for r in rows} == {k.name for k in table.kernels if k.builds_for(target)}, arch
        assert not any(r["launch_changed"] for r in rows) and all(r["ort_launchable"] for r in rows)
        # both Tritons built each kernel (a row holds both sides' numbers)
        assert all(r["size_current"] and r["size_candidate"] for r in rows), arch
    assert doc["failures"] == []  # what the report says agrees with the evidence above
    assert stem.with_name(stem.name + ".md").read_text() == pin_move.markdown(doc)
    if platform == "cuda":  # and the GPU half: compiled code, every kernel of the full profile on sm_90
        ort_sm90 = {r["kernel"] for r in doc["archs"]["sm_90"]}
        for side in ("current", "candidate"):
            gpu = doc["gpu"]["numerics"][side]
            assert gpu["arch"] == "sm_90" and gpu["triton"] == doc[side]["triton"]
            assert ort_sm90 <= {c["name"] for c in gpu["checked"] if not c["error"]}
            assert len(gpu["checked"]) > 2 * len(ort_sm90)  # the full profile, not ORT's groups alone


def test_the_host_half_runs_in_the_compile_image_and_names_what_it_checked(docker_engine, root, tmp_path):
    """The docker runner's numerics: the image's own tritonforge and Triton on the kernel scripts mounted
    read-only, the result read back; a script that computes wrong fails it, naming the kernel."""
    from tritonforge.pipeline.builds import numerics_check
    from tritonforge.pipeline.builds.images import build_image

    kernels = tmp_path / "kernels"
    kernels.mkdir()
    script = kernels / "softmax_triton.py"
    script.write_text((root / "kernels" / "softmax_triton.py").read_text())
    image = build_image("cuda", lambda line: None)
    result = pin_move.interpreter_check_in(image, kernels)
    assert result["passed"] and result["triton"] == pinned_version() and result["checked"]
    n = len(result["checked"])
    assert numerics_check.summary_line(result).startswith(f"{n} of {n} kernels")
    script.write_text(script.read_text().replace("y = numerator / denominator", "y = numerator / (denominator + 1)"))
    failed = pin_move.interpreter_check_in(image, kernels)
    assert not failed["passed"] and any(c["error"] and c["group"].startswith("softmax_") for c in failed["checked"])
    sides = pin_move.Side("3.9.0", tmp_path, failed), pin_move.Side("3.9.0", tmp_path, result)
    (said,) = pin_move.report(*sides, "cuda", [])["failures"]
    first = next(c["name"] for c in failed["checked"] if c["error"])
    assert said.startswith(f"interpreter numerics fail under triton 3.9.0: {first}")


def test_the_gpu_half_alone_names_what_it_is_missing(built_ort, tmp_path):
    """`python -m tritonforge.pipeline.builds.pin_move --gpu OUT --builds DIR` (a GPU runner without both
    Tritons) needs the host half's report and both sides' full-profile builds; anything else is refused
    before a GPU is touched, naming the file at fault."""
    _, dist = built_ort
    run = lambda *args: subprocess.run([sys.executable, "-m", "tritonforge.pipeline.builds.pin_move", *args],
                                       capture_output=True, text=True)
    out, builds = tmp_path / "move", tmp_path / "builds"
    proc = run("--gpu", str(out), "--builds", str(builds))
    assert proc.returncode and f"{out / 'report.json'} is missing" in proc.stderr
    out.mkdir()
    pin = pinned_version()
    (out / "report.json").write_text(json.dumps({"platform": "cuda", "current": {"triton": OLDEST},
                                                 "candidate": {"triton": pin}, "failures": []}))
    proc = run("--gpu", str(out), "--builds", str(builds))
    assert proc.returncode and f"{builds / f'triton-{OLDEST}'}: no build here" in proc.stderr
    (builds / f"triton-{OLDEST}").mkdir(parents=True)
    (builds / f"triton-{OLDEST}" / "cuda").symlink_to(dist / "cuda")  # the ORT profile, by the pin's Triton
    proc = run("--gpu", str(out), "--builds", str(builds))
    manifest = next((builds / f"triton-{OLDEST}").glob("cuda/*/kernels.json"))
    assert proc.returncode and f"{manifest}: the ort profile by triton {pin}, not the full profile by triton {OLDEST}" \
        in proc.stderr
    # Builds that say they are both sides' full profiles pass the checks; without a GPU the command says so.
    from tritonforge.pipeline.builds.runners import gpu_unavailable

    if gpu_unavailable("cuda") is None:
        return  # a GPU runner: the GPU half itself runs in the GPU tests
    for version in (OLDEST, pin):
        side = builds / f"triton-{version}"
        subprocess.run(["rm", "-rf", str(side)], check=True)
        side.mkdir()
        subprocess.run(["cp", "-r", str(dist / "cuda"), str(side)], check=True)
        for manifest in side.glob("cuda/*/kernels.json"):
            doc = json.loads(manifest.read_text())
            manifest.write_text(json.dumps({**doc, "profile": "full", "triton_version": version}))
    proc = run("--gpu", str(out), "--builds", str(builds))
    assert proc.returncode == 1 and "error: the GPU half needs a CUDA GPU: no usable NVIDIA GPU here" in proc.stderr
    assert "Traceback" not in proc.stderr and not (out / "report.md").exists()
