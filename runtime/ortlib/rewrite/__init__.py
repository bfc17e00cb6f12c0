"""Put a model's GroupNorms and softmaxes into the custom-op library's domain, leaving the rest.

    from tritonforge.runtime.ortlib.rewrite import rewrite_file
    report = rewrite_file("vae_decoder.onnx", "vae_decoder.tf.onnx")
    print("\n".join(report.lines()))

The forms it recognises are declared in patterns.py, one matcher each: GroupNorm as torch.onnx writes it (Reshape ->
InstanceNormalization -> Reshape -> Mul -> Add, TorchScript and dynamo exporters), ONNX GroupNormalization 18 and
21, ORT's com.microsoft.GroupNorm / SkipGroupNorm, each with a following SiLU fused in where the form allows (with
layout="nhwc", channels-last, a ResNet's time-embedding Add taken in as a broadcast skip: layout.py), and
last-axis Softmax / LogSoftmax at row lengths where the library's kernel measured faster than ORT's own
(choices.json's `softmax` table, derived from the committed measurements by benchmarks/choices.py: ORT's kernel wins on
attention over 77 text tokens or ViT's 197, and on fp32 rows of GPT-2's 50257; `softmax_min_cols` sets a plain
threshold instead, 0 takes every row), a Linear's GELU-tanh to ORT's own FastGelu with the bias folded in (gelu.py),
and a diffusion transformer's modulated LayerNorm, with the gated residual before it, to the library's AdaLayerNorm
(ada_layer_norm.py), a UNet block's Linear bias, residual Add and LayerNorm to ORT's SkipLayerNormalization
(skip_layer_norm.py), any other LayerNorm of a constant affine to AdaLayerNorm too (its affine the modulation,
ada_layer_norm.py), and a UNet's GEGLU, the bias folded in, to ORT's BiasSplitGelu or the library's (ORT's
optimizer's own BiasSplitGelu too: bias_split_gelu.py), and Flux's rotary embedding of queries and keys to the
library's RotaryEmbedding (rotary_embedding.py), each where it measured faster, and a bfloat16 Einsum that only
permutes axes (the DiTs' unpatchify) as the Transpose it is, which onnxruntime takes (einsum.py), and a bfloat16
patch-embedding Conv (kernel = stride) as the MatMul it is, which onnxruntime's CUDA EP runs (patch_conv.py); last,
in a pass of its own after those (which take some Linears' biases into their nodes), every other Linear's MatMul and
bias Add, with the GELU-tanh after it, to the library's Linear (linear.py: one cuBLASLt call, the epilogue fused),
where that measured faster. First, a Concat of Slices that give back one tensor is read as that tensor (rejoin.py:
Flux's single blocks, between each two), and a Shape of a Linear's output reads its MatMul (shapes.py: the dynamic
TorchScript export's head splits). Types and shapes come from graph.py (ONNX's inference carried past ORT's contrib
ops). A node that is almost one of these forms but not quite is left as it is, and the report names it and says why;
so is one whose dtype the library (`library=`) has no CUDA kernel for. The forms are found inside If branches and
Loop and Scan bodies as in the main graph, and a value a subgraph reads is never removed. Symbolic dims (dynamic
batch, resolution) are kept symbolic. Models of any size are read and written with their external data (files.py). A
model that passes onnx.checker still does after; node names and outputs are kept, nodes only the replaced ones read
are dropped, and the domain is added to the model's opsets. `rewrite_file` writes only a model that onnxruntime
loads with the library registered (loads.py).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .. import DOMAIN, info, library_path
from ..errors import TritonforgeError
from . import choices
from .ada_layer_norm import ADA_LAYER_NORM, AFFINE_LAYER_NORM
from .attention import ATTENTION
from .bias_split_gelu import BIAS_SPLIT_GELU
from .einsum import EINSUM
from .files import ModelFileError, read, tensors, weight_bytes, write
from .fp8 import to_fp8
from .fp8_check import MIN_COSINE as FP8_MIN_COSINE
from .gelu import GELU
from .graph import FLOAT_TYPES, MS, Graph, domain_of, every_node, named_subgraphs, outer_reads
from .layout import channels_last
from .linear import LINEAR
from .loads import check_loads
from .patch_conv import PATCH_CONV
from .patterns import PATTERNS, Left, Rewriter
from .rejoin import rejoin
from .rotary_embedding import ROTARY_EMBEDDING
from .shapes import shapes_past_bias
from .skip_layer_norm import SKIP_LAYER_NORM

__all__ = ["Report", "RewriteError", "rewrite", "rewrite_file"]

FP8_FIRST_ARCH = [arch for arch, _ in choices.ARCHS].index("ada")  # fp8 tensor cores: Ada (sm_89) and newer


class RewriteError(TritonforgeError, ValueError):
    pass


@dataclass
class Report:
    rewritten: Counter = field(default_factory=Counter)  # library op -> nodes written
    sources: Counter = field(default_factory=Counter)  # (library op, the form it came from) -> nodes
    targets: Counter = field(default_factory=Counter)  # (op, the domain written: the library's or ORT's) -> nodes
    fused_silu: int = 0
    channels_last: int = 0  # GroupNormalizations written as the NHWC GroupNorm between Transposes (layout.py)
    time_skips: int = 0  # of those, the ones that took a ResNet's time-embedding Add as a broadcast skip
    rejoined: int = 0  # Concats of Slices covering one tensor, read as that tensor (rejoin.py)
    shapes_moved: int = 0  # Shapes of a Linear's MatMul + bias pointed at the MatMul (shapes.py)
    left: list[str] = field(default_factory=list)  # "<op> node '<name>': why"
    notes: Counter = field(default_factory=Counter)  # why nodes went where they went -> how many
    wrote: list[str] = field(default_factory=list)  # files written (rewrite_file)
    foreign: list[tuple] = field(default_factory=list)  # (domain, op, dtype, name) of nodes written in ORT's domain
    loads: str = ""  # what rewrite_file checked before writing: "loads in onnxruntime 1.31.1 (...)"
    gpu: str = ""  # the GPU the choices were made for, as said ("NVIDIA L4 (named)"), or "" for none
    decided: dict = field(default_factory=dict)  # table consulted -> the GPU(s) whose rows decided (choices.py)
    fp8: list[str] = field(default_factory=list)  # Fp8Linear nodes written (precision="fp8", fp8.py)
    fp8_min_features: int | None = None  # the narrowest Linear put in fp8; None: the measured break-even
    fp8_kept: list = field(default_factory=list)  # (node, cosine): Linears the fp8 check kept in their type
    fp8_checked: str = ""  # how the fp8 check ran, or why it did not (fp8_check.py)
    fp8_measured: str = ""  # what timing each Linear in fp8 and as it is decided (measure.Fp8Timing)
    measured: str = ""  # what timing the choices on this GPU decided, or why they were not timed (measure.py)
    measured_rows: dict = field(default_factory=dict)  # {signature: {candidate: microseconds or why not}}
    measured_changed: int | None = None  # sites whose timing here overruled the shipped tables (None: not timed)

    def lines(self) -> list[str]:
        out = []
        for op, n in sorted(self.rewritten.items()):
            forms = ", ".join(f"{k} {src}" for (o, src), k in sorted(self.sources.items()) if o == op)
            to = [(d, k) for (o, d), k in sorted(self.targets.items()) if o == op] or [(DOMAIN, n)]
            named = [(f"{d}.{op}" if d else f"ONNX {op}", k) for d, k in to]
            where = " and ".join(name if len(to) == 1 else f"{k} {name}" for name, k in named)
            why = ("; ORT's own where it measured faster (rewrite/choices.json)"
                   if any(d not in (DOMAIN, "") for d, _ in to) else "")
            out.append(f"{op}: {n} node(s) -> {where} (from {forms}{why})")
        if self.fused_silu:
            out.append(f"SiLU fused into {self.fused_silu} GroupNormalization node(s)")
        if self.channels_last:
            out.append(f"channels-last: {self.channels_last} GroupNormalization node(s) as tritonforge.GroupNorm "
                       "between Transposes, for sessions with prefer_nhwc (rewrite/layout.py)")
        if self.time_skips:
            out.append(f"{self.time_skips} of them tritonforge.SkipGroupNorm, the time-embedding Add before the "
                       "norm taken as a skip broadcast over H*W (rewrite/layout.py)")
        if self.rejoined:
            out.append(f"{self.rejoined} Concat(s) of Slices that cover one tensor read as that tensor "
                       "(rewrite/rejoin.py)")
        if self.shapes_moved:
            out.append(f"{self.shapes_moved} Shape(s) of a Linear's output read its MatMul, which has that shape "
                       "(rewrite/shapes.py)")
        if self.fp8:
            if self.fp8_min_features is None:
                which = ("timed faster in fp8 here, or past the measured break-even where not timed"
                         if self.fp8_measured else "past the measured break-even")
            else:
                which = f"of {self.fp8_min_features}+ features" + (", timed faster in fp8 here where timed"
                                                                  if self.fp8_measured else "")
            out.append(f"fp8: {len(self.fp8)} Linear(s) {which} -> tritonforge.Fp8Linear "
                       "(e4m3 weights per output channel, activations per token; rewrite/fp8.py)")
        if self.fp8_kept:
            kept = ", ".join(f"{name} ({cos:.4f})" for name, cos in self.fp8_kept)
            out.append(f"fp8 {self.fp8_checked}; kept in their type below cosine {FP8_MIN_COSINE}: {kept}")
        elif self.fp8_checked.startswith("checked"):
            out.append(f"fp8 {self.fp8_checked}; every one within cosine {FP8_MIN_COSINE} of its exact product")
        elif self.fp8_checked:  # not checked, and why
            out.append(f"fp8 {self.fp8_checked}")
        if self.measured:
            out.append(f"choices timed here: {self.measured}")
        if self.fp8_measured:
            out.append(f"fp8 timed here: {self.fp8_measured}")
        if self.decided:
            out.append(f"choices for {self.gpu or 'no GPU named or seen'}: measured on " +
                       "; ".join(f"{device} ({table})" for table, device in sorted(self.decided.items())))
        out += [f"note: {why} ({n} node(s))" for why, n in self.notes.items()]
        out += [f"left as is: {why}" for why in self.left]
        return out or ["nothing to rewrite"]


def _check(model, what: str) -> bool:
    import onnx

    try:
        onnx.checker.check_model(model)
        return True
    except onnx.checker.ValidationError as exc:
        if what == "before":
            return False  # a model the checker refuses already (ORT may still run it): nothing to keep valid
        raise RewriteError(f"the rewritten model does not pass onnx.checker: {exc}") from None


def rewrite(model, library: str | os.PathLike | None = None, use_library: bool = True,
            softmax_min_cols: dict | int | None = None, base_dir: str | os.PathLike | None = None,
            check: bool | None = None, attention: str | None = None, layout: str = "nhwc",
            gpu: str | None = None, precision: str | None = None, fp8_min_features: int | None = None,
            fp8_check: bool = True, timer=None, dims: dict | None = None, measure_budget: float = 60.0,
            measured_rows: dict | None = None, say=None, measure_from: float | None = None,
            scratch: str | os.PathLike | None = None) -> Report:
    """Rewrite an onnx.ModelProto in place; returns a Report. With `use_library`, only ops whose dtype
    the library's CUDA kernels serve are rewritten (`library`: its path; default: ortlib.library_path).
    `softmax_min_cols`: the shortest last axis a softmax is rewritten at, per dtype or one for all (0
    rewrites every one; default: where the library measured faster, patterns.measured_speedup). `base_dir`:
    where the model's external data lives.
    `check`: run onnx.checker before and after (default: when the model's data is all in memory).
    `attention`: "tritonforge" (every attention the matchers find to the library), "ort" (to ORT's
    com.microsoft.MultiHeadAttention), or None: the fastest measured per class of shape (attention.py).
    `layout`: "nhwc" (the default, as tritonforge-rewrite's): GroupNorms channels-last for sessions with
    prefer_nhwc, which ortlib.session sets (layout.py); or "nchw", the export's, for sessions without it.
    `gpu`: the GPU whose measurements decide between the library's nodes and ORT's (default: the one nvidia-smi
    shows here, else none); each table takes the rows of the nearest GPU that measured it (choices.py).
    `precision`: None (the model's) or "fp8": Linears large enough to gain (default: the measured break-even,
    fp8.large_enough; `fp8_min_features` N: N input and output features or more, 0 every one) as Fp8Linear nodes
    (fp8.py), each tried on the model's own activations first where `fp8_check` (fp8_check.py): one that moves
    its product too far stays in its type; `scratch`: the folder the check writes its copy of the model in (default:
    the system's temporary folder; rewrite_file gives the output's, which must hold the model anyway).
    `timer`: a timing source (measure.OrtTimer on this GPU) that decides the choices the tables would make, site by
    site, on the model's own shapes (measure.py): `dims` sizes the dims the model leaves symbolic, `measure_budget`
    bounds the rewrite's seconds (counted from `measure_from`, a time.monotonic(); default: this call's start):
    no shape starts timing past it. `measured_rows` are rows timed before (a MeasuredFile's), `say` hears the
    progress."""
    measure_from = time.monotonic() if measure_from is None else measure_from
    if precision not in (None, "fp8"):
        raise RewriteError(f"precision={precision!r}: choose fp8 or None (the model's own)")
    if fp8_min_features is not None and (precision != "fp8" or fp8_min_features < 0):
        raise RewriteError(f"fp8_min_features={fp8_min_features!r}: a count of features >= 0, with precision='fp8'")
    if attention not in (None, "tritonforge", "ort"):
        raise RewriteError(f"attention={attention!r}: choose tritonforge, ort or None (the measured choice)")
    if layout not in ("nchw", "nhwc"):
        raise RewriteError(f"layout={layout!r}: choose nchw or nhwc")
    cuda = info(library)["cuda"] if use_library else None
    min_cols = (softmax_min_cols if isinstance(softmax_min_cols, dict) or softmax_min_cols is None
                else dict.fromkeys(FLOAT_TYPES.values(), softmax_min_cols))
    if check is None:
        check = not any(t.data_location == t.EXTERNAL for t in tensors(model))
    valid = check and _check(model, "before")
    report = Report()
    graph = Graph(model, base_dir)
    report.rejoined = rejoin(graph)
    report.shapes_moved = shapes_past_bias(graph)
    if report.rejoined or report.shapes_moved:  # nodes rewired to values of the same type and shape, or dropped
        graph.reindex()
    with choices.deciding(gpu) as scope:
        if precision == "fp8":
            _fp8_runs_on(scope)
        verdicts = _timed_choices(graph, cuda, min_cols, attention, timer, dims, (measure_budget, measure_from),
                                  measured_rows, say, report) if timer is not None else {}
        _rewrite_scope(graph, cuda, min_cols, report, attention, verdicts)
    report.gpu = f"{scope.gpu} ({'named' if scope.how == 'named' else 'this machine'})" if scope.gpu else ""
    report.decided = dict(scope.used)
    if layout == "nhwc":
        report.channels_last, report.time_skips, kept = channels_last(graph, cuda)
        report.left += kept
    if precision == "fp8":
        report.fp8_min_features = fp8_min_features
        timing = _fp8_timing(model, timer, dims, measure_budget, measure_from, measured_rows, say)
        if say:  # the weights' quantization and the check's run of the model take a while on a large model
            say("fp8: " + ("checking the Linears on the model's own activations, then " if fp8_check else "")
                + "quantizing their weights")
        done = to_fp8(model, report.fp8_min_features, base_dir, cuda.get("Fp8Linear", []) if cuda else None,
                      check_library=library_path(library) if use_library else None, check=fp8_check, dims=dims,
                      decide=timing, scratch=scratch)
        report.fp8, report.fp8_kept, report.fp8_checked = done.written, done.kept, done.checked
        if timing is not None:
            report.fp8_measured = timing.summary()
            report.measured_rows.update(timing.rows)
    # the domains the written nodes use (the library's, and ORT's where attention went to its own op)
    used = {n.domain for n in every_node(model.graph)} & {DOMAIN, MS} if report.rewritten or report.fp8 else set()
    for domain in sorted(used - {o.domain for o in model.opset_import}):
        from onnx import helper

        model.opset_import.append(helper.make_opsetid(domain, 1))
    if valid:
        _check(model, "after")
    return report


def _fp8_timing(model, timer, dims, budget, start, known, say):
    """The fp8 rewrite's timing of each Linear on this GPU (measure.Fp8Timing), or None without a timer."""
    if timer is None:
        return None
    from .measure import Fp8Timing

    return Fp8Timing(model, timer, dims, budget, start, known, say)


def _timed_choices(graph, cuda, min_cols, attention, timer, dims, budget, known, say, report) -> dict:
    """{site: Choice} as timed by `timer` (measure.py), its summary and rows in the report. `budget`: (seconds,
    the time.monotonic() they count from)."""
    from .measure import measure

    def trials(pick: str, verdicts: dict) -> tuple:
        return trial(graph, cuda, min_cols, attention, pick, verdicts)

    done = measure(graph, trials, timer, dims, budget[0], known, say, getattr(timer, "device", "this GPU"),
                   start=budget[1])
    report.measured, report.measured_rows, report.measured_changed = done.summary, done.rows, done.changed
    return done.verdicts


def _fp8_runs_on(scope) -> None:
    """Refuse fp8 for a GPU (named, or this machine's) of an architecture without fp8 tensor cores: the Fp8Linear
    nodes would run dequantized there, the fp8 rounding without its speed."""
    known = choices.model_of(scope.gpu) if scope.gpu else None
    if known is not None and known[0] < FP8_FIRST_ARCH:
        first = choices.ARCHS[FP8_FIRST_ARCH][0]
        said = "named" if scope.how == "named" else "this machine's GPU"
        raise RewriteError(f"precision='fp8': {scope.gpu} ({said}) is {choices.ARCHS[known[0]][0]}, which has no fp8 "
                           f"tensor cores; Fp8Linear runs in fp8 on {first} (sm_89) and newer (on older GPUs "
                           "dequantized: fp8's rounding without its speed). Rewrite without fp8 for it, or name the "
                           "GPU the model will run on (--gpu)")


def _matchers(late: bool) -> dict:
    """{anchor: matchers} of one pass: the late one (Linears) after the fusions that take a Linear's bias."""
    by_anchor = {}
    # attention before softmax: a Softmax is an attention's first
    for p in (*ATTENTION, *PATTERNS, *GELU, *ADA_LAYER_NORM, *SKIP_LAYER_NORM, *AFFINE_LAYER_NORM, *BIAS_SPLIT_GELU,
              *ROTARY_EMBEDDING, *EINSUM, *PATCH_CONV, *LINEAR):
        if getattr(p, "late", False) == late:
            for anchor in p.anchors:
                by_anchor.setdefault(anchor, []).append(p)
    return by_anchor


def _rewrite_scope(graph: Graph, cuda: dict | None, min_cols: dict | None, report: Report,
                   attention: str | None = None, verdicts: dict | None = None) -> None:
    """One scope's matches spliced in, its subgraphs' first (If branches, Loop and Scan bodies, at any depth).
    `verdicts`: the choices measured on this GPU per site (measure.py)."""
    for node in graph.nodes:
        for attr, sub in named_subgraphs(node):
            where = f" in the {attr} of {node.op_type} node '{node.name}'{graph.where}"
            _rewrite_scope(Graph(graph.model, graph.base_dir, sub, graph, where), cuda, min_cols, report, attention,
                           verdicts)
    r = Rewriter(graph, cuda, min_cols, attention, verdicts=verdicts)
    taken = _matches(graph, r, report)
    report.notes.update(r.notes)
    if taken:
        _splice(graph, taken, r.initializers)


def _matches(graph: Graph, r: Rewriter, report: Report) -> dict:
    """{node index: the match that replaces it} of one scope, both passes."""
    r.index = {id(n): i for i, n in enumerate(graph.nodes)}
    taken: dict[int, object] = {}
    for late in (False, True):
        _one_pass(graph, r, _matchers(late), taken, report, late)
    return taken


def trial(graph: Graph, cuda: dict | None, min_cols: dict | None, attention: str | None, prefer: str | None,
          verdicts: dict | None = None) -> tuple:
    """(the matches of the main scope that made a choice, by site; the initializers they read): what the rewrite
    would write if every choice `verdicts` does not settle went to `prefer` ("library" or "ort"; None: where the
    shipped tables send it). Nothing is spliced."""
    names, node_names = set(graph.names), set(graph.node_names)
    try:
        r = Rewriter(graph, cuda, min_cols, attention, prefer=prefer, verdicts=verdicts)
        taken = _matches(graph, r, Report())
    finally:  # the names a trial took are free again: the rewrite names its nodes as it would untimed
        graph.names.clear()
        graph.names.update(names)
        graph.node_names.clear()
        graph.node_names.update(node_names)
    return {m.site: m for m in taken.values() if m.site in r.consulted}, r.initializers


def _one_pass(graph: Graph, r: Rewriter, by_anchor: dict, taken: dict, report: Report,
              late: bool) -> None:
    """The matches of one pass over the scope's nodes, recorded in `taken` and the report. In the late pass a match
    overlapping an earlier one is no news: the earlier fusion took that Linear's bias on purpose."""
    index = r.index
    for node in graph.nodes:
        if index[id(node)] in taken:
            continue
        near = []  # why earlier matchers left it: a later one (the softmax alone) may still take it
        r.anchor = r.site(node)
        for p in by_anchor.get((domain_of(node), node.op_type), ()):
            try:
                m = p.match(r, node)
            except Left as why:
                near.append(str(why))
                continue
            if m is None:
                continue
            if _reads_its_own_result(graph, index, m):
                near.append("the fused node would read a value computed from its own result (a shape of it "
                            "feeds its other inputs)")
                continue
            if any(index[id(n)] in taken for n in m.remove):
                if not late:
                    report.left.append(f"{node.op_type} node '{node.name}'{graph.where}: overlaps a rewrite already "
                                       "made")
                else:
                    near = []
                break
            m.site = r.anchor
            taken.update((index[id(n)], m) for n in m.remove)
            r.taken.update(id(n) for n in (*m.remove, *m.claims))
            report.rewritten[m.node.op_type] += 1
            report.sources[(m.node.op_type, m.source)] += 1
            report.targets[(m.node.op_type, m.node.domain)] += 1
            report.fused_silu += m.silu
            if m.note:
                report.notes[m.note] += 1
            if m.node.domain != DOMAIN:
                report.foreign.append((m.node.domain, m.node.op_type, m.dtype or r.dtype(m.node.input[0]), m.node.name))
            near = [f"{why} (the {node.op_type} alone went to {m.node.domain}.{m.node.op_type})" for why in near]
            break
        report.left += [f"{node.op_type} node '{node.name}'{graph.where}: {why}" for why in dict.fromkeys(near)]


def _reads_its_own_result(graph: Graph, index: dict, m) -> bool:
    """Whether a match's nodes read a value computed from one of the nodes it replaces: TorchScript's
    `x.shape[0]` of a residual sum, say, in front of the reshape that makes the modulation a fused norm would take
    with that sum. Spliced, the node would wait on itself. The graph is in order, so only producers after the
    first replaced node can lead back to one."""
    removed = {id(n) for n in m.remove}
    first = min(index[id(n)] for n in m.remove)
    new = [*m.before, m.node, *m.after]
    made = {o for n in new for o in n.output}
    todo, seen = [v for n in new for v in n.input if v and v not in made], set()
    while todo:
        p = graph.producer.get(todo.pop())
        if p is None or id(p) in seen or index.get(id(p), -1) < first:
            continue
        if id(p) in removed:
            return True
        seen.add(id(p))
        todo.extend(v for v in p.input if v)
    return False


def _splice(graph: Graph, taken: dict, initializers: list) -> None:
    """Each match's node where its first replaced node was; the replaced nodes, and the nodes and
    initializers only they read, dropped. A value a subgraph reads from this scope counts as read."""
    first = {}
    for i, m in sorted(taken.items()):
        first.setdefault(id(m), i)
    placed = {i: [*m.before, m.node, *m.after] for i, m in taken.items() if first[id(m)] == i}
    kept = [n for i, node in enumerate(graph.nodes) if i in placed or i not in taken for n in placed.get(i, [node])]
    # producers whose every reader went: the constants and shapes feeding the replaced nodes
    readers = Counter(i for n in kept for i in dict.fromkeys([*n.input, *outer_reads(n)]) if i)
    dropped = [n for i, n in enumerate(graph.nodes) if i in taken]
    while True:
        dead = {id(graph.producer[i]) for n in dropped for i in n.input if i in graph.producer}
        dead = [n for n in kept if id(n) in dead and not any(readers[o] or o in graph.outputs for o in n.output)]
        if not dead:
            break
        kept = [n for n in kept if n not in dead]
        for n in dead:
            readers.subtract(i for i in dict.fromkeys([*n.input, *outer_reads(n)]) if i)
        dropped = dead
    kept = _in_order(kept)
    scope = graph.scope
    gone = ({i for n in graph.nodes for i in n.input} - {i for i, k in readers.items() if k > 0}
            - {i.name for i in scope.input} - graph.outputs)
    inits = [t for t in scope.initializer if t.name not in gone] + initializers
    del scope.node[:]
    scope.node.extend(kept)
    del scope.initializer[:]
    scope.initializer.extend(inits)


def _in_order(nodes: list) -> list:
    """`nodes` in a topological order that keeps their given order wherever it already is one: a match's node
    stands where its first replaced node stood, and may read values (a modulation's shift) made after that."""
    import heapq

    made = {o: i for i, n in enumerate(nodes) for o in n.output if o}
    waits = [{made[v] for v in (*n.input, *outer_reads(n)) if v in made and made[v] != i}
             for i, n in enumerate(nodes)]
    readers: dict[int, list[int]] = {}
    for i, w in enumerate(waits):
        for j in w:
            readers.setdefault(j, []).append(i)
    ready = [i for i, w in enumerate(waits) if not w]
    heapq.heapify(ready)
    out = []
    while ready:
        i = heapq.heappop(ready)
        out.append(nodes[i])
        for j in readers.get(i, []):
            waits[j].discard(i)
            if not waits[j]:
                heapq.heappush(ready, j)
    if len(out) != len(nodes):  # a cycle: not ours to mend (the checker names it)
        return nodes
    return out


def rewrite_file(src: str | os.PathLike, dst: str | os.PathLike, library: str | os.PathLike | None = None,
                 use_library: bool = True, softmax_min_cols: dict | int | None = None,
                 attention: str | None = None, layout: str = "nhwc", check_load: bool = True,
                 gpu: str | None = None, precision: str | None = None, fp8_min_features: int | None = None,
                 fp8_check: bool = True, measure: str = "off", dims: dict | None = None,
                 measure_budget: float = 60.0, progress=None) -> Report:
    """Read `src` (any size: external data is read where it lies), rewrite, write `dst` and, when the
    model keeps external data, `<dst>.data` beside it, atomically; `report.wrote` lists them. The written
    model is loaded by onnxruntime (CPU EP, the library registered) before it is renamed into place: one
    that onnxruntime refuses is not written, and the RewriteError names the node and onnxruntime's message
    (`report.loads` says what was checked; loads.py). Without onnxruntime nothing is written unless
    `check_load` is False. `measure`: "on" times the choices on this machine's GPU (measure.py; an error
    without one), "auto" where a CUDA GPU and onnxruntime's CUDA EP are here and no other `gpu` is named, "off"
    leaves them to the shipped tables; what was timed is kept in `<dst>.measured.json` and read again there.
    `dims`: as rewrite() takes them. `measure_budget` bounds this whole call: no shape starts timing once the
    call has run that long less the time kept for writing and load-checking the model (_kept_for_writing).
    `progress` hears a line per shape timed."""
    import onnx

    begun = time.monotonic()
    src, dst = Path(src), Path(dst)
    if src.resolve() == dst.resolve():
        raise RewriteError(f"{dst}: would overwrite the model being read; write the rewrite elsewhere")
    lib = library_path(library)
    try:
        model, base = read(src)
    except ModelFileError as exc:
        raise RewriteError(str(exc)) from None
    try:
        onnx.checker.check_model(str(src))
        valid = True
    except onnx.checker.ValidationError:
        valid = False
    timer, kept = _timer_for(measure, lib, gpu, dst)
    report = rewrite(model, lib, use_library, softmax_min_cols, base_dir=base, check=False, attention=attention,
                     layout=layout, gpu=gpu, precision=precision, fp8_min_features=fp8_min_features,
                     fp8_check=fp8_check, timer=timer, dims=dims, measure_budget=measure_budget,
                     measured_rows=kept.rows() if kept else None, say=progress,
                     measure_from=begun - _kept_for_writing(model, time.monotonic() - begun, precision),
                     scratch=dst.parent if dst.parent.is_dir() else None)

    def loads(path: Path) -> None:
        report.loads = check_loads(path, lib, dst, src, report.foreign, required=check_load)

    if progress:
        progress(f"writing {dst} and checking that onnxruntime loads it")
    try:
        report.wrote = [str(p) for p in write(model, dst, base, check=valid, verify=loads)]
    except ModelFileError as exc:
        raise RewriteError(str(exc)) from None
    if kept is not None and report.measured_rows:
        report.wrote.append(str(kept.write(report.measured_rows)))
    return report


# Seconds a GB of weights takes to write and load-check once the timing ends: SDXL's UNet (5.1 GB in fp16) took
# about 5 s on an H100 machine (rewrite_s in results.csv against its measure summary); twice that rate is kept.
WRITE_S_PER_GB = 2.0
# And what fp8 adds after the timing (its check's run of the model, the weights read and quantized in numpy): Flux's
# 2 + 4 blocks (2.62 GB in fp16) spent 42.9 s of a 44.3 s fp8 rewrite outside the timing on an H100 machine, 16.4 s
# a GB, writing's 2 of them.
FP8_S_PER_GB = 15.0


def _kept_for_writing(model, reading_s: float, precision: str | None = None) -> float:
    """Seconds of the budget kept for what follows the timing: as long again as reading took (a model read whole),
    and WRITE_S_PER_GB for its weights (a model whose external data is read only where it is used), and with fp8,
    FP8_S_PER_GB more."""
    return reading_s + (WRITE_S_PER_GB + (FP8_S_PER_GB if precision == "fp8" else 0.0)) * weight_bytes(model) / 1e9


def _timer_for(measure: str, lib: Path, gpu: str | None, dst: Path) -> tuple:
    """(the timing source, the MeasuredFile beside `dst`) that `measure` asks for here, or (None, None)."""
    if measure not in ("auto", "on", "off"):
        raise RewriteError(f"measure={measure!r}: choose auto, on or off")
    if measure == "off" or (measure == "auto" and gpu):
        return None, None
    try:
        import onnxruntime as ort
    except ImportError:
        ort = None
    seen = choices.detect_gpu()
    if ort is None or "CUDAExecutionProvider" not in ort.get_available_providers() or not seen:
        if measure == "on":
            lacks = ("onnxruntime is not installed" if ort is None else "nvidia-smi shows no GPU here" if not seen
                     else f"onnxruntime {ort.__version__} has no CUDA EP (install onnxruntime-gpu)")
            raise RewriteError(f"measure='on' times the choices on this machine's GPU, but {lacks}; use "
                               "measure='off' (--measure off) for the shipped tables")
        return None, None
    from .measure import MeasuredFile, OrtTimer

    key = {"device": seen, "onnxruntime": ort.__version__, "library": info(lib).get("archive_sha256", "")}
    return OrtTimer(lib, device=seen), MeasuredFile(dst, key)
