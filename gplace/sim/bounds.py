"""A lower bound on the step time of any placement (DESIGN.md, "Simulator").

max(critical path, work bound):
* critical path: longest path through the forward data and control edges with every op on its
  fastest device and communication free;
* work bound: sum over ops of the best-device time, divided by the total number of lanes. A
  device with L lanes runs at most L ops at once, so in a step of length T the cluster offers at
  most T * sum(lanes) lane-seconds, and every op needs at least its best-device time of them.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from gplace.problem import PlacementProblem


class LowerBound(NamedTuple):
    bound_s: float
    critical_path_s: float
    work_s: float     # best-device work / total lanes


def lower_bound(problem: PlacementProblem) -> LowerBound:
    g = problem.graph
    best = problem.costs.time_s.min(axis=1) if g.num_ops else np.zeros(0)
    fwd, keep_c = ~g.edge_back, ~g.ctrl_back
    src = np.concatenate([g.edge_src[fwd], g.ctrl_src[keep_c]])
    dst = np.concatenate([g.edge_dst[fwd], g.ctrl_dst[keep_c]])
    order = np.argsort(src, kind="stable")
    ptr = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=g.num_ops))])
    succ = dst[order]
    finish_before = np.zeros(g.num_ops)  # earliest start of each op
    for o in g.topo_order().tolist():
        fin = finish_before[o] + best[o]
        nxt = succ[ptr[o]:ptr[o + 1]]
        if nxt.size:
            finish_before[nxt] = np.maximum(finish_before[nxt], fin)
    critical = float((finish_before + best).max()) if g.num_ops else 0.0
    lanes = sum(d.lanes for d in problem.cluster.devices)
    work = float(best.sum() / lanes)
    return LowerBound(max(critical, work), critical, work)
