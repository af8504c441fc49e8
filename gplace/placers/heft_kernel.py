"""HEFT's upward rank and its scheduling loop compiled with numba: the same steps and float
operations as :func:`gplace.placers.heuristics_list.upward_rank_reference` and
:func:`gplace.placers.heuristics_list.heft_reference` (the plain references, which the tests
run against these), so ranks and placements are identical.

HEFT pops the ready op of highest rank (ties: topological position); keys are distinct (one
entry per op), so any heap pops them in Python heapq's order. All of the kernel's functions
live in this one file (numba's cache is keyed by each function's own file).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def upward_rank(mean_cost, order, succ_ptr, succ_op, succ_bytes, succ_rep, mean_lat,
                mean_inv_bw):
    """(ops,) rank_u(o) = mean cost(o) + max over consumers c of (mean comm(o, c) + rank_u(c)),
    mean comm(o, c) = mean latency * rep + bytes * mean inverse bandwidth * rep."""
    rank = mean_cost.copy()
    for i in range(order.shape[0] - 1, -1, -1):
        op = order[i]
        lo, hi = succ_ptr[op], succ_ptr[op + 1]
        if lo < hi:
            best = 0.0
            for e in range(lo, hi):
                r = succ_rep[e]
                v = (mean_lat * r + succ_bytes[e] * mean_inv_bw * r) + rank[succ_op[e]]
                if e == lo or v > best:
                    best = v
            rank[op] += best
    return rank


@njit(cache=True, inline="always")
def _less(key, pos, i, j):
    return key[i] < key[j] or (key[i] == key[j] and pos[i] < pos[j])


@njit(cache=True)
def _push(key, pos, op, size, k_new, p_new, o_new):
    k = size
    key[k], pos[k], op[k] = k_new, p_new, o_new
    while k > 0:
        parent = (k - 1) >> 1
        if not _less(key, pos, k, parent):
            break
        key[k], key[parent] = key[parent], key[k]
        pos[k], pos[parent] = pos[parent], pos[k]
        op[k], op[parent] = op[parent], op[k]
        k = parent
    return size + 1


@njit(cache=True)
def _pop(key, pos, op, size):
    """Removes the top (read it first at [0]); returns the new size."""
    last = size - 1
    key[0], pos[0], op[0] = key[last], pos[last], op[last]
    k = 0
    while True:
        a, b, m = 2 * k + 1, 2 * k + 2, k
        if a < last and _less(key, pos, a, m):
            m = a
        if b < last and _less(key, pos, b, m):
            m = b
        if m == k:
            break
        key[k], key[m] = key[m], key[k]
        pos[k], pos[m] = pos[m], pos[k]
        op[k], op[m] = op[m], op[k]
        k = m
    return last


@njit(cache=True)
def heft(rank, position, pred_ptr, pred_op, pred_bytes, pred_rep, succ_ptr, succ_op, latency,
         inv_bw, time_s, unit_of_op, num_units, lanes):
    """(unit_dev, finish): each op, by decreasing rank, on the device with the earliest
    finish (insertion-free; a unit's later ops on its first op's device)."""
    n, nd = time_s.shape[0], time_s.shape[1]
    pending = np.empty(n, np.int64)
    for o in range(n):
        pending[o] = pred_ptr[o + 1] - pred_ptr[o]
    key, pos, ops = np.empty(max(n, 1)), np.empty(max(n, 1), np.int64), np.empty(max(n, 1), np.int64)
    size = 0
    for o in range(n):
        if pending[o] == 0:
            size = _push(key, pos, ops, size, -rank[o], position[o], o)
    finish, op_dev = np.zeros(n), np.full(n, -1, np.int64)
    unit_dev = np.full(num_units, -1, np.int64)
    clocks = np.full((nd, max(1, lanes.max()) if nd else 1), np.inf)
    for d in range(nd):
        clocks[d, :lanes[d]] = 0.0
    free = np.zeros(nd)
    start, eft = np.empty(nd), np.empty(nd)
    while size:
        op = ops[0]
        size = _pop(key, pos, ops, size)
        u = unit_of_op[op]
        lo, hi = pred_ptr[op], pred_ptr[op + 1]
        for d in range(nd):  # max(data ready, device free), as heuristics_view.data_ready
            r = 0.0
            for e in range(lo, hi):
                q = pred_op[e]
                a = op_dev[q]
                r_e = pred_rep[e]
                v = finish[q] + latency[a, d] * r_e + pred_bytes[e] * inv_bw[a, d] * r_e
                if e == lo or v > r:
                    r = v
            start[d] = r if r >= free[d] else free[d]
            allowed = unit_dev[u] < 0 or unit_dev[u] == d
            eft[d] = start[d] + time_s[op, d] if allowed else np.inf
        d = np.argmin(eft)
        op_dev[op], unit_dev[u] = d, d
        k = np.argmin(clocks[d])
        clocks[d, k] = start[d] + time_s[op, d]
        free[d] = clocks[d].min()
        finish[op] = start[d] + time_s[op, d]
        for e in range(succ_ptr[op], succ_ptr[op + 1]):
            c = succ_op[e]
            pending[c] -= 1
            if pending[c] == 0:
                size = _push(key, pos, ops, size, -rank[c], position[c], c)
    return unit_dev, finish
