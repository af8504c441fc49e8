"""m-ETF and m-SCT's list-scheduling loop compiled with numba: the same steps as
:class:`gplace.placers.heuristics_list.EtfScheduler` (the plain reference, which the tests run
against this one), in the same order, with the same float operations, so the placements are
identical.

Each device has two heaps of ready ops: ``waiting`` keyed by (data-ready time, topological
position), ``avail`` by position. An op holds at most one entry per device (it is re-targeted
only once all its entries were dropped), so a heap never holds more than ``ops`` entries, and
its keys are distinct: any heap pops them in the same order as Python's heapq.

All the kernel's functions live in this one file: numba's cache is keyed by each function's
own file, so a kernel split over files could run a stale callee after an edit.
"""

from __future__ import annotations

import numpy as np
from numba import njit


# ---- heaps over rows of 2-D arrays -----------------------------------------------------------
@njit(cache=True, inline="always")
def _less(t, p, i, j):
    return t[i] < t[j] or (t[i] == t[j] and p[i] < p[j])


@njit(cache=True)
def _wpush(t, p, size, d, time, pos):
    """Pushes (time, pos) onto device d's waiting heap (rows t[d], p[d])."""
    tt, pp = t[d], p[d]
    k = size[d]
    size[d] = k + 1
    tt[k], pp[k] = time, pos
    while k > 0:
        parent = (k - 1) >> 1
        if _less(tt, pp, k, parent):
            tt[k], tt[parent] = tt[parent], tt[k]
            pp[k], pp[parent] = pp[parent], pp[k]
            k = parent
        else:
            break


@njit(cache=True)
def _wpop(t, p, size, d):
    """Removes the top of device d's waiting heap (read it first at [d, 0])."""
    tt, pp = t[d], p[d]
    last = size[d] - 1
    size[d] = last
    tt[0], pp[0] = tt[last], pp[last]
    k = 0
    while True:
        a, b, m = 2 * k + 1, 2 * k + 2, k
        if a < last and _less(tt, pp, a, m):
            m = a
        if b < last and _less(tt, pp, b, m):
            m = b
        if m == k:
            break
        tt[k], tt[m] = tt[m], tt[k]
        pp[k], pp[m] = pp[m], pp[k]
        k = m


@njit(cache=True)
def _apush(p, size, d, pos):
    """Pushes pos onto device d's avail heap (row p[d])."""
    pp = p[d]
    k = size[d]
    size[d] = k + 1
    pp[k] = pos
    while k > 0:
        parent = (k - 1) >> 1
        if pp[k] < pp[parent]:
            pp[k], pp[parent] = pp[parent], pp[k]
            k = parent
        else:
            break


@njit(cache=True)
def _apop(p, size, d):
    """Removes the top of device d's avail heap."""
    pp = p[d]
    last = size[d] - 1
    size[d] = last
    pp[0] = pp[last]
    k = 0
    while True:
        a, b, m = 2 * k + 1, 2 * k + 2, k
        if a < last and pp[a] < pp[m]:
            m = a
        if b < last and pp[b] < pp[m]:
            m = b
        if m == k:
            break
        pp[k], pp[m] = pp[m], pp[k]
        k = m


# ---- the scheduler's steps (EtfScheduler's methods of the same names) ------------------------
@njit(cache=True)
def _data_ready(op, pred_ptr, pred_op, pred_bytes, pred_rep, latency, inv_bw, finish, op_dev,
                out):
    """out[d] = when every input of op can be on device d (heuristics_view.data_ready): a
    producer's finish + (latency + bytes / bandwidth) * rep, written as there."""
    nd = out.shape[0]
    lo, hi = pred_ptr[op], pred_ptr[op + 1]
    for d in range(nd):
        out[d] = 0.0
    if lo == hi:
        return
    for d in range(nd):
        best = -np.inf
        for e in range(lo, hi):
            q = pred_op[e]
            a = op_dev[q]
            r = pred_rep[e]
            v = finish[q] + latency[a, d] * r + pred_bytes[e] * inv_bw[a, d] * r
            if v > best or e == lo:
                best = v
        out[d] = best


@njit(cache=True)
def _targets(op, unit_of_op, unit_dev, unit_need, primary, free_mem, forced, out):
    """Writes the devices op may go to into out; returns how many (EtfScheduler._targets)."""
    u = unit_of_op[op]
    if unit_dev[u] >= 0:
        out[0] = unit_dev[u]
        return 1
    need = unit_need[u]
    k = 0
    for d in primary:
        if free_mem[d] >= need:
            out[k] = d
            k += 1
    if k:
        return k
    for d in range(free_mem.shape[0]):
        if free_mem[d] >= need:
            out[k] = d
            k += 1
    if k:
        return k
    forced[op] = True
    out[0] = np.argmax(free_mem)
    return 1


@njit(cache=True)
def _valid(op, d, op_dev, unit_of_op, unit_dev, forced, free_mem, unit_need):
    if op_dev[op] >= 0:
        return False
    u = unit_of_op[op]
    if unit_dev[u] >= 0:
        return unit_dev[u] == d
    return forced[op] or free_mem[d] >= unit_need[u]


@njit(cache=True)
def schedule(position, order, pred_ptr, pred_op, pred_bytes, pred_rep, succ_ptr, succ_op,
             latency, inv_bw, time_s, unit_of_op, unit_need, capacity, primary, lanes, fav,
             use_fav):
    """(unit_dev, finish, overflow): Baechi's m-ETF (``use_fav`` False) or m-SCT (favourite
    children ``fav``). ``lanes[d]``: device d's lanes. The arguments are an OpView's arrays,
    the problem's time_s and unit_of_op, and compute_devices' ``primary``."""
    n, nd = time_s.shape[0], time_s.shape[1]
    num_units = unit_need.shape[0]
    finish = np.zeros(n)
    op_dev = np.full(n, -1, np.int64)
    unit_dev = np.full(num_units, -1, np.int64)
    free_mem = capacity.copy()
    pending = np.empty(n, np.int64)
    for o in range(n):
        pending[o] = pred_ptr[o + 1] - pred_ptr[o]
    ready_at = np.zeros((n, nd))
    live = np.zeros(n, np.int64)
    forced = np.zeros(n, np.bool_)
    last = np.full(nd, -1, np.int64)
    clocks = np.full((nd, max(1, lanes.max()) if nd else 1), np.inf)
    for d in range(nd):
        clocks[d, :lanes[d]] = 0.0
    free = np.zeros(nd)
    w_t, w_p = np.empty((nd, max(n, 1))), np.empty((nd, max(n, 1)), np.int64)
    a_p = np.empty((nd, max(n, 1)), np.int64)
    w_size, a_size = np.zeros(nd, np.int64), np.zeros(nd, np.int64)
    tbuf = np.empty(max(nd, 1), np.int64)
    overflow = 0

    for o in range(n):
        if pending[o] == 0:
            _make_ready(o, position, pred_ptr, pred_op, pred_bytes, pred_rep, latency, inv_bw,
                        finish, op_dev, ready_at, unit_of_op, unit_dev, unit_need, primary,
                        free_mem, forced, tbuf, w_t, w_p, w_size, live)
    cand = np.empty(4)  # scratch for one candidate: start, rule, position, device
    for _ in range(n):
        found = False
        for attempt in range(2):
            found = False
            best_start, best_rule, best_pos, best_d = 0.0, 0, 0, 0
            for d in range(nd):
                ok = _candidate(d, cand, position, order, pred_ptr, pred_op, pred_bytes,
                                pred_rep, latency, inv_bw, finish, op_dev, ready_at,
                                unit_of_op, unit_dev, unit_need, primary, free_mem, forced,
                                tbuf, w_t, w_p, w_size, a_p, a_size, live, pending, last, free,
                                fav, use_fav)
                if not ok:
                    continue
                s, r, pos = cand[0], int(cand[1]), int(cand[2])
                if (not found or s < best_start
                        or (s == best_start and (r < best_rule
                                                 or (r == best_rule and pos < best_pos)))):
                    best_start, best_rule, best_pos, best_d = s, r, pos, d
                    found = True
            if found:
                break
        if not found:
            raise AssertionError("m-ETF found no schedulable op; the graph view is "
                                 "inconsistent")
        op, d, start = order[best_pos], best_d, best_start
        # _assign
        u = unit_of_op[op]
        if unit_dev[u] < 0:
            unit_dev[u] = d
            free_mem[d] -= unit_need[u]
            overflow += int(forced[op])
        op_dev[op], last[d] = d, op
        k = np.argmin(clocks[d])
        clocks[d, k] = start + time_s[op, d]
        free[d] = clocks[d].min()
        finish[op] = start + time_s[op, d]
        for e in range(succ_ptr[op], succ_ptr[op + 1]):
            c = succ_op[e]
            pending[c] -= 1
            if pending[c] == 0:
                _make_ready(c, position, pred_ptr, pred_op, pred_bytes, pred_rep, latency, inv_bw,
                            finish, op_dev, ready_at, unit_of_op, unit_dev, unit_need,
                            primary, free_mem, forced, tbuf, w_t, w_p, w_size, live)
    return unit_dev, finish, overflow


@njit(cache=True)
def _make_ready(op, position, pred_ptr, pred_op, pred_bytes, pred_rep, latency, inv_bw, finish,
                op_dev, ready_at, unit_of_op, unit_dev, unit_need, primary, free_mem, forced,
                tbuf, w_t, w_p, w_size, live):
    _data_ready(op, pred_ptr, pred_op, pred_bytes, pred_rep, latency, inv_bw, finish, op_dev,
                ready_at[op])
    k = _targets(op, unit_of_op, unit_dev, unit_need, primary, free_mem, forced, tbuf)
    for i in range(k):
        d = tbuf[i]
        _wpush(w_t, w_p, w_size, d, ready_at[op, d], position[op])
        live[op] += 1


@njit(cache=True)
def _drop(op, position, pred_ptr, pred_op, pred_bytes, pred_rep, latency, inv_bw, finish,
          op_dev, ready_at, unit_of_op, unit_dev, unit_need, primary, free_mem, forced, tbuf,
          w_t, w_p, w_size, live):
    """One heap entry of op turned invalid; re-target op when none is left."""
    live[op] -= 1
    if live[op] == 0 and op_dev[op] < 0:
        _make_ready(op, position, pred_ptr, pred_op, pred_bytes, pred_rep, latency, inv_bw,
                    finish, op_dev, ready_at, unit_of_op, unit_dev, unit_need, primary,
                    free_mem, forced, tbuf, w_t, w_p, w_size, live)


@njit(cache=True)
def _candidate(d, cand, position, order, pred_ptr, pred_op, pred_bytes, pred_rep, latency,
               inv_bw, finish, op_dev, ready_at, unit_of_op, unit_dev, unit_need, primary,
               free_mem, forced, tbuf, w_t, w_p, w_size, a_p, a_size, live, pending, last, free,
               fav, use_fav):
    """Device d's best pair into cand (start, rule, position, d); False if none."""
    now = free[d]
    if use_fav and last[d] >= 0:
        c = fav[last[d]]
        if c >= 0 and pending[c] <= 0 and _valid(c, d, op_dev, unit_of_op, unit_dev, forced,
                                                 free_mem, unit_need):
            r = ready_at[c, d]
            cand[0] = r if r > now else now
            cand[1], cand[2], cand[3] = 0, position[c], d
            return True
    while w_size[d] and w_t[d, 0] <= now:
        pos = w_p[d, 0]
        _wpop(w_t, w_p, w_size, d)
        _apush(a_p, a_size, d, pos)
    while a_size[d]:
        op = order[a_p[d, 0]]
        if _valid(op, d, op_dev, unit_of_op, unit_dev, forced, free_mem, unit_need):
            break
        _apop(a_p, a_size, d)
        _drop(op, position, pred_ptr, pred_op, pred_bytes, pred_rep, latency, inv_bw, finish,
              op_dev, ready_at, unit_of_op, unit_dev, unit_need, primary, free_mem, forced, tbuf,
              w_t, w_p, w_size, live)
    if a_size[d]:
        cand[0], cand[1], cand[2], cand[3] = now, 1, a_p[d, 0], d
        return True
    while w_size[d]:
        op = order[w_p[d, 0]]
        if _valid(op, d, op_dev, unit_of_op, unit_dev, forced, free_mem, unit_need):
            break
        _wpop(w_t, w_p, w_size, d)
        _drop(op, position, pred_ptr, pred_op, pred_bytes, pred_rep, latency, inv_bw, finish,
              op_dev, ready_at, unit_of_op, unit_dev, unit_need, primary, free_mem, forced, tbuf,
              w_t, w_p, w_size, live)
    if w_size[d]:
        cand[0], cand[1], cand[2], cand[3] = w_t[d, 0], 1, w_p[d, 0], d
        return True
    return False
