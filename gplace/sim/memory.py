"""Peak memory per device of one simulated step, from the schedule that ``gplace.sim.loop``
left in a ``Work`` (the reference's ``_peak_memory``, over arrays).

* ``events``: one pass over the ops finds when each copy of each output can be
  freed (the last of: its op's end, its consumers' ends on that device, the arrivals of its
  transfers, for the sender's copy) and writes the step's allocations and frees as rows
  (time, bytes << DEV_BITS | device), bytes > 0 allocated, < 0 freed;
* ``peak``: a sweep over them in time order (bucket sort), frees before allocations within one
  instant, as the reference's per-device sort does.
"""

from __future__ import annotations

import numpy as np
from numba import njit

DEV_BITS = 16  # a memory event packs its device into the low bits of its byte count
DEV_MASK = (1 << DEV_BITS) - 1
MAX_BYTES = 1 << (62 - DEV_BITS)  # bytes one op may allocate at once (2^46 B = 64 TiB)


@njit(cache=True, inline="always")
def _row(ev_t, ev_b, i, t, nbytes, d):
    ev_t[i], ev_b[i] = t, (nbytes << DEV_BITS) | d
    return i + 1


@njit(cache=True)
def events(a, w, free):
    """Rows into w.ev_t / w.ev_b; ``free`` is (devices,) scratch. Returns the number of rows."""
    dev, start, end, xd, xa, xptr = w.dev, w.start, w.end, w.xd, w.xa, w.xptr
    ev_t, ev_b = w.ev_t, w.ev_b
    i = 0
    for o in range(a.num_ops):
        d = dev[o]
        for j in range(a.out_ptr[o], a.out_ptr[o + 1]):
            nbytes = a.out_bytes[j]
            if nbytes == 0:
                continue
            free[d] = end[o]
            for x in range(xptr[j], xptr[j + 1]):
                free[xd[x]] = xa[x]
                free[d] = max(free[d], xa[x])
            for e in range(a.cons_ptr[j], a.cons_ptr[j + 1]):
                c = a.cons_op[e]
                free[dev[c]] = max(free[dev[c]], end[c])
            i = _row(ev_t, ev_b, i, free[d], -nbytes, d)
            for x in range(xptr[j], xptr[j + 1]):
                i = _row(ev_t, ev_b, i, xa[x], nbytes, xd[x])
                i = _row(ev_t, ev_b, i, free[xd[x]], -nbytes, xd[x])
        temp = a.temp[o, d]
        if temp + a.out_total[o] != 0:
            i = _row(ev_t, ev_b, i, start[o], temp + a.out_total[o], d)
        if temp != 0:
            i = _row(ev_t, ev_b, i, end[o], -temp, d)
    return i


@njit(cache=True)
def peak(a, w, m, high):
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
            d = so_b[q] & DEV_MASK
            live[d] += so_b[q] >> DEV_BITS
            high[d] = max(high[d], live[d])
    for o in range(a.num_ops):
        high[w.dev[o]] += a.param_bytes[o]
