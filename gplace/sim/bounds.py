"""Lower bounds on the simulated step time (gplace.sim).

The simple bound, max(critical path, work bound):

* critical path: longest path through the forward data and control edges with every op on its
  fastest device and communication free;
* work bound: sum over ops of the best-device time, divided by the total number of lanes. A
  device with L lanes runs at most L ops at once, so in a step of length T the cluster offers at
  most T * sum(lanes) lane-seconds, and every op needs at least its best-device time of them.

The tighter bound adds what the simple one ignores: units are atomic (every op of a colocation
group runs on one device, as in Tarnawski et al., NeurIPS 2020, where a placement assigns whole
nodes of the contracted graph), devices differ, and parameters must fit. For a placement p with
step time T, unit u on device d, ``w[u, d]`` the time of u's ops on d and ``L_d`` d's lanes:

* memory: parameters stay resident, so a placement that fits puts u only where its parameter
  bytes fit (``mem_ok``);
* unit bound: T >= w[u, d] / L_d (d's lanes carry at least u's work) and T >= the longest path
  through any op o of u with o at its time on d and every other op at its best allowed time;
  so T >= max over u of min over allowed d of that requirement ``need[u, d]``;
* packing bound: for any weights mu >= 0 summing to 1, T >= sum_d mu_d load_d / L_d >=
  sum_u min_d mu_d w[u, d] / L_d (a Lagrangian relaxation of unrelated-machine makespan,
  R||Cmax). If p has T <= X, every unit sits where need[u, d] <= X, so a relaxation over those
  devices alone whose value exceeds X proves that no placement reaches X. The bound is the
  largest X proven so by a short search (weights by exponentiated-gradient ascent: any weights
  give a valid bound, better ones a tighter one).

``bound_s`` holds for every placement that fits in memory (the placements a placer returns);
``any_placement_s`` is the same without the memory argument and holds for every placement.
Floats: every bound is reduced by a relative 1e-9 so that a different summation order in the
simulator cannot put a step time a rounding error under it (``critical_path_s`` and ``work_s``
are reported as summed). tests/sim/test_bounds.py checks
both against simulated placements of random DAGs and corpus graphs.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from gplace.cost import transfer_repeats
from gplace.problem import PlacementProblem

SAFETY = 1e-9       # relative margin of every bound against float summation order
SEARCH_STEPS = 14   # certification attempts of the packing search (each: one ascent)
ASCENT_STEPS = 120  # exponentiated-gradient steps per ascent


class LowerBound(NamedTuple):
    bound_s: float           # the tightest below; holds for placements that fit in memory
    critical_path_s: float
    work_s: float            # best-device work / total lanes
    simple_s: float = 0.0    # max(critical path, work) (less SAFETY): the bound before the
                             # terms below
    path_s: float = 0.0      # critical path with atomic units and each edge's transfer
    unit_s: float = 0.0      # atomic units: max over units of the best device's requirement
    packing_s: float = 0.0   # atomic units x weighted device loads, restricted as unit_s
    any_placement_s: float = 0.0  # the tight bound without the memory argument: every placement


def lower_bound(problem: PlacementProblem) -> LowerBound:
    """Every bound of the module docstring for ``problem``."""
    g = problem.graph
    if g.num_ops == 0:
        return LowerBound(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    cost = problem.costs.time_s
    best = cost.min(axis=1)
    critical = float((_top_levels(problem, best) + best).max())
    lanes = np.array([d.lanes for d in problem.cluster.devices], np.float64)
    work = float(best.sum() / lanes.sum())
    simple = max(critical, work) * (1 - SAFETY)  # numpy sums pairwise, the simulator in turn
    fits = memory_ok(problem)
    tight = _atomic_bounds(problem, fits, simple)
    free = tight if fits.all() else _atomic_bounds(problem, np.ones_like(fits), simple)
    return LowerBound(max(simple, *tight), critical, work, simple, *tight, max(simple, *free))


def memory_ok(problem: PlacementProblem) -> np.ndarray:
    """(units, devices) bool: the unit's parameter bytes fit in the device's memory. A unit that
    fits nowhere leaves no placement that fits; it is allowed everywhere (the bound then holds
    for every placement)."""
    params = np.bincount(problem.unit_of_op, weights=problem.graph.param_bytes.astype(np.float64),
                         minlength=problem.num_units)
    cap = np.array([d.memory_bytes for d in problem.cluster.devices], np.float64)
    ok = params[:, None] <= cap[None, :]
    ok[~ok.any(axis=1)] = True
    return ok


def unit_work(problem: PlacementProblem) -> np.ndarray:
    """(units, devices) summed op time of each unit on each device."""
    cost, unit = problem.costs.time_s, problem.unit_of_op
    return np.stack([np.bincount(unit, weights=cost[:, d], minlength=problem.num_units)
                     for d in range(problem.num_devices)], axis=1)


def _atomic_bounds(problem: PlacementProblem, fits: np.ndarray, floor: float) -> tuple[float, float, float]:
    """(path bound, unit bound, packing bound) with units on the devices ``fits`` allows."""
    cost = np.where(fits[problem.unit_of_op], problem.costs.time_s, np.inf)  # (ops, devices)
    lanes = np.array([d.lanes for d in problem.cluster.devices], np.float64)
    edges = _edge_delays(problem)
    head = _levels(problem, cost, edges, forward=True)    # finish of o on d, at the earliest
    tail = _levels(problem, cost, edges, forward=False)   # from o's start on d to the end
    path_b = float(np.min(head, axis=1).max()) * (1 - SAFETY)
    path = np.full(fits.shape, -np.inf)
    with np.errstate(invalid="ignore"):  # inf - inf where the unit does not fit: masked below
        np.maximum.at(path, problem.unit_of_op, head + tail - cost)  # (units, devices)
    load = unit_work(problem) / lanes[None, :]
    need = np.where(fits, np.maximum(path, load), np.inf)
    unit_b = float(need.min(axis=1).max()) * (1 - SAFETY)
    packing = _packing_search(load, need, max(floor, unit_b, path_b))
    return path_b, unit_b, packing


class EdgeDelays(NamedTuple):
    """Forward edges (data and control) with the least delay each pair of devices imposes."""

    src: np.ndarray    # (edges,) int64
    dst: np.ndarray    # (edges,) int64
    delay: np.ndarray  # (edges, devices, devices): producer on a, consumer on b


def _edge_delays(problem: PlacementProblem) -> EdgeDelays:
    """A data edge across devices waits (latency + bytes / bandwidth) * r, r its output's sends
    per step (``cost.transfer_repeats``, 1 outside TF1 loops; the transfer alone, its queueing
    and receipt left out), a control edge the latency times its successor's runs; within a unit
    the two ends share a device (inf elsewhere); on one device nothing. (Written
    ``latency * r + bytes / bandwidth * r``: with r = 1 the arithmetic without repeats.)"""
    g, links = problem.graph, problem.cluster.link_table()
    fwd, keep_c = ~g.edge_back, ~g.ctrl_back
    out = g.out_ptr[g.edge_src[fwd]] + g.edge_src_out[fwd]
    nbytes = g.out_bytes[out].astype(np.float64)
    rep = transfer_repeats(g, problem.costs.runs)[out][:, None, None]
    data = (links.latency_s[None] * rep
            + nbytes[:, None, None] / links.bandwidth[None] * rep)
    runs = (np.ones(g.num_ops) if problem.costs.runs is None
            else problem.costs.runs.astype(np.float64))
    ctrl = links.latency_s[None] * runs[g.ctrl_dst[keep_c]][:, None, None]
    src = np.concatenate([g.edge_src[fwd], g.ctrl_src[keep_c]]).astype(np.int64)
    dst = np.concatenate([g.edge_dst[fwd], g.ctrl_dst[keep_c]]).astype(np.int64)
    delay = np.concatenate([data, ctrl]).copy()
    n = problem.num_devices
    diag = np.eye(n, dtype=bool)
    delay[:, diag] = 0.0
    same = problem.unit_of_op[src] == problem.unit_of_op[dst]
    delay[same] = np.where(diag, 0.0, np.inf)
    return EdgeDelays(src, dst, delay)


def _levels(problem: PlacementProblem, cost: np.ndarray, edges: EdgeDelays,
            forward: bool) -> np.ndarray:
    """(ops, devices) longest-path labels, one wavefront of ops at a time.

    forward: head[o, d] = cost[o, d] + max over in-edges (p, o) of min over a of
    head[p, a] + delay[a, d]; the real finish of o on d is at least that (by induction over
    the edges: its producers' finishes are at least their labels on their own devices).
    backward: tail[o, d] = cost[o, d] + max over out-edges (o, s) of min over b of
    delay[d, b] + tail[s, b]: the time from o's start to the end of the step, at least."""
    n = problem.graph.num_ops
    level = _depth(problem, edges, forward)
    a, b = (edges.src, edges.dst) if forward else (edges.dst, edges.src)
    label = np.zeros_like(cost)
    arrive = np.zeros_like(cost)  # (ops, devices) latest input, as the labels require
    by_level = np.argsort(level[b], kind="stable")
    bounds = np.searchsorted(level[b][by_level], np.arange(level.max() + 2 if n else 1))
    ops_by_level = np.argsort(level, kind="stable")
    op_bounds = np.searchsorted(level[ops_by_level], np.arange(level.max() + 2 if n else 1))
    for k in range(len(op_bounds) - 1):
        es = by_level[bounds[k]:bounds[k + 1]]
        if es.size:
            if forward:  # min over the producer's device a of head[p, a] + delay[a, d]
                cand = (label[a[es]][:, :, None] + edges.delay[es]).min(axis=1)
            else:        # min over the successor's device b of delay[d, b] + tail[s, b]
                cand = (edges.delay[es] + label[a[es]][:, None, :]).min(axis=2)
            np.maximum.at(arrive, b[es], cand)
        ops = ops_by_level[op_bounds[k]:op_bounds[k + 1]]
        label[ops] = arrive[ops] + cost[ops]
    return label


def _depth(problem: PlacementProblem, edges: EdgeDelays, forward: bool) -> np.ndarray:
    """(ops,) edges on the longest chain into each op (forward) or out of it (backward)."""
    n = problem.graph.num_ops
    src, dst = (edges.src, edges.dst) if forward else (edges.dst, edges.src)
    order = problem.graph.topo_order()
    order = order if forward else order[::-1]
    ptr = np.concatenate([[0], np.cumsum(np.bincount(dst, minlength=n))])
    pred = src[np.argsort(dst, kind="stable")]
    depth = np.zeros(n, np.int64)
    for o in order.tolist():
        prev = pred[ptr[o]:ptr[o + 1]]
        if prev.size:
            depth[o] = depth[prev].max() + 1
    return depth


def _packing_search(load: np.ndarray, need: np.ndarray, start: float) -> float:
    """The largest X (from ``start`` up) proven unreachable: the packing relaxation over the
    devices with need <= X exceeds X (or leaves a unit no device); when none is, the
    relaxation's value at ``start`` (at most ``start``)."""
    proven, top, mu = 0.0, np.inf, None
    x = max(start, float(need.min(axis=1).max()))  # below it some unit has no device left
    first = None  # min(X, value at X) bounds every placement too: those above X exceed it
    for _ in range(SEARCH_STEPS):
        value, mu = _best_packing(np.where(need <= x, load, np.inf), mu)
        first = min(x, value * (1 - SAFETY)) if first is None else first
        if value * (1 - SAFETY) > x:
            proven = x
            x = min(value * (1 - SAFETY), 0.5 * (x + top))
        else:
            top = x
            if proven == 0.0:
                break
            x = 0.5 * (proven + top)
        if np.isfinite(top) and top - proven <= 1e-4 * top:
            break
    return max(proven, first or 0.0)


def _best_packing(load: np.ndarray, mu: np.ndarray | None) -> tuple[float, np.ndarray]:
    """max over weights mu (a point of the simplex) of sum_u min_d mu_d load[u, d], by
    exponentiated-gradient ascent; inf load marks a forbidden device. Returns (value, mu)."""
    units, devices = load.shape
    if devices == 1 or units == 0:
        return float(load.sum()), np.ones(devices)
    mu = np.full(devices, 1.0 / devices) if mu is None else mu
    best_v, best_mu, rate = -np.inf, mu, 1.0
    for step in range(ASCENT_STEPS):
        v, grad = _packing_value(load, mu)
        if v > best_v:
            best_v, best_mu = v, mu
        scale = grad.max()
        if not np.isfinite(v) or scale <= 0:
            break
        mu = mu * np.exp(rate / np.sqrt(step + 1) * (grad / scale - 1.0))
        mu = np.maximum(mu / mu.sum(), 1e-12)
        mu /= mu.sum()
    return float(best_v), best_mu


def _packing_value(load: np.ndarray, mu: np.ndarray) -> tuple[float, np.ndarray]:
    """(sum_u min_d mu_d load[u, d], its supergradient in mu)."""
    weighted = np.where(np.isfinite(load), mu[None, :] * load, np.inf)
    pick = weighted.argmin(axis=1)
    rows = np.arange(load.shape[0])
    if not np.isfinite(weighted[rows, pick]).all():
        return np.inf, np.zeros_like(mu)  # a unit with no device left: nothing reaches X
    grad = np.bincount(pick, weights=load[rows, pick], minlength=load.shape[1])
    return float(weighted[rows, pick].sum()), grad


def _forward(problem: PlacementProblem) -> tuple[np.ndarray, np.ndarray]:
    g = problem.graph
    fwd, keep_c = ~g.edge_back, ~g.ctrl_back
    return (np.concatenate([g.edge_src[fwd], g.ctrl_src[keep_c]]).astype(np.int64),
            np.concatenate([g.edge_dst[fwd], g.ctrl_dst[keep_c]]).astype(np.int64))


def _top_levels(problem: PlacementProblem, time: np.ndarray) -> np.ndarray:
    """(ops,) earliest start of each op with op times ``time`` and free communication."""
    g = problem.graph
    src, dst = _forward(problem)
    order = np.argsort(src, kind="stable")
    ptr = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=g.num_ops))])
    succ = dst[order]
    start = np.zeros(g.num_ops)
    for o in g.topo_order().tolist():
        nxt = succ[ptr[o]:ptr[o + 1]]
        if nxt.size:
            start[nxt] = np.maximum(start[nxt], start[o] + time[o])
    return start
