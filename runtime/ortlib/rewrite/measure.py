"""Choose on the GPU that runs the model: each choice the shipped tables would make for this model, timed there.

The rewrite's choices (the library's node, ORT's own fused op, or the export's nodes as they are) are made per
site, the node a matcher anchors on. Two trials of the matchers (`trial` in the package), one taking the library's
op at every choice and one ORT's, give each site its candidates. Each candidate, and the export's nodes it would
replace, is cut out as a model of its own: its constants are the model's, its other inputs random, of the site's
shapes (`dims` fixes the dims the model leaves symbolic). A few copies run side by side, so one run amortises
onnxruntime's per-run cost. They run in onnxruntime sessions on the GPU with the library registered (`OrtTimer`).
Each candidate's outputs are checked against the export's nodes' first (CHECK_TOLERANCE), then it is timed; a
site's verdict is the fastest that checked. Sites of one signature (the same ops at the same shapes: a UNet's
repeated blocks) are timed once, the heaviest first, until `budget_s` is spent. Sites not timed by then, or that
cannot be cut out (a symbolic dim, an input that is not a float tensor), are left to the tables, and the summary
says how many. With fp8 asked for, `Fp8Timing` times each Linear fp8 may take the same way: as it is against
the Fp8Linear that would replace it.

What was measured is kept in a file beside the written model (`MeasuredFile`), keyed by the GPU, onnxruntime and
the library, and read again by the next rewrite there: a signature measured once is not timed again.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import statistics
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import DOMAIN
from ..errors import TritonforgeError
from .graph import FLOAT_TYPES, MS, named_subgraphs
from .patterns import Choice

PICKS = ("library", "ort")  # the trials, each taking that candidate at every choice
# how far a candidate's outputs may be from the export's nodes' (both run on the same inputs in the same dtype), in
# units of the largest magnitude of the export's output: the rounding of two orders of summation in the dtype
CHECK_TOLERANCE = {"fp32": 1e-3, "fp16": 1e-2, "bf16": 5e-2}
FP8_TOLERANCE = 0.1  # an fp8 Linear against its fp16 node: e4m3's 3-bit mantissa (fp8_check.py bounds the quality)
COPY_BYTES = 256 << 20  # the copies of a site run side by side stop at this much input
MAX_COPIES = 8


class Unmeasurable(TritonforgeError):
    """A site that cannot be cut out and run on its own; the message says why."""


@dataclass
class Side:
    """One side of a site cut out: its nodes, the constants they read (TensorProtos by name), the other values
    they read ({name: (ONNX element type, dims)}), and the values compared across sides ({name: element type})."""

    nodes: list
    constants: dict
    inputs: dict
    outputs: dict

    @functools.cached_property
    def signature(self) -> str:
        """The side's ops, attributes and shapes, with value names numbered by first use (weights by shape, not
        value): equal for a UNet's repeated blocks."""
        names: dict[str, str] = {}

        def local(v: str) -> str:
            return names.setdefault(v, f"v{len(names)}") if v else ""

        parts = []
        for n in self.nodes:
            attrs = sorted((a.name, a.SerializeToString().hex()) for a in n.attribute)
            parts.append((n.domain, n.op_type, [local(i) for i in n.input], [local(o) for o in n.output], attrs))
        for name in sorted(self.constants, key=local):
            t = self.constants[name]
            small = t.SerializeToString().hex() if _size(t.dims) <= 16 else ""  # a shape or a scale is semantics
            parts.append((local(name), t.data_type, list(t.dims), small))
        parts += [(local(n), e, d) for n, (e, d) in sorted(self.inputs.items(), key=lambda kv: local(kv[0]))]
        return json.dumps(parts, sort_keys=True)


def _size(dims) -> int:
    return int(np.prod(dims)) if len(dims) else 1


def cut(graph, nodes: list, outputs: list, added: dict, dims: dict, loaded: dict | None = None,
        known: dict | None = None) -> Side:
    """`nodes` of `graph` (or new nodes reading its values) as a Side computing `outputs`: what they read that the
    model fixes becomes a constant (the model's initializers, small folded values, `added`: the rewrite's new
    initializers by name), any other value an input of fixed dims (`dims` maps dim names to sizes; `known`: the
    inputs of the site's export side; Graph.proved_dims where inference leaves them open); Unmeasurable naming the
    value otherwise. `loaded`: the model's weights read so far, by name (one copy for every cut)."""
    import onnx
    from onnx import numpy_helper

    made = {o for n in nodes for o in n.output if o}
    constants, inputs = {}, {}
    loaded = {} if loaded is None else loaded
    for n in nodes:
        if any(True for _ in named_subgraphs(n)):
            raise Unmeasurable(f"{n.op_type} node '{n.name}' holds a subgraph")
        for v in n.input:
            if not v or v in made or v in constants or v in inputs:
                continue
            if v in added:
                constants[v] = added[v]
            elif v in graph.inits:
                if v not in loaded:
                    t = onnx.TensorProto()
                    t.CopyFrom(graph.inits[v])
                    loaded[v] = _inline(t, graph.base_dir)
                constants[v] = loaded[v]
            elif (c := graph.const(v)) is not None or (c := graph.weight(v)) is not None:
                constants[v] = numpy_helper.from_array(np.ascontiguousarray(c), v)
            else:
                elem, shape = graph.elem(v), graph.dims(v)
                if elem not in FLOAT_TYPES:
                    raise Unmeasurable(f"'{v}' is no float tensor the model states (ONNX type {elem})")
                if shape is None:
                    raise Unmeasurable(f"the rank of '{v}' is not known")
                if None in shape:
                    shape = (known[v][1] if known and v in known else graph.proved_dims(v)) or shape
                fixed = [d if isinstance(d, int) else dims.get(d) for d in shape]
                if None in shape:
                    raise Unmeasurable("an input's dims are not fixed (a dynamic export: size the model's symbolic "
                                       "input dims with --dims NAME=SIZE)" if dims.get(SYMBOLIC) else
                                       "an input's dims are not known to shape inference")
                if any(not isinstance(d, int) for d in fixed):
                    loose = sorted({d for d, f in zip(shape, fixed) if not isinstance(f, int)})
                    raise Unmeasurable(f"dims the model leaves symbolic ({', '.join(loose)}): size them with "
                                       "--dims NAME=SIZE to time these")
                inputs[v] = (elem, fixed)
    return Side([_held_inline(n, graph.base_dir, loaded) for n in nodes], constants, inputs,
                {o: graph.elem(o) for o in outputs})


def _inline(t, base_dir):
    """Tensor `t` with its external data read into it, in place: a model handed to onnxruntime as bytes may read
    no file (a large export keeps its initializers and its Constant nodes' tensors in one)."""
    import onnx
    from onnx import external_data_helper

    if external_data_helper.uses_external_data(t):
        external_data_helper.load_external_data_for_tensor(t, base_dir or "")
        t.data_location = onnx.TensorProto.DEFAULT
        del t.external_data[:]
    return t


def _held_inline(node, base_dir, loaded: dict):
    """`node`, or a copy whose tensor attributes (a Constant's value) hold their external data, read once for every
    cut (kept in `loaded` by the node's output)."""
    import onnx
    from onnx import external_data_helper

    def outside(a):
        return a.type == onnx.AttributeProto.TENSOR and external_data_helper.uses_external_data(a.t)

    if not any(outside(a) for a in node.attribute):
        return node
    key = ("node", node.output[0])  # initializers are kept by their names, never tuples
    if key not in loaded:
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        for a in copy.attribute:
            if outside(a):
                _inline(a.t, base_dir)
        loaded[key] = copy
    return loaded[key]


def replaced(graph, nodes: list, kept: set) -> list:
    """`nodes` and the nodes only they read from (a decomposition's head splits, the shapes they read), in the
    graph's order: what the rewrite drops with them. The walk stops at the values in `kept` (the new nodes read
    them)."""
    gone = {id(n) for n in nodes}
    frontier = list(nodes)
    while frontier:
        found = []
        for n in frontier:
            for p in (graph.producer.get(i) for i in n.input if i):
                if p is None or id(p) in gone or any(o in graph.outputs or o in kept for o in p.output):
                    continue
                if all(id(r) in gone for o in p.output if o for r in graph.consumers.get(o, [])):
                    gone.add(id(p))
                    found.append(p)
        frontier = found
    return [n for n in graph.nodes if id(n) in gone]


def sides(graph, match, added: dict, dims: dict, typed=None, loaded: dict | None = None) -> tuple[Side, Side]:
    """(the export's nodes, the match's new nodes) of one site, each cut out (cut) computing the values both make;
    `typed`: the view whose types and shapes the cuts take (the model with its symbolic input dims sized)."""
    new = [*match.before, match.node, *match.after]
    old = replaced(graph, [*match.claims, *match.remove], {i for n in new for i in n.input})
    old_made = {o for n in old for o in n.output if o}
    outputs = [o for n in new for o in n.output if o and o in old_made]
    if not outputs:
        raise Unmeasurable("the new nodes make none of the values the export's nodes make")
    typed = typed or graph
    loaded = {} if loaded is None else loaded
    export = cut(typed, old, outputs, {}, dims, loaded)
    return export, cut(typed, new, outputs, added, dims, loaded, known=export.inputs)


def copies_for(side: Side) -> int:
    """How many copies of the side run side by side: up to MAX_COPIES, within COPY_BYTES of input."""
    from onnx import helper

    per = sum(_size(d) * helper.tensor_dtype_to_np_dtype(e).itemsize for e, d in side.inputs.values())
    return max(1, min(MAX_COPIES, COPY_BYTES // max(per, 1)))


def side_model(side: Side, copies: int, opsets: dict, ir_version: int):
    """The side as a model: `copies` copies reading copies of the inputs (the constants shared), every output a
    graph output (so nothing is pruned), and the first copy's outputs also cast to float32 as '<name>:check'."""
    from onnx import TensorProto, helper

    def renamed(v: str, k: int) -> str:
        return v if not v or v in side.constants else f"{v}:{k}"

    nodes, outs = [], []
    for k in range(copies):
        for n in side.nodes:
            c = helper.make_node(n.op_type, [renamed(i, k) for i in n.input], [renamed(o, k) for o in n.output],
                                 name=f"{n.name}:{k}", domain=n.domain)
            c.attribute.extend(n.attribute)
            nodes.append(c)
        outs += [helper.make_tensor_value_info(renamed(o, k), e, None) for o, e in side.outputs.items()]
    for o in side.outputs:
        nodes.append(helper.make_node("Cast", [renamed(o, 0)], [f"{o}:check"], to=TensorProto.FLOAT))
        outs.append(helper.make_tensor_value_info(f"{o}:check", TensorProto.FLOAT, None))
    ins = [helper.make_tensor_value_info(renamed(v, k), e, d) for k in range(copies) for v, (e, d) in
           side.inputs.items()]
    graph = helper.make_graph(nodes, "site", ins, outs, initializer=list(side.constants.values()))
    ops = {**opsets, DOMAIN: 1, MS: 1}
    return helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in ops.items()],
                             ir_version=ir_version)


@dataclass
class Timed:
    seconds: float  # one copy's time per run
    outputs: dict  # the first copy's outputs as float32 (or their own type where not float)


class OrtTimer:
    """Runs a site's model in an onnxruntime session with the library registered (settings.make_session, the CUDA
    EP options the rewritten models run with), its inputs and outputs bound on the device; the median of `runs`
    runs after `warmup`."""

    def __init__(self, library, providers=("CUDAExecutionProvider",), runs: int = 10, warmup: int = 3,
                 device: str = "this GPU"):
        import onnxruntime as ort

        self.ort, self.library, self.providers, self.device = ort, Path(library), list(providers), device
        self.runs, self.warmup = runs, warmup
        self.place = "cuda" if "CUDAExecutionProvider" in self.providers else "cpu"
        self._casts: dict[int, object] = {}

    def __call__(self, model, feeds: dict, copies: int) -> Timed:
        from ..settings import make_session

        so = self.ort.SessionOptions()
        so.log_severity_level = 3  # a site's constant folding warns of what the model's session would fold too
        sess = make_session(model.SerializeToString(), self.library, providers=self.providers, session_options=so)
        binding = sess.io_binding()
        types = {i.name: i.type.tensor_type.elem_type for i in model.graph.input}
        placed = {name: self._value(values, types[name]) for name, values in feeds.items()}
        for name, value in placed.items():
            binding.bind_ortvalue_input(name, value)
        for o in sess.get_outputs():
            binding.bind_output(o.name, self.place)
        times = []
        for _ in range(self.warmup + self.runs):
            start = time.perf_counter()
            sess.run_with_iobinding(binding)
            times.append(time.perf_counter() - start)
        check = sess.io_binding()
        for name, value in placed.items():
            check.bind_ortvalue_input(name, value)
        names = [o.name for o in sess.get_outputs()]
        for name in names:
            check.bind_output(name, "cpu" if name.endswith(":check") else self.place)
        sess.run_with_iobinding(check)
        outputs = {n[:-len(":check")]: v.numpy() for n, v in zip(names, check.get_outputs()) if n.endswith(":check")}
        return Timed(statistics.median(times[self.warmup:]) / copies, outputs)

    def _value(self, values: np.ndarray, elem: int):
        """`values` (feeds_for's: float16 for a float16 input, else float32) as an OrtValue of ONNX type `elem` on
        the device, a buffer of its own: numpy's own types directly, bfloat16 through a one-Cast session whose output
        stays there."""
        from onnx import TensorProto, helper

        if elem in (TensorProto.FLOAT, TensorProto.FLOAT16):
            values = values.astype(helper.tensor_dtype_to_np_dtype(elem), copy=False)  # already so from feeds_for
            return self.ort.OrtValue.ortvalue_from_numpy(values, self.place, 0)
        if elem not in self._casts:
            g = helper.make_graph([helper.make_node("Cast", ["x"], ["y"], to=elem)], "cast",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                                  [helper.make_tensor_value_info("y", elem, None)])
            m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)], ir_version=9)
            self._casts[elem] = self.ort.InferenceSession(m.SerializeToString(), providers=self.providers)
        sess = self._casts[elem]
        b = sess.io_binding()
        b.bind_cpu_input("x", values)
        b.bind_output("y", self.place)
        sess.run_with_iobinding(b)
        return b.get_outputs()[0]


def feeds_for(side: Side, copies: int, drawn: dict | None = None) -> dict:
    """Random inputs (standard normal; float16 for a float16 input, else float32, which the timer casts) for each
    copy of the side's inputs, each drawn from its name: the export's nodes and a candidate that read one value read
    the same numbers. The copies share one host array per value (each is placed on the device on its own); `drawn`
    keeps the arrays for the site's other sides."""
    drawn = {} if drawn is None else drawn
    feeds = {}
    for v, (elem, d) in side.inputs.items():
        key = (v, tuple(d), FLOAT_TYPES.get(elem) == "fp16")
        if key not in drawn:
            drawn[key] = _draw(v, d, np.float16 if key[2] else np.float32)
        for k in range(copies):
            feeds[f"{v}:{k}"] = drawn[key]
    return feeds


DRAWN = 1_000_003  # values drawn per input at most; a larger one repeats them (a prime: no row lines up with it)


def _draw(name: str, dims: list, dtype) -> np.ndarray:
    """Standard normal values of `dtype` for the value `name` at `dims`, from a seed of its name. Past DRAWN values
    the block repeats: drawing is the measurement's largest host cost, and repeated values time and check the same."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    block = rng.standard_normal(min(_size(dims), DRAWN), dtype=np.float32).astype(dtype, copy=False)
    return np.resize(block, dims)


def mismatch(dtype: str, want: dict, got: dict, tol: float | None = None) -> str:
    """Why `got` (a candidate's outputs) is not `want` (the export's) within `tol` (default: the dtype's
    CHECK_TOLERANCE), or ""."""
    tol = CHECK_TOLERANCE.get(dtype, CHECK_TOLERANCE["fp16"]) if tol is None else tol
    for name, ref in want.items():
        out = got.get(name)
        if out is None or out.shape != ref.shape:
            return f"'{name}' has shape {None if out is None else out.shape}, not {ref.shape}"
        ref32, out32 = ref.astype(np.float32, copy=False), out.astype(np.float32, copy=False)  # finer than tolerances
        finite = np.isfinite(ref32)
        if not finite.all():
            ref32, out32 = ref32[finite], out32[finite]
        if not np.isfinite(out32).all():
            return f"'{name}' has values that are not finite where the export's are"
        scale = max(float(np.abs(ref32).max(initial=0.0)), 1e-6)
        err = float(np.abs(out32 - ref32).max(initial=0.0)) / scale
        if err > tol:
            return f"'{name}' is {err:.2g} of its largest value from the export's (past {tol:g} in {dtype})"
    return ""


@dataclass
class Site:
    """The sites of one signature: their keys, and each candidate's cut (the export's nodes under "export")."""

    sites: list
    cuts: dict  # pick -> Side
    dtype: str
    label: str  # what it is, for progress and the report ("Linear (2, 4096, 640) fp16")


@dataclass
class Measured:
    """What one measurement decided: `verdicts` {site: Choice}; `rows` {signature: {pick: microseconds or the
    reason it was not timed}}; a summary line for the report."""

    verdicts: dict = field(default_factory=dict)
    rows: dict = field(default_factory=dict)
    summary: str = ""
    changed: int = 0  # sites the verdicts write otherwise than the shipped tables would


SYMBOLIC = "<symbolic>"  # dims' key for the model's input dims left symbolic (the reasons say how to size them)


def symbolic_dims(model) -> list[str]:
    """The names of the dims the model's inputs leave symbolic."""
    weights = {t.name for t in model.graph.initializer}
    return sorted({d.dim_param for i in model.graph.input if i.name not in weights
                   for d in i.type.tensor_type.shape.dim if d.dim_param})


def sized(model, dims: dict):
    """A copy of `model` whose inputs' symbolic dims are `dims`' sizes; its weights as they are (external data
    stays a reference)."""
    import onnx

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for i in copy.graph.input:
        for d in i.type.tensor_type.shape.dim:
            if d.dim_param in dims:
                size = dims[d.dim_param]
                d.ClearField("dim_param")
                d.dim_value = size
    return copy


def opsets_of(model) -> dict:
    """{domain: version} of the model's opset imports ("" for ONNX's own, however it is spelled)."""
    return {o.domain if o.domain != "ai.onnx" else "": o.version for o in model.opset_import}


def timing_dims(model, dims: dict | None) -> dict:
    """`dims` as cut() takes them: with SYMBOLIC saying whether the model leaves input dims they do not size (so
    an unmeasurable cut's reason says how to size them)."""
    return {**(dims or {}), SYMBOLIC: bool(set(symbolic_dims(model)) - set(dims or {}))}


def _uncut(exc: Exception) -> str:
    """The summary's reason for a site the cut failed on in a way it does not foresee."""
    return f"could not be cut out ({type(exc).__name__}: {' '.join(str(exc).split())[:120]})"


def group(graph, trials: dict, dims: dict, typed=None) -> tuple[dict, dict]:
    """({signature: Site} of the sites the trials made a choice at, {reason: sites} of the ones that cannot be
    cut out). `trials`: {pick: ({site: Match}, the trial's new initializers)}."""
    by_sig: dict[str, Site] = {}
    skipped: dict[str, int] = {}
    every = sorted({s for matches, _ in trials.values() for s in matches})
    loaded: dict = {}  # the weights the cuts read, one copy each
    for site in every:
        cuts, dtype, label = {}, "", ""
        try:
            for pick, (matches, inits) in trials.items():
                m = matches.get(site)
                if m is None:
                    continue
                added = {t.name: t for t in inits}
                old, new = sides(graph, m, added, dims, typed, loaded)
                cuts.setdefault("export", old)
                cuts[pick] = new
                x = next(iter(old.inputs.values()), None)
                dtype = dtype or FLOAT_TYPES.get(x[0], "") if x else dtype
                label = label or f"{m.node.op_type} {tuple(x[1]) if x else ''} {dtype}".strip()
        except Unmeasurable as why:
            skipped[str(why)] = skipped.get(str(why), 0) + 1
            continue
        except Exception as exc:  # a form the cut does not foresee: the tables decide it, and the summary says so
            why = _uncut(exc)
            skipped[why] = skipped.get(why, 0) + 1
            continue
        if "ort" in cuts and "library" in cuts and cuts["ort"].signature == cuts["library"].signature:
            del cuts["ort"]  # both trials wrote the same node (ORT's op cannot take this one): timed once
        if len(cuts) < 2:
            continue
        sig = hashlib.sha256("\n".join(f"{p}:{c.signature}" for p, c in sorted(cuts.items())).encode()).hexdigest()
        by_sig.setdefault(sig, Site([], cuts, dtype, label)).sites.append(site)
    return by_sig, skipped


def measure(graph, trial, timer, dims: dict | None = None, budget_s: float = 60.0, known: dict | None = None,
            say=None, device: str = "this GPU", rounds: int = 3, start: float | None = None) -> Measured:
    """Time each site's candidates against the export's nodes (module docstring). `trial(pick, verdicts)`: the
    matches ({site: Match}, their new initializers) the rewrite makes where each choice `verdicts` does not settle
    goes to `pick` (None: where the shipped tables send it); a site kept as exported can open one the trials had
    not (a norm left as it is leaves its Linear's bias to the Linear), so the trials run again with the verdicts so
    far, up to `rounds` times. `known`: {signature: row} a MeasuredFile kept, taken as measured. `say`: progress,
    one line per shape timed. `start`: the time.monotonic() `budget_s` counts from (default: now)."""
    from .graph import Graph

    opsets = opsets_of(graph.model)
    known = known or {}
    loose = symbolic_dims(graph.model)
    unknown = sorted(set(dims or {}) - set(loose))
    if unknown:
        raise TritonforgeError(f"--dims names {', '.join(unknown)}, which the model's inputs do not have; its "
                               f"symbolic dims are {', '.join(loose) or 'none'}")
    dims = timing_dims(graph.model, dims)
    typed = Graph(sized(graph.model, dims), graph.base_dir) if set(dims) & set(loose) else graph
    result = Measured()
    began = time.monotonic()
    start = began if start is None else start
    sites = timed = late = 0
    skipped: dict[str, int] = {}
    example: dict[str, str] = {}  # a reason's first message
    tried: set = set()
    for _ in range(rounds):
        trials = {}
        for pick in PICKS:
            matches, inits = trial(pick, result.verdicts)
            trials[pick] = ({s: m for s, m in matches.items() if s not in tried}, inits)
        if not any(matches for matches, _ in trials.values()):
            break
        tried |= {s for matches, _ in trials.values() for s in matches}
        by_sig, cut_out = group(graph, trials, dims, typed)
        for why, n in cut_out.items():
            skipped[why] = skipped.get(why, 0) + n
        sites += sum(len(s.sites) for s in by_sig.values())
        order = sorted(by_sig.items(), key=lambda kv: -len(kv[1].sites) * _weight(kv[1].cuts["export"]))
        for k, (sig, site) in enumerate(order):
            row = result.rows.get(sig) or known.get(sig)  # a later round's site of a shape timed already
            if row is None:
                if time.monotonic() - start > budget_s:
                    late += len(site.sites)
                    continue
                if say:
                    say(f"measuring {k + 1}/{len(order)}: {site.label} ({len(site.sites)} site(s))")
                row = _time_site(site, timer, opsets, graph.model.ir_version)
                timed += 1
            result.rows[sig] = row
            times = {p: v for p, v in row.items() if isinstance(v, float)}
            if "export" not in times:
                why = "the export's nodes did not run here"
                skipped[why] = skipped.get(why, 0) + len(site.sites)
                example.setdefault(why, str(row.get("export", ""))[:200])
                continue
            best = min(times, key=lambda p: (times[p], p != "export"))
            said = ", ".join(f"{'the export' if p == 'export' else p} {v:.1f} us" for p, v in sorted(times.items()))
            for s in site.sites:
                result.verdicts[s] = Choice(best, f"measured on {device}: {said}")
    kept = sum(1 for c in result.verdicts.values() if c.pick == "export")
    result.changed = _changed(result.verdicts, trial) if result.verdicts else 0
    parts = [f"{len(result.verdicts)} of {sites} site(s) decided by timing on {device} "
             f"({timed} shape(s) timed now, {len(result.rows) - timed} from the measured file, "
             f"{time.monotonic() - began:.1f} s): {len(result.verdicts) - kept} to the rewrite's node, {kept} kept; "
             f"{result.changed} differ from the shipped tables' choice"]
    if late:  # spent before the first shape, a rewrite again would spend it the same way
        parts.append(f"{late} past the {budget_s:g} s budget left to the tables" + (
            ": reading the model and the time kept for what follows the timing (writing it; fp8's check and weights) "
            "took all of it; give a larger --measure-budget to time them" if began - start > budget_s else
            " (rewriting again times them: what was timed now is kept)"))
    parts += [f"{n} left to the tables: {why}" + (f" (the first: {example[why]})" if why in example else "")
              for why, n in skipped.items()]
    result.summary = "; ".join(parts)
    return result


def _changed(verdicts: dict, trial) -> int:
    """How many of the `verdicts`' sites are written otherwise than the shipped tables would write them: a
    different node (the library's op, ORT's, or the export's nodes kept). A verdict for a candidate that writes
    the same node as the tables' (where ORT has no op of its own, its trial writes the library's) changes nothing."""
    tables, _ = trial(None, {})
    measured, _ = trial(None, verdicts)

    def written(matches: dict, site) -> tuple | None:
        m = matches.get(site)
        return None if m is None else (m.node.domain, m.node.op_type)

    return sum(1 for site in verdicts if written(tables, site) != written(measured, site))


def _weight(side: Side) -> int:
    return sum(_size(d) for _, d in side.inputs.values())


def _time_site(site: Site, timer, opsets: dict, ir_version: int) -> dict:
    """{pick: microseconds per site} for the export's nodes and each candidate that checked against them; a
    candidate that did not check, or failed to run, is there with the reason."""
    row: dict[str, float | str] = {}
    copies = copies_for(site.cuts["export"])
    want, drawn = None, {}
    for pick in ("export", *(p for p in site.cuts if p != "export")):
        side = site.cuts[pick]
        try:
            got = timer(side_model(side, copies, opsets, ir_version), feeds_for(side, copies, drawn), copies)
        except Exception as exc:  # onnxruntime's errors share no public base; the site stays as the tables say
            row[pick] = f"failed: {' '.join(str(exc).split())[:200]}"
            if pick == "export":
                return row
            continue
        if pick == "export":
            want = got.outputs
        elif (why := mismatch(site.dtype, want, got.outputs, FP8_TOLERANCE if pick == "fp8" else None)):
            row[pick] = f"did not check: {why}"
            continue
        row[pick] = got.seconds * 1e6
    return row


class Fp8Timing:
    """`to_fp8`'s `decide`: each Linear the fp8 rewrite may take, timed on this GPU as its node is and as the
    Fp8Linear that would replace it (outputs checked within FP8_TOLERANCE first), the fp8 node kept only where it
    ran faster. Shapes are timed once, while the rewrite is within `budget_s` of `start`; rows come from and go to
    the same `rows` a MeasuredFile keeps (keyed "fp8:<signature>")."""

    def __init__(self, model, timer, dims: dict | None, budget_s: float, start: float, known: dict | None, say=None):
        self.timer, self.budget_s, self.start, self.known = timer, budget_s, start, known or {}
        self.dims = timing_dims(model, dims)
        self.opsets, self.ir_version, self.say = opsets_of(model), model.ir_version, say
        self.device = getattr(timer, "device", "this GPU")
        self.rows: dict = {}
        self.timed = self.late = 0
        self.verdicts: dict[str, bool] = {}  # node -> went to fp8
        self.skipped: dict[str, int] = {}

    def __call__(self, graph, node, fp8, inits) -> bool | None:
        out = node.output[0]
        try:
            old = cut(graph, [node], [out], {}, self.dims)
            new = cut(graph, [fp8], [out], {t.name: t for t in inits}, self.dims, known=old.inputs)
        except Unmeasurable as why:
            self.skipped[str(why)] = self.skipped.get(str(why), 0) + 1
            return None
        except Exception as exc:  # a form the cut does not foresee: the break-even decides, the summary says so
            why = _uncut(exc)
            self.skipped[why] = self.skipped.get(why, 0) + 1
            return None
        sig = "fp8:" + hashlib.sha256(f"{old.signature}\n{new.signature}".encode()).hexdigest()
        row = self.rows.get(sig) or self.known.get(sig)
        if row is None:
            if time.monotonic() - self.start > self.budget_s:
                self.late += 1
                return None
            x = next(iter(old.inputs.values()))
            label = f"fp8 Linear {tuple(x[1])} x {list(inits[0].dims)[::-1]}"
            if self.say:
                self.say(f"measuring {label}")
            row = _time_site(Site([node.name], {"export": old, "fp8": new}, FLOAT_TYPES.get(x[0], ""), label),
                             self.timer, self.opsets, self.ir_version)
            self.timed += 1
        self.rows[sig] = row
        times = {p: v for p, v in row.items() if isinstance(v, float)}
        if "export" not in times:
            self.skipped["the node did not run here"] = self.skipped.get("the node did not run here", 0) + 1
            return None
        faster = self.verdicts[node.name or out] = times.get("fp8", float("inf")) < times["export"]
        return faster

    def summary(self) -> str:
        taken = sum(self.verdicts.values())
        parts = [f"{len(self.verdicts)} Linear(s) decided by timing on {self.device} ({self.timed} shape(s) timed "
                 f"now): {taken} to fp8, {len(self.verdicts) - taken} kept in their type"]
        if self.late:
            parts.append(f"{self.late} past the {self.budget_s:g} s budget left to the break-even")
        parts += [f"{n} left to the break-even: {why}" for why, n in self.skipped.items()]
        return "; ".join(parts)


class MeasuredFile:
    """What was measured for one model on one GPU, beside the written model: `<model>.measured.json`, its rows
    taken again only where the GPU, onnxruntime and the library are the same."""

    def __init__(self, model_path, key: dict):
        path = Path(model_path)
        self.path = path.with_name(path.name.removesuffix(".onnx") + ".measured.json")
        self.key = key

    def rows(self) -> dict:
        try:
            doc = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return doc.get("rows", {}) if doc.get("key") == self.key else {}

    def write(self, rows: dict) -> Path:
        doc = {"about": "Per-site timings of the rewrite's candidates against the export's nodes, in microseconds "
                        "(tritonforge_ort's rewrite/measure.py); read again by a rewrite with the same key.",
               "key": self.key, "rows": rows}
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(doc, f, indent=1, sort_keys=True)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return self.path
