"""The learned list scheduler's rollout: HEFT's loop with the device choice left to a policy.

HEFT (Topcuoglu et al., IEEE TPDS 2002) takes ops by decreasing upward rank and puts each on the
device where it finishes first; a unit (colocation group) is fixed when its first op is placed.
Here the same loop runs (compiled with numba), and at each unit's first op a policy scores every
device from the partial schedule, in the spirit of Doppler (ICLR 2026) and Placeto (NeurIPS
2019): a decision can depend on earlier ones, so imitating HEFT is representable and improving
on it is learnable. The rank order depends on the graph only (an op is ready when its producers
are scheduled), so it is computed once per problem. ``build_sched(problem, dispatch=True)``
takes ops instead in the order the simulator starts them (gplace.gnn.dispatch), so that the
estimate and the features follow the simulated schedule.

Decision features (``DYN_FEATURES`` per device, times in units of ``tau``, the graph's mean
best-device op time; all but 4-5 shifted by the best device so they are 0 there):

0. ``log1p(eft - min eft)``: HEFT's own criterion (finish time of the first op);
1. ``log1p(start - min start)``; 2. ``log1p(data ready - min data ready)``: the transfer delay;
3. ``log1p(device backlog)``: how long after the op's inputs are ready the device frees up;
4. memory after placing the unit over capacity; 5. share of the unit's traffic (bytes to and
   from already placed units) that stays on this device;
6. ``log1p(load - min load)``: work already given to the device; 7. ``log1p(unit eft -
   min)``: start + the whole unit's time (HEFT looks at the first op only).

A device whose memory would overflow is masked (unless none has room). The logits are
``s[u, d] + w[u] . phi[u, d]`` with ``s`` and ``w`` from the GNN (gplace.gnn.policy): the
rollout records ``phi`` and the mask, so the log-probabilities are exact differentiable
functions of the network's outputs (the features depend on earlier actions, not on weights).
"""

from __future__ import annotations

import heapq
import os
from typing import NamedTuple

import numpy as np
from numba import njit

from gplace.gnn.decision import (DYN_FEATURES, ESTIMATE, FORCED, GREEDY, MASKED, MIXED,
                                 MIXED_SAMPLE, SAMPLE, UNIT_EFT, data_ready, decide, lane_free,
                                 mark_received, receive_time, run_on_lane)
from gplace.gnn.dispatch import dispatch_rollout
from gplace.problem import PlacementProblem

__all__ = ["DYN_FEATURES", "UNIT_EFT", "SAMPLE", "GREEDY", "FORCED", "ESTIMATE", "MIXED",
           "MIXED_SAMPLE",
           "MASKED", "SchedArrays", "Rollouts", "build_sched", "rollout"]


class SchedArrays(NamedTuple):
    """What the rollout needs about one problem, built once (:func:`build_sched`)."""

    order: np.ndarray       # (ops,) int64 HEFT order (decreasing upward rank among ready ops)
    pred_ptr: np.ndarray    # (ops+1,) int64 CSR of aggregated in-edges
    pred_op: np.ndarray     # (pairs,) int64
    pred_bytes: np.ndarray  # (pairs,) float64
    pred_rep: np.ndarray    # (pairs,) float64 crossings per step (TF1 loops; heuristics_view)
    cost: np.ndarray        # (ops, D) float64 seconds
    unit_of_op: np.ndarray  # (ops,) int64
    unit_cost: np.ndarray   # (units, D) float64 seconds: the unit's ops on each device
    adj_ptr: np.ndarray     # (units+1,) int64 CSR of the unit graph, both directions
    adj_unit: np.ndarray    # (adj,) int64
    adj_bytes: np.ndarray   # (adj,) float64
    lane_ptr: np.ndarray    # (D+1,) int64: device d's lanes are lane_ptr[d]:lane_ptr[d+1]
    latency: np.ndarray     # (D, D) float64, 0 on the diagonal
    inv_bw: np.ndarray      # (D, D) float64 seconds per byte, 0 on the diagonal
    need: np.ndarray        # (units,) float64 bytes (Baechi's static estimate)
    capacity: np.ndarray    # (D,) float64 bytes
    tau: float              # seconds: the feature time scale
    succ_ptr: np.ndarray    # (ops+1,) int64 CSR of aggregated out-edges (dispatch order)
    succ_op: np.ndarray     # (pairs,) int64
    position: np.ndarray    # (ops,) int64 topological position: the simulator's tie-break
    recv_s: np.ndarray      # (D, D) float64 receiver CPU per transfer (Link.recv_cpu_s)
    recv_per_byte: np.ndarray  # (D, D) float64 receiver CPU per byte (recv_cpu_s_per_byte)
    succ_bytes: np.ndarray  # (pairs,) float64 the out-edges' bytes, as succ_op
    succ_rep: np.ndarray    # (pairs,) float64 their crossings per step
    channel: np.ndarray     # (D, D) int64 the FIFO channel of each link, -1 on the diagonal
    num_channels: int
    dispatch: bool = False  # take ops in the simulator's dispatch order (gplace.gnn.dispatch)
    contention: bool = False  # ESTIMATE replays in dispatch order book transfers on the links'
                            # FIFO channels (gplace.gnn.dispatch) instead of never waiting

    @property
    def any_recv(self) -> bool:
        """Some link charges the receiver's CPU (decision.receive_time)."""
        return bool(self.recv_s.any() or self.recv_per_byte.any())

    @property
    def num_units(self) -> int:
        return self.unit_cost.shape[0]

    @property
    def num_devices(self) -> int:
        return self.cost.shape[1]


class Rollouts(NamedTuple):
    """K rollouts of one problem."""

    placements: np.ndarray  # (K, units) int64
    phi: np.ndarray         # (K, units, D, DYN_FEATURES) float32, at each unit's decision
    mask: np.ndarray        # (K, units, D) bool: allowed devices at that decision
    estimate_s: np.ndarray  # (K,) the list schedule's own makespan estimate


def build_sched(problem: PlacementProblem, dispatch: bool = False) -> SchedArrays:
    """The arrays of ``problem``; ``dispatch``: the rollout takes ops in the order the simulator
    starts them (gplace.gnn.dispatch) instead of HEFT's rank order."""
    from gplace.placers.heuristics_list import upward_rank
    from gplace.placers.heuristics_view import build_view
    view = build_view(problem)
    n, nd, nu = problem.graph.num_ops, problem.num_devices, problem.num_units
    rank = upward_rank(problem, view)
    time_s = problem.costs.time_s
    unit_cost = np.stack([np.bincount(problem.unit_of_op, weights=time_s[:, d], minlength=nu)
                          for d in range(nd)], axis=1) if n else np.zeros((nu, nd))
    lanes = np.array([d.lanes for d in problem.cluster.devices], np.int64)
    tau = float(view.best.mean()) if n else 1.0
    links = problem.cluster.link_table()
    recv = [np.zeros((nd, nd)) if m is None else np.ascontiguousarray(m, np.float64)
            for m in (links.recv_cpu_s, links.recv_cpu_s_per_byte)]
    return SchedArrays(
        _rank_order(view, rank), view.pred_ptr, view.pred_op, view.pred_bytes, view.pred_rep,
        np.ascontiguousarray(time_s, np.float64), problem.unit_of_op.astype(np.int64),
        unit_cost, *_unit_adjacency(problem),
        np.concatenate([[0], np.cumsum(lanes)]).astype(np.int64),
        np.ascontiguousarray(view.latency), np.ascontiguousarray(view.inv_bw),
        view.unit_need.astype(np.float64), view.capacity.astype(np.float64), max(tau, 1e-12),
        view.succ_ptr, view.succ_op, view.position, *recv,
        np.ascontiguousarray(view.succ_bytes, np.float64),
        np.ascontiguousarray(view.succ_rep, np.float64),
        np.ascontiguousarray(links.channel, np.int64), int(links.num_channels), dispatch)


def _rank_order(view, rank: np.ndarray) -> np.ndarray:
    """HEFT's pop order: the ready op of highest rank first (ties: topological position)."""
    pending = np.diff(view.pred_ptr).copy()
    succ_ptr, succ_op = view.succ_ptr.tolist(), view.succ_op.tolist()
    ready = [(-rank[o], int(view.position[o]), int(o)) for o in np.flatnonzero(pending == 0)]
    heapq.heapify(ready)
    order = []
    while ready:
        _, _, op = heapq.heappop(ready)
        order.append(op)
        for c in succ_op[succ_ptr[op]:succ_ptr[op + 1]]:
            pending[c] -= 1
            if pending[c] == 0:
                heapq.heappush(ready, (-rank[c], int(view.position[c]), c))
    return np.asarray(order, np.int64)


def _unit_adjacency(problem: PlacementProblem):
    """CSR over units: every other unit a unit exchanges data with, and the bytes (summed over
    both directions), from PlacementProblem.unit_traffic."""
    t, nu = problem.unit_traffic(), problem.num_units
    a, b, w = t.src[t.data], t.dst[t.data], t.nbytes[t.data]
    src, dst, w = np.concatenate([a, b]), np.concatenate([b, a]), np.concatenate([w, w])
    key, inv = np.unique(src * max(nu, 1) + dst, return_inverse=True)
    total = np.bincount(inv, weights=w, minlength=key.size)
    s, d = key // max(nu, 1), key % max(nu, 1)
    ptr = np.concatenate([[0], np.cumsum(np.bincount(s, minlength=nu))]).astype(np.int64)
    return ptr, d.astype(np.int64), total


def rollout(a: SchedArrays, s: np.ndarray, w: np.ndarray, mode: int, count: int = 1,
            seed: int = 0, forced: np.ndarray | None = None, follow: float = 0.0,
            head: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> Rollouts:
    """``count`` rollouts under logits ``s + w . phi`` (``s``: (units, D), ``w``: (units, F)),
    plus ``v[u] . relu(A phi + b[u])`` where ``head`` = (A, b, v) is given (the policy's state
    head: A (H, F), b and v (units, H)).

    ``mode``: SAMPLE draws from the softmax (uniforms from ``seed``), GREEDY takes the argmax,
    FORCED follows ``forced`` ((count, units) placements) to record their features, ESTIMATE
    follows it for the makespan estimate alone (the Rollouts' ``phi`` and ``mask`` have no
    units: each decision's features are not computed), MIXED
    follows ``forced`` at each decision with probability ``follow`` (uniforms from ``seed``)
    and takes the argmax otherwise: the states the policy itself reaches, for imitation along
    its own schedule (DAgger, Ross et al. 2011); MIXED_SAMPLE is MIXED with the other
    decisions drawn from the softmax (the states of the policy's samples). Ops are taken in
    HEFT's rank order, or in dispatch order where ``a.dispatch`` (gplace.gnn.dispatch; its
    ESTIMATE replays book transfers on the links' channels where ``a.contention``)."""
    nu, nd = a.num_units, a.num_devices
    if forced is not None:
        forced = np.ascontiguousarray(np.atleast_2d(forced), np.int64)
        count = forced.shape[0]
    else:
        forced = np.zeros((count, nu), np.int64)
    u01 = (np.random.default_rng(seed).random((count, nu))
           if mode in (SAMPLE, MIXED, MIXED_SAMPLE)
           else np.zeros((count, nu)))
    placements = np.zeros((count, nu), np.int64)
    rows = 0 if mode == ESTIMATE else nu
    phi = np.zeros((count, rows, nd, DYN_FEATURES), np.float32)
    mask = np.zeros((count, rows, nd), np.bool_)
    est = np.zeros(count)
    s64, w64 = np.ascontiguousarray(s, np.float64), np.ascontiguousarray(w, np.float64)
    if head is None:
        head = (np.zeros((0, DYN_FEATURES)), np.zeros((nu, 0)), np.zeros((nu, 0)))
    ha, hb, hv = (np.ascontiguousarray(x, np.float64) for x in head)
    any_recv = a.any_recv

    contend = a.contention and mode == ESTIMATE
    channel = a.channel if contend else np.zeros((0, 0), np.int64)

    def one(k: int) -> None:
        if a.dispatch:
            est[k] = dispatch_rollout(
                a.position, a.pred_ptr, a.pred_op, a.pred_bytes, a.pred_rep, a.succ_ptr,
                a.succ_op, a.cost,
                a.unit_of_op, a.unit_cost, a.adj_ptr, a.adj_unit, a.adj_bytes, a.lane_ptr,
                a.latency, a.inv_bw, a.recv_s, a.recv_per_byte, any_recv, a.need, a.capacity,
                a.tau, s64, w64, ha, hb, hv, mode, u01[k], forced[k], follow, placements[k],
                phi[k], mask[k], a.succ_bytes, a.succ_rep, channel, a.num_channels)
            return
        est[k] = _rollout(a.order, a.pred_ptr, a.pred_op, a.pred_bytes, a.pred_rep, a.cost,
                          a.unit_of_op,
                          a.unit_cost, a.adj_ptr, a.adj_unit, a.adj_bytes, a.lane_ptr, a.latency,
                          a.inv_bw, a.recv_s, a.recv_per_byte, any_recv, a.need, a.capacity,
                          a.tau, s64, w64, ha, hb, hv, mode, u01[k], forced[k], follow,
                          placements[k], phi[k], mask[k])

    for_each(one, count)
    return Rollouts(placements, phi, mask, est)


def heaviest_neighbour(a: SchedArrays) -> np.ndarray:
    """(units,) the unit each unit exchanges the most bytes with (itself if none)."""
    heaviest = np.arange(a.num_units)
    for u in range(a.num_units):
        lo, hi = a.adj_ptr[u], a.adj_ptr[u + 1]
        if hi > lo:
            heaviest[u] = a.adj_unit[lo + int(np.argmax(a.adj_bytes[lo:hi]))]
    return heaviest


def chain_of(u: int, heaviest: np.ndarray, rng: np.random.Generator, share: float) -> list[int]:
    """The units a local move moves: ``u`` and, with probability ``share``, a geometric number
    of steps along each unit's heaviest-traffic neighbour (``heaviest``: heaviest_neighbour)."""
    moved = [int(u)]
    if rng.random() < share:
        for _ in range(rng.geometric(0.5) - 1):
            moved.append(int(heaviest[moved[-1]]))
    return moved


_POOL: list = []  # [ThreadPoolExecutor, its thread count, the process id that made it]


def for_each(fn, count: int) -> None:
    """``fn(k)`` for k < count over numba's thread count (NUMBA_NUM_THREADS; the cores by
    default) in a thread pool; a process's first call runs k = 0 alone first (it loads the
    compiled kernel). The rollouts are independent, each writes its own rows and the compiled
    loop releases the GIL: the results are one thread's, in a fraction of its time. A process
    forked from one with a pool (pretraining's --jobs) makes its own: the threads stay behind."""
    import numba
    threads = min(numba.get_num_threads(), count)
    mine = bool(_POOL) and _POOL[2] == os.getpid()
    done = 0
    if threads <= 1 or not mine:  # one thread, or a first call: it loads the kernel
        done = count if threads <= 1 else min(1, count)
        for k in range(done):
            fn(k)
    if done >= count:
        return
    if not mine or _POOL[1] < threads:
        from concurrent.futures import ThreadPoolExecutor
        if mine:
            _POOL[0].shutdown(wait=False)
        _POOL[:] = [ThreadPoolExecutor(threads, thread_name_prefix="gplace-rollout"), threads,
                    os.getpid()]
    for f in [_POOL[0].submit(fn, k) for k in range(done, count)]:
        f.result()


@njit(cache=True, nogil=True)
def _rollout(order, pred_ptr, pred_op, pred_bytes, pred_rep, cost, unit_of_op, unit_cost, adj_ptr,
             adj_unit, adj_bytes, lane_ptr, latency, inv_bw, recv_s, recv_per_byte, any_recv,
             need, capacity, tau, s, w, ha, hb, hv, mode, u01, forced, follow, unit_dev, phi,
             mask):
    n, nd = cost.shape[0], cost.shape[1]
    got = np.zeros((n if any_recv else 0, nd), np.bool_)
    finish = np.zeros(n)
    op_dev = np.zeros(n, np.int64)
    unit_dev[:] = -1
    lanes = np.zeros(lane_ptr[nd])
    used = np.zeros(nd)
    load = np.zeros(nd)
    ready = np.empty(nd)
    start = np.empty(nd)
    makespan = 0.0
    for i in range(n):
        op = order[i]
        u = unit_of_op[op]
        placed = unit_dev[u]
        for d in range(nd):  # every device at a decision; only the unit's device after it
            if placed >= 0 and d != placed:
                continue
            r = data_ready(op, d, pred_ptr, pred_op, pred_bytes, pred_rep, finish, op_dev,
                           latency, inv_bw)
            ready[d] = r
            start[d] = max(r, lane_free(lanes, lane_ptr, d))
            if any_recv:
                start[d] += receive_time(op, d, pred_ptr, pred_op, pred_bytes, pred_rep, op_dev,
                                         recv_s,
                                         recv_per_byte, got)
        if placed < 0:
            d = decide(u, op, ready, start, cost, unit_cost, adj_ptr, adj_unit, adj_bytes,
                       unit_dev, used, load, need, capacity, tau, s, w, ha, hb, hv, mode, u01,
                       forced, follow, phi, mask)
            unit_dev[u] = d
            used[d] += need[u]
        d = unit_dev[u]
        if any_recv:
            mark_received(op, d, pred_ptr, pred_op, pred_bytes, op_dev, got)
        op_dev[op] = d
        finish[op] = start[d] + cost[op, d]
        run_on_lane(lanes, lane_ptr, d, finish[op])
        load[d] += cost[op, d]
        if finish[op] > makespan:
            makespan = finish[op]
    return makespan
