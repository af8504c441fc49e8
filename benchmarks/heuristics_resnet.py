"""Step time of every classic heuristic on the bundled small ResNet over post-4gpu.

    .venv/bin/python benchmarks/heuristics_resnet.py

Simulated estimates (roofline costs, gplace.sim), not hardware measurements.
"""

import time

import numpy as np

import gplace
from gplace.cluster import load_cluster
from gplace.placers import SimMeasurer, get_placer
from gplace.placers.heuristics import HEURISTICS
from gplace.problem import PlacementProblem
from gplace.sim import lower_bound


def main() -> None:
    graph = gplace.load_graph("gplace/examples/small_resnet.pb")
    problem = PlacementProblem.build(graph, load_cluster("post-4gpu"))
    measurer = SimMeasurer(problem)
    print(f"{graph.num_ops} ops, {problem.num_units} units, post-4gpu; "
          f"lower bound {lower_bound(problem).bound_s * 1e3:.2f} ms (estimates)")
    for name in HEURISTICS:
        start = time.perf_counter()
        r = get_placer(name, seed=0).place(problem, measurer, 0)
        units = np.bincount(r.placement, minlength=problem.num_devices).tolist()
        print(f"{name:7s} {r.step_time_s * 1e3:8.2f} ms  feasible={r.feasible}  "
              f"units per device {units}  {time.perf_counter() - start:.2f} s")


if __name__ == "__main__":
    main()
