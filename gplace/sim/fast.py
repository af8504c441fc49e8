"""The fast simulator: the reference's event loop (:mod:`gplace.sim.reference`), compiled with
numba over the flat arrays of :mod:`gplace.sim.arrays`, with a batch API.

Same semantics and the same arithmetic in the same order as the reference, so results agree to
the last bit (tests/sim/test_equivalence.py, test_eager.py). Per placement of a batch:
``loop.place`` (devices by op id), ``loop.run_eager`` (the event loop; where its checks fail,
``loop.plan`` and ``loop.run``, the general path, which ``run`` / ``run_ops`` always take for
the transfers in the order sent), ``memory.events`` and ``memory.peak``.

Batches are split over all cores by default (numba threads; the rows are independent, so the
results do not depend on the threads). Compiled code is cached on disk
(:mod:`gplace.sim.jit_cache`), so only the first call of a fresh install compiles.
"""

from __future__ import annotations

import threading

import numba
import numpy as np
from numba import njit, prange

from gplace.errors import ConfigError
from gplace.problem import PlacementProblem
from gplace.sim import jit_cache, loop, memory
from gplace.sim.arrays import SimArrays, build_arrays
from gplace.sim.records import BatchResult, SimResult, Transfers

jit_cache.invalidate_all()
MAX_BYTES = memory.MAX_BYTES
_NOTICED = False  # jit_cache.notice_if_cold ran in this process
_PARALLEL_MIN_OPS = 20_000  # op-events a batch needs before threads pay for their start-up


@njit(cache=True)
def _one(a, devs, col, b, w, shift, step, busy, peak, oom, nxs, eager):
    """Row b of a batch: runs (``loop.run_eager`` where it holds, else ``loop.plan`` and
    ``loop.run``), sweeps memory. Returns whether every op ran."""
    done = -1
    if eager and not a.any_recv:  # receive tasks go through the heap: loop.run
        loop.place(a, devs, col, b, w)
        done, nx = loop.run_eager(a, w, shift, busy[b])
    if done < 0:
        nx = loop.plan(a, devs, col, b, w, shift)
        done = loop.run(a, w, shift, busy[b])
    step[b] = w.end.max() if a.num_ops else 0.0
    memory.events(a, w, w.sweep, nx, step[b])
    memory.peak(a, w, w.sweep, nx, step[b], w.params, peak[b])
    oom[b] = (peak[b] > a.capacity).any()
    nxs[b] = nx
    return done == a.num_ops


@njit(cache=True)
def _batch(a, devs, col, w, shift, step, busy, peak, oom, nxs, eager):
    """Simulates every row of ``devs`` (batch, ops) in turn; returns whether every op ran.
    (``eager`` comes from Python, a bool like run_ops's: a constant here would be typed as a
    literal and compile ``_one`` a second time, seconds more of cold start.)"""
    all_ran = True
    for b in range(devs.shape[0]):
        all_ran &= _one(a, devs, col, b, w, shift, step, busy, peak, oom, nxs, eager)
    return all_ran


@njit(cache=True, parallel=True)
def _batch_parallel(a, devs, col, shift, step, busy, peak, oom, nxs, chunks, eager):
    """As _batch, the rows split into ``chunks`` contiguous runs simulated in parallel (one
    scratch each)."""
    rows = devs.shape[0]
    ran = np.ones(chunks, np.bool_)
    for c in prange(chunks):
        w = loop.new_work(a)
        for b in range(c * rows // chunks, (c + 1) * rows // chunks):
            ran[c] &= _one(a, devs, col, b, w, shift, step, busy, peak, oom, nxs, eager)
    return ran.all()


class FastSimulator:
    """Compiled simulator of one problem; build once, then call ``run`` / ``run_batch``.

    ``threads``: the numba threads a batch's rows are split over; None (the default) uses all
    of them (``numba.get_num_threads()``, the cores unless NUMBA_NUM_THREADS says otherwise).
    Small batches run on the calling thread. The results are the same for any ``threads``.
    """

    def __init__(self, problem: PlacementProblem, threads: int | None = None):
        self.problem = problem
        global _NOTICED
        if not _NOTICED:
            _NOTICED = True
            jit_cache.notice_if_cold()
        self.arrays: SimArrays = build_arrays(problem)
        self.threads = threads
        self._local = threading.local()  # one scratch per calling thread, kept between calls
        self._warm = False  # the all-cores kernel is loaded
        a = self.arrays
        self._col_unit = np.ascontiguousarray(problem.unit_of_op[a.op_of_id], np.int64)
        self._col_op = np.ascontiguousarray(a.op_of_id, np.int64)
        biggest = int((a.out_total + a.temp.max(axis=1)).max()) if a.num_ops else 0
        if a.num_ops and min(a.out_bytes.min(initial=0), a.temp.min()) < 0:
            raise ValueError("the fast simulator sums allocations and frees apart: byte counts "
                             "must not be negative")
        if a.num_devices > memory.DEV_MASK + 1 or biggest >= MAX_BYTES:
            raise ValueError(f"the fast simulator packs a device index into {memory.DEV_BITS} "
                             f"bits and an op's bytes into the rest: {a.num_devices} devices, "
                             f"{biggest} B")
        # heap keys: key << shift | op or transfer in an int64 (gplace.sim.loop)
        edges = a.cons_op.shape[0]
        self._shift = max(1, int(max(edges, a.num_ops)).bit_length())
        top_key = a.num_ops + a.out_bytes.shape[0] * a.num_devices * (2 if a.any_recv else 1)
        if top_key << self._shift >= 1 << 62:
            raise ValueError(f"the fast simulator's heap keys need {top_key} << {self._shift} "
                             f"< 2^62: the graph is too large ({a.num_ops} ops, {edges} edges)")

    def run_batch(self, placements: np.ndarray) -> BatchResult:
        """(batch, units) unit placements -> one BatchResult row each."""
        return self._batch(self._rows(placements, self.problem.num_units, "units"),
                           self._col_unit)

    def run_ops_batch(self, op_devices: np.ndarray) -> BatchResult:
        """(batch, ops) device of every op -> one BatchResult row each."""
        return self._batch(self._rows(op_devices, self.arrays.num_ops, "ops"), self._col_op)

    def _batch(self, devs: np.ndarray, col: np.ndarray) -> BatchResult:
        a, b = self.arrays, devs.shape[0]
        step, nxs = np.zeros(b), np.zeros(b, np.int64)
        busy, peak = np.zeros((b, a.num_devices)), np.zeros((b, a.num_devices), np.int64)
        oom = np.zeros(b, np.bool_)
        chunks = self._chunks(b)
        if chunks == 1 and not self._warm and self._threads() > 1:
            # the first call also loads (or compiles) the all-cores kernel, so that a timed
            # second call measures simulation, not set-up (gplace simulate's sim_events_per_s)
            _batch_parallel(a, devs[:0], col, self._shift, step, busy, peak, oom, nxs, 1, True)
        self._warm = True
        if chunks > 1:
            ok = _batch_parallel(a, devs, col, self._shift, step, busy, peak, oom, nxs, chunks,
                                 True)
        else:
            ok = _batch(a, devs, col, self._scratch(), self._shift, step, busy, peak, oom, nxs,
                        True)
        assert ok, "some op never ran: the scheduling view of the graph has a cycle"
        return BatchResult(step, busy, peak, oom, nxs)

    def _threads(self) -> int:
        return numba.get_num_threads() if self.threads is None else self.threads

    def _chunks(self, rows: int) -> int:
        """Threads for a batch of ``rows``: one when the batch is too small to pay for them."""
        if rows * self.arrays.num_ops < _PARALLEL_MIN_OPS:
            return 1
        return max(1, min(self._threads(), rows))

    def _rows(self, rows: np.ndarray, width: int, what: str) -> np.ndarray:
        """(batch, width) int64 rows of device indices, checked. Unit placements fail with
        ConfigError, as in PlacementProblem.expand; op rows with ValueError, as before."""
        devs = np.ascontiguousarray(np.atleast_2d(np.asarray(rows, np.int64)))
        nd, error = self.arrays.num_devices, ConfigError if what == "units" else ValueError
        if devs.ndim != 2 or devs.shape[1] != width:
            raise error(f"placement rows have {devs.shape[-1]} entries, the problem has "
                        f"{width} {what}")
        if devs.size and (devs.min() < 0 or devs.max() >= nd):
            raise error(f"placement holds a device index outside 0..{nd - 1}")
        return devs

    def _scratch(self) -> loop.Work:
        w = getattr(self._local, "work", None)
        if w is None:
            w = self._local.work = loop.new_work(self.arrays)
        return w

    def run(self, placement: np.ndarray) -> SimResult:
        """One (units,) placement, with the per-op schedule and the transfers."""
        return self.run_ops(self.problem.expand(np.asarray(placement, np.int64)))

    def run_ops(self, op_device: np.ndarray) -> SimResult:
        a = self.arrays
        devs = self._rows(np.asarray(op_device)[None, :], a.num_ops, "ops")
        step, busy, peak, oom, nxs = (np.zeros(1), np.zeros((1, a.num_devices)),
                                      np.zeros((1, a.num_devices), np.int64),
                                      np.zeros(1, np.bool_), np.zeros(1, np.int64))
        w = self._scratch()
        assert _one(a, devs, self._col_op, 0, w, self._shift, step, busy, peak, oom, nxs,
                    False), \
            "some op never ran: the scheduling view of the graph has a cycle"
        start, end = np.zeros(a.num_ops), np.zeros(a.num_ops)
        start[a.op_of_id], end[a.op_of_id] = w.start, w.end
        x = w.order[:int(nxs[0])]  # transfers in the order sent
        j = w.xj[x]
        transfers = Transfers(a.out_key[j].astype(np.int64), w.dev[a.out_owner[j]].astype(np.int64),
                              w.xd[x].astype(np.int64), w.xs[x], w.xf[x], w.xa[x], a.out_bytes[j])
        return SimResult(float(step[0]), busy[0], peak[0], bool(oom[0]), devs[0].copy(), start,
                         end, transfers)
