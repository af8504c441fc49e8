"""One copy of each distinct array among many problems built from the same graphs.

Pretraining holds every problem of its corpus in memory, five per graph by default (three
preset clusters, two random ones), and most of their arrays do not depend on the cluster: the
unit graph and its op-type table, the scheduler's adjacency and the simulator's graph layout.
:class:`ArrayPool` keeps the first copy of each array and hands it back for every array equal
to it (same dtype, shape, layout and contents), so the problems of one graph share them. It
holds its copies by weak reference: an array no problem holds any more is freed as before.

Shared arrays are read, never written: the learning code, the list scheduler and the simulator
only read their problem's arrays (tests/gnn/test_shared_arrays.py checks that training leaves
them as they were).
"""

from __future__ import annotations

import hashlib
import weakref

import numpy as np

from gplace.gnn.learn import ProblemState
from gplace.gnn.policy import FeatureTensors

MIN_BYTES = 1024  # smaller arrays are not worth a lookup


class ArrayPool:
    def __init__(self) -> None:
        self._arrays: dict[tuple, list[weakref.ref]] = {}
        self.offered_bytes = 0  # what the arrays offered to it take
        self.kept_bytes = 0     # what their distinct copies took when they were made

    def get(self, a):
        """The pool's copy of ``a`` (``a`` itself the first time); anything that is not a
        numpy array, or is small, comes back as it is."""
        if not isinstance(a, np.ndarray) or a.nbytes < MIN_BYTES or a.dtype.hasobject:
            return a
        self.offered_bytes += a.nbytes
        layout = (a.flags.c_contiguous, a.flags.f_contiguous, a.flags.writeable)
        raw = _raw(a)
        digest = hashlib.blake2b(raw, digest_size=16).digest()
        bucket = self._arrays.setdefault((a.dtype.str, a.shape, layout, digest), [])
        bucket[:] = [ref for ref in bucket if ref() is not None]
        for ref in bucket:
            kept = ref()
            if kept is not None and np.array_equal(_raw(kept), raw):  # bit for bit: -0.0, NaN
                return kept
        bucket.append(weakref.ref(a))
        self.kept_bytes += a.nbytes
        return a

    def fields(self, t):
        """A NamedTuple with each field through :meth:`get`."""
        return t._replace(**{f: self.get(getattr(t, f)) for f in t._fields})

    def share(self, state: ProblemState) -> ProblemState:
        """``state`` with its features, scheduler and simulator arrays from the pool (in
        place; the same object back). A state that measures with anything but the simulator
        keeps its measurer's arrays."""
        state.numpy_features = self.fields(state.numpy_features)
        state.features = FeatureTensors.from_numpy(state.numpy_features)
        state.sched = self.fields(state.sched)
        sim = getattr(state.measurer, "sim", None)
        if sim is not None and hasattr(sim, "arrays"):
            sim.arrays = self.fields(sim.arrays)
        return state


def _raw(a: np.ndarray) -> np.ndarray:
    """The bytes of ``a`` in C order, as a flat uint8 array."""
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)
