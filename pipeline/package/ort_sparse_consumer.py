"""Build a consumer of ONNX Runtime's SparseAttention kernel sources, as ORT's op launches them.

ORT's hand-written SparseAttention headers (its `SparseAttentionParams`, api.h) and either the generated
folders (`invoke ort-sources`, laid into a copy of ORT's tree with its patch) or ORT's own checked-in
kernels are compiled with stand-ins of the few ORT types they use (templates/ort_sparse_consumer/) into a
shared library whose C functions `tf_sparse_v1` / `tf_sparse_v2` take device pointers and ORT's arguments
(see consumer.cc). GPU tests and benchmarks load it with ctypes; the build needs g++ and CUDA's cuda.h.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from tritonforge.pipeline.errors import PipelineError
from tritonforge.pipeline.package.ort_sources import SPARSE, VERSIONS
from tritonforge.pipeline.package.ortlib import cuda_include  # cuda.h: the one the pinned Triton ships

STAND_IN = Path(__file__).resolve().parent.parent / "templates" / "ort_sparse_consumer"


def build(ort_root: Path, out: Path, jobs: int = 4) -> Path:
    """libsparse_consumer.so from the SparseAttention folders of `ort_root` (an ORT tree, or one laid with
    `ort_sources.lay_into`)."""
    gxx = shutil.which("g++")
    if gxx is None:
        raise PipelineError("building the SparseAttention consumer needs g++")
    sparse = Path(ort_root) / SPARSE
    sources = [STAND_IN / "consumer.cc"]
    for v in VERSIONS:
        sources += sorted(p for p in (sparse / v.folder).glob("*.cc"))
    flags = ["-std=c++17", "-O2", "-fPIC", "-w", "-I", str(Path(ort_root) / "onnxruntime"), "-I", str(STAND_IN),
             "-I", str(cuda_include())]
    with tempfile.TemporaryDirectory(prefix="tf-sparse-") as tmp:
        objs, procs = [], []
        for i, src in enumerate(sources):
            obj = Path(tmp) / f"{i}.o"
            objs.append(obj)
            procs.append((src, subprocess.Popen([gxx, *flags, "-c", str(src), "-o", str(obj)],
                                                stderr=subprocess.PIPE, text=True)))
            if len(procs) >= jobs:
                _wait(procs.pop(0))
        for p in procs:
            _wait(p)
        out.parent.mkdir(parents=True, exist_ok=True)
        link = subprocess.run([gxx, "-shared", "-Wl,-Bsymbolic", "-o", str(out), *map(str, objs), "-ldl"],
                              capture_output=True, text=True)
        if link.returncode:
            raise PipelineError(f"linking the SparseAttention consumer failed: {link.stderr.strip()[-2000:]}")
    return out


def build_pair(ort_root: Path, out_dir: Path, sm: int, kernels_dir: Path, cache_dir: Path | None = None
               ) -> tuple[Path, Path]:
    """(ours, ORT's own): consumers built from two copies of `ort_root`'s SparseAttention folders, one with
    the generated kernels of the arch that serves sm_`sm` laid in (as `invoke ort-sources --ort-root` lays
    them), one as ORT checked them in."""
    from tritonforge.pipeline.package import ort_sources as gen

    if not (Path(ort_root) / SPARSE).is_dir():
        raise PipelineError(f"{ort_root}: no {SPARSE} (an ONNX Runtime checkout, or its sparse folder alone)")
    served = [a for a in gen.ARCHS if gen.SERVES[a][0] <= sm]
    if not served:
        raise PipelineError(f"sm_{sm}: older than every arch ORT's SparseAttention serves ({gen.ARCHS[0]})")
    out_dir = Path(out_dir)
    libs = []
    for name in ("ours", "ort"):
        tree = out_dir / f"ort-{name}"
        shutil.rmtree(tree, ignore_errors=True)
        shutil.copytree(Path(ort_root) / SPARSE, tree / SPARSE)
        if name == "ours":
            compiled, triton = gen.compile_kernels(Path(kernels_dir), [served[-1]], cache_dir)
            gen.lay_into(gen.write(gen.render(compiled, [served[-1]], triton), out_dir / "generated"), tree)
        libs.append(build(tree, out_dir / f"libsparse_{name}.so"))
    return libs[0], libs[1]


def _wait(item) -> None:
    src, proc = item
    _, err = proc.communicate()
    if proc.returncode:
        raise PipelineError(f"compiling {src} failed: {err.strip()[-2000:]}")


# ---- what ORT's op computes on the host before it launches, and the layouts its test and Phi-3 use ----

def block_mask(num_layout: int, max_blocks: int, local_blocks: int, vert_stride: int):
    """Phi-3-small's block-sparse pattern ((num_layout, max_blocks, max_blocks) int32, as ORT's test builds
    it): causal blocks within `local_blocks` of the diagonal, plus every `vert_stride`-th column, its phase
    shifted per layout."""
    import numpy as np

    q = np.arange(max_blocks)[None, :, None]
    k = np.arange(max_blocks)[None, None, :]
    step = max(1, vert_stride // num_layout)
    vertical = np.stack([(np.arange(max_blocks) + h * step + 1) % vert_stride == 0 for h in range(num_layout)])
    return ((q >= k) & ((q - k < local_blocks) | vertical[:, None, :])).astype(np.int32)


def to_csr(mask):
    """(row indices (L, rows + 1), column indices (L, most non-zeros) padded with -1), int32, as ORT takes them."""
    import numpy as np

    rows = np.zeros((mask.shape[0], mask.shape[1] + 1), np.int32)
    cols = [np.nonzero(m.reshape(-1))[0] % mask.shape[2] for m in mask]
    rows[:, 1:] = np.cumsum(mask.sum(axis=2), axis=1)
    width = max(len(c) for c in cols)
    return rows, np.stack([np.pad(c, (0, width - len(c)), constant_values=-1) for c in cols]).astype(np.int32)


def v2_host_arrays(total_lens, prompt: bool, block: int):
    """(active_q_blocks, one int32 buffer, offsets of its six arrays): ORT's sparse_attention.cc for v2 with
    each batch's key length (padding excluded), each array 16-byte aligned in one buffer (q_batch_starts/ends,
    k_batch_starts/ends, q_batch_ids, q_start_sids). A prompt's queries are its keys; a decoding step has one."""
    import numpy as np

    batch = len(total_lens)
    q_ends = [t if prompt else 1 for t in total_lens]
    blocks = [(b, j * block) for b in range(batch) for j in range(-(-q_ends[b] // block))]
    ab, aq = -(-batch // 16) * 16, -(-len(blocks) // 16) * 16
    buf = np.zeros(4 * ab + 2 * aq, np.int32)
    buf[ab:ab + batch] = q_ends
    buf[3 * ab:3 * ab + batch] = total_lens
    buf[4 * ab:4 * ab + len(blocks)] = [b for b, _ in blocks]
    buf[4 * ab + aq:4 * ab + aq + len(blocks)] = [s for _, s in blocks]
    return len(blocks), buf, (0, ab, 2 * ab, 3 * ab, 4 * ab, 4 * ab + aq)


class Consumer:
    """The built library, loaded: `v1(...)` and `v2(...)` take device pointers (ints) and ORT's arguments."""

    def __init__(self, path: Path | str):
        import ctypes

        self.lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_LOCAL)
        self.path = Path(path)
        c = ctypes
        head = [c.c_int, c.c_int, c.c_void_p, c.c_void_p, c.c_void_p, c.c_void_p, c.c_void_p] + [c.c_int] * 7 + \
            [c.c_float, c.c_int, c.c_void_p, c.c_void_p, c.c_int, c.c_int, c.c_int]
        self.lib.tf_sparse_v1.argtypes = head + [c.c_int, c.c_char_p, c.c_int]
        self.lib.tf_sparse_v2.argtypes = head + [c.c_int] + [c.c_void_p] * 6 + [c.c_int, c.c_char_p, c.c_int]
        self.lib.tf_supported.argtypes = [c.c_int]

    def supported(self, sm: int) -> bool:
        return bool(self.lib.tf_supported(sm))

    def _call(self, fn, *args) -> None:
        import ctypes

        err = ctypes.create_string_buffer(2048)
        if fn(*args, err, len(err)):
            raise PipelineError(f"{self.path.name}: {err.value.decode(errors='replace')}")

    def v1(self, sm, bf16, stream, out, q, k, v, batch, seq, heads, kv_heads, head_size, total, max_cache, scale,
           block, rows, cols, row_stride, col_stride, num_layout, reps=1) -> None:
        self._call(self.lib.tf_sparse_v1, sm, int(bf16), stream, out, q, k, v, batch, seq, heads, kv_heads, head_size,
                   total, max_cache, scale, block, rows, cols, row_stride, col_stride, num_layout, reps)

    def v2(self, sm, bf16, stream, out, q, k, v, batch, seq, heads, kv_heads, head_size, total, max_cache, scale,
           block, rows, cols, row_stride, col_stride, num_layout, active_q_blocks, arrays, reps=1) -> None:
        self._call(self.lib.tf_sparse_v2, sm, int(bf16), stream, out, q, k, v, batch, seq, heads, kv_heads, head_size,
                   total, max_cache, scale, block, rows, cols, row_stride, col_stride, num_layout, active_q_blocks,
                   *arrays, reps)
