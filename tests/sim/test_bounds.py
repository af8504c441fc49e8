"""The lower bounds (gplace.sim.bounds): closed-form cases, and never above a simulated step
time on random DAGs, random placements and corpus graphs."""

import numpy as np
import pytest

from gplace.graph import OpGraph
from gplace.problem import PlacementProblem
from gplace.sim import FastSimulator, lower_bound
from gplace.sim.random_graphs import RandomDagConfig, random_cluster, random_dag

from tests.sim.helpers import cluster, device, problem


def test_simple_bound_is_the_old_one():
    g = OpGraph.from_lists([0] * 3, [0] * 3, [(0, 1), (1, 2)])
    b = lower_bound(problem(g, cluster(device("x"), device("y")), [1.0, 2.0, 3.0]))
    assert (b.critical_path_s, b.work_s) == (6.0, 3.0)
    assert b.simple_s == pytest.approx(6.0, rel=1e-8)
    assert b.bound_s == pytest.approx(6.0, rel=1e-8)  # nothing to add: one chain, free transfers


def test_the_work_bound_holds_whatever_the_summation_order():
    """numpy sums the work pairwise, the simulator one op after another: on one lane the
    step time is the sequential sum, which can be a rounding error below the pairwise one."""
    for seed in range(200):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(9, 60))
        g = OpGraph.from_lists([0] * n, [0] * n, [])
        prob = problem(g, cluster(device("x")), rng.random(n))
        t = FastSimulator(prob).run(np.zeros(n, np.int64)).step_time_s
        b = lower_bound(prob)
        assert b.bound_s <= t and b.any_placement_s <= t, seed


def test_units_are_atomic():
    """One group of two independent ops, each 1 s on its favourite device and 10 s on the
    other: the simple bound runs them at once on their favourites (1 s); the group runs both
    on one device: 1 + 10 = 11 s."""
    g = OpGraph.from_lists([0, 0], [0, 0], [], group=[0, 0])
    b = lower_bound(problem(g, cluster(device("x"), device("y")), [[1.0, 10.0], [10.0, 1.0]]))
    assert b.simple_s == pytest.approx(1.0, rel=1e-8)
    assert b.unit_s == pytest.approx(11.0, rel=1e-8) and b.bound_s == pytest.approx(11.0, rel=1e-8)


def test_packing_over_unlike_devices():
    """Eight independent ops, 1 s each on x (one lane), 4 s on y (four lanes). The work bound
    divides the best-device work over five lanes (1.6 s); the optimum puts four on each
    device: 4 s, and so does the packing bound (weights 1/2, 1/2)."""
    g = OpGraph.from_lists([0] * 8, [0] * 8, [])
    prob = problem(g, cluster(device("x"), device("y", lanes=4)), [[1.0, 4.0]] * 8)
    b = lower_bound(prob)
    assert b.work_s == 1.6
    assert b.packing_s == pytest.approx(4.0, rel=1e-3) and b.bound_s <= 4.0
    assert FastSimulator(prob).run(np.array([0] * 4 + [1] * 4)).step_time_s == 4.0


def test_memory_moves_a_unit_to_the_slow_device():
    g = OpGraph.from_lists([0], [0], [], param_bytes=[10**6])
    prob = problem(g, cluster(device("x", memory=10**5), device("y")), [[1.0, 5.0]])
    b = lower_bound(prob)
    assert b.simple_s == pytest.approx(1.0, rel=1e-8) and b.any_placement_s == pytest.approx(1.0, rel=1e-8)
    assert b.bound_s == pytest.approx(5.0, rel=1e-8)


def check_never_above(prob: PlacementProblem, placements: np.ndarray) -> None:
    b = lower_bound(prob)
    r = FastSimulator(prob).run_batch(placements)
    assert b.any_placement_s <= r.step_time_s.min()
    assert b.bound_s >= b.simple_s and b.any_placement_s >= b.simple_s
    fit = ~r.oom
    if fit.any():
        assert b.bound_s <= r.step_time_s[fit].min()


def random_case(seed: int, placements: int) -> tuple[PlacementProblem, np.ndarray]:
    g = random_dag(RandomDagConfig(ops=int(8 + seed % 70)), seed)
    prob = PlacementProblem.build(g, random_cluster(1 + seed % 4, seed))
    singles = np.stack([prob.single_device(d) for d in range(prob.num_devices)])
    return prob, np.vstack([prob.random_placements(placements, seed), singles])


@pytest.mark.parametrize("chunk", range(4))
def test_never_above_random_placements(chunk):
    for seed in range(chunk * 25, chunk * 25 + 25):
        check_never_above(*random_case(seed, 60))


@pytest.mark.slow
def test_never_above_random_placements_many():
    for seed in range(100, 500):
        check_never_above(*random_case(seed, 200))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mlp_3x1024_b256", "vae_06"])
@pytest.mark.parametrize("cluster_name", ["post-4gpu", "hetero"])
def test_never_above_on_corpus_graphs(name, cluster_name):
    from pathlib import Path
    from gplace.cluster import load_cluster
    from gplace.placers import SimMeasurer, get_placer
    from gplace.placers.base import cheap_heuristics
    path = Path(__file__).resolve().parents[2] / "datasets" / "corpus" / f"{name}.pb"
    if not path.exists():
        pytest.skip(f"{path} is not here (the corpus is built by datasets/build.py)")
    import gplace
    prob = PlacementProblem.build(gplace.load_graph(str(path)), load_cluster(cluster_name))
    m = SimMeasurer(prob)
    heur = np.stack([get_placer(h).place(prob, m, 0).placement for h in cheap_heuristics()])
    check_never_above(prob, np.vstack([heur, prob.random_placements(500, 0)]))


# ---- TF1 loops: a crossing into a loop body is paid per iteration (OpCosts.runs) -----------
def with_runs(prob: PlacementProblem, runs, scale: bool = False) -> PlacementProblem:
    """``prob`` with op runs; ``scale``: its times multiplied by them (as cost.py does)."""
    import dataclasses
    runs = np.asarray(runs, np.int64)
    time_s = prob.costs.time_s * runs[:, None] if scale else prob.costs.time_s
    return dataclasses.replace(prob, costs=prob.costs._replace(runs=runs, time_s=time_s))


def test_path_bound_pays_a_loops_crossings():
    """a (1 s on x, 100 on y) -> b (1 s on y, 100 on x), 1e9 B at 1e9 B/s, latency 0.5 s: once,
    the path bound is the split placement's 1 + 0.5 + 1 + 1 = 3.5 s; with b a 5-iteration loop
    body the tensor crosses 5 times, 1 + 2.5 + 5 + 1 = 9.5 s, which the split placement
    simulates to (still the best: one device takes 101 s)."""
    g = OpGraph.from_lists([0, 0], [10**9, 0], [(0, 1)])
    once = problem(g, cluster(device("x"), device("y"), latency=0.5), [[1.0, 100.0], [100.0, 1.0]])
    assert lower_bound(once).path_s == pytest.approx(3.5, rel=1e-8)
    looped = with_runs(once, [1, 5])
    b = lower_bound(looped)
    assert b.path_s == pytest.approx(9.5, rel=1e-8) and b.bound_s == b.path_s
    assert FastSimulator(looped).run(np.array([0, 1])).step_time_s == 9.5
    check_never_above(looped, np.array([[0, 0], [0, 1], [1, 0], [1, 1]]))


def test_path_bound_pays_a_control_edges_latency_per_run():
    g = OpGraph.from_lists([0, 0], [0, 0], control_edges=[(0, 1)])
    once = problem(g, cluster(device("x"), device("y"), latency=0.5), [[1.0, 10.0], [10.0, 1.0]])
    assert lower_bound(once).path_s == pytest.approx(2.5, rel=1e-8)
    looped = with_runs(once, [1, 4])
    assert lower_bound(looped).path_s == pytest.approx(4.0, rel=1e-8)
    assert FastSimulator(looped).run(np.array([0, 1])).step_time_s == 4.0


def test_without_loops_the_bound_is_unchanged():
    """Runs of 1 everywhere: every figure equals the bound without runs, bit for bit."""
    for seed in range(8):
        prob, _ = random_case(seed, 0)
        ones = with_runs(prob, np.ones(prob.graph.num_ops))
        assert tuple(lower_bound(ones)) == tuple(lower_bound(prob))


@pytest.mark.parametrize("chunk", range(2))
def test_never_above_random_looped_placements(chunk):
    for seed in range(chunk * 20, chunk * 20 + 20):
        prob, placements = random_case(seed, 60)
        runs = np.random.default_rng(seed).choice([1, 1, 2, 5, 8], size=prob.graph.num_ops)
        check_never_above(with_runs(prob, runs, scale=True), placements)


@pytest.mark.parametrize("name", ["rnn_loop_00", "rnn_loop_10"])
@pytest.mark.parametrize("cluster_name", ["post-4gpu", "hetero"])
def test_never_above_on_looped_corpus_graphs(name, cluster_name):
    """Profiles with op runs: the bound (now charging each crossing per iteration) stays below
    every simulated placement, the heuristics' included."""
    from pathlib import Path
    from gplace.cluster import load_cluster
    from gplace.cost import cost_model_for
    from gplace.opgraph_cache import load_graph
    from gplace.placers import SimMeasurer, get_placer
    from gplace.placers.base import cheap_heuristics
    path = Path(__file__).resolve().parents[2] / "datasets" / "corpus" / f"{name}.pb"
    if not path.exists():
        pytest.skip(f"{path} is not here (the corpus is built by datasets/build.py)")
    prob = PlacementProblem.build(load_graph(str(path)), load_cluster(cluster_name),
                                  cost_model_for(path))
    assert prob.costs.runs is not None and prob.costs.runs.max() > 1
    m = SimMeasurer(prob)
    heur = np.stack([get_placer(h).place(prob, m, 0).placement for h in cheap_heuristics()])
    check_never_above(prob, np.vstack([heur, prob.random_placements(300, 0)]))
