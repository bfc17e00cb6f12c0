"""Two builds on the same shapes (a pin move's speed half), CPU part: which problems a model list gives
(each shape once, as the model runs it), the summary `invoke pin-move --gpu` adds to its report, and that
report's speed table; the timing itself runs in GPU runs."""

from __future__ import annotations

import re

from tritonforge.pipeline.builds import pin_move
from tritonforge.runtime import build_speed, zoo
from tritonforge.runtime.ops.group_norm import GroupNormProblem


def test_every_zoo_shape_once_with_the_models_own_activation():
    got = list(build_speed.problems(zoo.models("all"), ["fp16", "fp32"], ["group_norm", "softmax"]))
    labels = [label for label, _ in got]
    assert len(labels) == len(set(labels))
    want = {(dt, *s.problem(b)) for m in zoo.models("all") for b in m.batches for s in m.softmax
            for dt in ("fp16", "fp32")}
    assert {(p.dtype, p.batch, p.n_cols) for _, p in got if not isinstance(p, GroupNormProblem)} == want
    for label, p in got:
        if isinstance(p, GroupNormProblem):
            assert label.startswith("group_norm_silu" if p.silu else "group_norm_pass") and label.endswith(p.dtype)
    # VAE decoders run GroupNorm without SiLU too (the attention block's norm): both kinds are there
    assert {p.silu for _, p in got if isinstance(p, GroupNormProblem)} == {True, False}
    only = list(build_speed.problems(zoo.models("vit_b16"), ["fp32"], ["softmax"], re.compile("x197 ")))
    assert [label for label, _ in only] == ["softmax 2364x197 fp32", "softmax 18912x197 fp32"]


def _shape(cur, cand, ort=None):
    out = {"best": {"current_us": cur, "candidate_us": cand, "ratio": round(cand / cur, 4), "current": "a",
                    "candidate": "b"}}
    if ort:
        out["ort_group"] = {"current_us": ort[0], "candidate_us": ort[1], "ratio": round(ort[1] / ort[0], 4),
                            "current": "c", "candidate": "c"}
    return out


def test_the_summary_names_the_shapes_over_the_target_and_the_report_shows_it():
    shapes = {"softmax 1x50257 fp16": _shape(3.0, 3.6, (4.0, 4.8)), "softmax 4096x77 fp16": _shape(3.6, 3.7),
              "group_norm_silu 2x64x64x320 fp16": _shape(10.0, 9.0, (12.0, 11.0))}
    s = build_speed.summary(shapes)
    assert s["best"]["shapes"] == 3 and s["best"]["worst"] == ["softmax 1x50257 fp16", 1.2]
    assert s["best"]["slower_than_target"] == ["softmax 1x50257 fp16"]  # 3.7 / 3.6 = 1.028: within 3%
    assert s["best"]["median"] == 1.0278 and s["ort_group"]["shapes"] == 2
    doc = {"platform": "cuda", "profile": "ort", "current": {"triton": "3.5.0", "numerics": {}},
           "candidate": {"triton": "3.9.0", "numerics": {}}, "archs": {}, "failures": [],
           "gpu": {"device": "NVIDIA H200", "summary": s}}
    text = pin_move.markdown(doc)
    assert "Speed on NVIDIA H200" in text
    assert "| runtime best | 3 | 1.028x | 1.200x (softmax 1x50257 fp16) | 1: softmax 1x50257 fp16 |" in text
    assert "| ORT group | 2 | 1.058x | 1.200x (softmax 1x50257 fp16) | 1: softmax 1x50257 fp16 |" in text
