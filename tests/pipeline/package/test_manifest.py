"""kernels.json: every kernel described, and what a plain (ORT) launch can run."""

from __future__ import annotations

import json

from tritonforge.pipeline.compile.pin import pinned_version

from ..builds.test_dist import ORT_GROUP, read


def test_manifest_describes_every_kernel(built, small_scripts):
    import hashlib

    from tritonforge.pipeline.scripts.abi import c_layout
    from tritonforge.pipeline.scripts.table import load_table

    report, out, _ = built
    table = load_table(small_scripts)
    for t in report.targets:
        d = out / t.target.platform / t.target.arch_name
        doc = json.loads((d / "kernels.json").read_text())
        assert doc["triton_version"] == pinned_version()
        assert doc["target"]["warp_size"] == (32 if t.target.backend == "cuda" else 64)
        assert doc["archive"]["sha256"] == hashlib.sha256(read(d / "triton_kernel_infos.a")).hexdigest()
        assert doc["header"]["sha256"] == hashlib.sha256(read(d / "triton_kernel_infos.h")).hexdigest()
        # Table order, less the kernels whose script does not build for this target.
        assert [k["name"] for k in doc["kernels"]] == [s.name for s in table.kernels if s.builds_for(t.target)]
        assert any("_packed_" in k["name"] for k in doc["kernels"]) == (t.target.platform == "cuda")
        for k in doc["kernels"]:
            assert k["symbol"] == f"_binary_{k['name']}_{t.target.binary_ext}_start"
            assert k["threads_per_block"] == k["warp_size"] * k["num_warps"]
            slots, _ = c_layout([p["size"] for p in k["params"]])
            assert [p["offset"] for p in k["params"]] == [s.offset for s in slots]
            # Triton 3.5 appends global_scratch and profile_scratch after the runtime arguments.
            end = slots[-1].offset + slots[-1].size
            first_hidden = (end + 7) // 8 * 8
            assert [(h["name"], h["offset"]) for h in k["hidden_params"]] == [
                ("global_scratch", first_hidden), ("profile_scratch", first_hidden + 8)]
            assert k["args_size"] == first_hidden + 16
        ort_groups = {f"{op}_{dt}" for op in ("softmax", "log_softmax") for dt in ("fp32", "fp16", "bf16")}
        assert ort_groups <= set(doc["groups"])
        assert all(g["contract"] for g in doc["groups"].values())
        assert doc["groups"]["softmax_fp16"]["contract"]["grid"] == ["batch", "1", "1"]
        by_name = {k["name"]: k for k in doc["kernels"]}
        assert by_name["softmax_fp16_32_w1"]["args_size"] == 48  # ORT's 32-byte struct + 2 hidden pointers
        gn = next(k for k in doc["kernels"] if k["group"] == "GroupNormTriton_Silu_fp16")
        assert gn["args_size"] == 96  # ORT's 80-byte GroupNorm struct (75 B of fields) + 2 hidden pointers


def test_ort_launchable_says_what_a_plain_launch_can_run(built):
    """ORT launches every kernel with a plain cuLaunchKernel / hipModuleLaunchKernel: kernels launched in
    clusters or as cooperative grids are flagged with the reason; ORT's own groups are launchable."""
    report, out, _ = built
    kinds = set()
    for t in report.targets:
        doc = json.loads((out / t.target.platform / t.target.arch_name / "kernels.json").read_text())
        for k in doc["kernels"]:
            contract = doc["groups"][k["group"]]["contract"] or {}
            reasons = []
            if contract.get("cluster"):
                reasons.append("thread-block clusters")
            if contract.get("cooperative"):
                reasons.append("cooperative grid")
            if t.target.backend == "cuda" and k["shared"] > 48 * 1024:
                reasons.append("shared memory")
            assert k["ort_launchable"] == (not reasons), (k["name"], k["ort_notes"])
            assert all(any(r in note for note in k["ort_notes"]) for r in reasons), (k["name"], k["ort_notes"])
            kinds.update(reasons)
            if ORT_GROUP.fullmatch(k["group"]):
                assert k["ort_launchable"], k["name"]
        flagged = {}  # what the build's summary warns about
        for k in doc["kernels"]:
            if not k["ort_launchable"]:
                flagged.setdefault(k["group"], []).append(k["name"])
        assert t.not_ort_launchable == flagged
    assert {"thread-block clusters", "cooperative grid"} <= kinds
