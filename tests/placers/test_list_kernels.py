"""The compiled list schedulers against their plain references, bit for bit, on random DAGs
with random clusters (tight memories, lanes, exact ties) and on corpus graphs: m-ETF / m-SCT
(gplace.placers.etf_kernel against EtfScheduler: placement, makespan, overflow count) and
HEFT (gplace.placers.heft_kernel against heft_reference and upward_rank_reference); the same
with TF1 loops (``OpCosts.runs``: communication times the crossings per step), and without
loops the arithmetic of the communication estimates as it was before repeats."""

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from gplace.cluster import load_cluster
from gplace.placers.heuristics_list import (EtfScheduler, etf, favourite_children, heft,
                                            heft_reference, upward_rank,
                                            upward_rank_reference)
from gplace.placers.heuristics_view import build_view, data_ready
from gplace.problem import PlacementProblem
from gplace.sim.random_graphs import RandomDagConfig, random_cluster, random_dag

CORPUS = Path(__file__).resolve().parents[2] / "datasets" / "corpus"


def assert_same(problem: PlacementProblem, use_host: bool) -> None:
    view = build_view(problem)
    for fav in (None, favourite_children(problem, view)):
        ref = EtfScheduler(problem, view, fav, use_host)
        placement = ref.run()
        got, makespan, overflow = etf(problem, view, fav, use_host)
        assert got.tolist() == placement.tolist()
        assert makespan == ref.makespan  # exact: the same float operations in the same order
        assert overflow == ref.overflow
    assert np.array_equal(upward_rank(problem, view), upward_rank_reference(problem, view))
    placement, makespan = heft(problem, view)
    ref_placement, ref_makespan = heft_reference(problem, view)
    assert placement.tolist() == ref_placement.tolist() and makespan == ref_makespan


@pytest.mark.parametrize("seed", range(24))
def test_random_problems_schedule_identically(seed):
    rng = np.random.default_rng(seed)
    cfg = RandomDagConfig(ops=int(rng.integers(2, 300)), max_fan_in=int(rng.integers(1, 5)))
    problem = PlacementProblem.build(random_dag(cfg, seed),
                                     random_cluster(int(rng.integers(1, 6)), seed))
    assert_same(problem, use_host=bool(seed % 2))


@pytest.mark.parametrize("name,cluster", [("lstm_lm_2l_h256", "post-4gpu"),
                                          ("nmt_2l", "hetero")])
def test_corpus_graphs_schedule_identically(name, cluster):
    from gplace.opgraph_cache import load_graph
    problem = PlacementProblem.build(load_graph(str(CORPUS / f"{name}.pb")), load_cluster(cluster))
    assert_same(problem, use_host=False)


def looped(problem: PlacementProblem, seed: int, scale: bool = True) -> PlacementProblem:
    """The problem with random TF1 loop runs per op (times scaled by them, as cost.py does,
    unless not ``scale``)."""
    runs = np.random.default_rng(seed).choice([1, 1, 1, 2, 5, 8], size=problem.graph.num_ops)
    time_s = problem.costs.time_s * runs[:, None] if scale else problem.costs.time_s
    costs = problem.costs._replace(time_s=time_s, runs=runs.astype(np.int64))
    return dataclasses.replace(problem, costs=costs)


@pytest.mark.parametrize("seed", range(12))
def test_random_looped_problems_schedule_identically(seed):
    rng = np.random.default_rng(100 + seed)
    cfg = RandomDagConfig(ops=int(rng.integers(2, 300)), max_fan_in=int(rng.integers(1, 5)))
    problem = looped(PlacementProblem.build(random_dag(cfg, seed),
                                            random_cluster(int(rng.integers(2, 6)), seed)), seed)
    assert build_view(problem).pred_rep.max() > 1  # some pairs cross more than once
    assert_same(problem, use_host=bool(seed % 2))


def test_looped_corpus_graph_schedules_identically():
    from gplace.cost import cost_model_for
    from gplace.opgraph_cache import load_graph
    path = CORPUS / "rnn_loop_10.pb"
    if not path.is_file():
        pytest.skip(f"{path} is not in this checkout")
    problem = PlacementProblem.build(load_graph(str(path)), load_cluster("post-4gpu"),
                                     cost_model_for(path))
    assert problem.costs.runs is not None and build_view(problem).pred_rep.max() > 1
    assert_same(problem, use_host=False)


def old_upward_rank(problem: PlacementProblem, view) -> np.ndarray:
    """HEFT's upward rank as written before repeats: mean latency + bytes * mean inverse
    bandwidth."""
    nd = problem.num_devices
    off = ~np.eye(nd, dtype=bool)
    mean_lat = float(view.latency[off].mean()) if nd > 1 else 0.0
    mean_inv_bw = float(view.inv_bw[off].mean()) if nd > 1 else 0.0
    rank = problem.costs.time_s.mean(axis=1)
    for op in view.order[::-1].tolist():
        lo, hi = view.succ_ptr[op], view.succ_ptr[op + 1]
        if lo < hi:
            comm = mean_lat + view.succ_bytes[lo:hi] * mean_inv_bw
            rank[op] += float((comm + rank[view.succ_op[lo:hi]]).max())
    return rank


@pytest.mark.parametrize("seed", range(6))
def test_without_loops_the_estimates_are_the_old_arithmetic(seed):
    """Every rep 1 (no runs, or runs of 1): the ranks and data-ready times are bit for bit the
    old ``latency + bytes * inv_bw``; with loops they are not."""
    rng = np.random.default_rng(seed)
    base = PlacementProblem.build(random_dag(RandomDagConfig(ops=120, max_fan_in=4), seed),
                                  random_cluster(int(rng.integers(2, 6)), seed))
    ones = dataclasses.replace(base, costs=base.costs._replace(
        runs=np.ones(base.graph.num_ops, np.int64)))
    n = base.graph.num_ops
    finish = rng.uniform(0.0, 1.0, n)
    op_dev = rng.integers(0, base.num_devices, n)
    base_heft = heft(base, build_view(base))
    for problem in (base, ones):
        view = build_view(problem)
        assert (view.pred_rep == 1.0).all() and (view.succ_rep == 1.0).all()
        assert np.array_equal(upward_rank(problem, view), old_upward_rank(problem, view))
        for op in range(n):
            lo, hi = view.pred_ptr[op], view.pred_ptr[op + 1]
            if lo == hi:
                continue
            a = op_dev[view.pred_op[lo:hi]]
            old = (finish[view.pred_op[lo:hi]][:, None] + view.latency[a]
                   + view.pred_bytes[lo:hi, None] * view.inv_bw[a]).max(axis=0)
            assert np.array_equal(data_ready(view, op, finish, op_dev), old)
        placement, makespan = heft(problem, view)
        assert placement.tolist() == base_heft[0].tolist() and makespan == base_heft[1]
    loop = looped(base, seed, scale=False)  # the same times: only the repeats differ
    assert not np.array_equal(upward_rank(loop, build_view(loop)),
                              old_upward_rank(loop, build_view(loop)))
