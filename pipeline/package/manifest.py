"""`kernels.json`: everything a runtime needs to load and launch each kernel without guessing."""

from __future__ import annotations

import hashlib
from pathlib import Path

from tritonforge.pipeline import __version__

from tritonforge.artifact_format import KERNELS_SCHEMA

SCHEMA = KERNELS_SCHEMA
ORT_MAX_SHARED = 48 * 1024  # ORT never raises the dynamic shared memory limit
ORT_ROCM_WARP = 64  # ORT's hipified loader hard-codes GPU_WARP_SIZE = 64


def tool_version() -> str:
    return __version__


def ort_notes(target, record: dict, contract: dict | None = None) -> list[str]:
    """Why an unmodified ORT build could not launch this kernel correctly (empty: it can).

    ORT launches every kernel with a plain cuLaunchKernel / hipModuleLaunchKernel: one CTA per program,
    no cluster attribute, no residency guarantee, no workspace.
    """
    notes = []
    contract = contract or {}
    if contract.get("cluster"):
        notes.append("launched in thread-block clusters; ORT's plain launch sets no cluster dimension, "
                     "and the kernel's distributed shared memory accesses fault without one")
    if contract.get("cooperative"):
        notes.append("cooperative grid: its programs wait for one another, which a plain launch does not "
                     "keep resident (it can hang)")
    if contract.get("workspace"):
        notes.append("needs a zeroed workspace buffer that ORT does not allocate")
    if target.backend == "cuda" and record["shared"] > ORT_MAX_SHARED:
        notes.append(f"needs {record['shared']} B of shared memory; ORT launches without raising the "
                     f"{ORT_MAX_SHARED} B default limit")
    if target.backend == "hip" and record["warp_size"] != ORT_ROCM_WARP:
        notes.append(f"wave{record['warp_size']} kernel; ORT's ROCm loader assumes wave64 blocks")
    return notes


def kernel_entry(index: int, spec, target, record: dict, symbol: str, contract: dict | None = None) -> dict:
    layout = record["layout"]
    params = [
        {"name": n, "type": p.type, "divisibility": p.divisibility or 1, "c_type": p.c_type, **slot}
        for n, p, slot in zip(spec.param_names, spec.params, layout["runtime"])
    ]
    notes = ort_notes(target, record, contract)
    return {
        "index": index,
        "name": spec.name,
        "group": spec.group,
        "script": Path(spec.script).name,  # not the checkout path: builds are byte-identical anywhere
        "func_name": record["func_name"],
        "symbol": f"{symbol}_start",
        "symbol_end": f"{symbol}_end",
        "binary": {"format": target.binary_ext, "arch": record["binary_arch"], "size": record["size"],
                   "sha256": record["sha256"]},
        "target": target.spec(),
        "warp_size": record["warp_size"],
        "num_warps": record["num_warps"],
        "threads_per_block": record["warp_size"] * record["num_warps"],
        "num_stages": record["num_stages"],
        "shared": record["shared"],
        "constants": dict(spec.constants),
        "sig": spec.sig_string(),
        "params": params,
        "hidden_params": [
            {**h, "scratch_size": record[f"{h['name']}_size"], "scratch_align": record[f"{h['name']}_align"]}
            for h in layout["hidden"]
        ],
        "args_size": layout["args_size"],
        "ort_launchable": not notes,
        "ort_notes": notes,
        **_ptx_entry(spec.name, target, record),
    }


def ptx_file(name: str) -> str:
    return f"ptx/{name}.ptx"


def _ptx_entry(name: str, target, record: dict) -> dict:
    """CUDA: the PTX kept beside the build (ptx/<name>.ptx) for multi-arch fatbins, or why there is none."""
    if target.backend != "cuda":
        return {}
    text = record.get("ptx")
    if text is None:
        return {"ptx": None, "ptx_note": record.get("ptx_note", "")}
    data = text.encode()
    return {"ptx": {"file": ptx_file(name), "target": record["ptx_target"], "size": len(data),
                    "sha256": hashlib.sha256(data).hexdigest()}}


def target_doc(target) -> dict:
    return {"backend": target.backend, "arch": target.arch, "arch_name": target.arch_name,
            "platform": target.platform, "warp_size": target.warp_size}


def build_manifest(target: dict, triton_version: str, kernels: list[dict], contracts: dict,
                   archive: dict, header: dict, host: str, profile: str = "full", **extra) -> dict:
    """The kernels.json document; `target` is target_doc()'s dict (a multi-arch build adds `archs`)."""
    groups: dict[str, dict] = {}
    for k in kernels:
        g = groups.setdefault(k["group"], {"kernels": [], "contract": contracts.get(k["group"])})
        g["kernels"].append(k["name"])
    return {
        "schema": SCHEMA,
        "tool": {"name": "tritonforge", "version": tool_version()},
        "triton_version": triton_version,
        "profile": profile,
        "target": target,
        "host": host,
        "archive": archive,
        "header": header,
        "groups": groups,
        "kernels": kernels,
        **extra,
    }
