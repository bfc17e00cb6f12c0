"""What every kernel script promises: one family per file, shared device code only in `_` modules next to
the scripts (never another script's names), a contract for every group, and a fallback for every shape."""

from __future__ import annotations

import ast

from tritonforge.pipeline.builds.dist import discover_scripts
from tritonforge.pipeline.scripts.table import load_table


def test_scripts_import_only_helpers(root):
    """A script may import triton and the `_`-prefixed helper modules beside it, nothing of another script."""
    scripts = {p.stem for p in discover_scripts(root / "kernels")}
    for path in sorted((root / "kernels").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                assert top not in scripts, f"{path.name} imports the script {name}"
                assert top == "triton" or top.startswith("_"), f"{path.name} imports {name}"


def test_one_family_per_script(root):
    """The groups of a script differ only in op, dtype and the op's flag (SiLU, causal, gated, gated with the branch's
    bias, the rotation's q/k norm), and, for a fallback, in being the fallback."""
    for path in discover_scripts(root / "kernels"):
        table = load_table([path])
        families = set()
        for group in table.contracts:
            family = group.removeprefix("log_")
            for dt in ("_fp32", "_fp16", "_bf16", "_fp64"):
                family = family.removesuffix(dt)
            family = family.replace("_Silu", "").replace("_Pass", "").replace("_causal", "")
            family = family.replace("_gated_bias", "").replace("_gated", "").replace("_rms", "")
            if not table.contracts[group] or not table.contracts[group].get("fallback"):
                families.add(family)
        assert len(families) == 1, (path.name, sorted(families))


def test_every_group_has_a_contract(root):
    table = load_table(discover_scripts(root / "kernels"))
    assert all(table.contracts[k.group] for k in table.kernels)


def test_every_unet_shape_and_row_has_a_kernel_other_than_the_fallback(root):
    """On sm_80 and sm_90: every Stable Diffusion GroupNorm and every aligned softmax row up to 256K columns
    has a candidate besides the fallback (which takes any shape, and says so)."""
    from tritonforge.pipeline.compile.targets import parse_target

    from .conftest import UNET, admits

    table = load_table(discover_scripts(root / "kernels"))
    for arch in ("sm_80", "sm_90"):
        target = parse_target(arch)
        kernels = [k for k in table.kernels if k.builds_for(target) and not table.contracts[k.group].get("fallback")]
        for dtype in ("fp32", "fp16", "bf16"):
            for n, h, c in UNET:
                problem = dict(n=n, hw=h * h, c=c, groups=32, c_per_group=c // 32, silu=1, resident=1000)
                assert any(k.group.startswith("GroupNorm") and k.group.endswith(f"Silu_{dtype}")
                           and admits(table, k, **problem) for k in kernels), (arch, dtype, n, h, c)
            for cols in [16 << i for i in range(15)]:
                problem = dict(batch=4, n_cols=cols, in_stride=cols, out_stride=cols)
                assert any(k.group.startswith("softmax_") and k.group.endswith(f"_{dtype}")
                           and admits(table, k, **problem) for k in kernels), (arch, dtype, cols)


def test_orts_own_scripts_stand_alone(root):
    """ORT's compile_triton.py compiles the scripts it is given one by one: ORT's two import only triton."""
    for name in ("softmax_triton.py", "group_norm_triton.py"):
        for node in ast.walk(ast.parse((root / "kernels" / name).read_text())):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                mods = [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                assert all(m.split(".")[0] == "triton" for m in mods), (name, mods)
