"""Peak memory per device of one simulated step, from the schedule that ``gplace.sim.loop``
left in a ``Work`` (the reference's ``_peak_memory``, over arrays).

The step's allocations and frees ("rows": time, bytes, device) come from four sources: each
output's own copy (freed), each transfer's copy (allocated at arrival, freed), each op (its
outputs and scratch allocated at its start, its scratch freed at its end). Rows are not written
out, only the bucket each falls in (4 bytes a row): a full row list of a 10,000-op placement
(60,000 rows of 20 bytes) does not fit in the core's cache, and writing it, then reading it
back, cost more than making the few rows the sweep needs again from their sources.

* ``events``: finds when each copy of each output can be freed (the last of: its op's end,
  its consumers' ends on that device, the arrivals of its transfers, for the sender's copy),
  then sums the rows per device and time bucket (``buckets`` equal slices of the step): the
  bytes allocated, the bytes freed (each row adds to one of the two: its sign is known where
  it is made; ops' scratch frees are skipped where no op has scratch). Flat loops over
  outputs, transfers, edges (each reads the copy the event loop noted, ``Work.copy``) and ops,
  without branches on the data: nested loops of a few irregular trips each mispredicted their
  exits, and cost half of the pass.
* ``peak``: the live bytes L(t) after all events at time t peak at some event time, and the
  reference's sweep (frees before allocations within an instant) finds exactly max_t L(t).
  L at the end of a bucket is a value L takes, so max over buckets of it is a lower bound; a
  bucket can only beat it if L at its start plus its allocations does. Only those buckets'
  rows (a few percent on the benchmark graph), made again from their sources, are sorted
  (radix by bucket, then insertion) and swept: branch and bound instead of sorting every row.

Byte counts are never negative (``FastSimulator`` checks), so allocations and frees can be
summed apart. Memory phase of a 10,000-op placement, interleaved A/B on a loaded machine
(load 4.4): 373 -> 210 us CPU (rows written out, every row added to both sums, then scanned
whole for the candidates: 62,000 rows of which 10,000 scratch frees of 0 bytes).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

DEV_BITS = 16  # a memory event packs its device into the low bits of its byte count
DEV_MASK = (1 << DEV_BITS) - 1
MAX_BYTES = 1 << (62 - DEV_BITS)  # bytes one op may allocate at once (2^46 B = 64 TiB)


class Sweep(NamedTuple):
    """Scratch of the memory sweep of one placement, reused along a batch."""

    ev_k: np.ndarray   # (rows,) uint32 bucket sum (device * buckets + bucket) of each row
    so_t: np.ndarray   # (rows,) the rows of the candidate buckets: times, then sorted
    so_b: np.ndarray   # (rows,) int64 bytes << DEV_BITS | device
    tmp_t: np.ndarray  # (rows,) radix sort buffer
    tmp_b: np.ndarray
    count: np.ndarray  # (rows + 64,) int64 digit counts of the sort
    cfree: np.ndarray  # (copies,) when each copy goes: outputs' own, then transfers'
    alloc: np.ndarray  # (devices * buckets,) int64 bytes allocated in each bucket
    freed: np.ndarray  # (devices * buckets,) int64 bytes freed in it, then L at its start
    live: np.ndarray   # (devices,) int64
    at: np.ndarray     # (devices,) int64 bucket the sweep is in


@njit(cache=True)
def new_sweep(rows, copies, devices):
    buckets = 16
    while buckets < 1024 and buckets * devices * 16 < rows:
        buckets *= 2
    f, i = np.float64, np.int64
    return Sweep(np.zeros(rows, np.uint32), np.zeros(rows, f), np.zeros(rows, i),
                 np.zeros(rows, f), np.zeros(rows, i), np.zeros(rows + 64, i), np.zeros(copies, f),
                 np.zeros(devices * buckets, i), np.zeros(devices * buckets, i),
                 np.zeros(devices, i), np.zeros(devices, i))


@njit(cache=True, inline="always")
def _bucket(t, scale, top):
    """int(t * scale), kept in 0..top whatever t (events never pass the step time)."""
    return min(int(t * scale), top)


@njit(cache=True, inline="always")
def _slot(t, d, scale, buckets):
    """Index of device d's bucket of time t in the (devices * buckets,) sums, unsigned (numba
    checks a signed index for a negative value on every access). (Scalars only: numba counts
    references to an array an inlined function gets, on every call.)"""
    return np.uint64(d * buckets + _bucket(t, scale, buckets - 1))


@njit(cache=True)
def _free_times(a, w, s, nx):
    """s.cfree: when each copy can go (module doc)."""
    end, xa, xj, copy = w.end, w.xa, w.xj, w.copy
    out_owner, cons_op, cfree = a.out_owner, a.cons_op, s.cfree
    n_out = a.out_bytes.shape[0]
    sent = cfree[n_out:]  # transfers' copies (a view: indices from 0 need no sign check)
    for j in range(n_out):  # an output's own copy: until its op ends, ...
        cfree[j] = end[out_owner[j]]
    for x in range(nx):  # ... and every transfer of it arrived; a copy sent: from arrival
        sent[x] = xa[x]
        cfree[xj[x]] = max(cfree[xj[x]], xa[x])
    for e in range(cons_op.shape[0]):  # every copy: until its last reader ends
        cfree[copy[e]] = max(cfree[copy[e]], end[cons_op[e]])


@njit(cache=True)
def _rows(s, n_out, nx, n):
    """Views of s.ev_k, by source: outputs' frees, transfers' allocations, transfers' frees,
    ops' starts, ops' ends (views index from 0, which numba need not check for a sign)."""
    ev_k = s.ev_k
    a, b, c = n_out + nx, n_out + 2 * nx, n_out + 2 * nx + n
    return ev_k[:n_out], ev_k[n_out:a], ev_k[a:b], ev_k[b:c], ev_k[c:c + n]


@njit(cache=True)
def events(a, w, s, nx, step):
    """s.cfree, the bucket sums s.alloc / s.freed of the step's rows and the bucket of each
    row in s.ev_k (``_rows``: ``_candidates`` finds a row's source by its place), from the
    schedule in ``w`` with its ``nx`` transfers; ``step`` is the last op's end."""
    _free_times(a, w, s, nx)
    dev, start, end, xd, xa, xj = w.dev, w.start, w.end, w.xd, w.xa, w.xj
    out_owner, out_bytes, temp_of, out_total = a.out_owner, a.out_bytes, a.temp, a.out_total
    cfree, alloc, freed = s.cfree, s.alloc, s.freed  # arrays out of the record (loop.place)
    n_out, nd, n = out_bytes.shape[0], a.num_devices, a.num_ops
    ev_out, ev_xa, ev_xf, ev_start, ev_end = _rows(s, n_out, nx, n)
    sent = cfree[n_out:]
    buckets = alloc.shape[0] // nd
    scale = buckets / step if step > 0.0 else 0.0
    alloc[:] = 0
    freed[:] = 0
    for j in range(n_out):
        k = _slot(cfree[j], dev[out_owner[j]], scale, buckets)
        freed[k] += out_bytes[j]
        ev_out[j] = k
    for x in range(nx):
        nbytes, d = out_bytes[xj[x]], xd[x]
        k = _slot(xa[x], d, scale, buckets)
        alloc[k] += nbytes
        ev_xa[x] = k
        k = _slot(sent[x], d, scale, buckets)
        freed[k] += nbytes
        ev_xf[x] = k
    for o in range(n):  # outputs and scratch from the start, scratch to the end
        d = dev[o]
        k = _slot(start[o], d, scale, buckets)
        alloc[k] += temp_of[o, d] + out_total[o]
        ev_start[o] = k
    if a.any_temp:
        for o in range(n):
            d = dev[o]
            k = _slot(end[o], d, scale, buckets)
            freed[k] += temp_of[o, d]
            ev_end[o] = k


@njit(cache=True)
def _bound(s, high):
    """high[d] = max over buckets of L at the bucket's end (a lower bound on the peak);
    s.freed becomes L at each bucket's start, and a bucket that cannot beat the bound gets
    s.alloc = -1. Returns the number of candidate buckets."""
    nd, freed, alloc = high.shape[0], s.freed, s.alloc
    buckets = freed.shape[0] // nd
    candidates = 0
    for d in range(nd):
        live = np.int64(0)
        for k in range(d * buckets, (d + 1) * buckets):
            at_start = live
            live += alloc[k] - freed[k]
            freed[k] = at_start
            high[d] = max(high[d], live)
        for k in range(d * buckets, (d + 1) * buckets):
            if alloc[k] > 0 and freed[k] + alloc[k] > high[d]:
                candidates += 1
            else:
                alloc[k] = -1
    return candidates


@njit(cache=True)
def _candidates(a, w, s, nx):
    """The rows of the candidate buckets (s.alloc >= 0, by each row's s.ev_k) into s.so_t /
    s.so_b, made again from their sources (rows of 0 bytes left out); returns their number.
    A row is made only where it counts: a branch that is rarely taken (a few percent of the
    rows) costs less than making every row."""
    dev, start, end, xd, xa, xj = w.dev, w.start, w.end, w.xd, w.xa, w.xj
    out_owner, out_bytes, temp_of, out_total = a.out_owner, a.out_bytes, a.temp, a.out_total
    cfree, alloc, so_t, so_b = s.cfree, s.alloc, s.so_t, s.so_b
    n_out, n = out_bytes.shape[0], a.num_ops
    ev_out, ev_xa, ev_xf, ev_start, ev_end = _rows(s, n_out, nx, n)
    sent = cfree[n_out:]
    c = 0
    for j in range(n_out):
        if alloc[ev_out[j]] >= 0:
            nbytes = out_bytes[j]
            so_t[c], so_b[c] = cfree[j], (-nbytes << DEV_BITS) | dev[out_owner[j]]
            c += nbytes != 0
    for x in range(nx):
        if alloc[ev_xa[x]] >= 0:
            nbytes = out_bytes[xj[x]]
            so_t[c], so_b[c] = xa[x], (nbytes << DEV_BITS) | xd[x]
            c += nbytes != 0
    for x in range(nx):
        if alloc[ev_xf[x]] >= 0:
            nbytes = out_bytes[xj[x]]
            so_t[c], so_b[c] = sent[x], (-nbytes << DEV_BITS) | xd[x]
            c += nbytes != 0
    for o in range(n):
        if alloc[ev_start[o]] >= 0:
            d = dev[o]
            nbytes = temp_of[o, d] + out_total[o]
            so_t[c], so_b[c] = start[o], (nbytes << DEV_BITS) | d
            c += nbytes != 0
    if a.any_temp:
        for o in range(n):
            if alloc[ev_end[o]] >= 0:
                d = dev[o]
                temp = temp_of[o, d]
                so_t[c], so_b[c] = end[o], (-temp << DEV_BITS) | d
                c += temp != 0
    return c


@njit(cache=True)
def _sort(t_, b_, tmp_t, tmp_b, count, m, scale, top):
    """Sorts rows 0..m of (t_, b_) by (time, packed bytes), in place: a two-digit radix sort
    (LSD) on the bucket int(t * scale) in 0..top, then an insertion sort that only reorders
    rows within a bucket."""
    bits = 1
    while (1 << bits) <= top:
        bits += 1
    low = (bits + 1) // 2
    base = 1 << low
    count[:2 * base] = 0
    for i in range(m):
        q = _bucket(t_[i], scale, top)
        count[q & (base - 1)] += 1
        count[base + (q >> low)] += 1
    lo_at, hi_at = 0, 0
    for k in range(base):  # counts -> first place of each digit value
        c_lo, c_hi = count[k], count[base + k]
        count[k], count[base + k] = lo_at, hi_at
        lo_at += c_lo
        hi_at += c_hi
    for i in range(m):
        k = _bucket(t_[i], scale, top) & (base - 1)
        tmp_t[count[k]], tmp_b[count[k]] = t_[i], b_[i]
        count[k] += 1
    for i in range(m):
        k = base + (_bucket(tmp_t[i], scale, top) >> low)
        t_[count[k]], b_[count[k]] = tmp_t[i], tmp_b[i]
        count[k] += 1
    for q in range(1, m):  # in bucket order; now order within each bucket
        t, b = t_[q], b_[q]
        r = q - 1
        while r >= 0 and (t_[r] > t or (t_[r] == t and b_[r] > b)):
            t_[r + 1], b_[r + 1] = t_[r], b_[r]
            r -= 1
        t_[r + 1], b_[r + 1] = t, b


@njit(cache=True)
def peak(a, w, s, nx, step, params, high):
    """Peak bytes per device into ``high``: ``params`` (devices,) plus the peak of the
    step's rows (after ``events``; module doc)."""
    nd = high.shape[0]
    buckets = s.alloc.shape[0] // nd
    scale = buckets / step if step > 0.0 else 0.0
    high[:] = 0
    if _bound(s, high) > 0:
        c = _candidates(a, w, s, nx)
        so_t, so_b, freed, live, at = s.so_t, s.so_b, s.freed, s.live, s.at
        top = max(1, c - 1)
        _sort(so_t, so_b, s.tmp_t, s.tmp_b, s.count, c, top / step if step > 0.0 else 0.0, top)
        at[:] = -1
        for q in range(c):
            d = so_b[q] & DEV_MASK
            k = d * buckets + _bucket(so_t[q], scale, buckets - 1)
            if at[d] != k:  # a new bucket: L at its start
                at[d], live[d] = k, freed[k]
            live[d] += so_b[q] >> DEV_BITS
            high[d] = max(high[d], live[d])
    high += params
