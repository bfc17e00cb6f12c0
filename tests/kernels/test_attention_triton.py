"""Flash attention: the head split, the contract's head dims, and the interpreter against float64 on awkward
shapes (one key, 77 and 4097 keys, head dims 40 and 160, one (batch, head))."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from .conftest import admitted, grid


def test_every_head_dim_from_16_to_256_and_512_has_kernels_of_one_width(table):
    for d in [*range(8, 257, 8), 512]:
        for group in ("attention_fp16", "attention_any_fp32"):
            splits = {(k.constants["D1"], k.constants["D2"]) for k in admitted(
                table, group, batch=2, heads=8, sq=100, skv=77, head_dim=d, strides8=1)}
            assert splits and all(d <= a + b for a, b in splits), (d, group)
    # 80 and 160 run as 64+16 and 128+32, not padded to a power of two; 40 runs as 64, its columns masked
    for d, split, exact in ((40, (64, 0), False), (80, (64, 16), True), (160, (128, 32), True)):
        ks = admitted(table, "attention_fp16", batch=1, heads=1, sq=1, skv=1, head_dim=d, strides8=1)
        assert split in {(k.constants["D1"], k.constants["D2"]) for k in ks}, d
        exact_splits = {(k.constants["D1"], k.constants["D2"]) for k in ks if k.constants["EXACT"]}
        assert exact_splits == ({split} if exact else set()), d
    # an exact kernel never runs a narrower head
    assert not [k for k in admitted(table, "attention_fp16", batch=1, heads=1, sq=1, skv=1, head_dim=56,
                                    strides8=1) if k.constants["EXACT"]]
    assert not admitted(table, "attention_fp16", batch=1, heads=1, sq=1, skv=1, head_dim=40, strides8=0)
    k = next(k for k in table.kernels if k.group == "attention_fp16" and k.constants["BLOCK_M"] == 128)
    assert grid(table, k, batch=2, heads=8, sq=4097) == [33, 16, 1]


def test_fp32_is_served_by_the_fallback_alone(table):
    assert {k.group for k in table.kernels if "fp32" in k.group} == {"attention_any_fp32", "attention_causal_any_fp32"}
    assert all(table.contracts[g]["fallback"] for g in ("attention_any_fp32", "attention_any_fp16"))


def test_awkward_shapes_match_float64_in_the_interpreter(table, root, tmp_path):
    cases = [("attention_fp16", (64, 0), dict(batch=1, heads=1, sq=5, skv=1, head_dim=40)),
             ("attention_fp16", (64, 0), dict(batch=2, heads=3, sq=70, skv=77, head_dim=64)),
             ("attention_fp16", (64, 16), dict(batch=1, heads=2, sq=33, skv=130, head_dim=80)),
             ("attention_bf16", (128, 32), dict(batch=1, heads=2, sq=19, skv=77, head_dim=160)),
             ("attention_any_fp32", (64, 16), dict(batch=1, heads=1, sq=9, skv=4097, head_dim=72)),
             ("attention_causal_fp16", (64, 0), dict(batch=1, heads=2, sq=70, skv=70, head_dim=64)),
             ("attention_causal_any_fp32", (32, 0), dict(batch=1, heads=1, sq=40, skv=33, head_dim=24))]
    spec = []
    for group, split, problem in cases:
        k = next(k for k in admitted(table, group, **problem, strides8=int(problem["head_dim"] % 8 == 0))
                 if (k.constants["D1"], k.constants["D2"]) == split and k.constants["BLOCK_M"] <= 64)
        spec.append({"script": k.script, "name": k.name, "group": k.group, "constants": k.constants,
                     "num_warps": k.num_warps, "contract": table.contracts[group],
                     "problem": {**problem, "strides8": int(problem["head_dim"] % 8 == 0)}})
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    proc = subprocess.run([sys.executable, "-m", "tritonforge.pipeline.builds.numerics_check", "--spec",
                           str(tmp_path / "spec.json")],
                          cwd=root, env={**os.environ, "TRITON_INTERPRET": "1"}, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(results) == len(cases)
    assert not [r for r in results if r["error"]], results
