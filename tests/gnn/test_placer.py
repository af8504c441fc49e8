"""The GNN placer behind the common interface: budget, seeds, determinism, zero-shot cost."""

import numpy as np
import torch

from gplace.cluster import load_cluster
from gplace.gnn.placer import FinetuneConfig, GNNPlacer
from gplace.gnn.policy import GNNPolicy
from gplace.placers import SimMeasurer, get_placer
from gplace.problem import PlacementProblem
from gplace.sim.random_graphs import RandomDagConfig, random_dag


class Counting(SimMeasurer):
    def __init__(self, problem):
        super().__init__(problem)
        self.calls = 0

    def measure(self, placements):
        self.calls += len(np.atleast_2d(placements))
        return super().measure(placements)


def setup(seed=0, cluster="post-4gpu"):
    torch.manual_seed(0)
    p = PlacementProblem.build(random_dag(RandomDagConfig(ops=150), seed), load_cluster(cluster))
    return p, GNNPolicy(hidden_channels=8, num_layers=1)


def test_the_budget_is_spent_exactly_and_the_seeds_are_never_lost():
    p, policy = setup(1)
    m = Counting(p)
    etf = get_placer("m-etf").place(p, m, 0)
    m.calls = 0
    r = GNNPlacer(seed=2, policy=policy).place(p, m, 37, seeds=[etf.placement])
    assert r.samples == 37 and len(r.history.step_time_s) == 37
    assert m.calls == 37 + 2  # the budget, plus zero-shot and the seed, which are free
    assert r.feasible and r.step_time_s <= etf.step_time_s
    assert r.step_time_s <= r.info["zero_shot_step_time_s"]


def test_same_seed_same_placement_and_the_policy_is_not_changed():
    p, policy = setup(2, "hetero")
    before = [q.detach().clone() for q in policy.parameters()]
    a = GNNPlacer(seed=4, policy=policy).place(p, SimMeasurer(p), 30)
    b = GNNPlacer(seed=4, policy=policy).place(p, SimMeasurer(p), 30)
    assert np.array_equal(a.placement, b.placement) and a.step_time_s == b.step_time_s
    assert all(torch.equal(x, y) for x, y in zip(before, policy.parameters()))


def test_zero_shot_measures_nothing_and_is_registered():
    p, policy = setup(3)
    placer = GNNPlacer(policy=policy, config=FinetuneConfig())
    z = placer.zero_shot(p)  # its measurer raises if called
    assert z.shape == (p.num_units,) and z.min() >= 0 and z.max() < p.num_devices
    from gplace.placers.base import REGISTRY
    get_placer("heft")  # imports every placer module
    assert REGISTRY["gnn"] is GNNPlacer

