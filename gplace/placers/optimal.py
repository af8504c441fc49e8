"""``optimal``: an exact placer for small problems, with OR-Tools CP-SAT.

It solves the placement problem as the simulator defines it (gplace.sim.reference),
relaxed to a constraint program (gplace.placers.cpsat_model, in the style of Tarnawski et
al., NeurIPS 2020, who solve placement exactly as an integer program), and simulates the
solver's placements.

What it relaxes (leaves out) of the simulator, so that every placement's simulated schedule,
mapped to integer time, is a solution of the model: the order of service (the simulator is a
list scheduler, first-ready-first-served per device and FIFO per channel; the model may order
ops and transfers freely), the receive CPU time of links that charge one (``recv_cpu_s``), and
memory over time (only resident parameters are constrained; activations are not). So the
solver's proven lower bound is a lower bound on the simulated step time of every placement
that fits in memory, and status "optimal" means: the best schedule over all placements of this
relaxation is proven; the returned placement is then simulated, and its simulated step time
is >= that optimum. They agree when the simulator's greedy order finds the solver's schedule
(or one as short). Then the placement is *certified* (``info["certified"]``): its simulated
step time is within ``rounding_slack_s`` of the proven bound, so no placement simulates faster
by more than that. Where the greedy order loses to the solver's (an op that a
first-ready-first-served device serves early blocks a critical one; the solver may also leave
a device idle on purpose), the difference is not bounded usefully:
:func:`list_schedule_slack` gives Graham's bound (every wait on a busy device or channel), which
is about one step time; finetune/OPTIMALITY.md measures it per case.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from gplace.cost import transfer_repeats
from gplace.placers.base import History, Measurer, PlaceResult, register
from gplace.placers.cpsat_model import OptimalConfig, Solved, canonical, solve_isolated
from gplace.problem import PlacementProblem
from gplace.sim.fast import FastSimulator

__all__ = ["OptimalConfig", "OptimalPlacer", "list_schedule_slack"]


def list_schedule_slack(problem: PlacementProblem, placement: np.ndarray) -> float:
    """How far the simulated step time of ``placement`` can lie above its best schedule
    (Graham's argument for list schedules): trace the last op back through what it waited
    for; every wait is a span when all lanes of a device, or a channel, were busy, so the
    step time is at most a longest path (its op times and transfers) plus every device's
    busy time over its lanes plus every channel's busy time. The best schedule is at least
    that path, so the gap is at most the sum of the busy terms (receive CPU time left out)."""
    r = FastSimulator(problem).run(placement)
    lanes = np.array([d.lanes for d in problem.cluster.devices], np.float64)
    wire = r.transfers.done_s - r.transfers.start_s
    return float((r.busy_s / lanes).sum() + wire.sum())


@register("optimal")
class OptimalPlacer:
    """CP-SAT over the relaxation of the module docstring; returns the best simulated of the
    solver's improving placements and the starts (cheap heuristics, or ``seeds``), polished.
    ``info``: ``status`` (CP-SAT's), ``solver_bound_s`` (the larger of CP-SAT's proven bound
    and :func:`gplace.sim.bounds.lower_bound`), ``cp_sat_bound_s``, ``solver_makespan_s`` and
    ``solver_step_time_s`` (the solver's best schedule and its placement simulated),
    ``rounding_slack_s``, ``certified``."""

    def __init__(self, seed: int = 0, **config):
        self.seed, self.config = seed, replace(OptimalConfig(), **config)

    def place(self, problem: PlacementProblem, measurer: Measurer, budget: int = 0,
              seeds=()) -> PlaceResult:
        t0, cfg = time.perf_counter(), self.config
        sim = FastSimulator(problem)
        starts = _starts(problem, measurer, seeds)
        times = _sim_times(sim, starts)
        k = int(np.argmin(times))
        horizon = float(times[k]) if np.isfinite(times[k]) else _serial_s(problem)
        hint = canonical(problem, starts[k]) if np.isfinite(times[k]) else None
        solved = solve_isolated(problem, horizon, cfg, hint, self.seed)
        found = solved.found
        cands = np.stack([starts[k]] + [p for _, p in found])
        cand_t = _sim_times(sim, cands)
        best = int(np.argmin(cand_t))
        info = _info(problem, solved, cand_t, best, float(times[k]))
        placement, step = cands[best], float(cand_t[best])
        if cfg.polish and np.isfinite(step):
            from gplace.placers.search import HillClimb
            hill = HillClimb(seed=self.seed).place(problem, measurer, cfg.polish, seeds=[placement])
            if hill.step_time_s < step:
                placement, step, info["returned"] = hill.placement, hill.step_time_s, "polish"
        ok = bool(np.isfinite(step))
        if info["solver_bound_s"] > 0 and ok:
            info["proven_ratio"] = step / info["solver_bound_s"]
        info["certified"] = bool(ok and step <= info["solver_bound_s"] + info["rounding_slack_s"])
        return PlaceResult(self.name, placement, step, ok, 0,
                           time.perf_counter() - t0, History(np.zeros(0), np.zeros(0, bool)),
                           {**info, "wall_s": time.perf_counter() - t0})


def _info(problem: PlacementProblem, solved: Solved, cand_t: np.ndarray, best: int,
          start_s: float) -> dict:
    """What PlaceResult.info reports (all in seconds of simulated time)."""
    from gplace.sim.bounds import lower_bound
    q, found = solved.time_unit_s, solved.found
    # both bound every placement that fits; the combinatorial one stands in where CP-SAT
    # proved nothing in its time (a large problem) or proved less
    bound_s = max(solved.bound * q, lower_bound(problem).bound_s)
    info = {"status": solved.status, "solver_bound_s": bound_s, "cp_sat_bound_s": solved.bound * q,
            "time_unit_s": q,
            "start_step_time_s": start_s, "solutions": len(found),
            "returned": "start" if best == 0 else "solver",
            "rounding_slack_s": q * _chain_tasks(problem)}
    if found:
        z, last = found[-1]
        info.update(solver_makespan_s=z * q, solver_step_time_s=float(cand_t[-1]),
                    gap=1.0 - solved.bound / z if z else 0.0,
                    list_schedule_slack_s=list_schedule_slack(problem, last))
    return info


def _chain_tasks(problem: PlacementProblem) -> int:
    """Tasks a chain can hold at most (ops and edges): each loses < one time unit."""
    g = problem.graph
    return int(g.num_ops + g.num_edges + g.num_control_edges)


def _starts(problem: PlacementProblem, measurer: Measurer, seeds) -> np.ndarray:
    """The given seeds, or the cheap heuristics' placements."""
    if len(seeds):
        return np.stack([np.asarray(s, np.int64) for s in seeds])
    from gplace.placers.base import cheap_heuristics, get_placer
    return np.stack([get_placer(h).place(problem, measurer, 0).placement
                     for h in cheap_heuristics()])


def _sim_times(sim: FastSimulator, placements: np.ndarray) -> np.ndarray:
    r = sim.run_batch(placements)
    return np.where(r.oom, np.inf, r.step_time_s)


def _serial_s(problem: PlacementProblem) -> float:
    """A horizon when no start fits: every op at its slowest and every byte over the slowest
    link, one after another, each send of a TF1 loop's (``cost.transfer_repeats``, the control
    edges' successors' runs) its own. Integer counts: without runs, the sums without them."""
    table, g = problem.cluster.link_table(), problem.graph
    runs = problem.costs.runs
    if runs is None:
        sent, waits = g.out_bytes.sum(), g.num_edges + g.num_control_edges
    else:
        repeat = np.rint(transfer_repeats(g, runs)).astype(np.int64)
        sent = (g.out_bytes * repeat).sum()
        waits = int(repeat[g.out_ptr[g.edge_src] + g.edge_src_out].sum()
                    + np.asarray(runs, np.int64)[g.ctrl_dst].sum())
    return float(problem.costs.time_s.max(axis=1).sum() + sent
                 / table.bandwidth.min() * problem.num_devices + table.latency_s.max()
                 * (waits + 1))
