"""The exact placer's constraint program (gplace.placers.optimal), for OR-Tools CP-SAT.

The placement problem as the simulator defines it (gplace.sim.reference), as a constraint
program in the style of Tarnawski et al. (NeurIPS 2020, "Efficient algorithms for device
placement of DNN graph operators", who solve placement exactly as an integer program) with
CP-SAT's optional intervals and NoOverlap / Cumulative (OR-Tools, "scheduling" in the CP-SAT
primer):

* ``x[u, d]``: unit u on device d, exactly one per unit; none where u's parameters exceed d's
  memory; per device the parameter bytes of its units fit its memory;
* per op o and device d an optional interval of o's time on d, present iff ``x[u(o), d]``,
  sharing o's start and end; per device its intervals in a NoOverlap (one lane) or a
  Cumulative of capacity ``lanes`` (a CPU);
* an edge within a unit: the consumer starts after the producer ends; a data edge across
  units: the consumer starts after its input's arrival on its device, which is the producer's
  end where both share a device, else the transfer's start plus bytes / bandwidth plus latency;
  one transfer per (output, receiving device), as TF's send/recv and the simulator, starting
  after the producer's end; per channel (gplace.cluster: a pair's link or a shared bus) the
  transfers' intervals in a NoOverlap (``links``); a control edge across devices waits the
  latency; in a TF1 loop, as in the simulator, a transfer stands for all of a step's sends of
  its output (``cost.transfer_repeats``: r of them, r times its time on the channel and its
  latency) and a control edge waits the latency once per run of its successor
  (``OpCosts.runs``);
* devices the simulator cannot tell apart (``cluster.interchangeable``) are symmetric: a
  device of a class is used only after the class's previous device has been (value symmetry
  breaking, by the lowest unit index on each device);
* objective: the makespan (the end of the last op).

Integer time: the unit is ``q = horizon / resolution`` seconds, horizon the best start's
simulated step time (its schedule, mapped to integer time, is a first solution). Every
duration is rounded down: an op's ``floor(time / q)``, a transfer's ``floor(bytes / bw * r / q)``
and ``floor(latency * r / q)``. Mapping a real schedule's times t to floor(t / q) keeps every
constraint (floor(a + b) >= floor(a) + floor(b), and intervals that overlap after the mapping
overlapped before it), so the model's optimum times q is a valid lower bound; rounding down
loses at most q per task on the longest chain (reported as ``rounding_slack_s``).
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from gplace import stopping
from gplace.cluster import interchangeable
from gplace.cost import transfer_repeats
from gplace.errors import ConfigError
from gplace.problem import PlacementProblem
from gplace.sim.bounds import memory_ok
from gplace.sim.fast import FastSimulator


@dataclass(frozen=True)
class OptimalConfig:
    time_limit_s: float = 60.0  # CP-SAT wall-clock limit; the best placement found is returned
    workers: int = 2            # CP-SAT search workers (threads); 1-2 on a shared machine
    resolution: int = 200_000   # integer time units in the horizon: rounding costs < one unit
                                # per task on a chain (~0.05% for 100 tasks); CP-SAT was no
                                # slower than at 20,000 on the 40-op DAGs tried
    links: bool = True          # channels serialize transfers (NoOverlap per channel)
    max_tasks: int = 50_000     # refuse models with more (op, device) intervals than this
    polish: int = 400           # simulated one-unit moves (hill climbing) from the best
                                # candidate: the simulator's greedy order may not find the
                                # solver's schedule, a neighbour's may be faster; 0: none


class Model:
    """A built CP-SAT model and the handles the placer reads back."""

    def __init__(self, problem: PlacementProblem, quantum_s: float, horizon: int):
        try:
            from ortools.sat.python import cp_model
        except ImportError:
            raise ConfigError("the exact placer needs OR-Tools: pip install 'gplace[solver]'") from None
        self.cp = cp_model.CpModel()
        self.problem, self.q, self.horizon = problem, quantum_s, horizon
        n, d = problem.graph.num_ops, problem.num_devices
        self.x = [[None] * d for _ in range(problem.num_units)]
        self.start = [self.cp.NewIntVar(0, horizon, f"s{o}") for o in range(n)]
        self.end = [self.cp.NewIntVar(0, horizon, f"e{o}") for o in range(n)]
        self.makespan = self.cp.NewIntVar(0, horizon, "makespan")

    def ticks(self, seconds: np.ndarray | float) -> np.ndarray:
        """Seconds to integer time units, rounded down (a valid relaxation, see module)."""
        return np.floor(np.asarray(seconds, np.float64) / self.q).astype(np.int64)

    def placement(self, value) -> np.ndarray:
        """(units,) device per unit from a solution (``value`` reads a BoolVar)."""
        return np.array([next(d for d, v in enumerate(row) if v is not None and value(v))
                         for row in self.x], np.int64)


def check_size(problem: PlacementProblem, max_tasks: int = OptimalConfig.max_tasks) -> None:
    """A ConfigError where the model would hold more than ``max_tasks`` (op, device)
    intervals: the exact placer is for small problems (a coarser problem:
    PlacementProblem.build's CoarsenConfig)."""
    tasks = int(memory_ok(problem)[problem.unit_of_op].sum())
    if tasks > max_tasks:
        raise ConfigError(f"the exact placer is for small problems: this one needs "
                          f"{tasks:,} (op, device) intervals, over its {max_tasks:,} "
                          f"({problem.graph.num_ops:,} ops on {problem.num_devices} devices)")


def build_model(problem: PlacementProblem, horizon_s: float, cfg: OptimalConfig) -> Model:
    """The constraint program of the module docstring, with makespan <= ``horizon_s``."""
    check_size(problem, cfg.max_tasks)
    fits = memory_ok(problem)
    # 1% spare above the horizon: the start's relabelled twin may simulate a tie slower
    m = Model(problem, horizon_s / cfg.resolution, cfg.resolution + cfg.resolution // 100)
    _placement_vars(m, fits)
    _lanes(m)
    _edges(m, cfg.links)
    _symmetry(m)
    for o in range(problem.graph.num_ops):
        m.cp.Add(m.makespan >= m.end[o])
    m.cp.Minimize(m.makespan)
    return m


def _placement_vars(m: Model, fits: np.ndarray) -> None:
    p, cp = m.problem, m.cp
    params = np.bincount(p.unit_of_op, weights=p.graph.param_bytes, minlength=p.num_units)
    for u in range(p.num_units):
        for d in np.flatnonzero(fits[u]).tolist():
            m.x[u][d] = cp.NewBoolVar(f"x{u}_{d}")
        cp.AddExactlyOne([v for v in m.x[u] if v is not None])
    for d, dev in enumerate(p.cluster.devices):
        on = [(int(params[u]), m.x[u][d]) for u in range(p.num_units)
              if m.x[u][d] is not None and params[u] > 0]
        if on and sum(b for b, _ in on) > dev.memory_bytes:
            cp.Add(sum(b * v for b, v in on) <= int(dev.memory_bytes))


def _lanes(m: Model) -> None:
    """Per op an optional interval per device; per device NoOverlap or Cumulative."""
    p, cp = m.problem, m.cp
    dur = m.ticks(p.costs.time_s)  # (ops, devices)
    per_device = [[] for _ in range(p.num_devices)]
    for o in range(p.graph.num_ops):
        u = int(p.unit_of_op[o])
        allowed = [d for d in range(p.num_devices) if m.x[u][d] is not None]
        cp.Add(m.end[o] >= m.start[o] + int(dur[o, allowed].min()))
        for d in allowed:
            iv = cp.NewOptionalIntervalVar(m.start[o], int(dur[o, d]), m.end[o], m.x[u][d],
                                           f"i{o}_{d}")
            if dur[o, d] > 0:
                per_device[d].append(iv)
    for d, dev in enumerate(p.cluster.devices):
        if dev.lanes == 1:
            cp.AddNoOverlap(per_device[d])
        elif len(per_device[d]) > dev.lanes:
            cp.AddCumulative(per_device[d], [1] * len(per_device[d]), dev.lanes)


def _edges(m: Model, links: bool) -> None:
    """Precedences, transfers and channels (module docstring)."""
    p, g, cp = m.problem, m.problem.graph, m.cp
    table = p.cluster.link_table()
    unit = p.unit_of_op
    repeat = transfer_repeats(g, p.costs.runs)  # (outputs,) sends per step of a crossing
    runs = np.ones(g.num_ops) if p.costs.runs is None else p.costs.runs.astype(np.float64)
    lat_of: dict[float, np.ndarray] = {}  # latency times r, in ticks, per r

    def lat(r: float) -> np.ndarray:
        if r not in lat_of:
            lat_of[r] = m.ticks(table.latency_s * r)
        return lat_of[r]

    channels: dict[int, list] = {}
    consumers: dict[int, dict[int, list[int]]] = {}  # output -> consumer unit -> ops
    for e in np.flatnonzero(~g.edge_back).tolist():
        a, c = int(g.edge_src[e]), int(g.edge_dst[e])
        if unit[a] == unit[c]:
            cp.Add(m.start[c] >= m.end[a])
        else:
            j = int(g.out_ptr[a] + g.edge_src_out[e])
            consumers.setdefault(j, {}).setdefault(int(unit[c]), []).append(c)
    owner = np.repeat(np.arange(g.num_ops), np.diff(g.out_ptr))
    for j, by_unit in consumers.items():
        r = float(repeat[j])
        _transfers(m, int(owner[j]), int(g.out_bytes[j]), r, by_unit, table, lat(r), channels,
                   links)
    for e in np.flatnonzero(~g.ctrl_back).tolist():
        a, c = int(g.ctrl_src[e]), int(g.ctrl_dst[e])
        cp.Add(m.start[c] >= m.end[a])
        if unit[a] != unit[c]:
            wait = lat(float(runs[c]))  # the latency once per run of the successor
            for d1, d2, x1, x2 in _pairs(m, int(unit[a]), int(unit[c])):
                if wait[d1, d2] > 0:
                    cp.Add(m.start[c] >= m.end[a] + int(wait[d1, d2])).OnlyEnforceIf([x1, x2])
    for ivs in channels.values():
        cp.AddNoOverlap(ivs)


def _pairs(m: Model, ua: int, uc: int):
    """(d1, d2, x[ua, d1], x[uc, d2]) for every pair of different allowed devices."""
    for d1, x1 in enumerate(m.x[ua]):
        for d2, x2 in enumerate(m.x[uc]):
            if d1 != d2 and x1 is not None and x2 is not None:
                yield d1, d2, x1, x2


def _transfers(m: Model, a: int, nbytes: int, repeat: float, by_unit: dict[int, list[int]],
               table, lat, channels: dict[int, list], links: bool) -> None:
    """Output of op ``a`` read by other units: its arrival on each consumer unit's device, and
    the one transfer per receiving device on its channel. ``repeat``: its sends per step (the
    transfer's channel time and latency ``lat``, in ticks, are that many sends')."""
    cp, ua = m.cp, int(m.problem.unit_of_op[a])
    wire = m.ticks(nbytes / table.bandwidth * repeat)  # (devices, devices); 0 on the diagonal
    arrive = {}
    for v, ops in by_unit.items():
        arrive[v] = cp.NewIntVar(0, m.horizon, f"a{a}_{v}")
        cp.Add(arrive[v] >= m.end[a])
        for c in ops:
            cp.Add(m.start[c] >= arrive[v])
    for d2 in range(m.problem.num_devices):
        readers = [(v, m.x[v][d2]) for v in by_unit if m.x[v][d2] is not None]
        if not readers:
            continue
        senders = [(d1, x1) for d1, x1 in enumerate(m.x[ua]) if x1 is not None and d1 != d2]
        queued = links and any(wire[d1, d2] > 0 for d1, _ in senders)
        if queued:  # the transfer's start, after the producer's end
            begin = cp.NewIntVar(0, m.horizon, f"t{a}_{d2}")
            cp.Add(begin >= m.end[a])
            sent = cp.NewBoolVar(f"y{a}_{d2}")
            cp.AddBoolOr([x for _, x in readers]).OnlyEnforceIf(sent)
            for _, x in readers:
                cp.AddImplication(x, sent)
        for d1, x1 in senders:
            delay = int(wire[d1, d2] + lat[d1, d2])
            if queued:
                if wire[d1, d2] > 0:
                    on = cp.NewBoolVar(f"p{a}_{d1}_{d2}")
                    cp.AddBoolOr([x1.Not(), sent.Not(), on])
                    cp.AddImplication(on, x1)
                    cp.AddImplication(on, sent)
                    iv = cp.NewOptionalFixedSizeIntervalVar(begin, int(wire[d1, d2]), on,
                                                            f"w{a}_{d1}_{d2}")
                    channels.setdefault(int(table.channel[d1, d2]), []).append(iv)
                for v, x2 in readers:
                    cp.Add(arrive[v] >= begin + delay).OnlyEnforceIf([x1, x2])
            elif delay > 0:
                for v, x2 in readers:
                    cp.Add(arrive[v] >= m.end[a] + delay).OnlyEnforceIf([x1, x2])


def _symmetry(m: Model) -> None:
    """Within a class of interchangeable devices, device k is used only by units after the
    first unit on device k - 1 (prefix-used booleans ``used[u][d]``)."""
    p, cp = m.problem, m.cp
    cls = interchangeable(p.cluster)
    chains = [np.flatnonzero(cls == c).tolist() for c in np.unique(cls)]
    cost = m.problem.costs.time_s  # a cost profile may still tell the devices apart
    chains = [ch for ch in chains
              if len(ch) > 1 and all(np.array_equal(cost[:, ch[0]], cost[:, d]) for d in ch)]
    if not chains or p.num_units == 0:
        return
    for chain in chains:
        if any(m.x[u][d] is None for u in range(p.num_units) for d in chain):
            continue  # memory keeps some unit off part of the class: leave it unbroken
        used_prev = [None] * len(chain)  # OR of x[v][d] over units v < u
        for u in range(p.num_units):
            for k, d in enumerate(chain):
                if k > 0:
                    prev = used_prev[k - 1]
                    if prev is None:
                        cp.Add(m.x[u][d] == 0)
                    else:
                        cp.AddImplication(m.x[u][d], prev)
            for k, d in enumerate(chain):
                now = cp.NewBoolVar(f"used{u}_{d}")
                parts = [m.x[u][d]] + ([used_prev[k]] if used_prev[k] is not None else [])
                cp.AddMaxEquality(now, parts)
                used_prev[k] = now


def canonical(problem: PlacementProblem, placement: np.ndarray) -> np.ndarray:
    """The placement with each class of interchangeable devices relabelled in order of first
    use (the form :func:`_symmetry` admits)."""
    cls = interchangeable(problem.cluster)
    out = np.asarray(placement, np.int64).copy()
    for c in np.unique(cls):
        chain = np.flatnonzero(cls == c).tolist()
        order = list(dict.fromkeys(int(d) for d in placement if cls[d] == c))
        order += [d for d in chain if d not in order]
        mapping = dict(zip(order, chain))
        for u, d in enumerate(placement.tolist()):
            if cls[d] == c:
                out[u] = mapping[d]
    return out


def add_hint(m: Model, placement: np.ndarray, sim: FastSimulator) -> None:
    """The placement and its simulated schedule, mapped to integer time, as a hint."""
    r = sim.run(placement)
    for u, row in enumerate(m.x):
        for d, v in enumerate(row):
            if v is not None:
                m.cp.AddHint(v, int(placement[u] == d))
    start = m.ticks(r.op_start_s)
    dur = m.ticks(m.problem.costs.time_s[np.arange(len(start)), r.op_device])
    for o in range(len(start)):
        m.cp.AddHint(m.start[o], int(start[o]))
        m.cp.AddHint(m.end[o], int(start[o] + dur[o]))
    m.cp.AddHint(m.makespan, int((start + dur).max()) if len(start) else 0)


def solve(m: Model, cfg: OptimalConfig, seed: int):
    """Runs CP-SAT; returns (status name, solver, the placements of improving solutions)."""
    from ortools.sat.python import cp_model
    found: list[tuple[int, np.ndarray]] = []

    class Collect(cp_model.CpSolverSolutionCallback):
        def on_solution_callback(self):
            found.append((int(self.ObjectiveValue()), m.placement(self.BooleanValue)))

    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(cfg.time_limit_s)
    solver.parameters.num_workers = int(cfg.workers)
    solver.parameters.random_seed = int(seed)
    if stopping.requested():  # a Ctrl-C came before the solve: no solve
        solver.parameters.max_time_in_seconds = 0.0
    handler = signal.getsignal(signal.SIGINT) if stopping.on_main_thread() else None
    try:
        status = solver.StatusName(solver.Solve(m.cp, Collect())).lower()
    finally:  # CP-SAT leaves SIGINT at the system's default when it returns: Python's again
        if handler is not None:
            signal.signal(signal.SIGINT, handler)
    if status in ("feasible", "unknown") and solver.WallTime() < 0.95 * cfg.time_limit_s:
        # stopped before its time limit without a proof (no other limit is set): CP-SAT's own
        # SIGINT handler, which replaces Python's while it solves, took a Ctrl-C
        stopping.request()
    return status, solver, found


class Solved(NamedTuple):
    """A CP-SAT run as plain data (it may come back from a child process)."""

    status: str                          # "optimal", "feasible", "infeasible", "unknown"
    time_unit_s: float                   # q: seconds per integer time unit
    bound: float                         # proven lower bound on the makespan, in units
    found: list[tuple[int, np.ndarray]]  # (makespan in units, placement) per improving solution


def solve_here(problem: PlacementProblem, horizon_s: float, cfg: OptimalConfig,
               hint: np.ndarray | None, seed: int) -> Solved:
    """Builds the model (hinted with ``hint``'s simulated schedule) and solves it."""
    m = build_model(problem, horizon_s, cfg)
    if hint is not None:
        add_hint(m, hint, FastSimulator(problem))
    status, solver, found = solve(m, cfg, seed)
    solved = bool(found) or status in ("optimal", "feasible")
    return Solved(status, m.q, float(solver.BestObjectiveBound()) if solved else 0.0, found)


def solve_isolated(problem: PlacementProblem, horizon_s: float, cfg: OptimalConfig,
                   hint: np.ndarray | None, seed: int) -> Solved:
    """:func:`solve_here`, in a fresh process where TensorFlow is loaded in this one: TF's and
    OR-Tools' bundled C++ libraries (abseil, protobuf) clash, and CP-SAT's solve then crashes
    the process (a segmentation fault)."""
    import sys
    if "tensorflow" not in sys.modules:
        return solve_here(problem, horizon_s, cfg, hint, seed)
    import multiprocessing
    from gplace.real.procs import die_with_parent
    with multiprocessing.get_context("spawn").Pool(1, die_with_parent, (os.getpid(),)) as pool:
        return pool.apply(solve_here, (problem, horizon_s, cfg, hint, seed))
