"""The classic heuristics on graphs whose best placement is known by hand.

Costs come from the default CostModel (roofline at efficiency 0.5, gplace.cost): with
peak 1e12 FLOP/s, 1e12 FLOPs take 2 s; memory bandwidth is 1e18 B/s and launch overhead 0, so
the bytes term is negligible (below 1e-7 s) and step times match the hand figures to 1e-6.
"""

import numpy as np
import pytest

from gplace.cluster import cluster_from_dict
from gplace.graph import OpGraph
from gplace.placers import SimMeasurer, get_placer
from gplace.placers.heuristics import HEURISTICS
from gplace.placers.heuristics_list import favourite_children
from gplace.placers.heuristics_static import forward_anchor
from gplace.placers.heuristics_view import build_view
from gplace.problem import PlacementProblem
from gplace.sim.random_graphs import RandomDagConfig, random_dag

TERA = 10**12
SCHEDULERS = ("heft", "m-etf", "m-sct")
MEMORY_AWARE = ("m-topo", "m-etf", "m-sct")


def cluster(memory=(10**13, 10**13), bandwidth=1e9, cpu_memory=None):
    """GPUs of 1e12 FLOP/s with the given memories (and a 4x slower host CPU if asked)."""
    devices = [{"name": f"gpu{i}", "tf_device": f"/device:GPU:{i}", "kind": "gpu",
                "peak_flops": 1e12, "mem_bandwidth": 1e18, "memory_bytes": m,
                "launch_overhead_s": 0.0} for i, m in enumerate(memory)]
    if cpu_memory:
        devices.insert(0, {"name": "cpu", "tf_device": "/device:CPU:0", "kind": "cpu",
                           "peak_flops": 0.25e12, "mem_bandwidth": 1e18,
                           "memory_bytes": cpu_memory, "launch_overhead_s": 0.0, "lanes": 1})
    return cluster_from_dict({"name": "test", "devices": devices,
                              "default_link": {"bandwidth": bandwidth, "latency_s": 0.0}}, "test")


def place(name, problem):
    return get_placer(name, seed=0).place(problem, SimMeasurer(problem), 0)


def two_chains():
    """a0->a1->a2 and b0->b1->b2, 2 s per op, 1e9 B tensors (1 s on the 1e9 B/s link)."""
    g = OpGraph.from_lists([TERA] * 6, [10**9] * 6, [(0, 1), (1, 2), (3, 4), (4, 5)])
    return PlacementProblem.build(g, cluster())


@pytest.mark.parametrize("name", [h for h in HEURISTICS if h != "single"])
def test_two_independent_chains_go_one_per_gpu(name):
    r = place(name, two_chains())
    assert r.feasible
    assert r.step_time_s == pytest.approx(6.0, rel=1e-6)   # 3 ops x 2 s on each GPU
    assert r.placement[:3].tolist() == [r.placement[0]] * 3
    assert r.placement[3:].tolist() == [1 - r.placement[0]] * 3


def test_single_puts_both_chains_on_one_gpu():
    r = place("single", two_chains())
    assert r.step_time_s == pytest.approx(12.0, rel=1e-6)
    assert len(set(r.placement.tolist())) == 1


def fork_join_with_huge_tensors():
    """c0 -> {c1, c2} -> c3, 2 s per op, 1e10 B tensors (10 s per transfer). Spreading c1 and
    c2 would save 2 s if transfers were free; with them, one device (8 s) is optimal."""
    g = OpGraph.from_lists([TERA] * 4, [10**10] * 4, [(0, 1), (0, 2), (1, 3), (2, 3)])
    return PlacementProblem.build(g, cluster())


@pytest.mark.parametrize("name", SCHEDULERS + ("single",))
def test_huge_tensors_keep_the_graph_on_one_device(name):
    r = place(name, fork_join_with_huge_tensors())
    assert len(set(r.placement.tolist())) == 1
    assert r.step_time_s == pytest.approx(8.0, rel=1e-6)


def parameters_over_one_gpu():
    """A chain of four ops with 4e9 parameter bytes each (16e9) on GPUs of 9e9 and 10e9 bytes;
    ops 0 and 1 are one colocation group. No single GPU holds the model; two do."""
    g = OpGraph.from_lists([TERA] * 4, [10**6] * 4, [(0, 1), (1, 2), (2, 3)],
                           param_bytes=[4 * 10**9] * 4, group=[0, 0, 1, 2])
    return PlacementProblem.build(g, cluster(memory=(9 * 10**9, 10 * 10**9)))


@pytest.mark.parametrize("name", MEMORY_AWARE)
def test_memory_aware_heuristics_split_a_model_one_gpu_cannot_hold(name):
    problem = parameters_over_one_gpu()
    r = place(name, problem)
    assert r.feasible, r.info
    assert set(r.placement.tolist()) == {0, 1}
    peak = SimMeasurer(problem).measure(r.placement[None]).peak_bytes[0]
    assert (peak <= [9 * 10**9, 10 * 10**9]).all()


def test_single_is_infeasible_and_picks_the_smallest_shortfall():
    r = place("single", parameters_over_one_gpu())
    assert not r.feasible and r.step_time_s == np.inf
    assert r.placement.tolist() == [1, 1, 1]   # the 10e9-byte GPU falls short the least


def test_host_cpu_only_takes_what_fits_nowhere_else():
    # four 1e12-FLOP ops in a chain; the CPU is 4x slower and has room for everything
    g = OpGraph.from_lists([TERA] * 4, [10**6] * 4, [(0, 1), (1, 2), (2, 3)],
                           param_bytes=[10**9, 10**9, 10**9, 20 * 10**9])
    problem = PlacementProblem.build(g, cluster(memory=(10**10, 10**10), cpu_memory=10**12))
    for name in ("expert", "m-topo", "m-etf", "m-sct"):
        r = place(name, problem)
        assert r.feasible, name
        assert r.placement[3] == 0, name            # 20e9 B of parameters fit only the CPU
        assert (r.placement[:3] > 0).all(), name    # the rest stays on the GPUs


def test_expert_keeps_gradients_with_their_forward_ops():
    names = ["x", "dense/MatMul", "dense/Relu", "loss",
             "gradients/loss_grad/Fill", "gradients/dense/Relu_grad/ReluGrad",
             "gradients/dense/MatMul_grad/MatMul_1", "gradients/AddN"]
    edges = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (2, 5), (5, 6), (0, 6), (6, 7)]
    anchor = forward_anchor(names)
    assert anchor.tolist() == [0, 1, 2, 3, 3, 2, 1, -1]
    g = OpGraph.from_lists([TERA] * 8, [10**6] * 8, edges, names=names)
    r = place("expert", PlacementProblem.build(g, cluster(memory=(10**13,) * 3)))
    p = r.placement
    assert p[5] == p[2] and p[6] == p[1] and p[4] == p[3]
    assert len(set(p.tolist())) > 1                      # the layers are spread over GPUs


def random_problem():
    g = random_dag(RandomDagConfig(ops=300, group_fraction=0.3), seed=3)
    return PlacementProblem.build(g, cluster(memory=(10**10,) * 3, cpu_memory=10**11))


@pytest.mark.parametrize("name", HEURISTICS)
def test_every_heuristic_is_deterministic_free_and_keeps_units_whole(name):
    problem = random_problem()
    assert problem.num_units < problem.graph.num_ops          # multi-op colocation groups
    first, second = place(name, problem), place(name, problem)
    assert first.samples == 0 and first.history.step_time_s.size == 0
    assert first.placement.shape == (problem.num_units,)
    assert first.placement.min() >= 0 and first.placement.max() < problem.num_devices
    op_dev = problem.expand(first.placement)
    np.testing.assert_array_equal(problem.from_op_devices(op_dev), first.placement)
    np.testing.assert_array_equal(first.placement, second.placement)
    assert first.step_time_s == second.step_time_s


@pytest.mark.parametrize("name", SCHEDULERS)
def test_schedulers_beat_one_device_on_a_parallel_graph(name):
    problem = random_problem()
    assert place(name, problem).step_time_s < place("single", problem).step_time_s


def test_favourite_children_are_a_greedy_matching_on_transfer_size():
    # p0 (1e9 B) and p1 (1e6 B) both feed c0 and c1: p0 takes c0 (largest edge first), c0 is
    # then taken, so p1 gets c1; every parent has one favourite, every child one parent.
    g = OpGraph.from_lists([TERA] * 4, [10**9, 10**6, 0, 0], [(0, 2), (0, 3), (1, 2), (1, 3)])
    problem = PlacementProblem.build(g, cluster())
    fav = favourite_children(problem, build_view(problem))
    assert fav.tolist() == [2, 3, -1, -1]


@pytest.mark.parametrize("name", ["m-etf", "m-sct"])
def test_an_op_retargeted_to_a_device_already_asked_is_still_scheduled(name):
    """gnn_08 on post-2gpu: asking a device for its best pair drops invalid heap entries, and
    an op left without one moved to a device asked earlier in the round; m-ETF then found no
    pair anywhere and stopped with an assertion (gplace place crashed on this corpus graph)."""
    from pathlib import Path
    from gplace.cluster import load_cluster
    from gplace.importer import load_graph
    path = Path(__file__).resolve().parents[2] / "datasets" / "corpus" / "gnn_08.pb"
    problem = PlacementProblem.build(load_graph(path), load_cluster("post-2gpu"))
    r = place(name, problem)
    assert r.placement.shape == (problem.num_units,) and (r.placement >= 0).all()


# ---- TF1 loops: a tensor read in a loop crosses devices once per iteration ------------------
def with_runs(problem, runs):
    """The problem with ``OpCosts.runs`` (its times, set by hand, stay per step)."""
    import dataclasses
    return dataclasses.replace(problem, costs=problem.costs._replace(
        runs=np.asarray(runs, np.int64)))


def hand_problem(graph, time_s, latency=0.0, x_memory=1 << 40):
    from tests.sim.helpers import cluster as hand_cluster, device, problem
    return problem(graph, hand_cluster(device("x", memory=x_memory), device("y"), latency=latency),
                   time_s)


@pytest.mark.parametrize("name", SCHEDULERS)
def test_a_tensor_read_in_a_loop_is_charged_per_crossing(name):
    """a (1 s on x) -> b (1 s on y, 100 s on x; its parameters fit only y, for m-ETF, which
    picks the earliest start): 1e9 B at 1e9 B/s, latency 0.5 s. b running 5 times reads a's
    tensor 5 times: data ready at 1 + 5 * 0.5 + 5 * 1 = 8.5, not 1 + 0.5 + 1; the schedule's
    estimate is the simulator's step time (nothing contends)."""
    from gplace.sim import simulate_reference
    g = OpGraph.from_lists([0, 0], [10**9, 0], [(0, 1)], param_bytes=[0, 3 * 10**9])
    once = hand_problem(g, [[1.0, 100.0], [100.0, 1.0]], latency=0.5, x_memory=2 * 10**9)
    inv_bw = 1.0 / 1e9
    for problem, rep, step in ((once, 1.0, 3.5), (with_runs(once, [1, 5]), 5.0, 9.5)):
        r = place(name, problem)
        assert r.placement.tolist() == [0, 1]
        assert r.step_time_s == pytest.approx(step, rel=1e-12)
        assert r.step_time_s == simulate_reference(problem, r.placement).step_time_s
        # the estimate's own arithmetic: finish(a) + latency * rep + bytes * inv_bw * rep + 1 s
        estimate = r.info["schedule_estimate_s"]
        assert estimate == 1.0 + 0.5 * rep + 10**9 * inv_bw * rep + 1.0
        assert estimate == pytest.approx(step, rel=1e-12)
    # rep 1: the arithmetic before repeats, bit for bit
    assert place(name, once).info["schedule_estimate_s"] == 1.0 + 0.5 + 10**9 * inv_bw + 1.0


@pytest.mark.parametrize("name", SCHEDULERS)
def test_a_loop_keeps_its_input_on_the_producers_device(name):
    """a (1 s) feeds b and c (2 s each), 1e9 B (1 s on the link). Once: b and c run side by
    side on both devices (4 s). With c a 5-iteration loop body (2 s in all), a's tensor would
    cross 5 times (5 s): all on one device (5 s) is faster, and the estimate says so."""
    from gplace.sim import simulate_reference
    g = OpGraph.from_lists([0] * 3, [10**9, 0, 0], [(0, 1), (0, 2)])
    once = hand_problem(g, [1.0, 2.0, 2.0])
    r = place(name, once)
    assert r.placement[1] != r.placement[2] and r.step_time_s == 4.0
    assert r.info["schedule_estimate_s"] == pytest.approx(4.0, rel=1e-12)
    looped = with_runs(once, [1, 1, 5])
    r = place(name, looped)
    assert len(set(r.placement.tolist())) == 1 and r.step_time_s == 5.0
    assert r.info["schedule_estimate_s"] == 5.0
    assert simulate_reference(looped, r.placement).step_time_s == 5.0


def test_favourite_children_weigh_transfers_by_crossings():
    """p0 (1e9 B) feeds c0 and c1, p1 (1e6 B) feeds c0 and c2. Once, p0 -> c0 moves the most
    and p1 gets c2. With c2 a 5000-iteration loop body p1's tensor crosses 5000 times (5e9 B
    per step): p1 -> c0 goes first and p0 gets c1."""
    g = OpGraph.from_lists([TERA] * 5, [10**9, 10**6, 0, 0, 0], [(0, 2), (0, 3), (1, 2), (1, 4)])
    problem = PlacementProblem.build(g, cluster())
    assert favourite_children(problem, build_view(problem)).tolist() == [2, 4, -1, -1, -1]
    looped = with_runs(problem, [1, 1, 1, 1, 5000])
    assert favourite_children(looped, build_view(looped)).tolist() == [3, 2, -1, -1, -1]


def test_expert_joins_the_neighbour_with_the_most_bytes_per_step():
    """Layers a, b, y cut over two GPUs (a | b, y); the gradient op x (no forward op of its
    own) reads 1e9 B from a and 1e6 B from b. Once, it joins a; with y a 5000-iteration loop
    body, b's tensor crosses 5000 times a step (5e9 B), so x joins b."""
    names = ["in", "a", "b", "y", "gradients/x"]
    edges = [(0, 1), (0, 2), (2, 3), (1, 4), (2, 4)]
    g = OpGraph.from_lists([TERA] * 5, [10**6, 10**9, 10**6, 0, 0], edges, names=names)
    problem = PlacementProblem.build(g, cluster())
    p = place("expert", problem).placement
    assert p[1] != p[2] and p[2] == p[3] and p[4] == p[1]
    p = place("expert", with_runs(problem, [1, 1, 1, 5000, 1])).placement
    assert p[1] != p[2] and p[2] == p[3] and p[4] == p[2]
