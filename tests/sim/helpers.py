"""Shared builders for the simulator tests: problems with hand-set costs."""

from __future__ import annotations

import numpy as np

from gplace.cluster import Cluster, Device, Link
from gplace.cost import OpCosts
from gplace.graph import OpGraph
from gplace.problem import PlacementProblem


def device(name: str, lanes: int = 1, memory: int = 1 << 40) -> Device:
    return Device(name=name, tf_device=f"/device:X:{name}", kind="test", peak_flops=1e12,
                  mem_bandwidth=1e11, memory_bytes=memory, launch_overhead_s=0.0, lanes=lanes)


def cluster(*devices: Device, bandwidth: float = 1e9, latency: float = 0.0,
            links: tuple[Link, ...] = ()) -> Cluster:
    return Cluster("test", tuple(devices), links, Link((), bandwidth, latency))


def problem(graph: OpGraph, cl: Cluster, time_s, temp=None) -> PlacementProblem:
    """A problem whose cost matrix is ``time_s`` (ops, devices) or (ops,) for all devices."""
    time_s = np.asarray(time_s, np.float64)
    if time_s.ndim == 1:
        time_s = np.repeat(time_s[:, None], cl.num_devices, axis=1)
    temp = np.zeros(time_s.shape, np.int64) if temp is None else np.asarray(temp, np.int64)
    costs = OpCosts(time_s, temp, graph.output_bytes, np.ones(time_s.shape, bool),
                    np.zeros(cl.num_devices, bool), ())
    return PlacementProblem(graph, cl, costs, graph.group.astype(np.int64), graph.num_groups)


def both(prob, placement):
    """Runs both simulators, checks they agree, returns the reference result."""
    from gplace.sim import FastSimulator, simulate_reference
    ref = simulate_reference(prob, np.asarray(placement))
    fast = FastSimulator(prob).run(np.asarray(placement))
    assert fast.step_time_s == ref.step_time_s
    np.testing.assert_array_equal(fast.op_start_s, ref.op_start_s)
    np.testing.assert_array_equal(fast.op_end_s, ref.op_end_s)
    np.testing.assert_array_equal(fast.peak_bytes, ref.peak_bytes)
    np.testing.assert_array_equal(fast.busy_s, ref.busy_s)
    assert fast.oom == ref.oom
    return ref
