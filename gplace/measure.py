"""How placements are measured (DESIGN.md, "Measurer"): a leaf module every part shares.

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
    """Step times of a batch of placements; infeasible (OOM, failed) ones are flagged."""

    step_time_s: np.ndarray   # (batch,) float64
    feasible: np.ndarray      # (batch,) bool
    peak_bytes: np.ndarray    # (batch, devices) int64


class Measurer(Protocol):
    def measure(self, placements: np.ndarray) -> Measurement: ...

    def close(self) -> None: ...
