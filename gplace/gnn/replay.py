"""Makespan estimates of placements near one placement, each replay resumed where it departs.

Hill climbing on the dispatch-order list schedule's estimate (gplace.gnn.infer.polish) replays
many placements that differ from the current one at a few units. Everything the dispatch-order
rollout does before a unit is placed is the same whatever that unit's device, so such a
placement's replay can start from the current placement's state just before the first of its
changed units is placed (gplace.gnn.dispatch.dispatch_resume). :class:`NearReplays` replays the
base placement once, keeping its state after evenly spaced counts of ops run, and estimates
each other placement from the last kept state before it departs: the same arithmetic in the
same order as a whole replay (ESTIMATE mode), so the same estimate, without replaying the
shared prefix. Moving the base to one of those placements keeps the states before it departs.

Where the replays book transfers on the links' channels (``sched.contention``), a transfer to a
unit is booked when the rollout takes its producer, which may be before the unit is placed,
and depends on the unit's device: a placement then departs at the earlier of its first
changed unit's placing and the first booking that read that unit's device.
"""

from __future__ import annotations

import copy

import numpy as np

from gplace.gnn.decision import ESTIMATE
from gplace.gnn.dispatch import dispatch_resume, dispatch_start
from gplace.gnn.schedule import for_each

SNAPSHOTS = 16          # kept states of the base replay, at most
SNAPSHOT_BYTES = 2**28  # their memory, at most (fewer states on a large graph)


class NearReplays:
    """ESTIMATE replays in dispatch order of placements near ``base`` (``sched``: the problem's
    gplace.gnn.schedule.SchedArrays; its ``dispatch`` flag is not read, its ``contention`` is)."""

    def __init__(self, sched, base: np.ndarray, snapshots: int = SNAPSHOTS):
        a, nu, nd = sched, sched.num_units, sched.num_devices
        self.base = np.array(base, np.int64)  # a copy: the caller may change theirs
        channel = a.channel if a.contention else np.zeros((0, 0), np.int64)
        # dispatch_resume's arguments up to ``forced``: the problem's arrays, then s, w, ha, hb,
        # hv, mode and u01 (none read in ESTIMATE mode); _blank: phi and mask (no rows), the
        # out-edges' bytes and repeats and the channels
        self._head = (a.position, a.pred_ptr, a.pred_op, a.pred_bytes, a.pred_rep, a.succ_ptr,
                      a.succ_op, a.cost, a.unit_of_op, a.unit_cost, a.adj_ptr, a.adj_unit,
                      a.adj_bytes, a.lane_ptr, a.latency, a.inv_bw, a.recv_s, a.recv_per_byte,
                      a.any_recv, a.need, a.capacity, a.tau, np.zeros((nu, nd)),
                      np.zeros((nu, 0)), np.zeros((0, 0)), np.zeros((nu, 0)),
                      np.zeros((nu, 0)), ESTIMATE, np.zeros(nu))
        self._blank = (np.zeros((0, nd, 1), np.float32), np.zeros((0, nd), np.bool_),
                       a.succ_bytes, a.succ_rep, channel)
        unit_dev = np.empty(nu, np.int64)
        state = list(dispatch_start(a.position, a.pred_ptr, a.pred_op, a.pred_bytes,
                                    a.pred_rep, a.unit_of_op, a.lane_ptr, a.latency, a.inv_bw,
                                    a.any_recv, unit_dev, channel, a.num_channels))
        self._op_at, self._heap_shape = state[0], state[-2].shape
        per_snapshot = sum(x.nbytes for x in state[1:]) + unit_dev.nbytes
        keep = int(max(1, min(snapshots, SNAPSHOT_BYTES // max(per_snapshot, 1))))
        ops = self._op_at.size
        self._stops = np.unique(np.linspace(0, ops, keep, endpoint=False).astype(np.int64))
        # ops run before each unit was placed (ops: never) and before a booking first read its
        # device (ops: none), as dispatch_resume counts them
        self.decided = np.full(nu, ops, np.int64)
        self.touched = np.full(nu if a.contention else 0, ops, np.int64)
        self._kept: list[tuple] = []
        self._replay(unit_dev, state[1:], (0.0, 0, 0))

    def _replay(self, unit_dev, state: list, scalars: tuple) -> None:
        """The base's replay on from ``state`` (at the next stop not kept yet), keeping its
        state at each later stop (a count of ops run)."""
        for stop in [*self._stops[len(self._kept):].tolist(), -1]:
            scalars = dispatch_resume(*self._head, self.base, 0.0, unit_dev, *self._blank,
                                      self._op_at, *state, *scalars, stop, self.decided,
                                      self.touched)
            if stop < 0:
                assert scalars[1] == self._op_at.size  # every op ran once
                break
            heaps, size = state[-2], state[-1]
            top = 2 * int(size.max()) if size.size else 0
            self._kept.append((unit_dev.copy(), [x.copy() for x in state[:-2]],
                               heaps[:, :top].copy(), size.copy(), scalars))
        self.estimate_s = float(scalars[0])

    def _departs(self, placement: np.ndarray) -> int:
        """The kept state ``placement``'s replay continues from; -1 if it is the base."""
        moved = np.flatnonzero(placement != self.base)
        if moved.size == 0:
            return -1
        first = int(self.decided[moved].min())
        if self.touched.size:  # the state kept at stop s has the bookings of the first s ops
            first = min(first, int(self.touched[moved].min()))
        return int(np.searchsorted(self._stops, first, side="right")) - 1

    def _restore(self, i: int):
        """Copies of kept state ``i``: (unit_dev, state arrays, scalars)."""
        unit_dev, arrays, heap_top, size, scalars = self._kept[i]
        heaps = np.empty(self._heap_shape, np.int64)
        heaps[:, :heap_top.shape[1]] = heap_top
        return unit_dev.copy(), [*(x.copy() for x in arrays), heaps, size.copy()], scalars

    def estimate(self, placement: np.ndarray) -> float:
        """The dispatch-order estimate of ``placement`` (gplace.gnn.schedule.rollout's in
        ESTIMATE mode)."""
        placement = np.ascontiguousarray(placement, np.int64)
        i = self._departs(placement)
        if i < 0:
            return self.estimate_s
        unit_dev, state, scalars = self._restore(i)
        none = np.zeros(0, np.int64)
        makespan, done, _ = dispatch_resume(*self._head, placement, 0.0, unit_dev, *self._blank,
                                            self._op_at, *state, *scalars, -1, none, none)
        assert done == self._op_at.size  # every op ran once
        return float(makespan)

    def estimates(self, placements: np.ndarray) -> np.ndarray:
        """:meth:`estimate` of each row, over numba's threads."""
        placements = np.atleast_2d(placements)
        out = np.zeros(placements.shape[0])

        def one(k: int) -> None:
            out[k] = self.estimate(placements[k])

        for_each(one, placements.shape[0])
        return out

    def rebased(self, placement: np.ndarray) -> NearReplays:
        """The replays near ``placement``: this base's kept states before it departs are
        shared, the later ones replayed."""
        placement = np.array(placement, np.int64)
        i = self._departs(placement)
        if i < 0:
            return self
        new = copy.copy(self)
        new.base, new.decided, new._kept = placement, self.decided.copy(), self._kept[:i + 1]
        new.touched = self.touched.copy()  # bookings after kept state i are made again
        new.touched[new.touched >= self._stops[i]] = self._op_at.size
        unit_dev, state, scalars = self._restore(i)
        new._replay(unit_dev, state, scalars)
        return new
