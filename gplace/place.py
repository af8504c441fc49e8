"""``gplace place``: a new graph in, the fastest feasible placement found out.
Import, zero-shot placement from the pretrained policy, fine-tuning with Post's
objective for N measured placements, and the cheap heuristics alongside: the result is never
slower than the best of them, and always fits in memory when anything found fits.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from gplace import stopping
from gplace.cluster import Cluster, load_cluster, parse_bytes, with_memory_limit  # noqa: F401
from gplace.cost import cost_model_for
from gplace.errors import ConfigError, GplaceError
from gplace.errors import check_whole as whole
from gplace.graph import OpGraph
from gplace.place_inputs import (IMPORT_OPTIONS, choose_cluster, keeps_torch_random_state,
                                 label, make_placer, model_file, one_torch_thread)
from gplace.placers import PlaceResult, SimMeasurer, get_placer
from gplace.placers.base import cheap_heuristics
from gplace.placers.heuristics_view import calibrated, estimate_binds
from gplace.problem import PlacementProblem
from gplace.sim import lower_bound
from gplace.stopping import stop_on_interrupt
from gplace.summary import (BestHeuristic, PlaceSummary, half_caveat, import_note,
                            kernel_warning, left_out_text, loop_caveat, plural, shape_caveat,
                            summary_text)


@dataclass(repr=False)
class PlacementResult:
    """What ``place`` returns: the placement, its figures, and everything to export;
    ``print(result)`` shows the summary as ``gplace place`` prints it."""

    graph: OpGraph
    problem: PlacementProblem
    unit_placement: np.ndarray       # (units,) device index per unit of ``problem``
    step_time_s: float
    summary: PlaceSummary
    finetune: PlaceResult            # the learned placer's run (its history: the curve)
    heuristics: dict[str, PlaceResult]
    source: Any                      # what was imported: a path, a GraphDef or a tf.Graph
    start_step_time_s: float = np.inf  # best of the zero-shot and heuristic starts
    # --measure real: name -> (step time, interval low, high) of the final head-to-head batch
    # ("chosen", "single", every feasible heuristic, "gnn"), and the placements tied with the
    # fastest there (their intervals overlap), which were not ranked against each other
    intervals: dict = field(default_factory=dict)
    ties: tuple = ()
    exact: PlaceResult | None = None  # the exact placer's run (``optimal``): its bound, status

    def __repr__(self) -> str:
        s = self.summary
        return (f"PlacementResult({s.graph!r} on {s.cluster}: {self.step_time_s * 1e3:.3f} ms, "
                f"found by {s.chosen}, {s.samples:,} samples)")

    def __str__(self) -> str:
        text = summary_text(self.summary, None, self.intervals, self.ties)
        return "\n".join(line for line in text.splitlines() if not line.startswith("wrote "))

    @property
    def placement(self) -> dict[str, str]:
        """op name -> TF device string (the same as ``op_devices``)."""
        return self.op_devices

    @property
    def op_devices(self) -> dict[str, str]:
        """op name -> TF device string."""
        devs = self.problem.expand(self.unit_placement)
        tf_names = [d.tf_device for d in self.problem.cluster.devices]
        return {n: tf_names[d] for n, d in zip(self.graph.names.tolist(), devs.tolist())}

    def export(self, out: str | Path) -> list[Path]:
        """placed.pb, placement.json, trace.json, report.html and its SVGs in ``out`` (a
        folder, made if missing); ConfigError for a path that cannot be one."""
        from gplace.cli.checks import output_dir
        from gplace.report import export_all
        return export_all(self, output_dir(out, "the export folder"))


@keeps_torch_random_state
def place(model, cluster: str | Path | Cluster | dict | None = None,
          checkpoint: str | Path | Any | None = None,
          finetune: int = 0, measure: str = "sim", memory_limit: str | None = None,
          seed: int | None = None, progress: bool = True, log=sys.stderr,
          allow_unsafe: bool = False, loss: str | None = None, cost_model=None,
          polish: int | None = None, screen: int | None = None, optimal: float | None = None,
          **import_options) -> PlacementResult:
    """Places ``model``: a path (.pb, .pbtxt, .meta, SavedModel folder, PyTorch .pt2, or a
    saved OpGraph .npz), a GraphDef, a tf.Graph, a ConcreteFunction, a torch.export
    ExportedProgram or an OpGraph; see the
    module docstring. ``cluster``: a preset name, a cluster YAML path, a Cluster, or a dict of
    a YAML's fields (default: the devices TensorFlow sees here if two or more, else
    post-4gpu, or local-procs with ``measure="real"``); ``checkpoint``: a policy file, a
    placer from ``gplace.load`` or a GNNPolicy
    (default: the shipped policy); ``memory_limit``: "8GB" for every device or "gpu0=8GB,gpu1=4GB";
    ``seed``: the placement's seed (default: the ``gplace.load`` placer's, else 0);
    ``progress``: progress bars on stderr. ``allow_unsafe`` lets ``measure="real"`` run ops
    off gplace.real.allowlist; ``loss`` names
    the op a real step runs (default: gplace.real.measurer.step_op's choice); ``cost_model``:
    the op costs (a gplace.cost.CostModel; default: the profile beside the model's file, an
    OpGraph's included, else estimates, ``cost_model_for``); ``polish``: zero-shot's estimate
    replays (FinetuneConfig.zero_shot_polish; None: the placer's) and ``screen``:
    fine-tuning's moves drawn per move measured (FinetuneConfig.local_screen; None: the
    placer's); ``optimal``: seconds for the exact placer (gplace.placers.optimal,
    started from the result's and the heuristics' placements; its placement is taken where it
    simulates faster, or where nothing else fits); ``import_options`` go to the import
    (gplace.load_graph): ``signature`` of a SavedModel, ``unknown_dim`` (the size of a
    TensorFlow graph's unknown dimensions, such as a None batch; default 1), ``optimizer`` and
    ``trust`` of a ``.pt2`` program. A first Ctrl-C once the graph is imported ends the search
    early: the result is the best placement found so far and ``summary.stopped`` says what was
    cut short (gplace.stopping); a second one raises KeyboardInterrupt."""
    from gplace.opgraph_cache import load_graph  # a file placed before is not imported again
    start = time.perf_counter()
    from gplace.cli.checks import MAX_SAMPLES, MAX_SCREEN
    whole("finetune", finetune, 0, MAX_SAMPLES)
    if seed is None:  # a gplace.load placer's own seed
        seed = getattr(checkpoint, "seed", 0)
    whole("seed", seed, 0, 2**32 - 1)  # numpy's seed range, [0, 2**32)
    if polish is not None:
        whole("polish", polish, 0, MAX_SAMPLES)
    if screen is not None:
        whole("screen", screen, 1, MAX_SCREEN)
    if optimal is not None and measure != "sim":
        raise ConfigError("optimal bounds simulated step times; it needs measure='sim'")
    unknown = sorted(set(import_options) - set(IMPORT_OPTIONS))
    if unknown:  # a misspelt keyword, as Python says it
        raise TypeError(f"place() got an unexpected keyword argument {unknown[0]!r}")
    if isinstance(model, OpGraph) or str(model).lower().endswith(".npz"):
        if import_options:  # an OpGraph, or one saved by inspect --save
            raise ConfigError(f"{label(model)}: an OpGraph is imported already; "
                              f"{', '.join(import_options)} cannot apply")
        graph = model if isinstance(model, OpGraph) else OpGraph.load(model)
    else:
        graph = load_graph(model, **import_options)
    chosen, why = choose_cluster(cluster, measure)
    if chosen.num_devices < 2:
        here = "; here, local-procs: TF processes on this machine's cores" \
            if measure == "real" else ""
        raise ConfigError(f"cluster {chosen.name} has one device, so every placement puts "
                          "every op on it: there is nothing to place (a cluster YAML or "
                          "preset with two or more devices: gplace clusters, or "
                          f"gplace.cluster.preset_names(){here})")
    chosen = with_memory_limit(chosen, memory_limit)
    placer = make_placer(checkpoint, seed, finetune, measure, polish, screen)
    # One problem at full granularity (colocation groups) for the policy and the heuristics;
    # the heuristics' placements seed the policy's elite set.
    problem = PlacementProblem.build(graph, chosen,
                                     cost_model or cost_model_for(model_file(model, graph),
                                                                  graph.meta.get("name")))
    if optimal is not None:  # the exact placer's size limit, before any placement work
        from gplace.placers.cpsat_model import check_size
        try:
            check_size(problem)
        except ConfigError as e:
            raise ConfigError(f"{e}; place it without --optimal (optimal=)") from None
    # The measurer closes on any exit (real measurement: its TF server processes stop).
    # A first Ctrl-C from here on ends the search with its best so far (gplace.stopping).
    wait = "once each placement being measured has run its first steps" if measure == "real" \
        else ""
    with _measurer(problem, measure, model, allow_unsafe, log, loss) as measurer, \
            stop_on_interrupt(log, wait), one_torch_thread():
        heuristics = {h: get_placer(h).place(problem, measurer, 0) for h in cheap_heuristics()}
        search, zero, starts = problem, None, {}
        zero_bar = _ZeroShotBar() if progress else None
        zero_progress = zero_bar.update_to if zero_bar else None
        if estimate_binds(problem):  # memory is tight: which estimate steers best?
            if progress:
                print("gplace: GPU memory is tight for this graph: zero-shot runs under two "
                      "estimates of the memory each op holds, and the search follows the one "
                      "whose placement simulates fastest", file=log, flush=True)
            search, zero, starts = _memory_estimate(placer, problem, measurer, zero_progress)
        bar = _SamplesBar(finetune, before=zero_bar) if progress and finetune else None
        tuned = placer.place(search, measurer, finetune,
                             seeds=[r.placement for r in heuristics.values()] + [
                                 p for p, _ in starts],
                             progress=bar.update_to if bar else None, start=zero,
                             zero_progress=zero_progress)
        if starts:
            tuned = _faster_zero_shot(tuned, starts)
        for done in (zero_bar, bar):
            if done:
                done.close()
        _say_drift(tuned, log)
        best = tuned
        intervals, ties = {}, ()
        stopped = stopping.requested()
        if measure == "real" and tuned.feasible and not stopped:
            best, heuristics, intervals, ties = _head_to_head(measurer, tuned, heuristics)
        best_h = min(heuristics.values(), key=lambda r: r.step_time_s if r.feasible else np.inf)
        chosen = _chosen(best, best_h, heuristics)
        exact = None
        if optimal is not None and not stopped:
            exact = _solve_exactly(problem, optimal, [best.placement] + [
                r.placement for r in heuristics.values()])
            if exact.feasible and (not best.feasible or exact.step_time_s < best.step_time_s):
                best, chosen = best._replace(placement=exact.placement, feasible=True,
                                             step_time_s=exact.step_time_s), (
                    "optimal (CP-SAT)" if exact.info.get("returned") == "solver" else
                    "optimal (hill climbing after CP-SAT)")
        if not best.feasible and not best_h.feasible:
            tried = {**heuristics, "gnn": tuned, **({"optimal": exact} if exact else {})}
            raise GplaceError(_shortfall_message(problem, measurer, tried, finetune, optimal))
        late = not stopped and stopping.requested()  # during the head-to-head or --optimal
    summary = _summary(graph, problem, best, heuristics, why, measure, start, chosen)
    if stopped or late:
        summary = replace(summary, stopped=_stopped_text(tuned, finetune, measure, optimal,
                                                         late))
    return PlacementResult(graph, problem, best.placement, best.step_time_s, summary, tuned,
                           heuristics, model,
                           float(tuned.info.get("start_step_time_s", np.inf)), intervals, ties,
                           exact)


def _stopped_text(tuned: PlaceResult, finetune: int, measure: str, optimal: float | None,
                  late: bool = False) -> str:
    """What a Ctrl-C cut short (PlaceSummary.stopped); ``late``: it came after the search."""
    if late:
        return ("by Ctrl-C during --optimal: CP-SAT's best so far and its bound then"
                if optimal is not None else
                "by Ctrl-C after the search, during the measurement beside the heuristics: "
                "the placements not yet tight have its first steps")
    cut = (f"after {tuned.samples:,} of {finetune:,} samples" if tuned.samples else
           "during zero-shot's search")
    skipped = [what for what, on in (("the measurement beside the heuristics",
                                      measure == "real"),
                                     ("--optimal", optimal is not None)) if on]
    return (f"by Ctrl-C {cut}: the best placement found so far"
            + (f"; skipped {' and '.join(skipped)}" if skipped else ""))


def _solve_exactly(problem, seconds: float, seeds, workers: int = 2) -> PlaceResult:
    """The exact placer (gplace.placers.optimal) for ``seconds``, started from ``seeds``."""
    return get_placer("optimal", seed=0, time_limit_s=seconds, workers=workers).place(
        problem, SimMeasurer(problem), 0, seeds=seeds)


def _memory_estimate(placer, problem: PlacementProblem, measurer, progress=None):
    """(the problem whose memory estimate the search steers by, its zero-shot placement or
    None, the other zero-shots as starts with their measured step times). The full estimate
    (every output, all the time) crowds the GPUs; scaled to the simulated peak
    (gplace.placers.heuristics_view.calibrated) it can let placements overflow where memory is
    very tight, and the fine-tuning samples then do not fit either: the estimate whose
    zero-shot simulates fastest is kept (the full one where none fits). Where the calibrated
    estimate fits everything, the full one's zero-shot is a start without its polish; where it
    refuses units devices too, the full one's is polished, and an unpolished zero-shot under a
    share halfway (geometrically) between the two competes too. ``progress``: the polishes'
    (gplace.gnn.infer.polish)."""
    fit = calibrated(problem)
    tight = estimate_binds(fit)
    options = [(fit, placer.zero_shot(fit, progress=progress), True),
               (problem, _unpolished(placer, problem, progress) if not tight else
                placer.zero_shot(problem, progress=progress), tight)]
    if tight:
        half = replace(problem, activation_share=fit.activation_share ** 0.5)
        options.append((half, _unpolished(placer, half, progress), False))
    m = measurer.measure(np.stack([p for _, p, _ in options]))
    t = np.where(m.feasible, m.step_time_s, np.inf)
    k = int(np.argmin(t)) if np.isfinite(t).any() else 1  # ties: the calibrated; none fits:
    #                                                        the full one's samples fit likelier
    search, zero, polished = options[k]
    starts = [(p, float(t[i])) for i, (_, p, _) in enumerate(options) if i != k or not polished]
    return search, zero if polished else None, starts


def _unpolished(placer, problem: PlacementProblem, progress=None) -> np.ndarray:
    """The learned placer's zero-shot without its polish (the estimate search, most of its
    time on large graphs)."""
    saved = placer.config
    placer.config = replace(saved, zero_shot_polish=0)
    try:
        return placer.zero_shot(problem, progress=progress)
    finally:
        placer.config = saved


def _faster_zero_shot(tuned: PlaceResult, starts: list[tuple]) -> PlaceResult:
    """``tuned`` whose zero-shot record (placement, step time) is the fastest of its own and
    ``starts`` ((placement, measured step time) of the learned placer's zero-shots under the
    other memory estimates)."""
    placement, t = min(starts, key=lambda s: s[1])
    if t < tuned.info.get("zero_shot_step_time_s", np.inf):
        return tuned._replace(info={**tuned.info, "zero_shot_placement": placement,
                                    "zero_shot_step_time_s": t})
    return tuned


def _say_drift(tuned: PlaceResult, log) -> None:
    """--measure real: how far the machine's speed moved between fine-tuning's batches, as the
    control placement (the incumbent best, re-measured in each batch) saw it."""
    drift = tuned.info.get("control_drift")
    if drift:
        f = np.asarray(drift)
        scaled = f[f != 1.0]
        moved = 1 / scaled - 1  # its time now over its recorded time
        span = (f"{moved.min():+.1%}" if len(scaled) == 1 else
                f"{moved.min():+.1%} to {moved.max():+.1%}" if len(scaled) else "")
        tail = (f"; in {plural(len(scaled), 'batch', 'batches')} it moved beyond its "
                f"interval ({span}) and their times were scaled to match" if len(scaled)
                else "; it never moved beyond its interval, so nothing was scaled")
        print(f"gplace real: the incumbent best was re-measured as a control in "
              f"{plural(len(f), 'batch', 'batches')}{tail}", file=log)


def _head_to_head(measurer, tuned: PlaceResult, heuristics: dict[str, PlaceResult]):
    """--measure real: the fine-tuned placement, the zero-shot one and every feasible
    heuristic's, measured again in one interleaved batch, so that all the reported times saw
    the same load. Placements whose intervals overlap the fastest's are tied
    (gplace.measure.tied): among them the first heuristic in CHEAP_ORDER is returned rather
    than a placement ahead by noise alone, then the search's best, then zero-shot's.
    Returns (chosen PlaceResult, heuristics with these times, intervals, tied names); the
    chosen result's info has the zero-shot placement's new time."""
    from gplace.measure import tied
    names = [n for n, r in heuristics.items() if r.feasible] + ["gnn"]
    placements = [heuristics[n].placement for n in names[:-1]] + [tuned.placement]
    zero = tuned.info.get("zero_shot_placement")
    if zero is not None:
        names, placements = names + ["zero-shot"], placements + [np.asarray(zero, np.int64)]
    keys = list(dict.fromkeys(p.tobytes() for p in placements))  # distinct, first seen first
    row = {k: i for i, k in enumerate(keys)}
    m = measurer.measure(np.stack([np.frombuffer(k, np.int64) for k in keys]))
    t = np.where(m.feasible, m.step_time_s, np.inf)
    fastest = int(np.argmin(t))
    if not np.isfinite(t[fastest]):  # nothing ran this time: keep what fine-tuning measured
        return tuned, heuristics, {}, ()
    pick = next(n for n, p in zip(names, placements)  # names: heuristics first, "gnn" last
                if tied(m, row[p.tobytes()], fastest) and np.isfinite(t[row[p.tobytes()]]))
    out = dict(heuristics)
    intervals = {}
    for n, p in zip(names, placements):
        i = row[p.tobytes()]
        intervals[n] = (float(t[i]), float(m.low_s[i]), float(m.high_s[i]))
        if n in heuristics:
            out[n] = heuristics[n]._replace(step_time_s=float(t[i]), feasible=bool(m.feasible[i]))
    chosen_p = placements[names.index(pick)]
    info = {**tuned.info, **({"zero_shot_step_time_s": intervals["zero-shot"][0]}
                             if "zero-shot" in intervals else {})}
    best = tuned._replace(placement=chosen_p, step_time_s=intervals[pick][0], info=info)
    intervals["chosen"] = intervals[pick]
    ties = tuple(n for n, p in zip(names, placements)  # another placement, not the same one
                 if row[p.tobytes()] != row[chosen_p.tobytes()]
                 and tied(m, row[p.tobytes()], row[chosen_p.tobytes()]))
    return best, out, intervals, ties


def _chosen(tuned: PlaceResult, best_h: PlaceResult, heuristics: dict[str, PlaceResult]) -> str:
    """Who found the returned placement: "gnn (zero-shot)", "gnn (fine-tuned)" or the
    heuristic whose placement no policy or fine-tuning sample beat (ties go to the heuristic)."""
    for name, r in heuristics.items():
        if r.feasible and np.array_equal(r.placement, tuned.placement):
            return name
    if best_h.feasible and best_h.step_time_s <= tuned.step_time_s:
        return best_h.name
    zero = tuned.info.get("zero_shot_placement")
    if zero is not None and np.array_equal(zero, tuned.placement):
        return "gnn (zero-shot)"
    return "gnn (fine-tuned)"


def _measurer(problem: PlacementProblem, measure: str, source, allow_unsafe: bool = False,
              log=sys.stderr, loss: str | None = None):
    if measure == "sim":
        return SimMeasurer(problem)
    if measure == "real":
        from tqdm import tqdm
        from gplace.real import RealConfig, RealMeasurer
        from gplace.report import source_graph_def
        graph_def = source_graph_def(source)
        from gplace.importer import is_torch_program
        if graph_def is None and (is_torch_program(source) or str(source).lower().endswith(
                ".pt2")):
            raise ConfigError("--measure real (measure='real') runs TensorFlow graphs; place a "
                              "PyTorch program in simulation and run the placed step with "
                              "gplace.torchfront.load_placed")
        if graph_def is None:
            raise ConfigError("--measure real needs the TensorFlow graph (a file, GraphDef or "
                              "tf.Graph), not an OpGraph")
        say = lambda s: tqdm.write(f"gplace real: {s}", file=log)  # noqa: E731 - under the bar
        return RealMeasurer(problem, graph_def, RealConfig(allow_unsafe=allow_unsafe, fetch=loss),
                            log=say)
    raise ConfigError(f"unknown --measure (measure=) {measure!r}; choose sim or real")


def _summary(graph, problem, tuned, heuristics, why, measure, start, chosen) -> PlaceSummary:
    feasible = {n: r for n, r in heuristics.items() if r.feasible}
    best_name = min(feasible, key=lambda n: feasible[n].step_time_s) if feasible else None
    estimated = [d.name for d, e in zip(problem.cluster.devices, problem.costs.estimated) if e]
    zero = tuned.info.get("zero_shot_step_time_s")  # the learned placer's record of its start
    return PlaceSummary(
        graph=graph.meta.get("name", ""), ops=graph.num_ops, units=problem.num_units,
        cluster=problem.cluster.name, cluster_choice=why,
        devices=tuple(d.name for d in problem.cluster.devices),
        step_time_s=tuned.step_time_s,
        single_device_s=heuristics["single"].step_time_s,
        best_heuristic=BestHeuristic(best_name,
                                     feasible[best_name].step_time_s if best_name else None),
        lower_bound_s=lower_bound(problem).bound_s,  # from the cost model, even when real
        zero_shot_step_time_s=None if zero is None else float(zero),
        samples=tuned.samples, wall_s=round(time.perf_counter() - start, 3),
        measure=measure,
        costs=("estimated (roofline) on " + ", ".join(estimated) if estimated else "measured")
        + loop_caveat(graph, problem) + half_caveat(graph, problem) + shape_caveat(graph),
        step_times="simulated, an estimate" if measure == "sim" else "measured on hardware",
        groups=problem.num_units, chosen=chosen, left_out=left_out_text(graph),
        warning=kernel_warning(graph, problem, tuned.placement), note=import_note(graph))


def _shortfall_message(problem, measurer, tried: dict[str, PlaceResult], finetune: int = 0,
                       optimal: float | None = None) -> str:
    """No placement was feasible. When every placement tried (the heuristics', the learned
    placer's, the exact placer's) is short of memory by the simulator's peak, which --measure
    real also refuses by, name the closest (the smallest largest shortfall on one device) and
    the searches not run yet; else a run failed: say why, never as a memory shortfall."""
    from gplace.sim import FastSimulator
    names = list(tried)
    peak = FastSimulator(problem).run_batch(np.stack([tried[n].placement for n in names])) \
        .peak_bytes
    cap = np.array([d.memory_bytes for d in problem.cluster.devices], np.float64)
    short = (peak - cap).max(axis=1)
    if (short <= 0).any():
        name = names[int(np.flatnonzero(short <= 0)[0])]
        result = getattr(measurer, "result_of", lambda p: None)(tried[name].placement)
        why = " ".join(result.reason.split())[:300] if result and result.reason else "no reason"
        return (f"no placement ran: the {name} placement fits in memory but failed when "
                f"measured ({why})")
    k = int(np.argmin(short))
    d = int(np.argmax(peak[k] - cap))
    more = [o for o, ran in (("--finetune 300 (finetune=300)", finetune >= 300),
                             ("--optimal 60 (optimal=60)", optimal))
            if not ran]
    return (f"no placement found fits in memory: the closest ({names[k]}) needs "
            f"{_size(peak[k, d])} on {problem.cluster.devices[d].name}, which holds "
            f"{_size(cap[d])} (short by {_size(peak[k, d] - cap[d])})"
            + (f"; try {' or '.join(more)}" if more else ""))


def _size(n: float) -> str:
    """'1.23 GB', '4.5 MB', '12.0 KB' or '512 bytes'."""
    for unit, scale, digits in (("GB", 1e9, 2), ("MB", 1e6, 1), ("KB", 1e3, 1)):
        if abs(n) >= scale:
            return f"{n / scale:.{digits}f} {unit}"
    return "1 byte" if n == 1 else f"{int(n)} bytes"


class _SamplesBar:
    """Fine-tuning's samples on stderr, from the first sample on (an idle bar at 0 during
    zero-shot would skew the rate and the time left); ``before``: a bar it closes then."""

    def __init__(self, total: int, before=None):
        self.total, self.bar, self.before = total, None, before

    def update_to(self, used: int, best: float) -> None:
        if self.bar is None:  # no time left: a sample's cost grows as the screened local
            # moves take over (4-8x on graphs of 20,000+ groups), so tqdm's guess is far off
            self._open("fine-tuning", "sample", "{desc}: {percentage:3.0f}%|{bar}| "
                                                "{n_fmt}/{total_fmt} [{elapsed}{postfix}]")
        self.bar.set_postfix_str(f"best {best * 1e3:.3f} ms", refresh=False)
        self.bar.update(used - self.bar.n)

    def _open(self, desc: str, unit: str, bar_format: str | None = None) -> None:
        from tqdm import tqdm
        for bar in (self.before, self):
            if bar is not None:
                bar.close()
        self.bar = tqdm(total=self.total, desc=desc, unit=unit, file=sys.stderr, leave=False,
                        bar_format=bar_format)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


class _ZeroShotBar(_SamplesBar):
    """Zero-shot's rollouts, then its polish's replays, on stderr (a large graph's zero-shot
    takes minutes)."""

    def __init__(self):
        super().__init__(0)

    UNITS = {"rollout": "batch", "replays": "replay"}  # by the stage's first word

    def update_to(self, stage: str, done: int, total: int) -> None:
        if self.bar is None or self.bar.desc != f"zero-shot {stage}" or \
                self.bar.total != total or done < self.bar.n:
            self.total = total
            self._open(f"zero-shot {stage}", self.UNITS.get(stage.split()[0], "step"))
        self.bar.update(done - self.bar.n)
        if done >= total:  # a finished stage leaves the screen: --measure real measures for
            self.close()   # minutes before the next bar, and this one's clock would run on


class _PlaceModule(type(sys)):
    """This module, callable: ``gplace.place(model, ...)`` is :func:`place`, as a user of
    ``gplace.load`` expects, while ``from gplace.place import place`` still works."""

    def __call__(self, *args, **kwargs) -> PlacementResult:
        return place(*args, **kwargs)


sys.modules[__name__].__class__ = _PlaceModule
