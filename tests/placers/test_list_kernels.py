"""The compiled list schedulers against their plain references, bit for bit, on random DAGs
with random clusters (tight memories, lanes, exact ties) and on corpus graphs: m-ETF / m-SCT
(gplace.placers.etf_kernel against EtfScheduler: placement, makespan, overflow count) and
HEFT (gplace.placers.heft_kernel against heft_reference and upward_rank_reference)."""

from pathlib import Path

import numpy as np
import pytest

from gplace.cluster import load_cluster
from gplace.placers.heuristics_list import (EtfScheduler, etf, favourite_children, heft,
                                            heft_reference, upward_rank,
                                            upward_rank_reference)
from gplace.placers.heuristics_view import build_view
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
