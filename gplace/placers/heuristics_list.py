"""List-scheduling heuristics: HEFT (Topcuoglu, Hariri, Wu, IEEE TPDS 2002) and Baechi's
memory-constrained m-ETF and m-SCT (Jeon et al., SoCC 2020, sections 4.2-4.3).

All three schedule ops (see :mod:`gplace.placers.heuristics_view`) and fix a unit's device when
its first op is placed; the unit's later ops may only go there. A device with L lanes (a CPU)
starts an op on its earliest-free lane.
"""

from __future__ import annotations

import heapq
import time

import numpy as np

from gplace.placers.base import Measurer, PlaceResult, heuristic_result, register
from gplace.placers.heuristics_view import OpView, build_view, compute_devices, data_ready
from gplace.problem import PlacementProblem


class Lanes:
    """Per-device lane clocks: ``free[d]`` is when device d can start its next op."""

    def __init__(self, problem: PlacementProblem):
        self.clocks = [np.zeros(d.lanes) for d in problem.cluster.devices]
        self.free = np.zeros(problem.num_devices)

    def run(self, d: int, start: float, duration: float) -> float:
        """Runs an op on device d's earliest-free lane from ``start``; returns its finish."""
        lane = self.clocks[d]
        k = int(np.argmin(lane))
        lane[k] = start + duration
        self.free[d] = lane.min()
        return start + duration


# ---- HEFT ------------------------------------------------------------------------------------
@register("heft", cheap=True)
class Heft:
    """HEFT: ops by decreasing upward rank (mean cost, mean communication), each on the device
    with the earliest finish time (insertion-free: an op starts after the device's last op)."""

    def __init__(self, seed: int = 0):
        self.seed = seed

    def place(self, problem: PlacementProblem, measurer: Measurer, budget: int) -> PlaceResult:
        start = time.perf_counter()
        view = build_view(problem)
        placement, makespan = heft(problem, view)
        return heuristic_result("heft", measurer, placement, start, schedule_estimate_s=makespan)


def _mean_comm(view: OpView) -> tuple[float, float]:
    """Mean latency and mean seconds per byte over ordered pairs of distinct devices."""
    nd = view.latency.shape[0]
    off = ~np.eye(nd, dtype=bool)
    return ((float(view.latency[off].mean()), float(view.inv_bw[off].mean())) if nd > 1
            else (0.0, 0.0))


def upward_rank(problem: PlacementProblem, view: OpView) -> np.ndarray:
    """(ops,) rank_u(o) = mean cost(o) + max over consumers c of (mean comm(o, c) + rank_u(c)),
    with the mean over devices and over ordered pairs of distinct devices (HEFT, eq. 7), and
    mean comm(o, c) = (mean latency + bytes * mean inverse bandwidth) * the pair's crossings
    per step (``view.succ_rep``); compiled (gplace.placers.heft_kernel)."""
    from gplace.placers.heft_kernel import upward_rank as kernel
    return kernel(problem.costs.time_s.mean(axis=1), view.order, view.succ_ptr, view.succ_op,
                  view.succ_bytes, view.succ_rep, *_mean_comm(view))


def heft(problem: PlacementProblem, view: OpView) -> tuple[np.ndarray, float]:
    """(units,) placement and the schedule's own makespan estimate (compiled:
    gplace.placers.heft_kernel)."""
    from gplace.placers.heft_kernel import heft as kernel
    lanes = np.array([d.lanes for d in problem.cluster.devices], np.int64)
    unit_dev, finish = kernel(
        upward_rank(problem, view), view.position, view.pred_ptr, view.pred_op,
        view.pred_bytes, view.pred_rep, view.succ_ptr, view.succ_op,
        np.ascontiguousarray(view.latency), np.ascontiguousarray(view.inv_bw),
        np.ascontiguousarray(problem.costs.time_s, np.float64),
        problem.unit_of_op.astype(np.int64), problem.num_units, lanes)
    return unit_dev, float(finish.max()) if finish.size else 0.0


def upward_rank_reference(problem: PlacementProblem, view: OpView) -> np.ndarray:
    """The plain reference of :func:`upward_rank`: (ops,) rank_u(o) = mean cost(o) + max over
    consumers c of (mean comm(o, c) + rank_u(c)), with the mean over devices and over ordered
    pairs of distinct devices (HEFT, eq. 7), times the pair's crossings per step."""
    mean_cost = problem.costs.time_s.mean(axis=1)
    nd = problem.num_devices
    off = ~np.eye(nd, dtype=bool)
    mean_lat = float(view.latency[off].mean()) if nd > 1 else 0.0
    mean_inv_bw = float(view.inv_bw[off].mean()) if nd > 1 else 0.0
    rank = mean_cost.copy()
    for op in view.order[::-1].tolist():
        lo, hi = view.succ_ptr[op], view.succ_ptr[op + 1]
        if lo < hi:
            rep = view.succ_rep[lo:hi]
            comm = mean_lat * rep + view.succ_bytes[lo:hi] * mean_inv_bw * rep
            rank[op] += float((comm + rank[view.succ_op[lo:hi]]).max())
    return rank


def heft_reference(problem: PlacementProblem, view: OpView) -> tuple[np.ndarray, float]:
    """The plain reference of :func:`heft`."""
    n, nd = problem.graph.num_ops, problem.num_devices
    rank = upward_rank_reference(problem, view)
    pending = np.diff(view.pred_ptr).copy()
    ready = [(-rank[o], int(view.position[o]), int(o)) for o in np.flatnonzero(pending == 0)]
    heapq.heapify(ready)
    finish, op_dev = np.zeros(n), np.full(n, -1, np.int64)
    unit_dev = np.full(problem.num_units, -1, np.int64)
    lanes, allowed_all = Lanes(problem), np.ones(nd, bool)
    while ready:
        _, _, op = heapq.heappop(ready)
        u = problem.unit_of_op[op]
        allowed = allowed_all if unit_dev[u] < 0 else np.arange(nd) == unit_dev[u]
        start = np.maximum(data_ready(view, op, finish, op_dev), lanes.free)
        eft = np.where(allowed, start + problem.costs.time_s[op], np.inf)
        d = int(np.argmin(eft))
        op_dev[op], unit_dev[u] = d, d
        finish[op] = lanes.run(d, float(start[d]), float(problem.costs.time_s[op, d]))
        for c in view.succ_op[view.succ_ptr[op]:view.succ_ptr[op + 1]].tolist():
            pending[c] -= 1
            if pending[c] == 0:
                heapq.heappush(ready, (-rank[c], int(view.position[c]), c))
    assert (op_dev >= 0).all(), "HEFT left an op unscheduled"
    return unit_dev, float(finish.max()) if n else 0.0


# ---- m-ETF and m-SCT -------------------------------------------------------------------------
@register("m-etf", cheap=True)
class MEtf:
    """Baechi's m-ETF: repeatedly the ready (op, device) pair with the earliest start time
    (ties: topological order), among the devices with memory left for the op's unit."""

    def __init__(self, seed: int = 0, use_host: bool = False):
        self.seed = seed
        self.use_host = use_host  # False: host CPUs only for units no accelerator can hold

    def place(self, problem: PlacementProblem, measurer: Measurer, budget: int) -> PlaceResult:
        start = time.perf_counter()
        placement, makespan, overflow = etf(problem, build_view(problem), None, self.use_host)
        return heuristic_result("m-etf", measurer, placement, start,
                                schedule_estimate_s=makespan, overflow_units=overflow)


@register("m-sct", cheap=True)
class MSct:
    """Baechi's m-SCT: m-ETF plus the favourite-child rule of SCT (Hanen and Munier 1995): when
    the op a device ran last has a ready favourite child that may go there, the device runs it
    next. Favourite children come from a greedy stand-in for SCT's LP (see favourite_children)."""

    def __init__(self, seed: int = 0, use_host: bool = False):
        self.seed = seed
        self.use_host = use_host

    def place(self, problem: PlacementProblem, measurer: Measurer, budget: int) -> PlaceResult:
        start = time.perf_counter()
        view = build_view(problem)
        placement, makespan, overflow = etf(problem, view, favourite_children(problem, view),
                                            self.use_host)
        return heuristic_result("m-sct", measurer, placement, start,
                                schedule_estimate_s=makespan, overflow_units=overflow)


def favourite_children(problem: PlacementProblem, view: OpView) -> np.ndarray:
    """(ops,) each op's favourite child or -1. SCT's LP sets x_ij = 0 (same device, no delay)
    for at most one child per parent and one parent per child, where the transfer would cost the
    most; Baechi replaces the LP by a greedy rule, done here as: take edges by decreasing
    transfer time per step ((mean latency + bytes * mean seconds per byte) * the pair's crossings
    per step, data edges only; ties by more bytes) and make the child the parent's favourite
    while both are still free (a greedy maximum-weight matching). Outside loops (every rep 1)
    that is the order of decreasing bytes."""
    n, nd = problem.graph.num_ops, problem.num_devices
    fav = np.full(n, -1, np.int64)
    if nd < 2:
        return fav
    parent = np.repeat(np.arange(n), np.diff(view.succ_ptr))
    has_bytes = view.succ_bytes > 0
    has_parent = np.zeros(n, bool)
    mean_lat, mean_inv_bw = _mean_comm(view)
    rep = view.succ_rep
    comm = mean_lat * rep + view.succ_bytes * mean_inv_bw * rep
    data = np.flatnonzero(has_bytes)
    # lexsort: the last key first; stable, so equal keys keep edge order
    by_time = data[np.lexsort((-view.succ_bytes[data], -comm[data]))]
    for e in by_time.tolist():
        p, c = int(parent[e]), int(view.succ_op[e])
        if fav[p] < 0 and not has_parent[c]:
            fav[p], has_parent[c] = c, True
    return fav


def etf(problem: PlacementProblem, view: OpView, favourite: np.ndarray | None,
        use_host: bool) -> tuple[np.ndarray, float, int]:
    """(units,) placement, the schedule's makespan estimate and the number of units placed
    over the memory estimate: EtfScheduler's run, compiled (gplace.placers.etf_kernel)."""
    from gplace.placers.etf_kernel import schedule
    nd = problem.num_devices
    primary = np.arange(nd) if use_host else compute_devices(problem)
    lanes = np.array([d.lanes for d in problem.cluster.devices], np.int64)
    fav = np.zeros(0, np.int64) if favourite is None else favourite.astype(np.int64)
    i64 = lambda x: np.ascontiguousarray(x, np.int64)  # noqa: E731
    f64 = lambda x: np.ascontiguousarray(x, np.float64)  # noqa: E731
    unit_dev, finish, overflow = schedule(
        i64(view.position), i64(view.order), i64(view.pred_ptr), i64(view.pred_op),
        f64(view.pred_bytes), f64(view.pred_rep), i64(view.succ_ptr), i64(view.succ_op),
        f64(view.latency), f64(view.inv_bw), f64(problem.costs.time_s), i64(problem.unit_of_op),
        f64(view.unit_need), f64(view.capacity), i64(primary), lanes, fav,
        favourite is not None)
    return unit_dev, float(finish.max()) if finish.size else 0.0, int(overflow)


class EtfScheduler:
    """Earliest-task-first list scheduling with memory (Baechi's m-ETF), optionally with SCT's
    favourite children: the plain reference of :func:`etf`, which the tests hold it to. Per device, two heaps hold the ready ops that may run there: ``waiting``
    by data-ready time, ``avail`` (ready before the device is free) by topological position, so
    each device's earliest (op, start) pair is found without scanning every ready op."""

    def __init__(self, problem: PlacementProblem, view: OpView, favourite: np.ndarray | None,
                 use_host: bool):
        self.p, self.v, self.fav = problem, view, favourite
        n, nd = problem.graph.num_ops, problem.num_devices
        self.primary = np.arange(nd) if use_host else compute_devices(problem)
        self.finish, self.op_dev = np.zeros(n), np.full(n, -1, np.int64)
        self.unit_dev = np.full(problem.num_units, -1, np.int64)
        self.free_mem = view.capacity.copy()
        self.pending = np.diff(view.pred_ptr).copy()
        self.ready_at = np.zeros((n, nd))
        self.live = np.zeros(n, np.int64)       # heap entries that may still be valid
        self.forced = np.zeros(n, bool)         # placed over the memory estimate
        self.waiting = [[] for _ in range(nd)]  # (data-ready time, position, op)
        self.avail = [[] for _ in range(nd)]    # (position, op)
        self.last = np.full(nd, -1, np.int64)   # the op each device ran last
        self.lanes = Lanes(problem)
        self.overflow, self.makespan = 0, 0.0

    def run(self) -> np.ndarray:
        """Schedules every op; returns the (units,) placement."""
        for op in np.flatnonzero(self.pending == 0).tolist():
            self._make_ready(op)
        for _ in range(self.p.graph.num_ops):
            cands = self._candidates() or self._candidates()
            assert cands, "m-ETF found no schedulable op; the graph view is inconsistent"
            start, _, _, op, d = min(cands)
            self._assign(op, d, start)
        self.makespan = float(self.finish.max()) if self.finish.size else 0.0
        return self.unit_dev

    # -- readiness and validity ----------------------------------------------------------------
    def _make_ready(self, op: int) -> None:
        self.ready_at[op] = data_ready(self.v, op, self.finish, self.op_dev)
        for d in self._targets(op):
            heapq.heappush(self.waiting[d], (self.ready_at[op, d], int(self.v.position[op]), op))
            self.live[op] += 1

    def _targets(self, op: int) -> list[int]:
        """Devices op may go to: its unit's device; else accelerators with room for the unit;
        else any device with room; else (forced) the device with the most free memory."""
        u = self.p.unit_of_op[op]
        if self.unit_dev[u] >= 0:
            return [int(self.unit_dev[u])]
        need = self.v.unit_need[u]
        for devices in (self.primary, np.arange(self.p.num_devices)):
            fits = devices[self.free_mem[devices] >= need]
            if fits.size:
                return fits.tolist()
        self.forced[op] = True
        return [int(np.argmax(self.free_mem))]

    def _valid(self, op: int, d: int) -> bool:
        if self.op_dev[op] >= 0:
            return False
        u = self.p.unit_of_op[op]
        if self.unit_dev[u] >= 0:
            return self.unit_dev[u] == d
        return self.forced[op] or self.free_mem[d] >= self.v.unit_need[u]

    def _drop(self, op: int) -> None:
        """One heap entry of op turned invalid; re-target op when none is left."""
        self.live[op] -= 1
        if self.live[op] == 0 and self.op_dev[op] < 0:
            self._make_ready(op)

    # -- choosing ------------------------------------------------------------------------------
    def _candidates(self) -> list:
        """Every device's best pair. Asking a device drops its invalid heap entries, and an op
        left without a valid one is re-targeted, possibly to a device already asked this
        round: when no device had a pair, asking again finds it (the caller does)."""
        return [c for d in range(self.p.num_devices) if (c := self._candidate(d))]

    def _candidate(self, d: int):
        """(start, rule, position, op, d) of device d's best pair, or None; rule 0 = favourite."""
        free = self.lanes.free[d]
        fav = self._favourite(d)
        if fav is not None:
            return max(free, self.ready_at[fav, d]), 0, int(self.v.position[fav]), fav, d
        waiting, avail = self.waiting[d], self.avail[d]
        while waiting and waiting[0][0] <= free:
            _, pos, op = heapq.heappop(waiting)
            heapq.heappush(avail, (pos, op))
        while avail and not self._valid(avail[0][1], d):
            self._drop(heapq.heappop(avail)[1])
        if avail:
            return free, 1, avail[0][0], avail[0][1], d
        while waiting and not self._valid(waiting[0][2], d):
            self._drop(heapq.heappop(waiting)[2])
        if waiting:
            return waiting[0][0], 1, waiting[0][1], waiting[0][2], d
        return None

    def _favourite(self, d: int):
        """The ready favourite child of the op device d ran last, if it may run on d."""
        if self.fav is None or self.last[d] < 0:
            return None
        c = int(self.fav[self.last[d]])
        if c < 0 or self.pending[c] > 0 or not self._valid(c, d):
            return None
        return c

    def _assign(self, op: int, d: int, start: float) -> None:
        u = self.p.unit_of_op[op]
        if self.unit_dev[u] < 0:
            self.unit_dev[u] = d
            self.free_mem[d] -= self.v.unit_need[u]
            self.overflow += int(self.forced[op])
        self.op_dev[op], self.last[d] = d, op
        self.finish[op] = self.lanes.run(d, float(start), float(self.p.costs.time_s[op, d]))
        for c in self.v.succ_op[self.v.succ_ptr[op]:self.v.succ_ptr[op + 1]].tolist():
            self.pending[c] -= 1
            if self.pending[c] == 0:
                self._make_ready(c)
