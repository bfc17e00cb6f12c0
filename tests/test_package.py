"""One installable package: a wheel whose only top-level package is tritonforge (the repository's
pipeline/ and runtime/ inside it), and a checkout that imports it with nothing installed, as a GPU
runner's carried copy does."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import zipfile

from .cli import fresh_copy


def test_the_wheel_holds_tritonforge_alone(root, tmp_path):
    # from a copy of the repository's files: setuptools' build/ would otherwise stay in the checkout, and
    # a stale one puts modules that no longer exist into the next wheel
    src = fresh_copy(tmp_path / "src", root)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                    str(tmp_path), str(src)], check=True, capture_output=True, timeout=300)
    (wheel,) = tmp_path.glob("tritonforge-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names if ".dist-info/" not in n} == {"tritonforge"}
    # every module of the checkout's pipeline/ and runtime/ (subpackages too), and the files they read
    expected = {f"tritonforge/{p.relative_to(root)}" for sub in ("pipeline", "runtime")
                for p in (root / sub).rglob("*.py")}
    expected |= {"tritonforge/pipeline/templates/ort_compile_triton.py", "tritonforge/runtime/ortlib/src/ops.cc",
                 "tritonforge/pins/triton.txt", "tritonforge/pins/ort_headers.txt"}
    assert expected - set(names) == set()
    # installed, away from the checkout: the pins the drop-in and the library's build check come with it
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = ("from tritonforge.pipeline.compile.pin import pinned_version; from tritonforge.pipeline.package."
            "ort_headers import read_pin; print(pinned_version(), read_pin()['version'])")
    proc = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, cwd="/",
                          env={"PYTHONPATH": str(site)})
    assert proc.returncode == 0, proc.stderr
    pin = (root / "pins/triton.txt").read_text().split("==")[1].split()[0]
    assert proc.stdout.split()[0] == pin
    # a pin move's checks are the package's own: the host half runs from the installed copy, in a child
    # Python that imports that copy alone
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    (kernels / "softmax_triton.py").write_bytes((root / "kernels" / "softmax_triton.py").read_bytes())
    code = ("import sys; from pathlib import Path; from tritonforge.pipeline.builds import pin_move; "
            f"r = pin_move.interpreter_check(sys.executable, Path({str(kernels)!r}), Path({str(tmp_path / 'c')!r})); "
            "print(r['passed'], len(r['checked']), r['triton'])")
    purelib = sysconfig.get_paths()["purelib"]  # numpy and triton, not the checkout
    proc = subprocess.run([sys.executable, "-S", "-c", f"import sys; sys.path.append({purelib!r}); " + code],
                          capture_output=True, text=True, cwd="/", env={"PYTHONPATH": str(site)}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    passed, count, _ = proc.stdout.split()
    assert passed == "True" and int(count) > 0
    assert (tmp_path / "c" / "import" / "tritonforge").resolve() == (site / "tritonforge").resolve()


def test_a_checkout_imports_it_with_nothing_installed(root):
    # site-packages on the path for numpy, but not its .pth files (the editable install's finder)
    code = (f"import sys; sys.path[:0] = [{str(root)!r}]; sys.path.append({sysconfig.get_paths()['purelib']!r}); "
            "import tritonforge.runtime.zoo, tritonforge.pipeline.scripts.table, tritonforge.runtime.reference as r; "
            "print(tritonforge.runtime.zoo.__file__, r.__name__)")
    proc = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, cwd="/")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(root / "runtime" / "zoo.py"), "tritonforge.runtime.reference"]


def _modules(root) -> dict[str, object]:
    """tritonforge's modules by name -> source path (pipeline/ and runtime/ under the package's names)."""
    out = {}
    for sub in ("pipeline", "runtime"):
        for path in (root / sub).rglob("*.py"):
            parts = ["tritonforge", *path.relative_to(root).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _imports(name: str, path, known: set[str]) -> set[str]:
    """The package's modules that `name` imports anywhere in its source (inside functions too)."""
    import ast

    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found |= {f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names}
    return {m for m in found if m in known and m != name}


def test_no_import_cycles(root):
    modules = _modules(root)
    graph = {name: _imports(name, path, set(modules)) for name, path in modules.items()}
    state, cycles = {}, []

    def visit(node, trail):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                cycles.append(" -> ".join(trail[trail.index(nxt):] + [nxt]) if nxt in trail else nxt)
            elif nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert len(graph) > 40 and not cycles, cycles
