"""Peak memory per device of one simulated step, from the schedule that ``gplace.sim.loop``
left in a ``Work`` (the reference's ``_peak_memory``, over arrays).

* ``events``: one pass over the ops finds when each copy of each output can be freed (the
  last of: its op's end, its consumers' ends on that device, the arrivals of its transfers,
  for the sender's copy) and writes the step's allocations and frees as rows
  (time, bytes << DEV_BITS | device), bytes > 0 allocated, < 0 freed. In passing it sums,
  per device and time bucket (``buckets`` equal slices of the step), the bytes allocated and
  the net change.
* ``peak``: the live bytes L(t) after all events at time t peak at some event time, and the
  reference's sweep (frees before allocations within an instant) finds exactly max_t L(t).
  L at the end of a bucket is a value L takes, so max over buckets of it is a lower bound; a
  bucket can only beat it if L at its start plus its allocations does. Only those buckets'
  rows (a few percent on the benchmark graph) are sorted (radix by bucket, then insertion)
  and swept: branch and bound instead of sorting every row.
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

    ev_t: np.ndarray   # (rows,) event times
    ev_b: np.ndarray   # (rows,) int64 bytes << DEV_BITS | device
    so_t: np.ndarray   # (rows,) the rows of the candidate buckets, then sorted
    so_b: np.ndarray
    tmp_t: np.ndarray  # (rows,) radix sort buffer
    tmp_b: np.ndarray
    count: np.ndarray  # (rows + 64,) int64 digit counts of the sort
    alloc: np.ndarray  # (devices * buckets,) int64 bytes allocated in each bucket
    net: np.ndarray    # (devices * buckets,) int64 net change, then L at the bucket's start
    live: np.ndarray   # (devices,) int64
    at: np.ndarray     # (devices,) int64 bucket the sweep is in


@njit(cache=True)
def new_sweep(rows, devices):
    buckets = 16
    while buckets < 1024 and buckets * devices * 16 < rows:
        buckets *= 2
    f, i = np.float64, np.int64
    return Sweep(np.zeros(rows, f), np.zeros(rows, i), np.zeros(rows, f), np.zeros(rows, i),
                 np.zeros(rows, f), np.zeros(rows, i), np.zeros(rows + 64, i),
                 np.zeros(devices * buckets, i), np.zeros(devices * buckets, i),
                 np.zeros(devices, i), np.zeros(devices, i))


@njit(cache=True, inline="always")
def _bucket(t, scale, top):
    """int(t * scale), kept in 0..top whatever t (events never pass the step time)."""
    return min(int(t * scale), top)


@njit(cache=True, inline="always")
def _row(ev_t, ev_b, net, alloc, i, t, nbytes, d, scale, buckets):
    """Writes row i and adds it to its bucket's sums; returns i + 1."""
    ev_t[i], ev_b[i] = t, (nbytes << DEV_BITS) | d
    k = d * buckets + _bucket(t, scale, buckets - 1)
    net[k] += nbytes
    if nbytes > 0:
        alloc[k] += nbytes
    return i + 1


@njit(cache=True)
def events(a, w, s, free, step):
    """Rows into s.ev_t / s.ev_b, bucket sums into s.alloc / s.net; ``free`` is (devices,)
    scratch, ``step`` the last op's end. Returns the number of rows."""
    dev, start, end, xd, xa, xj, xo, xn = w.dev, w.start, w.end, w.xd, w.xa, w.xj, w.xo, w.xn
    ev_t, ev_b, net, alloc = s.ev_t, s.ev_b, s.net, s.alloc
    out_ptr, out_bytes, cons_ptr, cons_op = a.out_ptr, a.out_bytes, a.cons_ptr, a.cons_op
    temp_of, out_total = a.temp, a.out_total
    buckets = net.shape[0] // a.num_devices
    scale = buckets / step if step > 0.0 else 0.0
    net[:] = 0
    alloc[:] = 0
    i = 0
    for o in range(a.num_ops):
        d = dev[o]
        x1, x_end = xo[o], xo[o] + xn[o]  # the op's transfers, by output
        for j in range(out_ptr[o], out_ptr[o + 1]):
            x0 = x1
            while x1 < x_end and xj[x1] == j:
                x1 += 1
            nbytes = out_bytes[j]
            if nbytes == 0:
                continue
            free[d] = end[o]
            for x in range(x0, x1):
                free[xd[x]] = xa[x]
                free[d] = max(free[d], xa[x])
            for e in range(cons_ptr[j], cons_ptr[j + 1]):
                c = cons_op[e]
                free[dev[c]] = max(free[dev[c]], end[c])
            i = _row(ev_t, ev_b, net, alloc, i, free[d], -nbytes, d, scale, buckets)
            for x in range(x0, x1):
                dd = xd[x]
                i = _row(ev_t, ev_b, net, alloc, i, xa[x], nbytes, dd, scale, buckets)
                i = _row(ev_t, ev_b, net, alloc, i, free[dd], -nbytes, dd, scale, buckets)
        temp = temp_of[o, d]
        size = temp + out_total[o]
        if size != 0:
            i = _row(ev_t, ev_b, net, alloc, i, start[o], size, d, scale, buckets)
        if temp != 0:
            i = _row(ev_t, ev_b, net, alloc, i, end[o], -temp, d, scale, buckets)
    return i


@njit(cache=True)
def _bound(s, high):
    """high[d] = max over buckets of L at the bucket's end (a lower bound on the peak);
    s.net becomes L at each bucket's start, and a bucket that cannot beat the bound gets
    s.alloc = -1. Returns the number of candidate buckets."""
    nd, net, alloc = high.shape[0], s.net, s.alloc
    buckets = net.shape[0] // nd
    candidates = 0
    for d in range(nd):
        live = np.int64(0)
        for k in range(d * buckets, (d + 1) * buckets):
            live += net[k]
            net[k] = live - net[k]
            high[d] = max(high[d], live)
        for k in range(d * buckets, (d + 1) * buckets):
            if alloc[k] > 0 and net[k] + alloc[k] > high[d]:
                candidates += 1
            else:
                alloc[k] = -1
    return candidates


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
def peak(s, m, step, params, high):
    """Peak bytes per device into ``high``: ``params`` (devices,) plus the peak of the m
    events (module doc)."""
    nd = high.shape[0]
    buckets = s.net.shape[0] // nd
    scale = buckets / step if step > 0.0 else 0.0
    ev_t, ev_b, so_t, so_b, alloc, net = s.ev_t, s.ev_b, s.so_t, s.so_b, s.alloc, s.net
    live, at = s.live, s.at
    high[:] = 0
    if m > 0 and _bound(s, high) > 0:
        c = 0  # the rows of the candidate buckets
        for i in range(m):
            d = ev_b[i] & DEV_MASK
            if alloc[d * buckets + _bucket(ev_t[i], scale, buckets - 1)] >= 0:
                so_t[c], so_b[c] = ev_t[i], ev_b[i]
                c += 1
        top = max(1, c - 1)
        _sort(so_t, so_b, s.tmp_t, s.tmp_b, s.count, c, top / step if step > 0.0 else 0.0, top)
        at[:] = -1
        for q in range(c):
            d = so_b[q] & DEV_MASK
            k = d * buckets + _bucket(so_t[q], scale, buckets - 1)
            if at[d] != k:  # a new bucket: L at its start
                at[d], live[d] = k, net[k]
            live[d] += so_b[q] >> DEV_BITS
            high[d] = max(high[d], live[d])
    high += params
