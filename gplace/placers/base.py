"""One interface for every placer, heuristic or learned.

    placer = get_placer("post", seed=0)
    result = placer.place(problem, SimMeasurer(problem), budget=2400)

A placer gets a PlacementProblem, a Measurer and a sample budget, and returns the best feasible
placement it found with the history of its samples. Sampling placers evaluate placements only
through a :class:`Tracker`, which counts every evaluated placement against the budget, keeps the
best feasible one, and records the history; heuristics spend no samples (they may call the
simulator directly to pick among a few candidates, and say so in ``PlaceResult.info``).
"""

from __future__ import annotations

import time
from typing import Callable, NamedTuple, Protocol

import numpy as np

from gplace import stopping
from gplace.errors import ConfigError
from gplace.measure import Measurement, Measurer, overlap, tie_span
from gplace.problem import PlacementProblem


class History(NamedTuple):
    step_time_s: np.ndarray   # (samples,) float64, in evaluation order
    feasible: np.ndarray      # (samples,) bool

    def best_so_far(self) -> np.ndarray:
        """(samples,) best feasible step time after each sample (inf before the first)."""
        t = np.where(self.feasible, self.step_time_s, np.inf)
        return np.minimum.accumulate(t) if t.size else t


class PlaceResult(NamedTuple):
    name: str
    placement: np.ndarray     # (units,) int64 device per unit
    step_time_s: float        # inf when nothing feasible was found
    feasible: bool
    samples: int              # evaluated placements charged to the budget
    wall_s: float
    history: History
    info: dict


class Tracker:
    """Evaluates placements for a sampling placer: budget, best feasible, history.

    Real measurements (a measurer with ``drifts = True``) are taken on a machine whose speed
    moves between batches: in calibration/RESULTS.md, every placement's step time moved by 3-13%
    between two runs half an hour apart. Batches of ``CONTROL_MIN_BATCH`` or more placements
    then carry the incumbent best as a control, not charged to the budget: the batch's times
    are scaled by the incumbent's recorded time over its time now (when that recorded time lies
    outside the control's interval: a smaller move is noise), so that times of different
    batches compare (Post's elite set ranks them together), and a newcomer replaces the best
    only if it is faster than the control *in the same batch* beyond both intervals."""

    CONTROL_MIN_BATCH = 4  # a smaller batch would spend a large share of its time on the control

    def __init__(self, problem: PlacementProblem, measurer: Measurer, budget: int):
        if budget < 0:
            raise ConfigError(f"budget = {budget} must be >= 0")
        self.problem, self.measurer, self.budget = problem, measurer, budget
        self.times: list[np.ndarray] = []
        self.feasible: list[np.ndarray] = []
        self.best_placement: np.ndarray | None = None
        self.best_time = np.inf
        self.best_span: tuple[float, float] | None = None  # its interval, if measured with one
        self.drift: list[float] = []  # per controlled batch: the factor its times were scaled by
        self.start = time.perf_counter()

    @property
    def used(self) -> int:
        return int(sum(t.size for t in self.times))

    @property
    def left(self) -> int:
        """Samples still to hand out: none once a Ctrl-C asked to stop (gplace.stopping)."""
        return 0 if self.stopped else self.budget - self.used

    @property
    def stopped(self) -> bool:
        """Whether a Ctrl-C ended the search before its budget (gplace.stopping)."""
        return stopping.requested() and self.used < self.budget

    def evaluate(self, placements: np.ndarray) -> Measurement:
        """Measures up to ``left`` of the given (batch, units) placements (the rest are cut)."""
        placements = np.atleast_2d(np.asarray(placements, np.int64))[: max(self.left, 0)]
        if placements.shape[0] == 0:
            empty = np.zeros(0)
            return Measurement(empty, empty.astype(bool), np.zeros((0, self.problem.num_devices)))
        control = (self.best_placement is not None and getattr(self.measurer, "drifts", False)
                   and len(placements) >= self.CONTROL_MIN_BATCH)
        if control:
            m = self._controlled(placements)
        else:
            m = self.measurer.measure(placements)
        self.times.append(np.asarray(m.step_time_s, np.float64))
        self.feasible.append(np.asarray(m.feasible, bool))
        t = np.where(m.feasible, m.step_time_s, np.inf)
        k = int(np.argmin(t))
        span = tie_span(m, k)
        if t[k] < self.best_time and not self._tied(span):
            self.best_time, self.best_placement = float(t[k]), placements[k].copy()
            self.best_span = span
        return m

    def _controlled(self, placements: np.ndarray) -> Measurement:
        """Measures the batch with the incumbent best appended as a control; returns the
        batch's measurement (without the control) scaled by the control's drift, and sets the
        best's interval to the control's, scaled alike, for this batch's tie test."""
        m = self.measurer.measure(np.vstack([placements, self.best_placement[None]]))
        cut = lambda a: None if a is None else np.asarray(a)[:-1]  # noqa: E731
        now = float(m.step_time_s[-1])
        if not (m.feasible[-1] and np.isfinite(now) and now > 0):  # the control failed now
            return Measurement(*(cut(a) for a in m))
        f = self.best_time / now
        if m.low_s is not None and m.high_s is not None and (
                m.low_s[-1] <= self.best_time <= m.high_s[-1]):
            f = 1.0  # the control moved less than its own noise: scaling would add noise
        self.drift.append(f)
        scale = lambda a: None if a is None else np.asarray(a)[:-1] * f  # noqa: E731
        span = tie_span(m, len(m.step_time_s) - 1)
        if span is not None:
            self.best_span = (span[0] * f, span[1] * f)
        return Measurement(scale(m.step_time_s), cut(m.feasible), cut(m.peak_bytes),
                           scale(m.low_s), scale(m.high_s))

    def _tied(self, span: tuple[float, float] | None) -> bool:
        """Does a real measurement's interval overlap the best one's (gplace.measure.tied)? A
        newcomer then does not take the best's place: it has to be faster beyond the noise
        Simulated times carry no interval and are never tied."""
        return overlap(span, self.best_span)

    def offer_free(self, placement: np.ndarray, step_time_s: float) -> None:
        """A placement measured outside the budget (a heuristic's start) that the result may
        return; it is not charged and not in the history."""
        if step_time_s < self.best_time:
            self.best_time, self.best_placement = float(step_time_s), np.asarray(placement).copy()
            self.best_span = None

    def history(self) -> History:
        cat = (lambda xs, dt: np.concatenate(xs) if xs else np.zeros(0, dt))
        return History(cat(self.times, np.float64), cat(self.feasible, bool))

    def result(self, name: str, fallback: np.ndarray, **info) -> PlaceResult:
        """The best feasible placement seen, else ``fallback`` (marked infeasible)."""
        found = self.best_placement is not None
        if self.drift:  # per controlled batch: the factor its times were scaled by
            info = {**info, "control_drift": list(self.drift)}
        if self.stopped:
            info = {**info, "stopped_at": self.used, "budget": self.budget}
        return PlaceResult(name, self.best_placement if found else np.asarray(fallback, np.int64),
                           self.best_time, found, self.used, time.perf_counter() - self.start,
                           self.history(), info)


class Placer(Protocol):
    name: str

    def place(self, problem: PlacementProblem, measurer: Measurer, budget: int) -> PlaceResult: ...


REGISTRY: dict[str, Callable[..., Placer]] = {}
# The modules whose import registers placers; the learned one imports this module, so it is
# named here rather than imported (a registry of plugins, not an import cycle).
PLACER_MODULES = ("gplace.placers.heuristics", "gplace.placers.post_table",
                  "gplace.placers.search", "gplace.placers.optimal", "gplace.gnn.placer")
CHEAP_MODULE = "gplace.placers.heuristics"  # every cheap heuristic registers there


def register(name: str, cheap: bool = False):
    """Class decorator: ``@register("post")`` makes the placer available by name; ``cheap``
    marks a heuristic that spends no samples (``place`` runs them all alongside the policy)."""
    def wrap(factory):
        REGISTRY[name] = factory
        factory.name = name
        factory.cheap = cheap
        return factory
    return wrap


# The order place() and pretraining run the cheap heuristics in (ties go to the first).
CHEAP_ORDER = ("single", "heft", "m-etf", "m-sct", "m-topo", "expert", "chunks")


def cheap_heuristics() -> tuple[str, ...]:
    """Names of the registered cheap heuristics, in ``CHEAP_ORDER`` then by name."""
    import importlib
    importlib.import_module(CHEAP_MODULE)
    cheap = [n for n, f in REGISTRY.items() if getattr(f, "cheap", False)]
    return tuple(sorted(cheap, key=lambda n: (CHEAP_ORDER.index(n) if n in CHEAP_ORDER
                                               else len(CHEAP_ORDER), n)))


def placer_names() -> list[str]:
    """Every registered placer's name."""
    _import_placers()
    return sorted(REGISTRY)


def _import_placers() -> None:
    import importlib
    for module in PLACER_MODULES:  # importing registers every placer (by name, no cycle)
        importlib.import_module(module)


def get_placer(name: str, **config) -> Placer:
    """The placer called ``name``, built with ``config`` (e.g. ``seed=0``)."""
    if name not in REGISTRY:
        _import_placers()
    if name not in REGISTRY:
        raise ConfigError(f"unknown placer {name!r}; choose one of {', '.join(sorted(REGISTRY))}")
    return REGISTRY[name](**config)


def heuristic_result(name: str, measurer: Measurer, placement: np.ndarray,
                     start: float, **info) -> PlaceResult:
    """A PlaceResult for a heuristic: measured once for its step time, charged no samples."""
    m = measurer.measure(np.asarray(placement, np.int64)[None, :])
    ok = bool(m.feasible[0])
    return PlaceResult(name, np.asarray(placement, np.int64),
                       float(m.step_time_s[0]) if ok else np.inf, ok, 0,
                       time.perf_counter() - start, History(np.zeros(0), np.zeros(0, bool)), info)
