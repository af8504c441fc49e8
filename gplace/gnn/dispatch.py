"""The rollout in dispatch order: ops taken in the order the simulator starts them.

The rank-order rollout (gplace.gnn.schedule) appends ops to their device's lanes in HEFT's
upward-rank order, while the simulator (gplace.sim.reference) serves each device's ready ops
first-ready-first-served (ties: topological position) on the lane that frees first; for the
same placement the two schedules differ and so do the rollout's estimate and its features
(pretrain/ORDER.md: the rank-order estimate of good placements is 1.155x their simulated time).

Here the rollout always takes next the ready op (its producers scheduled) of earliest start,
key (earliest start, data ready, topological position), start = max(data ready on its device,
that device's earliest-free lane). A placed unit's op has one device; for the first ready op of
an unplaced unit the key is the minimum over devices, and the unit's device is chosen (as in the
rank order: features, mask, policy) when that op comes first; the op then waits for its turn on
the chosen device. A device's start is increasing in the data-ready time, so each device serves
its ops in data-ready order, as the simulator does.

Keys need no re-evaluation as lanes fill: a placed op waits in its device's heap keyed (data
ready there, position), fixed once it is ready; an unplaced unit's ready op waits in every
device's heap of unplaced ops, keyed the same on that device, so the minimum over devices of
max(data ready, lane free) is the minimum over the tops of the heaps. Entries of ops decided
since are dropped, or moved to their device's heap, when they reach a top, before the next op
is taken. ESTIMATE replays, whose devices are all known, put an op that becomes ready straight
on its device's heap (:func:`dispatch_resume`): the same schedule with less heap work.

Transfers: data ready = producer end + latency + bytes / bandwidth, the rank-order rollout's
model, where no transfer waits for its link. ESTIMATE replays of a placement (every unit's
device known from the start) may instead book transfers on the links' FIFO channels as the
simulator sends them (``channel`` given; SchedArrays.contention): when an op ends, one
transfer to each other device that one of its consumers is placed on, of the largest bytes a
consumer there reads from it (times its loop repeats), queued on its channel (:func:`_send`),
arriving its repeats' latency after. Decision rollouts (features, sampling) keep the model
without waits, the one the policy was trained on.

What still differs from the simulator:

* transfers: without booking, no channel contention (the simulator's FIFO per device pair or
  shared bus); with it, channels are booked in the order ops start, not in the order their
  transfers become ready (they differ on a device of several lanes and on a bus several
  devices send on; :func:`_send` fills idle gaps to make up for it), and a producer's outputs
  go to a device as one transfer, of the largest bytes one consumer there reads (the
  simulator sends each output once per device);
* receive tasks (links with ``recv_cpu_s``): run on the receiving lane just before their
  consumer, once per producer and device (gplace.gnn.decision.receive_time), where the
  simulator runs one per tensor and device when it arrives;
* ties at equal times between an op and a transfer (the simulator orders all tasks by one key).

Where no transfer waits for a channel and no link charges a receive task, the forced rollout's
estimate of a placement is its simulated step time up to rounding (tests/gnn/test_schedule.py);
on the order probe's cases see pretrain/ORDER.md.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from gplace.gnn.decision import data_ready as ready_on
from gplace.gnn.decision import (ESTIMATE, arrival, decide, lane_free, mark_received,
                                 receive_time, run_on_lane)
from gplace.sim.heap import bits, from_bits, pop, push

WAITING, UNPLACED, PLACED, DONE = 0, 1, 2, 3  # an op's state


@njit(cache=True, nogil=True)
def dispatch_rollout(position, pred_ptr, pred_op, pred_bytes, pred_rep, succ_ptr, succ_op, cost,
                     unit_of_op, unit_cost, adj_ptr, adj_unit, adj_bytes, lane_ptr, latency,
                     inv_bw, recv_s, recv_per_byte, any_recv, need, capacity, tau, s, w, ha, hb,
                     hv, mode, u01, forced, follow, unit_dev, phi, mask, succ_bytes, succ_rep,
                     channel, num_channels):
    """gplace.gnn.schedule._rollout's arguments and results, ``order`` replaced by
    ``position`` and the successors (``succ_bytes``, ``succ_rep``: the out-edges' bytes and
    repeats); ``channel`` (D, D), the links' channels, books transfers on them (ESTIMATE mode
    only; no rows: never), ``num_channels`` of them. Returns the makespan estimate."""
    st = dispatch_start(position, pred_ptr, pred_op, pred_bytes, pred_rep, unit_of_op, lane_ptr,
                        latency, inv_bw, any_recv, unit_dev, channel, num_channels)
    makespan, done, _ = dispatch_resume(
        position, pred_ptr, pred_op, pred_bytes, pred_rep, succ_ptr, succ_op, cost, unit_of_op,
        unit_cost, adj_ptr, adj_unit, adj_bytes, lane_ptr, latency, inv_bw, recv_s,
        recv_per_byte, any_recv, need, capacity, tau, s, w, ha, hb, hv, mode, u01, forced,
        follow, unit_dev, phi, mask, succ_bytes, succ_rep, channel, *st, 0.0, 0, 0, -1,
        np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert done == cost.shape[0]  # every op ran once (the op graph is acyclic)
    return makespan


@njit(cache=True, nogil=True)
def dispatch_start(position, pred_ptr, pred_op, pred_bytes, pred_rep, unit_of_op, lane_ptr,
                   latency, inv_bw, any_recv, unit_dev, channel, num_channels):
    """The state of a rollout before its first op (every unit unplaced, ``unit_dev`` set to -1):
    (op_at, finish, op_dev, lanes, used, load, data_ready, state, got, pending, arrive,
    booked, heaps, size), what :func:`dispatch_resume` continues from."""
    n, nd = position.shape[0], latency.shape[0]
    op_at = np.empty(n, np.int64)
    for op in range(n):
        op_at[position[op]] = op
    finish = np.zeros(n)
    op_dev = np.zeros(n, np.int64)
    unit_dev[:] = -1
    lanes = np.zeros(lane_ptr[nd])
    used, load = np.zeros(nd), np.zeros(nd)
    data_ready = np.zeros((n, nd))
    state = np.zeros(n, np.int64)
    got = np.zeros((n if any_recv else 0, nd), np.bool_)
    pending = pred_ptr[1:] - pred_ptr[:-1]
    contend = channel.shape[0] > 0
    arrive = np.zeros((n if contend else 0, nd))
    booked = np.zeros((num_channels if contend else 0, 2 * KEPT + 4))
    heaps = np.empty((2 * nd, 2 * max(n, 1)), np.int64)  # placed on d: row d; unplaced: nd + d
    size = np.zeros(2 * nd, np.int64)
    for op in range(n):
        if pending[op] == 0:
            _enqueue(op, pred_ptr, pred_op, pred_bytes, pred_rep, finish, op_dev, latency, inv_bw,
                     unit_dev[unit_of_op[op]], position, data_ready, state, heaps, size, arrive)
    return (op_at, finish, op_dev, lanes, used, load, data_ready, state, got, pending, arrive,
            booked, heaps, size)


@njit(cache=True, nogil=True)
def dispatch_resume(position, pred_ptr, pred_op, pred_bytes, pred_rep, succ_ptr, succ_op, cost,
                    unit_of_op, unit_cost, adj_ptr, adj_unit, adj_bytes, lane_ptr, latency,
                    inv_bw, recv_s, recv_per_byte, any_recv, need, capacity, tau, s, w, ha, hb,
                    hv, mode, u01, forced, follow, unit_dev, phi, mask, succ_bytes, succ_rep,
                    channel, op_at, finish, op_dev, lanes, used, load, data_ready, state, got,
                    pending, arrive, booked, heaps, size, makespan, done, decisions, stop,
                    decided, touched):
    """Runs the rollout from its state (:func:`dispatch_start`'s arrays, updated in place, and
    ``makespan``, ``done`` ops run, ``decisions`` units placed) to its end, or until ``stop``
    ops have run (-1: never); returns (makespan, done, decisions).

    In ESTIMATE mode every unit's device is known (``forced``), so an op that becomes ready
    (its last producer run) goes straight to its device's heap and its unit is placed then;
    an op ready from the start waits in the unplaced heaps until its unit is placed, by its
    own decision or through another op, as in the other modes. Both give the same schedule: an
    unplaced op's key on its device is one of the keys it waits under, so its unit is placed
    before any op with a larger key runs, and an op whose unit was placed through another op
    moves to its device's heap before the next op is taken (:func:`_earliest`).

    Where ``decided`` has an entry per unit it records when the unit was placed, and
    ``touched`` the earliest time a booked transfer read the unit's device (:func:`_send`),
    both as the count of ops run before: a unit placed, or booked to, as the ``c``-th op (from
    0) ends, or by a decision after ``c`` ops, gets ``c``. Everything before a unit is placed
    is the same whatever its device, bookings aside, so a placement that differs from another
    only at units whose counts are ``stop`` or more continues from the other's state after
    ``stop`` ops (gplace.gnn.replay)."""
    nd = latency.shape[0]
    ready, start = np.empty(nd), np.empty(nd)
    send, send_rep = np.zeros(nd), np.zeros(nd)
    contend = arrive.shape[0] > 0
    while done != stop:
        k, t = _earliest(heaps, size, state, unit_of_op, unit_dev, data_ready, position, op_at,
                         lanes, lane_ptr)
        if k < 0:
            break
        op = op_at[heaps[k, 1]]
        size[k] = pop(heaps[k], size[k])
        if k >= nd:  # the first ready op of an unplaced unit: decide, then wait for its turn
            u = unit_of_op[op]
            for d in range(nd):
                ready[d] = data_ready[op, d]
                start[d] = max(ready[d], lane_free(lanes, lane_ptr, d))
                if any_recv:
                    start[d] += receive_time(op, d, pred_ptr, pred_op, pred_bytes, pred_rep,
                                             op_dev, recv_s, recv_per_byte, got)
            d = decide(u, op, ready, start, cost, unit_cost, adj_ptr, adj_unit, adj_bytes,
                       unit_dev, used, load, need, capacity, tau, s, w, ha, hb, hv, mode, u01,
                       forced, follow, phi, mask)
            decisions = _place(u, d, unit_dev, used, need, decided, done, decisions)
            state[op] = PLACED
            size[d] = push(heaps[d], size[d], bits(data_ready[op, d]), position[op])
            continue
        if any_recv:
            t += receive_time(op, k, pred_ptr, pred_op, pred_bytes, pred_rep, op_dev, recv_s,
                              recv_per_byte, got)
            mark_received(op, k, pred_ptr, pred_op, pred_bytes, op_dev, got)
        op_dev[op] = k
        finish[op] = t + cost[op, k]
        run_on_lane(lanes, lane_ptr, k, finish[op])
        load[k] += cost[op, k]
        makespan = max(makespan, finish[op])
        state[op] = DONE
        if contend:
            _send(op, k, succ_ptr, succ_op, succ_bytes, succ_rep, unit_of_op, forced, finish,
                  latency, inv_bw, channel, arrive, booked, send, send_rep, touched, done)
        for e in range(succ_ptr[op], succ_ptr[op + 1]):
            c = succ_op[e]
            pending[c] -= 1
            if pending[c] == 0:
                uc = unit_of_op[c]
                if mode == ESTIMATE and unit_dev[uc] < 0:
                    decisions = _place(uc, forced[uc], unit_dev, used, need, decided, done,
                                       decisions)
                _enqueue(c, pred_ptr, pred_op, pred_bytes, pred_rep, finish, op_dev, latency,
                         inv_bw, unit_dev[uc], position, data_ready, state, heaps, size, arrive)
        done += 1
    return makespan, done, decisions


@njit(cache=True, inline="always")
def _place(u, d, unit_dev, used, need, decided, done, decisions):
    """Unit u goes to device d, its count ``done`` into ``decided`` (where it has entries);
    returns the units placed."""
    unit_dev[u] = d
    used[d] += need[u]
    if decided.shape[0] > 0:
        decided[u] = done
    return decisions + 1


@njit(cache=True)
def _send(op, k, succ_ptr, succ_op, succ_bytes, succ_rep, unit_of_op, forced, finish, latency,
          inv_bw, channel, arrive, booked, send, send_rep, touched, done):
    """Books the transfers of ``op`` (run on ``k``) on their links' FIFO channels: to each other
    device a consumer's unit is ``forced`` to, once, the largest bytes x repeats a consumer there
    reads (a TF1 loop crosses a tensor once per iteration), ready when ``op`` ends;
    ``arrive[op, d]`` is when it reaches d (its repeats' latency after it leaves the channel).
    A transfer that takes no channel time (no bytes' worth at its bandwidth) books nothing.

    Ops are booked as the rollout takes them, in the order they start, which on a device of
    several lanes, or a bus that several devices send on, is not the order their transfers
    become ready, as the simulator's FIFO takes them. So each channel keeps (``booked[ch]``,
    :func:`_book`) its last KEPT bookings, and a transfer goes in the first idle gap between
    them that it fits at or after its ready time, where it would have gone first.

    Where ``touched`` has an entry per unit, it keeps for each consumer's unit the fewest
    ops run (``done``) when a booking read its device: a replay resumed from an earlier state
    books the same (gplace.gnn.replay)."""
    nd = latency.shape[0]
    send[:] = 0.0
    send_rep[:] = 0.0
    for e in range(succ_ptr[op], succ_ptr[op + 1]):
        uc = unit_of_op[succ_op[e]]
        if touched.shape[0] > 0 and touched[uc] > done:
            touched[uc] = done
        d = forced[uc]
        x = succ_bytes[e] * succ_rep[e]
        if d != k and x > send[d]:
            send[d], send_rep[d] = x, succ_rep[e]
    for d in range(nd):
        if send[d] > 0.0:
            w = send[d] * inv_bw[k, d]
            begin = finish[op] if w == 0.0 else _book(booked[channel[k, d]], finish[op], w)
            arrive[op, d] = begin + w + latency[k, d] * send_rep[d]


KEPT = 8  # bookings each channel keeps (:func:`_book`)


@njit(cache=True)
def _book(row, ready, w):
    """Books ``w`` seconds of a channel at the first idle time at or after ``ready``; returns
    its start. ``row``: (count, floor, start_0, end_0, ... start_KEPT-1, end_KEPT-1), the kept
    bookings by start; before ``floor`` (the end of bookings no longer kept) the channel counts
    as busy."""
    n = int(row[0])
    t = max(ready, row[1])
    at = n  # where the new booking goes among the kept ones
    for i in range(n):
        if t + w <= row[2 + 2 * i]:
            at = i
            break
        t = max(t, row[3 + 2 * i])
    for i in range(n, at, -1):  # shift the later ones up
        row[2 + 2 * i] = row[2 * i]
        row[3 + 2 * i] = row[1 + 2 * i]
    row[2 + 2 * at] = t
    row[3 + 2 * at] = t + w
    n += 1
    if n > KEPT:  # forget the earliest
        row[1] = max(row[1], row[3])
        for i in range(n - 1):
            row[2 + 2 * i] = row[4 + 2 * i]
            row[3 + 2 * i] = row[5 + 2 * i]
        n -= 1
    row[0] = n
    return t


@njit(cache=True)
def _ready(op, d, pred_ptr, pred_op, pred_bytes, pred_rep, finish, op_dev, latency, inv_bw,
           arrive):
    """decision.data_ready, with a producer's booked arrival (:func:`_send`) where there is
    one."""
    if arrive.shape[0] == 0:
        return ready_on(op, d, pred_ptr, pred_op, pred_bytes, pred_rep, finish, op_dev, latency,
                        inv_bw)
    r = 0.0
    for e in range(pred_ptr[op], pred_ptr[op + 1]):
        p = pred_op[e]
        a = op_dev[p]
        if a != d and pred_bytes[e] > 0.0 and arrive[p, d] > 0.0:
            t = arrive[p, d]
        else:
            t = arrival(finish[p], a, d, pred_bytes[e], pred_rep[e], latency, inv_bw)
        if t > r:
            r = t
    return r


@njit(cache=True)
def _enqueue(op, pred_ptr, pred_op, pred_bytes, pred_rep, finish, op_dev, latency, inv_bw, placed,
             position, data_ready, state, heaps, size, arrive):
    """A ready op (its producers scheduled): its data-ready times, into its device's heap, or
    into every device's unplaced heap if its unit (``placed``: its device, or -1) is not."""
    nd = latency.shape[0]
    for d in range(nd):
        if placed >= 0 and d != placed:
            continue
        r = _ready(op, d, pred_ptr, pred_op, pred_bytes, pred_rep, finish, op_dev, latency,
                   inv_bw, arrive)
        data_ready[op, d] = r
        k = d if placed >= 0 else nd + d
        size[k] = push(heaps[k], size[k], bits(r), position[op])
    state[op] = PLACED if placed >= 0 else UNPLACED


@njit(cache=True)
def _earliest(heaps, size, state, unit_of_op, unit_dev, data_ready, position, op_at, lanes,
              lane_ptr):
    """(the heap whose top op starts first, by (start, data ready, position), its start); -1
    when every heap is empty. Drops the unplaced heaps' stale tops first."""
    nd = lane_ptr.shape[0] - 1
    for k in range(nd, 2 * nd):  # first: a stale top may move to a device's heap
        _drop_stale(k, heaps, size, state, unit_of_op, unit_dev, data_ready, position, op_at)
    best, bs, br, bp = -1, 0.0, 0.0, 0
    for k in range(2 * nd):
        if size[k] == 0:
            continue
        r, p = from_bits(heaps[k, 0]), heaps[k, 1]
        t = max(r, lane_free(lanes, lane_ptr, k % nd))
        if best < 0 or t < bs or (t == bs and (r < br or (r == br and p < bp))):
            best, bs, br, bp = k, t, r, p
    return best, bs


@njit(cache=True)
def _drop_stale(k, heaps, size, state, unit_of_op, unit_dev, data_ready, position, op_at):
    """Pops unplaced heap k's tops until one is an unplaced unit's ready op; the op of a unit
    placed since it was pushed goes to that device's heap (once: its state becomes PLACED)."""
    while size[k] > 0:
        op = op_at[heaps[k, 1]]
        d = unit_dev[unit_of_op[op]]
        if state[op] == UNPLACED and d < 0:
            return
        size[k] = pop(heaps[k], size[k])
        if state[op] == UNPLACED:
            state[op] = PLACED
            size[d] = push(heaps[d], size[d], bits(data_ready[op, d]), position[op])
