"""ONNX Runtime's SparseAttention kernels launched as ORT's op launches them: checked against float64, then
timed against ORT's checked-in kernels.

    python benchmarks/sparse_attention_bench.py --ort-root ORT [--cases ort,long] [--time]
    python benchmarks/sparse_attention_bench.py --consumer ours.so [--rival ort.so] [--cases ort,long] [--time]

`--ort-root` (an ONNX Runtime checkout, its SparseAttention folder at least) builds both libraries for this
GPU (tritonforge.pipeline.package.ort_sparse_consumer.build_pair): `--consumer` is one made from ORT's tree
with `invoke ort-sources --ort-root` laid into it, `--rival` one from ORT's own tree (its checked-in
kernels). Each case builds what ORT's op has at the launch: Q in BNSH, the KV cache (BNSH, `max_cache`
rows), the block-sparse layout in CSR and, for v2, the per-batch spans ORT computes on the host; the output
is compared with attention computed in float64 on the same masks (every position a query may see: its
layout's blocks, causal, within its batch's keys). Cases:

- `ort`: onnxruntime/test/python/transformers/test_sparse_attention.py's CUDA cases (batch 1-3, 4/8/16
  heads with half as many KV heads, sequence 1-256 of 256, two layouts, 2 local blocks, vertical stride 2,
  scale 1.8/sqrt(128), a 128-row cache below 128), prompt through v1 and through v2, decoding through v2,
  fp16 and bf16; plus batches of different lengths (right padding) through v2.
- `long`: Phi-3-small's pattern (32 heads, 8 KV heads, 16 local blocks, vertical stride 8, 8 layouts) at
  4096 and 8192 tokens: the prompt and a decoding step.

`--time` times the `long` shapes (and their batched decoding) for each library: CUDA events around 50
launches back to back after 5, median of 5. The process exits 1 if any output is off; rows go to
benchmarks/results/results.csv (benchmark `sparse_attention`).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tritonforge.pipeline.package.ort_sparse_consumer import Consumer, block_mask, to_csr, v2_host_arrays  # noqa: E402

from benchmarks.results import write_rows  # noqa: E402

BLOCK, HEAD = 64, 128
TOL = {"fp16": 1e-2, "bf16": 3e-2}  # max |out - ref| / max |ref|


@dataclass
class Case:
    name: str
    kernel: str  # v1 or v2
    batch: int
    heads: int
    kv_heads: int
    seq: int  # new tokens
    totals: tuple  # each batch's key length
    max_seq: int
    max_cache: int
    num_layout: int
    local: int
    vert: int
    scale: float

    @property
    def prompt(self) -> bool:
        return self.seq > 1 or max(self.totals) == 1


def ort_cases() -> list[Case]:
    """test_sparse_attention.py's CUDA cases, as its non-comprehensive loop cycles them, and every prompt
    length with padding."""
    out = []
    batches, seqs, heads = [1, 2, 3], [1, 64, 127, 128, 192, 256], [4, 8, 16]
    for i in range(6):
        b, s, h = batches[i % 3], seqs[i], heads[i % 3]
        cache = 256 if s >= 128 else 128
        common = dict(batch=b, heads=h, kv_heads=h // 2, max_seq=256, max_cache=cache, num_layout=2, local=2,
                      vert=2, scale=1.8 / HEAD ** 0.5)
        out.append(Case(f"prompt b{b} s{s} h{h}", "v1", seq=s, totals=(s,) * b, **common))
        out.append(Case(f"prompt(v2) b{b} s{s} h{h}", "v2", seq=s, totals=(s,) * b, **common))
        past = min(255, s)
        if past + 1 <= cache:
            out.append(Case(f"decode b{b} past{past} h{h}", "v2", seq=1, totals=(past + 1,) * b, **common))
    pad = dict(heads=8, kv_heads=4, max_seq=256, max_cache=256, num_layout=2, local=2, vert=2, scale=1 / HEAD ** 0.5)
    out.append(Case("prompt(v2) padded 200,77,256", "v2", batch=3, seq=256, totals=(200, 77, 256), **pad))
    out.append(Case("decode padded 200,77,256", "v2", batch=3, seq=1, totals=(200, 77, 256), **pad))
    return out


PHI3 = dict(heads=32, kv_heads=8, num_layout=8, local=16, vert=8, scale=1 / HEAD ** 0.5)


def long_cases() -> list[Case]:
    out = []
    for n in (4096, 8192):
        out.append(Case(f"phi3 prompt {n}", "v1", batch=1, seq=n, totals=(n,), max_seq=8192, max_cache=8192, **PHI3))
        out.append(Case(f"phi3 decode past{n - 1}", "v2", batch=1, seq=1, totals=(n,), max_seq=8192,
                        max_cache=8192, **PHI3))
    return out


def timed_cases() -> list[Case]:
    extra = [Case(f"phi3 decode b{b} past{n - 1}", "v2", batch=b, seq=1, totals=(n,) * b, max_seq=8192,
                  max_cache=8192, **PHI3) for b in (4, 16) for n in (4096, 8192)]
    return long_cases() + extra


class Inputs:
    """What ORT's op hands its kernels, in device memory (torch tensors), and the float64 answer."""

    def __init__(self, case: Case, dtype: str, seed: int = 0):
        import torch

        self.case, self.dtype = case, dtype
        tdt = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
        g = torch.Generator(device="cuda").manual_seed(seed)
        c = case
        self.q = torch.randn(c.batch, c.heads, c.seq, HEAD, device="cuda", generator=g).to(tdt)  # BNSH
        self.k = torch.randn(c.batch, c.kv_heads, c.max_cache, HEAD, device="cuda", generator=g).to(tdt)
        self.v = torch.randn(c.batch, c.kv_heads, c.max_cache, HEAD, device="cuda", generator=g).to(tdt)
        self.out = torch.full((c.batch, c.seq, c.heads, HEAD), float("nan"), device="cuda", dtype=tdt)  # BSNH
        mask = block_mask(c.num_layout, c.max_seq // BLOCK, c.local, c.vert)
        self.mask = mask
        rows, cols = to_csr(mask)
        self.rows, self.cols = torch.from_numpy(rows).cuda(), torch.from_numpy(cols).cuda()
        if c.kernel == "v2":
            self.active, buf, self.offsets = v2_host_arrays(list(c.totals), c.prompt, BLOCK)
            self.buf = torch.from_numpy(buf).cuda()
        self.total = max(c.totals)

    def launch(self, lib: Consumer, sm: int, reps: int = 1) -> None:
        import torch

        c = self.case
        stream = torch.cuda.current_stream().cuda_stream
        args = (sm, self.dtype == "bf16", stream, self.out.data_ptr(), self.q.data_ptr(), self.k.data_ptr(),
                self.v.data_ptr(), c.batch, c.seq, c.heads, c.kv_heads, HEAD, self.total, c.max_cache, c.scale,
                BLOCK, self.rows.data_ptr(), self.cols.data_ptr(), self.rows.shape[1], self.cols.shape[1],
                c.num_layout)
        if c.kernel == "v1":
            lib.v1(*args, reps=reps)
        else:
            base = self.buf.data_ptr()
            lib.v2(*args, self.active, [base + 4 * o for o in self.offsets], reps=reps)

    def error(self) -> float:
        """max |out - ref| / max |ref| over the rows the op defines (each batch's real queries)."""
        import torch

        c, worst, top = self.case, 0.0, 0.0
        mask = torch.from_numpy(self.mask).cuda().bool()
        for b in range(c.batch):
            t = c.totals[b]
            n_q = t if c.prompt else 1
            past = t - n_q
            pos_q = torch.arange(past, t, device="cuda")
            pos_k = torch.arange(t, device="cuda")
            for h in range(c.heads):
                allowed = mask[h % c.num_layout][pos_q[:, None] // BLOCK, pos_k[None, :] // BLOCK]
                allowed &= pos_k[None, :] <= pos_q[:, None]
                q = self.q[b, h, :n_q].double()
                k = self.k[b, h // (c.heads // c.kv_heads), :t].double()
                v = self.v[b, h // (c.heads // c.kv_heads), :t].double()
                s = (q @ k.T) * c.scale
                s = s.masked_fill(~allowed, float("-inf"))
                ref = torch.softmax(s, dim=-1) @ v
                got = self.out[b, :n_q, h].double()
                if not torch.isfinite(got).all():
                    return float("inf")
                worst = max(worst, (got - ref).abs().max().item())
                top = max(top, ref.abs().max().item())
        return worst / max(top, 1e-30)


def time_us(inputs: Inputs, lib: Consumer, sm: int, reps: int = 50) -> float:
    import torch

    inputs.launch(lib, sm, reps=5)
    times = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        inputs.launch(lib, sm, reps=reps)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / reps)
    return statistics.median(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ort-root", type=Path, help="an ONNX Runtime checkout: build both libraries from it")
    ap.add_argument("--consumer", type=Path, help="the library built from the generated sources")
    ap.add_argument("--rival", type=Path, help="the library built from ORT's own tree (its checked-in kernels)")
    ap.add_argument("--cases", default="ort,long", help="comma list of ort, long")
    ap.add_argument("--dtypes", default="fp16,bf16")
    ap.add_argument("--time", action="store_true", help="time Phi-3-small's shapes for each library")
    ap.add_argument("--results", type=Path, default=None)
    args = ap.parse_args(argv)
    if not args.consumer and not args.ort_root:
        ap.error("give --ort-root (an ONNX Runtime checkout) or --consumer (a built library)")
    import torch

    major, minor = torch.cuda.get_device_capability()
    sm, device = major * 10 + minor, torch.cuda.get_device_name()
    if args.ort_root and not args.consumer:
        import tempfile

        from tritonforge.pipeline.package.ort_sparse_consumer import build_pair

        built = Path(tempfile.mkdtemp(prefix="tf-sparse-bench-"))
        print(f"building both libraries for sm_{sm} from {args.ort_root} in {built}", flush=True)
        args.consumer, args.rival = build_pair(args.ort_root, built, sm, ROOT / "kernels")
    libs = {"tritonforge": Consumer(args.consumer)}
    if args.rival:
        libs["ort"] = Consumer(args.rival)
    cases = [c for name, fn in (("ort", ort_cases), ("long", long_cases)) if name in args.cases.split(",")
             for c in fn()]
    rows, failed = [], 0
    for lib_name, lib in libs.items():
        if not lib.supported(sm):
            print(f"{lib_name}: sm_{sm} is not supported (is_supported_device)")
            failed += lib_name == "tritonforge"
            continue
        for dtype in args.dtypes.split(","):
            for case in cases:
                inputs = Inputs(case, dtype)
                try:
                    inputs.launch(lib, sm)
                    torch.cuda.synchronize()
                    err = inputs.error()
                except Exception as exc:  # a refused launch is a failed case, named
                    err, why = float("inf"), str(exc)
                else:
                    why = ""
                ok = err <= TOL[dtype]
                failed += not ok and lib_name == "tritonforge"
                print(f"{lib_name:11s} {dtype} {case.kernel} {case.name:32s} max rel err {err:.2e} "
                      f"{'ok' if ok else 'FAILED'} {why}", flush=True)
                rows.append({"provider": lib_name, "shape": f"{case.kernel} {case.name}", "dtype": dtype,
                             "metric": "max_rel_err", "unit": "", "value": f"{err:.3g}", "extra": why[:200]})
    if args.time:
        for dtype in args.dtypes.split(","):
            for case in timed_cases():
                inputs = Inputs(case, dtype)
                us = {}
                for lib_name, lib in libs.items():
                    inputs.launch(lib, sm)
                    torch.cuda.synchronize()
                    err = inputs.error()
                    if err > TOL[dtype]:
                        print(f"{lib_name} {dtype} {case.name}: max rel err {err:.2e}: not timed")
                        continue
                    us[lib_name] = time_us(inputs, lib, sm)
                    rows.append({"provider": lib_name, "shape": f"{case.kernel} {case.name}", "dtype": dtype,
                                 "metric": "us", "unit": "us", "value": f"{us[lib_name]:.2f}"})
                ratio = us["ort"] / us["tritonforge"] if len(us) == 2 else float("nan")
                if len(us) == 2:
                    rows.append({"provider": "tritonforge", "shape": f"{case.kernel} {case.name}", "dtype": dtype,
                                 "metric": "speedup_vs_ort", "unit": "x", "value": f"{ratio:.3f}"})
                print(f"time {dtype} {case.name:28s} " + "  ".join(f"{k} {v:.1f} us" for k, v in us.items())
                      + (f"  ours/ORT {ratio:.2f}x" if len(us) == 2 else ""), flush=True)
    write_rows("sparse_attention", device, rows, *([args.results] if args.results else []))
    print(f"{failed} case(s) failed" if failed else "every case within tolerance")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
