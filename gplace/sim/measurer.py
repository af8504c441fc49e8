"""The simulator as a Measurer (gplace.measure): estimates, not hardware."""

from __future__ import annotations

import numpy as np

from gplace.measure import Measurement
from gplace.problem import PlacementProblem
from gplace.sim.fast import FastSimulator


class SimMeasurer:
    """Measures placements with the fast simulator (the default)."""

    def __init__(self, problem: PlacementProblem):
        self.sim = FastSimulator(problem)

    def measure(self, placements: np.ndarray) -> Measurement:
        r = self.sim.run_batch(np.atleast_2d(placements))
        return Measurement(r.step_time_s, ~r.oom, r.peak_bytes)

    def close(self) -> None:
        """Nothing to release; here so that every measurer closes the same way."""

    def __enter__(self) -> SimMeasurer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
