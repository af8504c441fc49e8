"""TF1 loops in the simulator: a loop body runs once with summed times, and a tensor that
crosses devices is sent once per run of its consumer (``OpCosts.runs``,
``cost.transfer_repeats``); closed forms in both simulators, then a looped corpus graph."""

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from gplace.graph import OpGraph
from gplace.sim import FastSimulator, simulate_reference

from tests.sim.helpers import both, cluster, device, problem

CORPUS = Path(__file__).resolve().parents[2] / "datasets" / "corpus"


def with_runs(prob, runs):
    return dataclasses.replace(prob, costs=prob.costs._replace(runs=np.asarray(runs, np.int64)))


@pytest.mark.parametrize("lanes", [1, 2])  # 1: eager channels; 2: every transfer via the heap
def test_a_crossing_into_a_loop_is_sent_once_per_iteration(lanes):
    # a (dev0, 1 s) -> b (dev1, 2 s, 4 runs) -> c (dev0, 1 s); 1e9 B at 1e9 B/s, latency 0.5 s.
    g = OpGraph.from_lists([0] * 3, [10**9] * 3, [(0, 1), (1, 2)])
    prob = problem(g, cluster(device("x", lanes), device("y", lanes), latency=0.5), [1.0, 2.0, 1.0])
    assert both(prob, [0, 1, 0]).step_time_s == 7.0   # a [0,1], b [2.5,4.5], c [6,7]
    looped = with_runs(prob, [1, 4, 1])
    # a -> b four times: channel 4 s, latency 2 s: b [7,9]; b -> c once (c runs once): c [10.5,11.5]
    r = both(looped, [0, 1, 0])
    assert r.step_time_s == 11.5
    np.testing.assert_array_equal(r.op_end_s, [1.0, 9.0, 11.5])
    assert both(looped, [0, 0, 0]).step_time_s == 4.0  # one device: no transfer, no change


def test_a_crossing_control_edge_pays_latency_per_run():
    g = OpGraph.from_lists([0] * 2, [0, 0], control_edges=[(0, 1)])
    prob = with_runs(problem(g, cluster(device("x"), device("y"), latency=0.5), [1.0, 1.0]),
                     [1, 4])
    assert both(prob, [0, 1]).step_time_s == 1.0 + 4 * 0.5 + 1.0


@pytest.mark.parametrize("preset", ["post-4gpu", "local-procs"])
def test_fast_equals_reference_on_a_looped_corpus_graph(preset):
    from gplace.cluster import load_cluster
    from gplace.cost import cost_model_for
    from gplace.opgraph_cache import load_graph
    from gplace.problem import PlacementProblem
    path = CORPUS / "rnn_loop_10.pb"
    if not path.is_file():
        pytest.skip(f"{path} is not in this checkout")
    g = load_graph(path)
    prob = PlacementProblem.build(g, load_cluster(preset), cost_model_for(path))
    assert prob.costs.runs is not None and prob.costs.runs.max() > 1  # the profile has runs
    one_trip = dataclasses.replace(prob, costs=prob.costs._replace(runs=None))
    fast = FastSimulator(prob)
    for p in prob.random_placements(3, seed=0):
        ref = simulate_reference(prob, p)
        assert fast.run(p).step_time_s == ref.step_time_s
        assert ref.step_time_s > simulate_reference(one_trip, p).step_time_s
