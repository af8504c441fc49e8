"""The fast simulator's batch paths: threads and rows give the same results as one by one."""

import numpy as np

from gplace.cluster import load_cluster
from gplace.problem import PlacementProblem
from gplace.sim import FastSimulator
from gplace.sim.random_graphs import RandomDagConfig, random_dag


def _problem(ops: int = 300) -> PlacementProblem:
    return PlacementProblem.build(random_dag(RandomDagConfig(ops=ops), 3),
                                  load_cluster("post-4gpu"))


def test_batch_rows_equal_single_runs_and_threads_change_nothing():
    prob = _problem()
    placements = prob.random_placements(7, seed=1)
    serial = FastSimulator(prob).run_batch(placements)
    threaded = FastSimulator(prob, threads=3).run_batch(placements)
    for x, y in zip(serial, threaded):
        np.testing.assert_array_equal(x, y)
    sim = FastSimulator(prob)
    for b, p in enumerate(placements):
        one = sim.run(p)
        assert one.step_time_s == serial.step_time_s[b]
        np.testing.assert_array_equal(one.peak_bytes, serial.peak_bytes[b])
        np.testing.assert_array_equal(one.busy_s, serial.busy_s[b])
        assert one.transfers.output.shape[0] == serial.num_transfers[b]


def test_reused_scratch_does_not_leak_between_rows():
    """Row order must not matter: the scratch of one row is reset for the next."""
    prob = _problem(200)
    placements = prob.random_placements(5, seed=2)
    sim = FastSimulator(prob)
    forward = sim.run_batch(placements)
    backward = sim.run_batch(placements[::-1])
    for x, y in zip(forward, backward):
        np.testing.assert_array_equal(x, y[::-1])


def test_graph_ending_in_ops_without_outputs():
    """A NoOp (no outputs) as the last op used to break the simulator's set-up."""
    import numpy as np

    from gplace.cluster import load_cluster
    from gplace.graph import OpGraph
    from gplace.problem import PlacementProblem
    from gplace.sim import FastSimulator, simulate_reference
    g = OpGraph.from_lists([1e6, 1e6, 0.0], [4096, 4096, 0], [(0, 1)], control_edges=[(1, 2)])
    g = g.replace(out_ptr=np.array([0, 1, 2, 2]), out_dtype=g.out_dtype[:2],
                  out_bytes=g.out_bytes[:2], out_rank=g.out_rank[:2], dim_ptr=g.dim_ptr[:3],
                  out_dims=g.out_dims[:2], edge_bytes=g.edge_bytes)
    p = PlacementProblem.build(g, load_cluster("post-2gpu"))
    placement = np.array([1, 2, 1])
    assert FastSimulator(p).run(placement).step_time_s == simulate_reference(p, placement).step_time_s
