"""What the two rollouts share (gplace.gnn.schedule in HEFT's rank order, gplace.gnn.dispatch
in the simulator's dispatch order): when an op's inputs reach a device, a device's lanes, and
the decision at a unit's first op: its features (``DYN_FEATURES``, listed in
gplace.gnn.schedule's docstring), mask and choice."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from numba import njit

from gplace.sim import jit_cache
from gplace.sim import heap as _heap

_HERE = Path(__file__).resolve().parent
# numba inlines these functions (and gplace.sim.heap's) into the cached rollouts of
# gplace.gnn.schedule and gplace.gnn.dispatch, whose cache follows only their own file
KERNELS = jit_cache.Kernels(_HERE, (_HERE / "decision.py", _HERE / "dispatch.py",
                                    _HERE / "schedule.py", Path(_heap.__file__).resolve()),
                            "gplace-gnn-kernels.sha256")
jit_cache.invalidate_all(KERNELS)

DYN_FEATURES = 8
UNIT_EFT = 7  # the feature index of the whole unit's earliest finish time (gplace.gnn.schedule)
SAMPLE, GREEDY, FORCED, MIXED, MIXED_SAMPLE = 0, 1, 2, 3, 4  # rollout modes
ESTIMATE = 5  # FORCED without recording features or masks: the makespan estimate alone
# The logit of a device the unit does not fit on, here and in gplace.gnn.learn's loss: finite,
# so that no 0 * inf reaches an entropy; its softmax weight is exactly 0 in float64.
MASKED = -1e9


@njit(cache=True)
def decide(u, op, ready, start, cost, unit_cost, adj_ptr, adj_unit, adj_bytes, unit_dev, used,
           load, need, capacity, tau, s, w, ha, hb, hv, mode, u01, forced, follow, phi, mask):
    """Unit u's device at its first op (``ready``, ``start``: (D,) that op's times on each
    device); records ``phi[u]`` and ``mask[u]`` (not in ESTIMATE mode, whose ``phi`` and
    ``mask`` may have no rows)."""
    if mode == ESTIMATE:
        return forced[u]
    features(u, op, ready, start, cost, unit_cost, adj_ptr, adj_unit, adj_bytes, unit_dev,
             used, load, need, capacity, tau, phi[u], mask[u])
    if mode == FORCED or ((mode == MIXED or mode == MIXED_SAMPLE) and u01[u] < follow):
        mask[u, forced[u]] = True
        return forced[u]
    if mode == MIXED_SAMPLE:  # given u01 >= follow, (u01 - follow) / (1 - follow) is uniform
        return choose(s[u], w[u], ha, hb[u], hv[u], phi[u], mask[u], SAMPLE,
                      (u01[u] - follow) / (1.0 - follow))
    return choose(s[u], w[u], ha, hb[u], hv[u], phi[u], mask[u],
                  GREEDY if mode == MIXED else mode, u01[u])


@njit(cache=True, inline="always")
def data_ready(op, d, pred_ptr, pred_op, pred_bytes, pred_rep, finish, op_dev, latency, inv_bw):
    """When every input of ``op`` has reached device ``d``: the latest producer's end plus its
    link's latency and transfer time (no link contention), each ``pred_rep`` times (a tensor
    read inside a TF1 loop crosses once per iteration; heuristics_view)."""
    r = 0.0
    for e in range(pred_ptr[op], pred_ptr[op + 1]):
        p = pred_op[e]
        t = arrival(finish[p], op_dev[p], d, pred_bytes[e], pred_rep[e], latency, inv_bw)
        if t > r:
            r = t
    return r


@njit(cache=True, inline="always")
def arrival(end, a, d, nbytes, rep, latency, inv_bw):
    """When a tensor of ``nbytes`` that a producer on device ``a`` finished at ``end`` reaches
    ``d`` on an idle link: its latency and transfer time, ``rep`` times (data_ready)."""
    return end + latency[a, d] * rep + nbytes * inv_bw[a, d] * rep


@njit(cache=True, inline="always")
def receive_time(op, d, pred_ptr, pred_op, pred_bytes, pred_rep, op_dev, recv_s, recv_per_byte,
                 got):
    """The receiver CPU ``op``'s inputs take on device ``d`` before it runs, where links charge
    it (``Link.recv_cpu_s``, ``recv_cpu_s_per_byte``): one receive task per producer on another
    device whose data is not on ``d`` yet (``got[producer, d]``), none for control edges (0
    bytes). The simulator runs a receive task per output tensor and device on the receiver's
    lane when the tensor arrives; here it runs just before the consumer, on its lane, and per
    producer: a producer's other outputs to the same device are not charged again, a tensor a
    consumer reads twice is charged its bytes twice (the in-edges are summed per producer and
    consumer), and an empty tensor is taken for a control edge. On local-procs the rollouts'
    receive time is 0.1-7% below the simulator's at random placements of the test graphs.
    Inside a TF1 loop a receipt repeats ``pred_rep`` times, as the simulator's does."""
    r = 0.0
    for e in range(pred_ptr[op], pred_ptr[op + 1]):
        p = pred_op[e]
        a = op_dev[p]
        if a != d and pred_bytes[e] > 0.0 and not got[p, d]:
            r += (recv_s[a, d] + recv_per_byte[a, d] * pred_bytes[e]) * pred_rep[e]
    return r


@njit(cache=True, inline="always")
def mark_received(op, d, pred_ptr, pred_op, pred_bytes, op_dev, got):
    """Records that ``op``'s producers' data is on ``d`` (see :func:`receive_time`)."""
    for e in range(pred_ptr[op], pred_ptr[op + 1]):
        p = pred_op[e]
        if op_dev[p] != d and pred_bytes[e] > 0.0:
            got[p, d] = True


@njit(cache=True, inline="always")
def lane_free(lanes, lane_ptr, d):
    m = lanes[lane_ptr[d]]
    for k in range(lane_ptr[d] + 1, lane_ptr[d + 1]):
        m = min(m, lanes[k])
    return m


@njit(cache=True, inline="always")
def run_on_lane(lanes, lane_ptr, d, end):
    best = lane_ptr[d]
    for k in range(lane_ptr[d] + 1, lane_ptr[d + 1]):
        if lanes[k] < lanes[best]:
            best = k
    lanes[best] = end


@njit(cache=True)
def features(u, op, ready, start, cost, unit_cost, adj_ptr, adj_unit, adj_bytes, unit_dev,
             used, load, need, capacity, tau, phi, mask):
    nd = cost.shape[1]
    traffic = np.zeros(nd)
    total = 0.0
    for e in range(adj_ptr[u], adj_ptr[u + 1]):
        v = unit_dev[adj_unit[e]]
        if v >= 0:
            traffic[v] += adj_bytes[e]
            total += adj_bytes[e]
    eft = np.empty(nd)
    ueft = np.empty(nd)
    any_fit = False
    for d in range(nd):
        eft[d] = start[d] + cost[op, d]
        ueft[d] = start[d] + unit_cost[u, d]
        mask[d] = used[d] + need[u] <= capacity[d]
        any_fit = any_fit or mask[d]
    if not any_fit:
        mask[:] = True
    m_eft, m_start, m_ready = eft.min(), start.min(), ready.min()
    m_ueft, m_load = ueft.min(), load.min()
    for d in range(nd):
        phi[d, 0] = np.log1p((eft[d] - m_eft) / tau)
        phi[d, 1] = np.log1p((start[d] - m_start) / tau)
        phi[d, 2] = np.log1p((ready[d] - m_ready) / tau)
        phi[d, 3] = np.log1p(max(start[d] - ready[d], 0.0) / tau)
        phi[d, 4] = min((used[d] + need[u]) / max(capacity[d], 1.0), 2.0)
        phi[d, 5] = traffic[d] / total if total > 0 else 0.0
        phi[d, 6] = np.log1p((load[d] - m_load) / tau) / 4.0
        phi[d, 7] = np.log1p((ueft[d] - m_ueft) / tau)


@njit(cache=True)
def choose(s, w, ha, hb, hv, phi, mask, mode, u):
    nd = s.shape[0]
    logits = np.empty(nd)
    best = -1
    for d in range(nd):
        x = s[d]
        for f in range(w.shape[0]):
            x += w[f] * phi[d, f]
        for j in range(ha.shape[0]):  # the state head, if any
            z = hb[j]
            for f in range(w.shape[0]):
                z += ha[j, f] * phi[d, f]
            if z > 0.0:
                x += hv[j] * z
        logits[d] = x if mask[d] else MASKED
        if mask[d] and (best < 0 or logits[d] > logits[best]):
            best = d
    if mode == GREEDY:
        return best
    z, top = 0.0, logits[best]
    for d in range(nd):
        logits[d] = np.exp(logits[d] - top) if mask[d] else 0.0
        z += logits[d]
    acc, target = 0.0, u * z
    for d in range(nd):
        acc += logits[d]
        if mask[d] and acc >= target:
            return d
    return best
