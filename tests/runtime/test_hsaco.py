"""AMD code objects read without a GPU: the kernel arguments their metadata declares match kernels.json."""

from __future__ import annotations

from tritonforge.runtime.hsaco import kernarg_layout


def test_hsaco_kernargs_match_manifest(built):
    """The HIP side cannot run here, but its argument buffer can be checked against the code object."""
    from tritonforge.runtime import load_artifacts

    _, out, _ = built
    arts = load_artifacts(out / "rocm/gfx942")
    for info in arts.kernels:
        layout = kernarg_layout(arts.blobs[info.name], info.func_name)
        explicit = [a for a in layout["args"] if not a["value_kind"].startswith("hidden_")]
        want = [(p["offset"], p["size"]) for p in (*info.params, *info.hidden_params)]
        assert [(a["offset"], a["size"]) for a in explicit] == want, info.name
        # Implicit arguments (hidden_block_count_x, ... when a kernel asks for tl.num_programs) sit
        # after the explicit ones; the HIP runtime fills them at dispatch, so ORT's buffer stops before.
        implicit = [a for a in layout["args"] if a["value_kind"].startswith("hidden_")]
        assert all(a["offset"] >= info.args_size for a in implicit), info.name
        if implicit:
            assert layout["segment_size"] >= max(a["offset"] + a["size"] for a in implicit), info.name
        else:
            assert layout["segment_size"] == info.args_size, info.name
        assert layout["wavefront_size"] == info.warp_size == 64
        assert layout["max_flat_workgroup_size"] >= info.threads_per_block
