"""The fast simulator: the reference's event loop (:mod:`gplace.sim.reference`), compiled with
numba over the flat arrays of :mod:`gplace.sim.arrays`, with a batch API.

Same semantics and the same arithmetic in the same order as the reference, so results agree to
the last bit (tests/sim/test_equivalence.py). Three steps per placement, each a small function:

* ``_run``: the event loop. The heap holds (time, key) pairs in two arrays; besides the
  schedule, the loop notes when each tensor copy can be freed (``free_at``), since it meets
  every consumer's end and every arrival in passing;
* ``_mem_events``: the allocations and frees of the step, as (time, bytes, device) rows;
* ``_peak``: a sweep over them in time order (bucket sort), frees before allocations within one
  instant, as the reference's per-device sort does.

Scratch arrays (a ``_Work``) are allocated once per simulator and thread (once per batch and
thread in the parallel path), not once per placement.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

import numpy as np
from numba import njit, prange

from gplace.problem import PlacementProblem
from gplace.sim.arrays import SimArrays, build_arrays
from gplace.sim.records import BatchResult, SimResult, Transfers


_DEV_BITS = 16  # a memory event packs its device into the low bits of its byte count
_DEV_MASK = (1 << _DEV_BITS) - 1
MAX_BYTES = 1 << (62 - _DEV_BITS)  # bytes one op may allocate at once (2^46 B = 64 TiB)


class _Work(NamedTuple):
    """Scratch of one placement at a time, reused along a batch."""

    dev: np.ndarray        # (ops,) device of each op, by rank
    ready: np.ndarray      # (ops,) latest input availability so far
    pending: np.ndarray    # (ops,) inputs not yet available
    lane_free: np.ndarray  # (lanes,)
    chan_free: np.ndarray  # (channels,)
    ht: np.ndarray         # heap times
    hk: np.ndarray         # heap keys
    mark: np.ndarray       # (outputs * devices,) == stamp once sent to that device
    free_at: np.ndarray    # (outputs * devices,) when that copy of the output can go
    start: np.ndarray      # (ops,) by rank
    end: np.ndarray        # (ops,) by rank
    xo: np.ndarray         # transfers: output (rank numbering), device, start, done, arrival
    xd: np.ndarray
    xs: np.ndarray
    xf: np.ndarray
    xa: np.ndarray
    ev_t: np.ndarray       # memory events: time, bytes (+alloc / -free) << _DEV_BITS | device
    ev_b: np.ndarray
    so_t: np.ndarray       # the same, sorted by time
    so_b: np.ndarray
    count: np.ndarray      # bucket bounds
    stamp: np.ndarray      # (1,) rows run with this scratch: the mark of the current one


@njit(cache=True)
def _work(a):
    n, nd, n_out = a.num_ops, a.num_devices, a.out_bytes.shape[0]
    ne = a.cons_op.shape[0]
    m = 2 * n + n_out + 2 * ne + 1
    return _Work(np.zeros(n, np.int64), np.zeros(n), np.zeros(n, np.int64),
                 np.zeros(a.lane_ptr[nd]), np.zeros(a.num_channels), np.zeros(n + ne + 1),
                 np.zeros(n + ne + 1, np.int64), np.zeros(n_out * nd, np.int64),
                 np.zeros(n_out * nd), np.zeros(n), np.zeros(n), np.zeros(ne + 1, np.int64),
                 np.zeros(ne + 1, np.int64), np.zeros(ne + 1), np.zeros(ne + 1), np.zeros(ne + 1),
                 np.zeros(m), np.zeros(m, np.int64), np.zeros(m), np.zeros(m, np.int64),
                 np.zeros(m + 1, np.int64), np.zeros(1, np.int64))


@njit(cache=True, inline="always")
def _less(t1, k1, t2, k2):
    return t1 < t2 or (t1 == t2 and k1 < k2)


@njit(cache=True, inline="always")
def _push(ht, hk, size, t, k):
    i = size
    while i > 0:
        p = (i - 1) >> 2
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
        c = 4 * i + 1
        if c + 3 < size:
            m = c
            if _less(ht[c + 1], hk[c + 1], ht[m], hk[m]):
                m = c + 1
            if _less(ht[c + 2], hk[c + 2], ht[m], hk[m]):
                m = c + 2
            if _less(ht[c + 3], hk[c + 3], ht[m], hk[m]):
                m = c + 3
        elif c < size:
            m = c
            for q in range(c + 1, size):
                if _less(ht[q], hk[q], ht[m], hk[m]):
                    m = q
        else:
            break
        ht[i], hk[i] = ht[m], hk[m]
        i = m
    while i > 0:
        p = (i - 1) >> 2
        if not _less(t, k, ht[p], hk[p]):
            break
        ht[i], hk[i] = ht[p], hk[p]
        i = p
    ht[i], hk[i] = t, k
    return size


@njit(cache=True, inline="always")
def _available(o, t, ready, pending, ht, hk, size):
    if t > ready[o]:
        ready[o] = t
    pending[o] -= 1
    if pending[o] == 0:
        size = _push(ht, hk, size, ready[o], o)
    return size


@njit(cache=True)
def _run(a, w, stamp, busy):
    """The placement in ``w.dev``: fills w.start/end/free_at, busy and the transfer columns;
    returns (ops run, transfers). Ops are numbered by rank, which is also their heap key."""
    n, nd = a.num_ops, a.num_devices
    dev, ready, pending, lane_free, chan_free = w.dev, w.ready, w.pending, w.lane_free, w.chan_free
    ht, hk, mark, free_at, start, end = w.ht, w.hk, w.mark, w.free_at, w.start, w.end
    cost, out_ptr, cons_ptr, cons_op, lane_ptr = a.cost, a.out_ptr, a.cons_ptr, a.cons_op, a.lane_ptr
    ready[:] = 0.0
    pending[:] = a.indeg
    lane_free[:] = 0.0
    chan_free[:] = 0.0
    busy[:] = 0.0
    size = 0
    for o in range(n):
        if a.indeg[o] == 0:
            size = _push(ht, hk, size, 0.0, o)
    done = 0
    nx = 0
    while size > 0:
        t, key = ht[0], hk[0]
        size = _pop(ht, hk, size)
        if key < n:
            o = key
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
                free_at[j * nd + d] = en
                for e in range(cons_ptr[j], cons_ptr[j + 1]):
                    c = cons_op[e]
                    dc = dev[c]
                    if dc == d:
                        size = _available(c, en, ready, pending, ht, hk, size)
                    elif mark[j * nd + dc] != stamp:
                        mark[j * nd + dc] = stamp
                        size = _push(ht, hk, size, en, n + a.out_key[j] * nd + dc)
            for e in range(a.in_ptr[o], a.in_ptr[o + 1]):  # this copy is needed until en
                slot = a.in_out[e] * nd + d
                free_at[slot] = max(free_at[slot], en)
            for e in range(a.ctrl_ptr[o], a.ctrl_ptr[o + 1]):
                c = a.ctrl_op[e]
                ta = en if dev[c] == d else en + a.latency[d, dev[c]]
                size = _available(c, ta, ready, pending, ht, hk, size)
        else:
            j = a.out_of_key[(key - n) // nd]
            dd = (key - n) % nd
            src = dev[a.out_owner[j]]
            ch = a.channel[src, dd]
            begin = max(t, chan_free[ch])
            finish = begin + a.out_bytes[j] / a.bandwidth[src, dd]
            chan_free[ch] = finish
            arrive = finish + a.latency[src, dd]
            w.xo[nx], w.xd[nx], w.xs[nx], w.xf[nx], w.xa[nx] = j, dd, begin, finish, arrive
            nx += 1
            free_at[j * nd + dd] = arrive
            free_at[j * nd + src] = max(free_at[j * nd + src], arrive)
            for e in range(cons_ptr[j], cons_ptr[j + 1]):
                if dev[cons_op[e]] == dd:
                    size = _available(cons_op[e], arrive, ready, pending, ht, hk, size)
    return done, nx


@njit(cache=True)
def _mem_events(a, w, nx):
    """Rows (time, bytes << _DEV_BITS | device) into w.ev_t / w.ev_b, bytes > 0 allocated,
    < 0 freed: at its start an op allocates its scratch and all its outputs; the scratch goes
    at its end, each copy of an output at its free_at; a received copy comes with its
    transfer. Returns the number of rows."""
    nd, dev, free_at, ev_t, ev_b = a.num_devices, w.dev, w.free_at, w.ev_t, w.ev_b
    i = 0
    for o in range(a.num_ops):
        d = dev[o]
        size = a.temp[o, d]
        for j in range(a.out_ptr[o], a.out_ptr[o + 1]):
            size += a.out_bytes[j]
            if a.out_bytes[j] != 0:
                ev_t[i], ev_b[i] = free_at[j * nd + d], (-a.out_bytes[j] << _DEV_BITS) | d
                i += 1
        if size != 0:
            ev_t[i], ev_b[i] = w.start[o], (size << _DEV_BITS) | d
            i += 1
        if a.temp[o, d] != 0:
            ev_t[i], ev_b[i] = w.end[o], (-a.temp[o, d] << _DEV_BITS) | d
            i += 1
    for k in range(nx):
        b, d = a.out_bytes[w.xo[k]], w.xd[k]
        if b != 0:
            ev_t[i], ev_b[i] = w.xa[k], (b << _DEV_BITS) | d
            ev_t[i + 1], ev_b[i + 1] = free_at[w.xo[k] * nd + d], (-b << _DEV_BITS) | d
            i += 2
    return i


@njit(cache=True)
def _peak(a, w, m, high):
    """Peak bytes per device into ``high`` from the m events. Within one instant frees come
    before allocations, so the live bytes peak after an allocation: sorted by (time, frees
    first), one sweep that takes the maximum after each allocation is exact. The sort: buckets
    linear in time (times run from 0 to the step time), then an insertion sort that only
    reorders within a bucket; ~linear for the spread-out times of a schedule (numba's argsort
    is ~10x slower)."""
    ev_t, ev_b, so_t, so_b, count = w.ev_t, w.ev_b, w.so_t, w.so_b, w.count
    high[:] = 0
    if m > 0:
        hi = ev_t[:m].max()
        scale = (m - 1) / hi if hi > 0.0 else 0.0
        count[:m + 1] = 0
        for i in range(m):
            count[int(ev_t[i] * scale) + 1] += 1
        for b in range(m):
            count[b + 1] += count[b]
        for i in range(m):
            b = int(ev_t[i] * scale)
            so_t[count[b]], so_b[count[b]] = ev_t[i], ev_b[i]
            count[b] += 1
        for q in range(1, m):  # rows are in order but within their bucket
            t, b = so_t[q], so_b[q]
            r = q - 1
            while r >= 0 and (so_t[r] > t or (so_t[r] == t and so_b[r] > b)):
                so_t[r + 1], so_b[r + 1] = so_t[r], so_b[r]
                r -= 1
            so_t[r + 1], so_b[r + 1] = t, b
        live = np.zeros(high.shape[0], np.int64)
        for q in range(m):
            d = so_b[q] & _DEV_MASK
            live[d] += so_b[q] >> _DEV_BITS
            high[d] = max(high[d], live[d])
    for o in range(a.num_ops):
        high[w.dev[o]] += a.param_bytes[o]


@njit(cache=True)
def _one(a, devs, b, w, step, busy, peak, oom, nxs):
    """Row b of a batch: gathers its devices by rank, runs, sweeps memory."""
    for r in range(a.num_ops):
        w.dev[r] = devs[b, a.op_of_rank[r]]
    w.stamp[0] += 1
    done, nx = _run(a, w, w.stamp[0], busy[b])
    step[b] = w.end.max() if a.num_ops else 0.0
    _peak(a, w, _mem_events(a, w, nx), peak[b])
    oom[b] = (peak[b] > a.capacity).any()
    nxs[b] = nx
    return done == a.num_ops


@njit(cache=True)
def _batch(a, devs, w, step, busy, peak, oom, nxs):
    """Simulates every row of ``devs`` (batch, ops) in turn; returns whether every op ran."""
    all_ran = True
    for b in range(devs.shape[0]):
        all_ran &= _one(a, devs, b, w, step, busy, peak, oom, nxs)
    return all_ran


@njit(cache=True, parallel=True)
def _batch_parallel(a, devs, step, busy, peak, oom, nxs, chunks):
    """As _batch, the rows split into ``chunks`` contiguous runs simulated in parallel (one
    scratch each). Rows are independent, so results do not depend on the threads."""
    rows = devs.shape[0]
    ran = np.ones(chunks, np.bool_)
    for c in prange(chunks):
        w = _work(a)
        for b in range(c * rows // chunks, (c + 1) * rows // chunks):
            ran[c] &= _one(a, devs, b, w, step, busy, peak, oom, nxs)
    return ran.all()


class FastSimulator:
    """Compiled simulator of one problem; build once, then call ``run`` / ``run_batch``.

    ``threads`` > 1 simulates the rows of a batch on that many numba threads (at most
    ``numba.config.NUMBA_NUM_THREADS``); the results are the same as with one.
    """

    def __init__(self, problem: PlacementProblem, threads: int = 1):
        self.problem = problem
        self.arrays: SimArrays = build_arrays(problem)
        self.threads = threads
        self._local = threading.local()  # one scratch per calling thread, kept between calls
        a = self.arrays
        # per-op output bytes (np.add.reduceat breaks on trailing ops without outputs)
        owner = np.repeat(np.arange(a.num_ops), np.diff(a.out_ptr))
        per_op = np.bincount(owner, weights=a.out_bytes, minlength=a.num_ops)
        biggest = int((per_op + a.temp.max(axis=1)).max()) if a.num_ops else 0
        if a.num_devices > _DEV_MASK + 1 or biggest >= MAX_BYTES:
            raise ValueError(f"the fast simulator packs a device index into {_DEV_BITS} bits and "
                             f"an op's bytes into the rest: {a.num_devices} devices, {biggest} B")

    def run_batch(self, placements: np.ndarray) -> BatchResult:
        """(batch, units) unit placements -> one BatchResult row each."""
        placements = np.atleast_2d(np.asarray(placements, np.int64))
        return self.run_ops_batch(self.problem.expand(placements))

    def run_ops_batch(self, op_devices: np.ndarray) -> BatchResult:
        """(batch, ops) device of every op -> one BatchResult row each."""
        devs = np.ascontiguousarray(np.atleast_2d(op_devices), np.int64)
        a = self.arrays
        if devs.shape[1] != a.num_ops:
            raise ValueError(f"placement rows have {devs.shape[1]} ops, the graph has {a.num_ops}")
        b = devs.shape[0]
        step, nxs = np.zeros(b), np.zeros(b, np.int64)
        busy, peak = np.zeros((b, a.num_devices)), np.zeros((b, a.num_devices), np.int64)
        oom = np.zeros(b, np.bool_)
        chunks = min(self.threads, b)
        if chunks > 1:
            ok = _batch_parallel(a, devs, step, busy, peak, oom, nxs, chunks)
        else:
            ok = _batch(a, devs, self._scratch(), step, busy, peak, oom, nxs)
        assert ok, "some op never ran: the scheduling view of the graph has a cycle"
        return BatchResult(step, busy, peak, oom, nxs)

    def _scratch(self) -> _Work:
        w = getattr(self._local, "work", None)
        if w is None:
            w = self._local.work = _work(self.arrays)
        return w

    def run(self, placement: np.ndarray) -> SimResult:
        """One (units,) placement, with the per-op schedule and the transfers."""
        return self.run_ops(self.problem.expand(np.asarray(placement, np.int64)))

    def run_ops(self, op_device: np.ndarray) -> SimResult:
        a = self.arrays
        devs = np.ascontiguousarray(np.asarray(op_device, np.int64)[None, :])
        if devs.shape[1] != a.num_ops:
            raise ValueError(f"placement rows have {devs.shape[1]} ops, the graph has {a.num_ops}")
        step, busy, peak, oom, nxs = (np.zeros(1), np.zeros((1, a.num_devices)),
                                      np.zeros((1, a.num_devices), np.int64),
                                      np.zeros(1, np.bool_), np.zeros(1, np.int64))
        w = self._scratch()
        assert _one(a, devs, 0, w, step, busy, peak, oom, nxs), \
            "some op never ran: the scheduling view of the graph has a cycle"
        start, end = np.zeros(a.num_ops), np.zeros(a.num_ops)
        start[a.op_of_rank], end[a.op_of_rank] = w.start, w.end
        nx = int(nxs[0])
        j = w.xo[:nx]
        transfers = Transfers(a.out_key[j], w.dev[a.out_owner[j]], w.xd[:nx].copy(),
                              w.xs[:nx].copy(), w.xf[:nx].copy(), w.xa[:nx].copy(),
                              a.out_bytes[j])
        return SimResult(float(step[0]), busy[0], peak[0], bool(oom[0]), devs[0].copy(), start,
                         end, transfers)
