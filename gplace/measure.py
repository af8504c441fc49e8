"""How placements are measured : a leaf module every part shares.

A Measurer turns a batch of (units,) placements into step times, feasibility and peak memory.
The simulator (:class:`gplace.sim.measurer.SimMeasurer`) and real TensorFlow runs
(:class:`gplace.real.measurer.RealMeasurer`) implement it; both are context managers, and
``close()`` releases what they hold (TF server processes for real runs), so callers write

    with SimMeasurer(problem) as m:
        m.measure(placements)
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

import numpy as np


class Measurement(NamedTuple):
    """Step times of a batch of placements; infeasible (OOM, failed) ones are flagged. Real
    measurements carry each step time's interval: two placements whose intervals overlap are
    tied, and a placer should not rank one above the other on that measurement."""

    step_time_s: np.ndarray   # (batch,) float64
    feasible: np.ndarray      # (batch,) bool
    peak_bytes: np.ndarray    # (batch, devices) int64
    low_s: np.ndarray | None = None   # (batch,) confidence interval of a measured step time
    high_s: np.ndarray | None = None  # (gplace.real.protocol); None from the simulator


def overlap(a: tuple[float, float] | None, b: tuple[float, float] | None) -> bool:
    """Do two intervals (lo, hi) overlap? Two placements whose intervals do are tied; a
    missing interval (an exact, simulated time) overlaps nothing."""
    return a is not None and b is not None and a[0] <= b[1] and b[0] <= a[1]


def tied(m: Measurement, i: int, j: int) -> bool:
    """Are placements i and j of ``m`` tied: their intervals overlap? Without intervals (the
    simulator, deterministic) only equal step times are; a placement timed in one visit
    (interval (low, inf): too few visits to bound it) counts as its step time alone."""
    if m.low_s is None or m.high_s is None:
        return bool(m.step_time_s[i] == m.step_time_s[j])
    return overlap(tie_span(m, i), tie_span(m, j))


def tie_span(m: Measurement, k: int) -> tuple[float, float] | None:
    """Placement k's interval as ties see it: None without one (nan: simulated); a one-visit
    interval (low, inf) is too wide to mean anything, so its step time alone."""
    if m.low_s is None or m.high_s is None or np.isnan(m.low_s[k]) or np.isnan(m.high_s[k]):
        return None
    if np.isinf(m.high_s[k]):
        return float(m.step_time_s[k]), float(m.step_time_s[k])
    return float(m.low_s[k]), float(m.high_s[k])


class Measurer(Protocol):
    """``drifts`` (optional, False if absent): the step times of separate ``measure`` calls
    are not directly comparable (a real machine's speed moves); gplace.placers.base.Tracker
    then measures a control placement in every batch."""

    def measure(self, placements: np.ndarray) -> Measurement: ...

    def close(self) -> None: ...
