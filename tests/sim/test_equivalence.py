"""fast == reference, bit for bit, on seeded random DAGs (alpa tests its new solver this way)."""

import dataclasses

import numpy as np
import pytest

from gplace.cost import CostModel, OpCosts
from gplace.problem import PlacementProblem
from gplace.sim import FastSimulator, simulate_reference
from gplace.sim.random_graphs import RandomDagConfig, random_cluster, random_dag

SEEDS = range(220)


def _case(seed: int) -> tuple[PlacementProblem, np.ndarray]:
    rng = np.random.default_rng(10_000 + seed)
    cfg = RandomDagConfig(ops=int(rng.choice([1, 2, 5, 12, 40, 90, 200])),
                          max_fan_in=int(rng.integers(0, 5)), window=int(rng.choice([2, 10, 60])),
                          control_fraction=float(rng.choice([0.0, 0.2, 1.0])))
    graph = random_dag(cfg, seed)
    cl = random_cluster(int(rng.integers(1, 6)), seed)
    prob = PlacementProblem.build(graph, cl, CostModel())
    if seed % 2:  # coarse costs: lots of exact ties in time, the hard case for tie-breaking
        t = rng.choice([0.0, 2.0 ** -12, 2.0 ** -11, 3 * 2.0 ** -12], size=prob.costs.time_s.shape)
        temp = rng.choice([0, 0, 1 << 12, 1 << 20], size=t.shape)
        prob = PlacementProblem(graph, cl, OpCosts(t, temp, prob.costs.output_bytes,
                                prob.costs.measured, prob.costs.estimated, ()),
                                prob.unit_of_op, prob.num_units)
    if seed % 3 == 0:  # mostly one device, a few units elsewhere
        placement = np.where(rng.random(prob.num_units) < 0.8, 0,
                             rng.integers(0, cl.num_devices, prob.num_units))
    else:
        placement = rng.integers(0, cl.num_devices, prob.num_units)
    return prob, placement


def _assert_same(a, b):
    assert a.step_time_s == b.step_time_s
    np.testing.assert_array_equal(a.busy_s, b.busy_s)
    np.testing.assert_array_equal(a.peak_bytes, b.peak_bytes)
    assert a.oom == b.oom
    np.testing.assert_array_equal(a.op_start_s, b.op_start_s)
    np.testing.assert_array_equal(a.op_end_s, b.op_end_s)
    for x, y in zip(a.transfers, b.transfers):
        np.testing.assert_array_equal(x, y)


def _check_both_ways(prob, placement):
    """The fast simulator, one placement with its schedule and in a batch, against the
    reference; returns the reference's result."""
    ref = simulate_reference(prob, placement)
    fast = FastSimulator(prob)
    _assert_same(ref, fast.run(placement))
    batch = fast.run_batch(np.stack([placement, np.zeros_like(placement)]))
    assert batch.step_time_s[0] == ref.step_time_s
    np.testing.assert_array_equal(batch.peak_bytes[0], ref.peak_bytes)
    assert batch.num_transfers[0] == ref.transfers.output.shape[0]
    assert batch.step_time_s[1] == simulate_reference(prob, np.zeros_like(placement)).step_time_s
    return ref


def test_fast_equals_reference_on_random_dags():
    checked = 0
    for seed in SEEDS:
        prob, placement = _case(seed)
        _check_both_ways(prob, placement)
        checked += 1
    assert checked >= 200


def test_random_cases_exercise_transfers_lanes_and_ties():
    """Guards the test bed itself: the cases must cover what they claim to."""
    transfers = lanes = ties = 0
    for seed in range(40):
        prob, placement = _case(seed)
        r = simulate_reference(prob, placement)
        transfers += r.transfers.output.shape[0] > 0
        lanes += any(d.lanes > 1 for d in prob.cluster.devices)
        ties += np.unique(r.op_end_s).size < r.op_end_s.size
    assert transfers > 10 and lanes > 10 and ties > 10


@pytest.mark.parametrize("name", ["function_switch.pbtxt", "loops_and_resource_vars.pbtxt",
                                  "large_function_graph.pbtxt"])
def test_fast_equals_reference_on_imported_graph(name):
    from pathlib import Path

    import gplace
    from gplace.cluster import load_cluster
    path = Path(__file__).resolve().parents[3] / "shared" / "testdata" / "tf-grappler" / name
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    graph = gplace.load_graph(path)
    prob = PlacementProblem.build(graph, load_cluster("post-4gpu"))
    rng = np.random.default_rng(0)
    for _ in range(3):
        placement = rng.integers(0, prob.num_devices, prob.num_units)
        _assert_same(simulate_reference(prob, placement), FastSimulator(prob).run(placement))


def _with_receive_cpu(prob: PlacementProblem, seed: int) -> PlacementProblem:
    """``prob`` on its cluster with receive CPU on every link (powers of two, so that lane
    times tie often), none on one link in three and a per-byte part only on one in three of
    the rest: receive tasks mixed with plain arrivals; a third of the outputs empty."""
    rng = np.random.default_rng(seed)

    def charged(link):
        if rng.random() < 1 / 3:
            return link
        fixed = 0.0 if rng.random() < 1 / 3 else float(2.0 ** -rng.integers(12, 18))
        return dataclasses.replace(link, recv_cpu_s=fixed,  # 0: empty tensors cost nothing
                                   recv_cpu_s_per_byte=float(2.0 ** -rng.integers(30, 36)))
    cl = prob.cluster
    cl = dataclasses.replace(cl, links=tuple(charged(l) for l in cl.links),
                             default_link=charged(cl.default_link))
    return dataclasses.replace(prob, cluster=cl)


def test_fast_equals_reference_with_receive_cpu():
    receipts = 0
    for seed in range(120):
        prob, placement = _case(seed)
        prob = _with_receive_cpu(prob, seed)
        if seed % 2:  # empty tensors: a per-byte receive cost of 0 s runs no receive task
            g = prob.graph
            empty = np.random.default_rng(seed).random(g.out_bytes.shape) < 1 / 3
            g = dataclasses.replace(g, out_bytes=np.where(empty, 0, g.out_bytes))
            prob = dataclasses.replace(prob, graph=g)
        ref = _check_both_ways(prob, placement)
        receipts += ref.transfers.output.shape[0] > 0 and prob.cluster.link_table().recv_cpu_s.any()
    assert receipts > 30
