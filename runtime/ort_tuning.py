"""ORT's TuningResults from a tune cache: the choices inside ORT's own groups, as the ids ORT's TunableOps
look up, for the execution provider and validators of the ORT build that will load them.

ORT keeps `[{"ep", "validators", "results": {op_signature: {params_signature: id}}}]` and applies an
entry only when `ep` is the provider's name and the validator key set is exactly the build's own
(ROCm: ORT_VERSION, ORT_GIT_COMMIT, ORT_BUILD_CONFIG, HIP_VERSION, ROCBLAS_VERSION, DEVICE_MODEL; CUDA:
CUDA_VERSION instead of the HIP and rocBLAS versions). An id is a registration index inside ORT's op:
the op's own implementations first (`offset` of them: built-in kernels and library instances, which
differ between builds), then the Triton group in header order; GroupNorm registers its Pass group
before its Silu group. ORT does not check an id against the list, so a wrong offset picks a wrong
kernel silently: the offsets are never guessed here.

    python -m tritonforge.runtime.ort_tuning --cache tune/rocm/gfx942/X.json --dist dist --platform rocm \
        --op 'softmax_fp16=onnxruntime::rocm::SoftmaxTunableOp<__half, __half, float>' --offset softmax_fp16=11 \
        --validators-from ort_tuning_results.json --out tuning_results.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tritonforge.errors import TritonforgeError

from . import ops as op_modules

EP = {"cuda": "CUDAExecutionProvider", "rocm": "ROCMExecutionProvider"}
VALIDATORS = {
    "cuda": ("ORT_VERSION", "ORT_GIT_COMMIT", "ORT_BUILD_CONFIG", "CUDA_VERSION", "DEVICE_MODEL"),
    "rocm": ("ORT_VERSION", "ORT_GIT_COMMIT", "ORT_BUILD_CONFIG", "HIP_VERSION", "ROCBLAS_VERSION", "DEVICE_MODEL"),
}
class ExportError(TritonforgeError, ValueError):
    pass


def registered_groups(op_key: str) -> list[str]:
    """The Triton groups ORT's op for `op_key` registers, in order; the last is the one it launches (each
    op module of runtime/ops declares its own: Tuning.ort_groups)."""
    groups = op_modules.ort_registered_groups(op_key)
    if groups is None:
        known = [p for t in op_modules.tunings() for p in t.ort_groups]
        raise ExportError(f"ORT has no Triton op for '{op_key}' (ORT's ops take tune keys matching "
                          f"{', '.join(known)}; log-softmax is never launched)")
    return groups


def export(cache: dict, manifest: dict, platform: str, ops: dict[str, str], offsets: dict[str, int],
           validators: dict[str, str]) -> list[dict]:
    """TuningResults for the ORT build described by `validators`: for each tune-cache op key in `ops`
    (mapped to ORT's op signature), every problem whose ORT-group choice is known, as the id
    offsets[op] + the choice's place among the op's registered Triton kernels."""
    if platform not in EP:
        raise ExportError(f"platform must be one of {sorted(EP)}, not '{platform}'")
    want = set(VALIDATORS[platform])
    if set(validators) != want:
        missing, extra = sorted(want - set(validators)), sorted(set(validators) - want)
        raise ExportError(f"{EP[platform]} builds apply TuningResults only with exactly the validators "
                          f"{sorted(want)}: missing {missing}, not {platform}'s {extra}")
    made_for = cache.get("validators", {}).get("archive_sha256")
    if made_for != manifest["archive"]["sha256"]:
        raise ExportError(f"the tune cache was made for archive {made_for}, not this one "
                          f"({manifest['archive']['sha256']}): tune these artifacts")
    missing = sorted(set(ops) - set(offsets))
    if missing:
        raise ExportError(f"no id offset for {missing}: pass the number of implementations ORT registers "
                          "before its Triton kernels in that op (docs/runtime-and-tuning.md: TuningResults for ORT)")
    results: dict[str, dict[str, int]] = {}
    for op_key, signature in ops.items():
        groups = registered_groups(op_key)
        if op_key not in cache.get("results", {}):
            raise ExportError(f"the tune cache has no results for '{op_key}'")
        absent = [g for g in groups if g not in manifest["groups"]]
        if absent:
            raise ExportError(f"these artifacts have no group {absent} for '{op_key}'")
        order = [name for g in groups for name in manifest["groups"][g]["kernels"]]
        launched = manifest["groups"][groups[-1]]["kernels"]
        for params, entry in cache["results"][op_key].items():
            name = entry.get("ort_kernel")
            if name is None:
                continue
            if name not in launched:
                raise ExportError(f"'{op_key}' {params}: {name} is not in ORT's group {groups[-1]}")
            results.setdefault(signature, {})[params] = offsets[op_key] + order.index(name)
    return [{"ep": EP[platform], "validators": dict(validators), "results": results}]


def validators_from(path: Path | str, platform: str) -> dict[str, str]:
    """The validators of an ORT build, from TuningResults it wrote (InferenceSession.get_tuning_results())."""
    doc = json.loads(Path(path).read_text())
    for entry in doc if isinstance(doc, list) else []:
        if entry.get("ep") == EP[platform]:
            return dict(entry["validators"])
    raise ExportError(f"{path}: no {EP[platform]} entry to read validators from")


def _pairs(items: list[str] | None, what: str) -> dict[str, str]:
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ExportError(f"{what} must be KEY=VALUE, got {item!r}")
        out[key] = value
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tritonforge.runtime.ort_tuning", description=__doc__.splitlines()[0])
    ap.add_argument("--cache", required=True, help="tune cache (runtime.tune) made for these artifacts")
    ap.add_argument("--dist", default="dist/full", help="artifact root holding <platform>/<arch>/ (default: dist/full)")
    ap.add_argument("--platform", required=True, choices=sorted(EP))
    ap.add_argument("--arch", help="the artifacts' arch (default: the tune cache's target)")
    ap.add_argument("--op", action="append", required=True, help="OP_KEY=ORT op signature, e.g. softmax_fp16=...")
    ap.add_argument("--offset", action="append", help="OP_KEY=N: implementations ORT registers before Triton's")
    ap.add_argument("--validator", action="append", help="KEY=VALUE of the target ORT build")
    ap.add_argument("--validators-from", help="TuningResults JSON written by the target ORT build")
    ap.add_argument("--out", required=True, help="TuningResults JSON to write")
    args = ap.parse_args(argv)
    try:
        cache = json.loads(Path(args.cache).read_text())
        arch = args.arch or cache["validators"]["target"]
        manifest = json.loads((Path(args.dist) / args.platform / arch / "kernels.json").read_text())
        validators = validators_from(args.validators_from, args.platform) if args.validators_from else {}
        validators.update(_pairs(args.validator, "--validator"))
        offsets = {k: int(v) for k, v in _pairs(args.offset, "--offset").items()}
        doc = export(cache, manifest, args.platform, _pairs(args.op, "--op"), offsets, validators)
    except (ExportError, OSError, KeyError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {args.out}: {sum(len(v) for v in doc[0]['results'].values())} choices for {doc[0]['ep']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
