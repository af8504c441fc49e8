"""The discrete-event simulator of one training step.

* :func:`simulate_reference` (:mod:`gplace.sim.reference`): plain Python, the specification;
* :class:`FastSimulator` (:mod:`gplace.sim.fast`): numba, batch API, bit-identical results;
* :func:`lower_bound` (:mod:`gplace.sim.bounds`); :func:`chrome_trace` (:mod:`gplace.sim.trace`).

    sim = FastSimulator(problem)                 # arrays built once per problem
    batch = sim.run_batch(placements)            # (B, units) -> BatchResult
    one = sim.run(placement)                     # SimResult with the per-op schedule
"""

from gplace.sim.bounds import LowerBound, lower_bound
from gplace.sim.fast import FastSimulator
from gplace.sim.records import BatchResult, SimResult, Transfers
from gplace.sim.reference import simulate_ops_reference, simulate_reference

__all__ = ["FastSimulator", "simulate_reference", "simulate_ops_reference", "lower_bound",
           "LowerBound", "SimResult", "BatchResult", "Transfers"]
