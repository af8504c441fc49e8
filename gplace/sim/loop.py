"""The fast simulator's event loop (the reference's, :mod:`gplace.sim.reference`, over arrays).

Per placement, ``place`` gathers the devices and op times by op id (:mod:`gplace.sim.arrays`),
then ``run_eager`` runs the loop. Tasks leave the heap (:mod:`gplace.sim.heap`) in (ready time,
key) order with the reference's keys: an op's topological rank, or ``ops + output key * devices
+ device`` for a transfer. Ops are numbered by that rank (``SimArrays``), so the heap holds an
op's number as it is, and ``key << shift | transfer`` for a transfer (>= ops): a popped task
needs no look-up. The ops without inputs (a quarter of a random DAG's) are all ready at 0 and
come in key order from a list of their own, which keeps the heap small.

A transfer is found when its op ends. One on a channel fed by a single device of one lane
(``SimArrays.eager``: 16 of post-4gpu's 20) skips the heap: that device's ops end in the order
it runs them, so its transfers reach the channel in the order the reference's heap would send
them, and are sent there and then (the half of the heap's work that transfers were). Where that
order or a strictly positive transfer time does not hold (ties in end times: zero-time ops),
``run_eager`` says so and the placement is run again by ``plan`` (every transfer listed first)
and ``run`` (every transfer through the heap), the exact general path, also used for the
per-op schedule (its transfers in the order sent).

Scratch arrays (a ``Work``) are allocated once per simulator and thread, not per placement.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from gplace.sim.heap import bits, from_bits, lt, pop, push
from gplace.sim.memory import Sweep, new_sweep


class Work(NamedTuple):
    """Scratch of one placement at a time, reused along a batch. Ops by id."""

    dev: np.ndarray        # (ops,) uint32 device of each op
    dur: np.ndarray        # (ops,) its time on that device
    ready: np.ndarray      # (ops,) latest input availability so far
    pending: np.ndarray    # (ops,) int32 inputs not yet available
    start: np.ndarray      # (ops,)
    end: np.ndarray        # (ops,)
    lane_free: np.ndarray  # (lanes,)
    chan_free: np.ndarray  # (channels,)
    heap: np.ndarray       # (2 * (ops + 2 * edges + 1),) int64 (time bits, key) pairs: ops,
    #                        transfers and receive tasks
    xptr: np.ndarray       # (outputs + 1,) uint32: output -> its transfers
    xd: np.ndarray         # (edges,) uint32: transfer -> receiving device
    xj: np.ndarray         # (edges,) uint32: transfer -> output
    xkey: np.ndarray       # (edges,) int64: its heap key
    xch: np.ndarray        # (edges,) int32: its channel
    xdur: np.ndarray       # (edges,) bytes / bandwidth
    xlat: np.ndarray       # (edges,) link latency
    xrc: np.ndarray        # (edges,) receive CPU at the receiver (0: none, no receive task)
    xs: np.ndarray         # (edges,) the link starts carrying it
    xf: np.ndarray         # (edges,) the link is free again
    xa: np.ndarray         # (edges,) it arrives at the receiver (usable then, or after its
    #                        receive task where xrc > 0)
    order: np.ndarray      # (edges,) int32: transfers in the order they were sent
    copy: np.ndarray       # (edges,) uint32: the copy an edge reads: its output j (the local
    #                        copy) or outputs + x (the copy transfer x brought) (memory.events)
    xat: np.ndarray        # (devices,) uint32: transfer of the output being sent there
    last: np.ndarray       # (2 * channels,) int64: time bits and key last sent on a channel
    arrive: np.ndarray     # (devices,) arrival there of the output being sent (-1: queued)
    seen: np.ndarray       # (devices,) int32: last output sent to each device (plan)
    params: np.ndarray     # (devices,) int64 parameter bytes
    sweep: Sweep           # scratch of the memory sweep


@njit(cache=True)
def new_work(a):
    n, nd, n_out = a.num_ops, a.num_devices, a.out_bytes.shape[0]
    ne = a.cons_op.shape[0]
    m = 2 * n + n_out + 2 * ne + 1
    f, i = np.float64, np.int32
    x = ne + 1
    u = np.uint32
    return Work(np.zeros(n, u), np.zeros(n, f), np.zeros(n, f), np.zeros(n, i), np.zeros(n, f),
                np.zeros(n, f), np.zeros(a.lane_ptr[nd], f), np.zeros(a.num_channels, f),
                np.zeros(2 * (n + 2 * ne + 1), np.int64),
                np.zeros(n_out + 1, u), np.zeros(x, u),
                np.zeros(x, u), np.zeros(x, np.int64), np.zeros(x, i), np.zeros(x, f),
                np.zeros(x, f), np.zeros(x, f), np.zeros(ne + 1, f), np.zeros(ne + 1, f),
                np.zeros(ne + 1, f), np.zeros(ne + 1, i), np.zeros(ne + 1, u), np.zeros(nd, u),
                np.zeros(2 * a.num_channels, np.int64), np.zeros(nd, f), np.zeros(nd, i),
                np.zeros(nd, np.int64), new_sweep(m, n_out + ne + 1, nd))


@njit(cache=True)
def place(a, devs, col, b, w):
    """Row b of ``devs`` (batch, columns), op i's device in column col[i] (a unit placement's
    or a graph op's), into w.dev / w.dur by id; w.ready / w.pending reset, w.params summed.
    (Arrays are taken out of the records first: numba counts references on every access to a
    record's array inside a loop, 3x slower. The gather loop has no other stores, the resets
    are whole-array copies, and parameters are summed over the ops that have some: one loop
    doing all of it took 73 us of a 10,000-op placement, these 40.)"""
    dev, dur, ready, pending, params = w.dev, w.dur, w.ready, w.pending, w.params
    cost, param_ops, param_bytes, row = a.cost, a.param_ops, a.param_bytes, devs[b]
    for o in range(a.num_ops):
        d = np.uint32(row[col[o]])
        dev[o], dur[o] = d, cost[o, d]
    ready[:] = 0.0
    pending[:] = a.indeg
    params[:] = 0
    for o in param_ops:
        params[dev[o]] += param_bytes[o]


@njit(cache=True)
def plan(a, devs, col, b, w, shift):
    """``place``, then the row's transfers into w.xptr and the w.x* columns, for ``run``, and
    w.copy. Returns the number of transfers."""
    place(a, devs, col, b, w)
    n, nd = a.num_ops, a.num_devices
    dev, seen, xat, copy = w.dev, w.seen, w.xat, w.copy
    xptr, xd, xj, xch, xkey, xdur, xlat = w.xptr, w.xd, w.xj, w.xch, w.xkey, w.xdur, w.xlat
    xrc, recv_cpu, recv_cpu_per_byte = w.xrc, a.recv_cpu, a.recv_cpu_per_byte
    out_ptr, cons_ptr, cons_op, out_key, out_bytes = (a.out_ptr, a.cons_ptr, a.cons_op,
                                                      a.out_key, a.out_bytes)
    channel, bandwidth, latency, out_repeat = a.channel, a.bandwidth, a.latency, a.out_repeat
    seen[:] = -1
    nx = 0
    n_out = out_bytes.shape[0]
    for o in range(n):
        src = dev[o]
        for j in range(out_ptr[o], out_ptr[o + 1]):
            xptr[j] = nx
            for e in range(cons_ptr[j], cons_ptr[j + 1]):
                dc = dev[cons_op[e]]
                copy[e] = j
                if dc == src:
                    continue
                if seen[dc] != j:
                    seen[dc], xat[dc] = j, nx
                    xd[nx], xj[nx], xch[nx] = dc, j, channel[src, dc]
                    xkey[nx] = (np.int64(n + out_key[j] * nd + dc) << shift) | nx
                    r = out_repeat[j]
                    xdur[nx] = out_bytes[j] / bandwidth[src, dc] * r
                    xlat[nx] = latency[src, dc] * r
                    xrc[nx] = (recv_cpu[src, dc] + recv_cpu_per_byte[src, dc] * out_bytes[j]) * r
                    nx += 1
                copy[e] = n_out + xat[dc]
    xptr[out_bytes.shape[0]] = nx
    return nx


@njit(cache=True, inline="always")
def _queue(h, size, has, qt, qk, t, k):
    """Adds (time bits t, key k) to the queue: the heap h of ``size`` entries and a slot
    (``has`` a task, its time bits ``qt`` and key ``qk``) for a task that orders before every
    heap entry (an op or transfer that is due next skips the heap); keeps that invariant.
    Returns the new (size, has, qt, qk). One push, of the later of the new task and the
    slot's, chosen without a branch. (Scalars, not an array: numba counts references to an
    array an inlined function gets, atomically, on every call.)"""
    if has or not ((size == 0) | lt(t, k, h[0], h[1])):
        swap = has & lt(t, k, qt, qk)  # the new task goes before the slot's
        pt, pk = (qt, qk) if swap else (t, k)
        qt, qk = (t, k) if swap else (qt, qk)
        size = push(h, size, pt, pk)
    else:
        has, qt, qk = 1, t, k
    return size, has, qt, qk


@njit(cache=True, inline="always")
def _task(o, ready):
    """(time bits, heap entry) of op o, ready at ready[o]: its key is its number (module
    doc)."""
    return bits(ready[o]), np.int64(o)


@njit(cache=True, inline="always")
def _ready(o, t, ready, pending):
    """An input of op o is available at t; returns whether o is now ready (at ready[o]).
    (The caller queues it: an inlined function that gets the queue's arrays costs numba
    reference counts, atomic, on every call.)"""
    r, p = max(ready[o], t), pending[o] - 1
    ready[o], pending[o] = r, p
    return p == 0


@njit(cache=True)
def run(a, w, shift, busy):
    """The placement planned in ``w`` (by ``plan``, with the same ``shift``): fills
    w.start/end, busy (devices,) and the transfer columns (w.order in the order sent).
    Returns the number of ops run."""
    n = a.num_ops
    dev, ready, pending, start, end, h = w.dev, w.ready, w.pending, w.start, w.end, w.heap
    lane_free, chan_free, dur = w.lane_free, w.chan_free, w.dur
    xptr, xd, xj, xch, xkey, xdur, xlat = w.xptr, w.xd, w.xj, w.xch, w.xkey, w.xdur, w.xlat
    xs, xf, xa, order, xrc = w.xs, w.xf, w.xa, w.order, w.xrc
    out_ptr, cons_ptr, cons_op, lane_ptr = a.out_ptr, a.cons_ptr, a.cons_op, a.lane_ptr
    ctrl_ptr, ctrl_op, latency, first = a.ctrl_ptr, a.ctrl_op, a.latency, a.sources
    op_runs = a.op_runs
    mask = (np.int64(1) << shift) - 1
    recv_base = np.int64(n + a.out_bytes.shape[0] * a.num_devices)  # receive tasks' keys
    lane_free[:] = 0.0
    chan_free[:] = 0.0
    busy[:] = 0.0
    size, has, qt, qk = 0, 0, np.int64(0), np.int64(0)  # the heap's size; the slot
    done = sent = f = 0
    while size > 0 or has or f < first.shape[0]:
        if has:
            nt, nk = qt, qk
        elif size > 0:
            nt, nk = h[0], h[1]
        if f < first.shape[0] and (not (size > 0 or has) or nt > 0
                                   or nk > first[f]):
            t, packed = 0.0, np.int64(first[f])  # ready at 0
            f += 1
        elif has:
            t, packed = from_bits(nt), nk
            has = 0
        else:
            t, packed = from_bits(nt), nk
            size = pop(h, size)
        if packed < n:
            o = np.uint32(packed)
            d = dev[o]
            lane = lane_ptr[d]
            for s in range(lane + np.uint32(1), lane_ptr[d + 1]):
                if lane_free[s] < lane_free[lane]:
                    lane = s
            st = max(t, lane_free[lane])
            en = st + dur[o]
            start[o], end[o], lane_free[lane] = st, en, en
            busy[d] += dur[o]
            done += 1
            for j in range(out_ptr[o], out_ptr[o + 1]):
                for x in range(xptr[j], xptr[j + 1]):
                    size, has, qt, qk = _queue(h, size, has, qt, qk, bits(en), xkey[x])
                for e in range(cons_ptr[j], cons_ptr[j + 1]):
                    c = cons_op[e]
                    if dev[c] == d:
                        if _ready(c, en, ready, pending):
                            tb, tk = _task(c, ready)
                            size, has, qt, qk = _queue(h, size, has, qt, qk, tb, tk)
            for e in range(ctrl_ptr[o], ctrl_ptr[o + 1]):
                c = ctrl_op[e]
                ta = en if dev[c] == d else en + latency[d, dev[c]] * op_runs[c]
                if _ready(c, ta, ready, pending):
                    tb, tk = _task(c, ready)
                    size, has, qt, qk = _queue(h, size, has, qt, qk, tb, tk)
        elif (packed >> shift) >= recv_base:  # a receive task (see plan's keys)
            x = np.uint32(packed & mask)
            j, dd = xj[x], xd[x]
            lane = lane_ptr[dd]
            for s in range(lane + np.uint32(1), lane_ptr[dd + 1]):
                if lane_free[s] < lane_free[lane]:
                    lane = s
            usable = max(t, lane_free[lane]) + xrc[x]
            lane_free[lane] = usable
            for e in range(cons_ptr[j], cons_ptr[j + 1]):
                c = cons_op[e]
                if dev[c] == dd and _ready(c, usable, ready, pending):
                    tb, tk = _task(c, ready)
                    size, has, qt, qk = _queue(h, size, has, qt, qk, tb, tk)
        else:
            x = np.uint32(packed & mask)
            j, dd, ch = xj[x], xd[x], xch[x]
            begin = max(t, chan_free[ch])
            finish = begin + xdur[x]
            chan_free[ch] = finish
            arrive = finish + xlat[x]
            xs[x], xf[x], xa[x], order[sent] = begin, finish, arrive, x
            sent += 1
            if xrc[x] > 0.0:  # its receive task: key recv_base + (transfer's key - ops)
                rk = ((xkey[x] >> shift) - n + recv_base) << shift | x
                size, has, qt, qk = _queue(h, size, has, qt, qk, bits(arrive), rk)
                continue
            for e in range(cons_ptr[j], cons_ptr[j + 1]):
                c = cons_op[e]
                if dev[c] == dd and _ready(c, arrive, ready, pending):
                    tb, tk = _task(c, ready)
                    size, has, qt, qk = _queue(h, size, has, qt, qk, tb, tk)
    return done


@njit(cache=True)
def run_eager(a, w, shift, busy):
    """As ``run`` (after ``place`` alone), with the transfers found when their op ends and
    those of a.eager channels sent there and then, without the heap. Exact when, on every
    such channel, the transfers come in strictly increasing (ready time, key), the order in
    which the reference's heap would send them, and each arrives strictly after it was ready
    (so the consumers it readies order after every task the reference takes before sending
    it). Both are checked as it goes. Returns (ops run, transfers), or (-1, 0) if a check
    failed: the caller then runs ``plan`` and ``run``."""
    n, nd = a.num_ops, a.num_devices
    dev, ready, pending, start, end, h = w.dev, w.ready, w.pending, w.start, w.end, w.heap
    lane_free, chan_free, dur, seen, arr, last = (w.lane_free, w.chan_free, w.dur, w.seen,
                                                  w.arrive, w.last)
    xd, xj, xch, xdur, xlat, xs, xf, xa, xat, copy = (w.xd, w.xj, w.xch, w.xdur, w.xlat, w.xs,
                                                      w.xf, w.xa, w.xat, w.copy)
    out_ptr, cons_ptr, cons_op, lane_ptr, out_key = (a.out_ptr, a.cons_ptr, a.cons_op,
                                                     a.lane_ptr, a.out_key)
    ctrl_ptr, ctrl_op, latency, first = a.ctrl_ptr, a.ctrl_op, a.latency, a.sources
    op_runs, out_repeat = a.op_runs, a.out_repeat
    channel, bandwidth, out_bytes, eager, cons_out = (a.channel, a.bandwidth, a.out_bytes,
                                                      a.eager, a.cons_out)
    mask = (np.int64(1) << shift) - 1
    n_out = out_bytes.shape[0]
    lane_free[:] = 0.0
    chan_free[:] = 0.0
    busy[:] = 0.0
    seen[:] = -1
    last[:] = 0  # before every task (heap.lt compares unsigned)
    size, has, qt, qk = 0, 0, np.int64(0), np.int64(0)  # the heap's size; the slot
    done = nx = f = 0
    while size > 0 or has or f < first.shape[0]:
        if has:
            nt, nk = qt, qk
        elif size > 0:
            nt, nk = h[0], h[1]
        if f < first.shape[0] and (not (size > 0 or has) or nt > 0
                                   or nk > first[f]):
            t, packed = 0.0, np.int64(first[f])  # ready at 0
            f += 1
        elif has:
            t, packed = from_bits(nt), nk
            has = 0
        else:
            t, packed = from_bits(nt), nk
            size = pop(h, size)
        if packed < n:
            o = np.uint32(packed)
            d = dev[o]
            lane = lane_ptr[d]
            for s in range(lane + np.uint32(1), lane_ptr[d + 1]):
                if lane_free[s] < lane_free[lane]:
                    lane = s
            st = max(t, lane_free[lane])
            en = st + dur[o]
            start[o], end[o], lane_free[lane] = st, en, en
            busy[d] += dur[o]
            done += 1
            ben = bits(en)
            for e in range(cons_ptr[out_ptr[o]], cons_ptr[out_ptr[o + 1]]):  # by output
                j, c = cons_out[e], cons_op[e]
                dc = dev[c]
                if dc == d:
                    copy[e] = j
                    if _ready(c, en, ready, pending):
                        tb, tk = _task(c, ready)
                        size, has, qt, qk = _queue(h, size, has, qt, qk, tb, tk)
                    continue
                if seen[dc] != j:  # the first consumer there: send j
                    seen[dc], xat[dc] = j, nx
                    ch = channel[d, dc]
                    k = np.int64(n + out_key[j] * nd + dc)
                    xd[nx], xj[nx] = dc, j
                    if eager[ch]:
                        if lt(ben, k, last[2 * ch], last[2 * ch + 1]):
                            return -1, 0
                        last[2 * ch], last[2 * ch + 1] = ben, k
                        begin = max(en, chan_free[ch])
                        finish = begin + out_bytes[j] / bandwidth[d, dc] * out_repeat[j]
                        chan_free[ch] = finish
                        arrive = finish + latency[d, dc] * out_repeat[j]
                        if not arrive > en:
                            return -1, 0
                        xs[nx], xf[nx], xa[nx], arr[dc] = begin, finish, arrive, arrive
                    else:
                        xch[nx], xdur[nx] = ch, out_bytes[j] / bandwidth[d, dc] * out_repeat[j]
                        xlat[nx], arr[dc] = latency[d, dc] * out_repeat[j], -1.0
                        size, has, qt, qk = _queue(h, size, has, qt, qk, ben, (k << shift) | nx)
                    nx += 1
                copy[e] = n_out + xat[dc]
                if arr[dc] >= 0.0:
                    if _ready(c, arr[dc], ready, pending):
                        tb, tk = _task(c, ready)
                        size, has, qt, qk = _queue(h, size, has, qt, qk, tb, tk)
            for e in range(ctrl_ptr[o], ctrl_ptr[o + 1]):
                c = ctrl_op[e]
                ta = en if dev[c] == d else en + latency[d, dev[c]] * op_runs[c]
                if _ready(c, ta, ready, pending):
                    tb, tk = _task(c, ready)
                    size, has, qt, qk = _queue(h, size, has, qt, qk, tb, tk)
        else:
            x = np.uint32(packed & mask)
            j, dd, ch = xj[x], xd[x], xch[x]
            begin = max(t, chan_free[ch])
            finish = begin + xdur[x]
            chan_free[ch] = finish
            arrive = finish + xlat[x]
            xs[x], xf[x], xa[x] = begin, finish, arrive
            for e in range(cons_ptr[j], cons_ptr[j + 1]):
                c = cons_op[e]
                if dev[c] == dd and _ready(c, arrive, ready, pending):
                    tb, tk = _task(c, ready)
                    size, has, qt, qk = _queue(h, size, has, qt, qk, tb, tk)
    return done, nx
