"""One installable package: a wheel whose only top-level package is tritonforge (the repository's
pipeline/ and runtime/ inside it), and a checkout that imports it with nothing installed, as a GPU
runner's carried copy does."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import zipfile


def test_the_wheel_holds_tritonforge_alone(root, tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                    str(tmp_path), str(root)], check=True, capture_output=True, timeout=300)
    (wheel,) = tmp_path.glob("tritonforge-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names if ".dist-info/" not in n} == {"tritonforge"}
    for module in ("tritonforge/pipeline/build.py", "tritonforge/runtime/zoo.py", "tritonforge/runtime/ops/softmax.py",
                   "tritonforge/pipeline/templates/ort_compile_triton.py"):
        assert module in names, module


def test_a_checkout_imports_it_with_nothing_installed(root):
    # site-packages on the path for numpy, but not its .pth files (the editable install's finder)
    code = (f"import sys; sys.path[:0] = [{str(root)!r}]; sys.path.append({sysconfig.get_paths()['purelib']!r}); "
            "import tritonforge.runtime.zoo, tritonforge.pipeline.table, tritonforge.runtime.reference as r; "
            "print(tritonforge.runtime.zoo.__file__, r.__name__)")
    proc = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, cwd="/")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(root / "runtime" / "zoo.py"), "tritonforge.runtime.reference"]
