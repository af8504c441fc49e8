"""The fast simulator: the reference's event loop (:mod:`gplace.sim.reference`), compiled with
numba over the flat arrays of :mod:`gplace.sim.arrays`, with a batch API.

Same semantics and the same arithmetic in the same order as the reference, so results agree to
the last bit (tests/sim/test_equivalence.py). The heap holds (time, key) pairs in two arrays.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from gplace.problem import PlacementProblem
from gplace.sim.arrays import SimArrays, build_arrays
from gplace.sim.records import BatchResult, SimResult, Transfers


@njit(cache=True, inline="always")
def _less(t1, k1, t2, k2):
    return t1 < t2 or (t1 == t2 and k1 < k2)


@njit(cache=True, inline="always")
def _push(ht, hk, size, t, k):
    i = size
    while i > 0:
        p = (i - 1) >> 1
        if not _less(t, k, ht[p], hk[p]):
            break
        ht[i], hk[i] = ht[p], hk[p]
        i = p
    ht[i], hk[i] = t, k
    return size + 1


@njit(cache=True, inline="always")
def _pop(ht, hk, size):
    """Removes the root; returns the new size (the caller read ht[0], hk[0] first)."""
    size -= 1
    t, k = ht[size], hk[size]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and _less(ht[c + 1], hk[c + 1], ht[c], hk[c]):
            c += 1
        if not _less(ht[c], hk[c], t, k):
            break
        ht[i], hk[i] = ht[c], hk[c]
        i = c
    ht[i], hk[i] = t, k
    return size


@njit(cache=True, inline="always")
def _available(o, t, ready, pending, rank, ht, hk, size):
    if t > ready[o]:
        ready[o] = t
    pending[o] -= 1
    if pending[o] == 0:
        size = _push(ht, hk, size, ready[o], rank[o])
    return size


@njit(cache=True)
def _run(dev, stamp, mark, rank, op_of_rank, cost, out_ptr, out_owner, out_bytes, cons_ptr,
         cons_op, ctrl_ptr, ctrl_op, indeg, lane_ptr, channel, bw, lat, num_channels,
         ready, pending, lane_free, ht, hk, start, end, busy, xo, xd, xs, xf, xa):
    """One placement. Fills start/end/busy and the transfer columns; returns (ops run, xfers)."""
    n, nd = cost.shape
    ready[:] = 0.0
    pending[:] = indeg
    lane_free[:] = 0.0
    busy[:] = 0.0
    chan_free = np.zeros(num_channels)
    size = 0
    for o in range(n):
        if indeg[o] == 0:
            size = _push(ht, hk, size, 0.0, rank[o])
    done = 0
    nx = 0
    while size > 0:
        t, key = ht[0], hk[0]
        size = _pop(ht, hk, size)
        if key < n:
            o = op_of_rank[key]
            d = dev[o]
            lane = lane_ptr[d]
            for s in range(lane_ptr[d] + 1, lane_ptr[d + 1]):
                if lane_free[s] < lane_free[lane]:
                    lane = s
            st = max(t, lane_free[lane])
            en = st + cost[o, d]
            start[o], end[o], lane_free[lane] = st, en, en
            busy[d] += cost[o, d]
            done += 1
            for j in range(out_ptr[o], out_ptr[o + 1]):
                for e in range(cons_ptr[j], cons_ptr[j + 1]):
                    c = cons_op[e]
                    dc = dev[c]
                    if dc == d:
                        size = _available(c, en, ready, pending, rank, ht, hk, size)
                    elif mark[j * nd + dc] != stamp:
                        mark[j * nd + dc] = stamp
                        size = _push(ht, hk, size, en, n + j * nd + dc)
            for e in range(ctrl_ptr[o], ctrl_ptr[o + 1]):
                c = ctrl_op[e]
                ta = en if dev[c] == d else en + lat[d, dev[c]]
                size = _available(c, ta, ready, pending, rank, ht, hk, size)
        else:
            j = (key - n) // nd
            dd = (key - n) % nd
            src = dev[out_owner[j]]
            ch = channel[src, dd]
            begin = max(t, chan_free[ch])
            finish = begin + out_bytes[j] / bw[src, dd]
            chan_free[ch] = finish
            arrive = finish + lat[src, dd]
            xo[nx], xd[nx], xs[nx], xf[nx], xa[nx] = j, dd, begin, finish, arrive
            nx += 1
            for e in range(cons_ptr[j], cons_ptr[j + 1]):
                if dev[cons_op[e]] == dd:
                    size = _available(cons_op[e], arrive, ready, pending, rank, ht, hk, size)
    return done, nx


@njit(cache=True)
def _bucket_argsort(times, m):
    """Indices that sort times[:m] (nonnegative): buckets linear in time, insertion sort inside.
    Exact, as any sort; ~linear for the spread-out times of a schedule (numba's argsort is
    ~10x slower here)."""
    order = np.empty(m, np.int64)
    if m == 0:
        return order
    hi = times[:m].max()
    if not hi > 0.0:
        for i in range(m):
            order[i] = i
        return order
    scale = (m - 1) / hi
    count = np.zeros(m + 1, np.int64)
    for i in range(m):
        count[int(times[i] * scale) + 1] += 1
    for b in range(m):
        count[b + 1] += count[b]
    for i in range(m):
        b = int(times[i] * scale)
        order[count[b]] = i
        count[b] += 1
    lo = 0
    for b in range(m):  # count[b] is now the end of bucket b
        for q in range(lo + 1, count[b]):
            x = order[q]
            r = q - 1
            while r >= lo and times[order[r]] > times[x]:
                order[r + 1] = order[r]
                r -= 1
            order[r + 1] = x
        lo = count[b]
    return order


@njit(cache=True)
def _peak(dev, start, end, nx, xo, xd, xa, temp, param_bytes, out_ptr, out_owner, out_bytes,
          cons_ptr, cons_op, free_at, nd):
    """Peak bytes per device; the same events and order rule as the reference's sweep."""
    n = start.shape[0]
    n_out = out_bytes.shape[0]
    for j in range(n_out):  # the producer's copy lives at least until its op ends
        o = out_owner[j]
        free_at[j * nd + dev[o]] = end[o]
    for k in range(nx):
        j, dd = xo[k], xd[k]
        free_at[j * nd + dd] = xa[k]
        slot = j * nd + dev[out_owner[j]]
        free_at[slot] = max(free_at[slot], xa[k])
    for j in range(n_out):
        for e in range(cons_ptr[j], cons_ptr[j + 1]):
            c = cons_op[e]
            slot = j * nd + dev[c]
            free_at[slot] = max(free_at[slot], end[c])
    m = 2 * n + n_out + 2 * nx
    times = np.empty(m)
    delta = np.empty(m, np.int64)
    where = np.empty(m, np.int64)
    i = 0
    for o in range(n):  # at its start an op allocates its scratch and all its outputs
        d = dev[o]
        size = temp[o, d]
        for j in range(out_ptr[o], out_ptr[o + 1]):
            size += out_bytes[j]
            if out_bytes[j] != 0:
                times[i], delta[i], where[i] = free_at[j * nd + d], -out_bytes[j], d
                i += 1
        if size != 0:
            times[i], delta[i], where[i] = start[o], size, d
            i += 1
        if temp[o, d] != 0:
            times[i], delta[i], where[i] = end[o], -temp[o, d], d
            i += 1
    for k in range(nx):
        b = out_bytes[xo[k]]
        if b != 0:
            times[i], delta[i], where[i] = xa[k], b, xd[k]
            times[i + 1], delta[i + 1], where[i + 1] = free_at[xo[k] * nd + xd[k]], -b, xd[k]
            i += 2
    # Sweep in time order. Within one instant frees come before allocations, so the live bytes
    # peak at the end of the instant: apply every event of the instant, then take the maxima.
    live = np.zeros(nd, np.int64)
    high = np.zeros(nd, np.int64)
    order = _bucket_argsort(times, i)
    k = 0
    while k < i:
        t = times[order[k]]
        first = k
        while k < i and times[order[k]] == t:
            live[where[order[k]]] += delta[order[k]]
            k += 1
        for q in range(first, k):
            d = where[order[q]]
            if live[d] > high[d]:
                high[d] = live[d]
    for o in range(n):
        high[dev[o]] += param_bytes[o]
    return high


@njit(cache=True)
def _batch(devs, a_rank, a_op_of_rank, cost, temp, param_bytes, out_ptr, out_owner, out_bytes,
           cons_ptr, cons_op, ctrl_ptr, ctrl_op, indeg, lane_ptr, channel, bw, lat, num_channels,
           capacity, step, busy_out, peak_out, oom, nxs, start, end):
    """Simulates every row of ``devs`` (batch, ops); per-row outputs go to the *_out arrays."""
    b_count, n = devs.shape
    nd = cost.shape[1]
    n_out = out_bytes.shape[0]
    n_edges = cons_op.shape[0]
    mark = np.zeros(n_out * nd, np.int64)
    free_at = np.zeros(n_out * nd)
    ready = np.zeros(n)
    pending = np.zeros(n, np.int64)
    lane_free = np.zeros(lane_ptr[nd])
    ht = np.zeros(n + n_edges + 1)
    hk = np.zeros(n + n_edges + 1, np.int64)
    xo = np.zeros(n_edges + 1, np.int64)
    xd = np.zeros(n_edges + 1, np.int64)
    xs = np.zeros(n_edges + 1)
    xf = np.zeros(n_edges + 1)
    xa = np.zeros(n_edges + 1)
    all_ran = True
    for b in range(b_count):
        dev = devs[b]
        done, nx = _run(dev, b + 1, mark, a_rank, a_op_of_rank, cost, out_ptr, out_owner,
                        out_bytes, cons_ptr, cons_op, ctrl_ptr, ctrl_op, indeg, lane_ptr,
                        channel, bw, lat, num_channels, ready, pending, lane_free, ht, hk,
                        start, end, busy_out[b], xo, xd, xs, xf, xa)
        all_ran = all_ran and done == n
        step[b] = end.max() if n else 0.0
        peak_out[b] = _peak(dev, start, end, nx, xo, xd, xa, temp, param_bytes, out_ptr,
                            out_owner, out_bytes, cons_ptr, cons_op, free_at, nd)
        oom[b] = (peak_out[b] > capacity).any()
        nxs[b] = nx
    return all_ran


class FastSimulator:
    """Compiled simulator of one problem; build once, then call ``run`` / ``run_batch``."""

    def __init__(self, problem: PlacementProblem):
        self.problem = problem
        self.arrays: SimArrays = build_arrays(problem)

    def run_batch(self, placements: np.ndarray) -> BatchResult:
        """(batch, units) unit placements -> one BatchResult row each."""
        placements = np.atleast_2d(np.asarray(placements, np.int64))
        return self.run_ops_batch(self.problem.expand(placements))

    def run_ops_batch(self, op_devices: np.ndarray) -> BatchResult:
        """(batch, ops) device of every op -> one BatchResult row each."""
        devs = np.ascontiguousarray(np.atleast_2d(op_devices), np.int64)
        result, _, _ = self._call(devs)
        return result

    def run(self, placement: np.ndarray) -> SimResult:
        """One (units,) placement, with the per-op schedule and the transfers."""
        return self.run_ops(self.problem.expand(np.asarray(placement, np.int64)))

    def run_ops(self, op_device: np.ndarray) -> SimResult:
        devs = np.ascontiguousarray(np.asarray(op_device, np.int64)[None, :])
        result, start, end = self._call(devs)
        # The transfers of one step are cheap to recompute in order from the schedule: rerun
        # the single placement through the loop with the transfer columns kept.
        transfers = self._transfers(devs[0])
        return SimResult(float(result.step_time_s[0]), result.busy_s[0], result.peak_bytes[0],
                         bool(result.oom[0]), devs[0].copy(), start, end, transfers)

    def _call(self, devs: np.ndarray):
        a = self.arrays
        if devs.shape[1] != a.num_ops:
            raise ValueError(f"placement rows have {devs.shape[1]} ops, the graph has {a.num_ops}")
        b = devs.shape[0]
        step, nxs = np.zeros(b), np.zeros(b, np.int64)
        busy, peak = np.zeros((b, a.num_devices)), np.zeros((b, a.num_devices), np.int64)
        oom = np.zeros(b, np.bool_)
        start, end = np.zeros(a.num_ops), np.zeros(a.num_ops)
        ok = _batch(devs, a.rank, a.op_of_rank, a.cost, a.temp, a.param_bytes, a.out_ptr,
                    a.out_owner, a.out_bytes, a.cons_ptr, a.cons_op, a.ctrl_ptr, a.ctrl_op,
                    a.indeg, a.lane_ptr, a.channel, a.bandwidth, a.latency, a.num_channels,
                    a.capacity, step, busy, peak, oom, nxs, start, end)
        assert ok, "some op never ran: the scheduling view of the graph has a cycle"
        return BatchResult(step, busy, peak, oom, nxs), start, end

    def _transfers(self, dev: np.ndarray) -> Transfers:
        a = self.arrays
        n, ne = a.num_ops, a.cons_op.shape[0]
        cols = [np.zeros(ne + 1, np.int64), np.zeros(ne + 1, np.int64)] + [np.zeros(ne + 1)
                                                                         for _ in range(3)]
        start, end = np.zeros(n), np.zeros(n)
        _, nx = _run(dev, 1, np.zeros(a.out_bytes.shape[0] * a.num_devices, np.int64), a.rank,
                     a.op_of_rank, a.cost, a.out_ptr, a.out_owner, a.out_bytes, a.cons_ptr,
                     a.cons_op, a.ctrl_ptr, a.ctrl_op, a.indeg, a.lane_ptr, a.channel,
                     a.bandwidth, a.latency, a.num_channels, np.zeros(n), np.zeros(n, np.int64),
                     np.zeros(a.lane_ptr[-1]), np.zeros(n + ne + 1), np.zeros(n + ne + 1, np.int64),
                     start, end, np.zeros(a.num_devices), *cols)
        xo, xd, xs, xf, xa = (c[:nx].copy() for c in cols)
        return Transfers(xo, dev[a.out_owner[xo]], xd, xs, xf, xa, a.out_bytes[xo])
