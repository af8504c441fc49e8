"""Peak memory per device of one simulated step, from the schedule that ``gplace.sim.loop``
left in a ``Work`` (the reference's ``_peak_memory``, over arrays).

* ``events``: finds when each copy of each output can be freed (the last of: its op's end,
  its consumers' ends on that device, the arrivals of its transfers, for the sender's copy)
  and writes the step's allocations and frees as rows (time, bytes << DEV_BITS | device),
  bytes > 0 allocated, < 0 freed. In passing it sums, per device and time bucket (``buckets``
  equal slices of the step), the bytes allocated and the net change. Flat loops over outputs,
  transfers, edges (each reads the copy the event loop noted, ``Work.copy``) and ops, without
  branches on the data: nested loops of a few irregular trips each mispredicted their exits,
  and cost half of the pass.
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
    ev_k: np.ndarray   # (rows,) int32 device * buckets + bucket of each row
    count: np.ndarray  # (rows + 64,) int64 digit counts of the sort
    cfree: np.ndarray  # (copies,) when each copy goes: outputs' own, then transfers'
    alloc: np.ndarray  # (devices * buckets,) int64 bytes allocated in each bucket
    net: np.ndarray    # (devices * buckets,) int64 net change, then L at the bucket's start
    live: np.ndarray   # (devices,) int64
    at: np.ndarray     # (devices,) int64 bucket the sweep is in


@njit(cache=True)
def new_sweep(rows, copies, devices):
    buckets = 16
    while buckets < 1024 and buckets * devices * 16 < rows:
        buckets *= 2
    f, i = np.float64, np.int64
    return Sweep(np.zeros(rows, f), np.zeros(rows, i), np.zeros(rows, f), np.zeros(rows, i),
                 np.zeros(rows, f), np.zeros(rows, i), np.zeros(rows, np.int32),
                 np.zeros(rows + 64, i), np.zeros(copies, f),
                 np.zeros(devices * buckets, i), np.zeros(devices * buckets, i),
                 np.zeros(devices, i), np.zeros(devices, i))


@njit(cache=True, inline="always")
def _bucket(t, scale, top):
    """int(t * scale), kept in 0..top whatever t (events never pass the step time)."""
    return min(int(t * scale), top)


@njit(cache=True, inline="always")
def _row(r, i, t, nbytes, d, scale, buckets):
    """Writes row i into r = (ev_t, ev_b, ev_k, net, alloc) and adds it to its bucket's sums;
    returns i + 1, or i if nbytes is 0 (the row is overwritten later: no branch)."""
    ev_t, ev_b, ev_k, net, alloc = r
    k = d * buckets + _bucket(t, scale, buckets - 1)
    ev_t[i], ev_b[i], ev_k[i] = t, (nbytes << DEV_BITS) | d, k
    net[k] += nbytes
    alloc[k] += max(nbytes, 0)
    return i + (nbytes != 0)


@njit(cache=True)
def events(a, w, s, nx, step):
    """Rows into s.ev_t / s.ev_b / s.ev_k, bucket sums into s.alloc / s.net, from the schedule
    in ``w`` with its ``nx`` transfers; ``step`` is the last op's end. Returns the number of
    rows."""
    dev, start, end, xd, xa, xj, copy = w.dev, w.start, w.end, w.xd, w.xa, w.xj, w.copy
    out_owner, out_bytes, cons_op = a.out_owner, a.out_bytes, a.cons_op
    temp_of, out_total, cfree = a.temp, a.out_total, s.cfree
    r = s.ev_t, s.ev_b, s.ev_k, s.net, s.alloc  # arrays out of the record (loop.plan)
    n_out, nd = out_bytes.shape[0], a.num_devices
    buckets = s.net.shape[0] // nd
    scale = buckets / step if step > 0.0 else 0.0
    s.net[:] = 0
    s.alloc[:] = 0
    for j in range(n_out):  # an output's own copy: until its op ends, ...
        cfree[j] = end[out_owner[j]]
    for x in range(nx):  # ... and every transfer of it arrived; a copy sent: from arrival
        cfree[n_out + x] = xa[x]
        cfree[xj[x]] = max(cfree[xj[x]], xa[x])
    for e in range(cons_op.shape[0]):  # every copy: until its last reader ends
        cfree[copy[e]] = max(cfree[copy[e]], end[cons_op[e]])
    i = 0
    for j in range(n_out):
        i = _row(r, i, cfree[j], -out_bytes[j], dev[out_owner[j]], scale, buckets)
    for x in range(nx):
        nbytes = out_bytes[xj[x]]
        i = _row(r, i, xa[x], nbytes, xd[x], scale, buckets)
        i = _row(r, i, cfree[n_out + x], -nbytes, xd[x], scale, buckets)
    for o in range(a.num_ops):  # outputs and scratch from the start, scratch to the end
        d = dev[o]
        temp = temp_of[o, d]
        i = _row(r, i, start[o], temp + out_total[o], d, scale, buckets)
        i = _row(r, i, end[o], -temp, d, scale, buckets)
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
        ev_k = s.ev_k
        for i in range(m):
            so_t[c], so_b[c] = ev_t[i], ev_b[i]
            c += alloc[ev_k[i]] >= 0
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
