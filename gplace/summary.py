"""PlaceSummary: the figures of one ``gplace place`` run, as one typed, frozen record.

``place()`` builds it; the CLI prints it (``--json`` is :meth:`PlaceSummary.as_dict`), and
``placement.json`` and ``report.html`` read it by attribute. The dict keeps the keys and their
order of the ``--json`` output that scripts already read. The functions at the end write its
sentences about the graph: ops left out of the step, what the costs leave out, and ops placed
where TensorFlow has no kernel for them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np


class BestHeuristic(NamedTuple):
    """The fastest feasible cheap heuristic; both fields None when none fits in memory."""

    name: str | None
    step_time_s: float | None


@dataclass(frozen=True)
class PlaceSummary:
    graph: str                   # OpGraph.meta["name"]
    ops: int                     # ops in the graph
    units: int                   # units of placement (colocation groups) of the problem
    cluster: str                 # cluster name
    cluster_choice: str          # one sentence: which cluster and why
    devices: tuple[str, ...]     # device names, in cluster order
    step_time_s: float           # the returned placement (simulated or measured, see step_times)
    single_device_s: float       # everything on the single fastest device ("single" heuristic)
    best_heuristic: BestHeuristic
    lower_bound_s: float         # from the cost model, even when step times are measured
    zero_shot_step_time_s: float | None  # the policy's zero-shot placement, before fine-tuning
    samples: int                 # measured placements charged to the fine-tuning budget
    wall_s: float                # seconds place() took (left out of placement.json)
    measure: str                 # "sim" or "real"
    costs: str                   # "measured", or which devices have roofline estimates
    step_times: str              # "simulated, an estimate" or "measured on hardware"
    groups: int                  # colocation groups (= units: place() plans at that grain)
    chosen: str                  # "gnn (zero-shot)", "gnn (fine-tuned)" or a heuristic's name
    left_out: str = ""           # ops of the file outside the training step, e.g. "variable
                                 # initializers 110" (gplace.importer.step); "" when none
    warning: str = ""            # what TensorFlow would not run as placed; "" when nothing
    note: str = ""               # what the import chose or found that the user should know
    stopped: str = ""            # what a Ctrl-C cut short (gplace.stopping); "" when nothing

    @property
    def speedup_vs_single(self) -> float:
        """How many times faster than the single fastest device (nan without a step time)."""
        return _ratio(self.single_device_s, self.step_time_s)

    @property
    def speedup_vs_best_heuristic(self) -> float:
        """How many times faster than the best heuristic (nan when none fits)."""
        return _ratio(self.best_heuristic.step_time_s, self.step_time_s)

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON types, keys in field order (the ``--json`` output)."""
        out = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out["devices"] = list(self.devices)
        out["best_heuristic"] = self.best_heuristic._asdict()
        for key in ("left_out", "warning", "note", "stopped"):
            if not out[key]:
                del out[key]
        return out

    to_json = as_dict


def _ratio(slower: float | None, faster: float | None) -> float:
    if not slower or not faster:
        return float("nan")
    return slower / faster


# ---- the notes of a place() summary ----------------------------------------------------
def kernel_warning(graph, problem, placement) -> str:
    """A sentence when the placement puts ops where TensorFlow has no kernel for them: ops
    that run only on CPUs (the import's ``cpu_only_ops``: string, checkpoint and sparse
    momentum ops) off the CPU, or ops that run only on GPUs (``gpu_only_ops``: CudnnRNN) off
    a GPU; "" otherwise. The simulator does not model kernel availability."""
    im = graph.meta.get("import", {})
    if placement is None:
        return ""
    on_cpu = np.array(["/device:CPU:" in d.tf_device for d in problem.cluster.devices])
    op_cpu = on_cpu[problem.expand(np.asarray(placement))]
    found = []
    for only, misplaced, where in ((im.get("cpu_only_ops") or {}, ~op_cpu, "GPU"),
                                   (im.get("gpu_only_ops") or {}, op_cpu, "CPU")):
        off = misplaced & np.isin(graph.op_types, list(only)) if only else None
        if off is None or not off.any():
            continue
        kinds, n = sorted(set(graph.op_types[off].tolist())), int(off.sum())
        found.append(f"{n} op{'s' if n > 1 else ''} with no {where} kernel in TensorFlow "
                     f"({', '.join(kinds[:3])}{', ...' if len(kinds) > 3 else ''}) "
                     f"{'are' if n > 1 else 'is'} placed on a {where}")
    if not found:
        return ""
    return ("; ".join(found) + ": TensorFlow's soft placement moves their colocation groups "
            "to a device that has the kernel, and without it the graph fails to run")


def import_note(graph) -> str:
    """What the import chose or found that changes what is placed: the SavedModel signature it
    took, functions XLA was asked to compile, tf.cond If ops lowered (importer.functions),
    inputs whose unknown dimensions it sized, a graph with no training update; "" when
    nothing."""
    im = graph.meta.get("import", {})
    notes = []
    if im.get("signature"):
        notes.append(f"the step is the SavedModel's signature {im['signature']!r} (--signature "
                     "chooses another)")
    if im.get("xla_functions"):
        n = len(im["xla_functions"])
        what = f"{n} functions of the step ask" if n > 1 else "a function of the step asks"
        notes.append(f"{what} XLA to compile them whole (jit_compile=True): gplace places "
                     "their ops one by one, and placed.pb runs them without XLA")
    if im.get("lowered_conds"):
        n = len(im["lowered_conds"])
        what = f"{n} tf.cond If ops" if n > 1 else "a tf.cond If op"
        notes.append(f"{what} lowered to Switch and Merge as TensorFlow runs them: both "
                     "branches are placed, and costed as if both ran")
    sized = im.get("sized_inputs") or []
    if sized:
        size, n = im.get("unknown_dim", 1), len(sized)
        names = ", ".join(sized[:3]) + (", ..." if n > 3 else "")
        notes.append(f"{n} input{'s' if n > 1 else ''} with unknown dimensions ({names}) "
                     f"given size {size} in each" + (
                         ": a None batch counts as a batch of 1; give the batch size when the "
                         "graph is imported (--unknown-dim N, unknown_dim=N)" if size == 1 else
                         " (--unknown-dim)"))
    if im.get("trains") is False:
        notes.append("no optimizer update in the graph (no Apply*, Assign{Add,Sub} or Scatter* "
                     "op): an inference graph, placed as it is, though gplace is built for "
                     "training steps")
    return "; ".join(notes)


def left_out_text(graph) -> str:
    """"variable initializers 110, initialization checks 30": the ops of the file the import
    left out because a training step does not run them (gplace.importer.step)."""
    left = graph.meta.get("import", {}).get("left_out") or {}
    return ", ".join(f"{kind} {count:,}" for kind, count in sorted(left.items()))


def loop_caveat(graph, problem) -> str:
    """What the costs leave out of a graph with TF1 loops and no run counts (no profile that
    records them): the iterations, so the loop's estimated times and crossings count once;
    and of functional While loops whose trip count neither the graph nor a profile gives."""
    notes = graph.meta.get("import", {}).get("notes", [])
    once = sum("functional While, cost of one iteration" in n for n in notes)
    measured = problem.costs.loop_trips or {}
    once -= len(measured)
    functional = (f"; {once} functional While loop{'s' if once > 1 else ''} counted as one "
                  "iteration (the trip count is not fixed in the graph; gplace profile "
                  "measures it)") if once > 0 else ""
    if measured:
        shown = ", ".join(f"{n} {t:,}" for n, t in list(measured.items())[:2])
        functional += (f"; functional While trips from the profile: {shown}"
                       + (", ..." if len(measured) > 2 else ""))
    loops = graph.meta.get("import", {}).get("loops", 0)
    if not loops or problem.costs.runs is not None:
        return functional
    return (f"; {loops} TF1 loops counted as one iteration (no profile with run counts beside "
            "the graph): estimated op times and transfers inside them are per step, not per "
            "iteration" + functional)


def half_caveat(graph, problem) -> str:
    """How the estimates price the ops that compute in 16-bit floats (mixed precision): at a
    device's tensor-core peak where the cluster gives one (Device.half_flops), else at its fp32
    peak. "" for a graph without them, or where every cost is measured."""
    from gplace.cost import half_precision
    count = int(half_precision(graph).sum())
    devices = [d for d, e in zip(problem.cluster.devices, problem.costs.estimated) if e]
    if not count or not devices:
        return ""
    fast = [d.name for d in devices if d.half_flops is not None]
    where = (f"at the tensor-core peak (half_flops) on {', '.join(fast)}, elsewhere at the "
             "fp32 peak" if fast else "at the fp32 peak (no device of the cluster gives "
             "half_flops, its tensor-core FLOP/s)")
    return f"; {count:,} ops in float16 or bfloat16 {where}"


def shape_caveat(graph) -> str:
    """What the costs miss when a TF2 function's graph was written without its shapes: its
    captured variables have none, and the ops that read them lose FLOPs and bytes."""
    shapeless = graph.meta.get("import", {}).get("shapeless_variables", 0)
    if not shapeless:
        return ""
    return (f"; {shapeless:,} variables without a shape (a TF2 function's graph written "
            "without shapes: their readers' FLOPs and bytes are undercounted; write it with "
            "concrete_function.graph.as_graph_def(add_shapes=True), or pass the "
            "ConcreteFunction to gplace.load_graph)")


# ---- the summary as ``gplace place`` prints it ---------------------------------------------
def summary_text(s: PlaceSummary, files: list | None = None, intervals: dict | None = None,
                 ties: tuple = ()) -> str:
    """The PlaceSummary as text; ``files`` None when they were not written; ``intervals``
    (name -> step time, low, high) and ``ties`` from --measure real."""
    intervals = intervals or {}
    best = s.best_heuristic
    bound = ("from the cost model" if s.measure == "sim" else
             "from the cost model, not scaled to this machine: it bounds simulated step "
             "times, not measured ones")
    tie = (f"; tied with {', '.join(ties)} (intervals overlap: not ranked)" if ties else "")
    lines = [
        f"{s.graph}: {s.ops:,} ops in {s.units:,} units; {s.cluster_choice}",
        *([f"left out         ops a training step does not run: {s.left_out}"]
          if s.left_out else []),
        f"step time        {format_ms(s.step_time_s)}{_interval_text(intervals.get('chosen'))} "
        f"({s.step_times}); found by {s.chosen}{tie}",
        "single device    " + (
            f"{format_ms(s.single_device_s)}{_interval_text(intervals.get('single'))} "
            f"({_versus(s.speedup_vs_single)})" if math.isfinite(s.single_device_s or 0)
            else "does not fit in memory"),
        "best heuristic   " + (
            f"{best.name} {format_ms(best.step_time_s)}{_interval_text(intervals.get(best.name))}"
            if best.name else "none fits in memory"),
        f"zero-shot        {format_ms(s.zero_shot_step_time_s)}"
        f"{_interval_text(intervals.get('zero-shot'))}"
        + (" (measured again beside the heuristics)" if "zero-shot" in intervals else ""),
        *([f"fine-tuned best  {format_ms(intervals['gnn'][0])}{_interval_text(intervals['gnn'])} "
           "(measured again beside the heuristics)"] if "gnn" in intervals else []),
        f"lower bound      {format_ms(s.lower_bound_s)} ({bound})",
        f"samples          {s.samples:,} ({s.wall_s:.1f} s in all)",
        f"costs            {s.costs}",
        f"wrote            {', '.join(str(f) for f in files) if files else 'nothing'}",
        *([f"stopped          {s.stopped}"] if s.stopped else []),
        *([f"note             {s.note}"] if s.note else []),
        *([f"warning          {s.warning}"] if s.warning else []),
    ]
    return "\n".join(lines)


def _interval_text(entry) -> str:
    """' [90% interval 11.920-12.800]' from (step time, low, high) in seconds; '' without one."""
    if not entry:
        return ""
    if not math.isfinite(entry[0]):
        return " (failed when measured again)"
    if not math.isfinite(entry[2]):
        return " [one visit: no interval]"
    return f" [90% interval {entry[1] * 1e3:.3f}-{entry[2] * 1e3:.3f}]"


def plural(n: int, one: str, many: str) -> str:
    """'1 batch', '3 batches'."""
    return f"{n:,} {one if n == 1 else many}"


def _versus(ratio: float) -> str:
    """'1.36x slower' for another placement's time over the step time; 'as fast' within 0.5%."""
    if not math.isfinite(ratio) or ratio <= 0:
        return "no ratio: the step time is not a time"
    if abs(ratio - 1) < 0.005:
        return "as fast"
    return f"{ratio:.2f}x slower" if ratio > 1 else f"{1 / ratio:.2f}x faster"


def format_ms(seconds: float | None) -> str:
    """'12.345 ms'; '-' for none or inf (nothing that fits in memory)."""
    return f"{seconds * 1e3:.3f} ms" if seconds is not None and math.isfinite(seconds) else "-"
