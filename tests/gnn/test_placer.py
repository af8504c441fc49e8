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



def test_zero_shot_keeps_the_rollout_with_the_best_dispatch_estimate():
    """Zero-shot in one order with no samples is that order's greedy rollout. In both orders it
    is the greedy rollout or one of K samples of either order, whichever the dispatch-order
    list schedule estimates fastest, the same for the same seed, and it may differ between
    seeds."""
    import dataclasses
    from gplace.gnn.infer import as_float64, policy_weights, scores, tempered
    from gplace.gnn.learn import ProblemState
    from gplace.gnn.schedule import FORCED, GREEDY, rollout
    p, _ = setup(5)
    torch.manual_seed(1)
    policy = GNNPolicy(hidden_channels=8, num_layers=1)
    state = ProblemState(p, SimMeasurer(p))
    s, w, _ = as_float64(tempered(scores(policy_weights(policy), state.numpy_features),
                                  FinetuneConfig().learn.temperature))
    g = rollout(state.sched, s, w, GREEDY).placements[0]
    judge = state.sched._replace(dispatch=True)
    estimate = lambda z: rollout(judge, s, w, FORCED, forced=z[None]).estimate_s[0]
    g_dispatch = rollout(judge, s, w, GREEDY).placements[0]
    unpolished = dataclasses.replace(FinetuneConfig(), zero_shot_polish=0)
    own = dataclasses.replace(unpolished, zero_shot_rollouts=0, zero_shot_both_orders=False)
    assert np.array_equal(GNNPlacer(policy=policy, config=own).zero_shot(p), g)
    greedies = GNNPlacer(policy=policy, config=dataclasses.replace(
        unpolished, zero_shot_rollouts=0, zero_shot_prior=False)).zero_shot(p)
    assert estimate(greedies) == min(estimate(g), estimate(g_dispatch))
    picks = [GNNPlacer(seed=k, policy=policy, config=unpolished).zero_shot(p)
             for k in (0, 0, 1, 2, 3)]
    assert np.array_equal(picks[0], picks[1])
    assert np.array_equal(GNNPlacer(seed=0, policy=policy, config=unpolished).zero_shot(p, state),
                          picks[0])
    assert all(estimate(z) <= estimate(greedies) for z in picks)
    assert any(estimate(z) < estimate(greedies) for z in picks)
    assert len({z.tobytes() for z in picks[1:]}) > 1
    # the default then hill-climbs on the same estimate from the pick
    assert estimate(GNNPlacer(seed=0, policy=policy).zero_shot(p)) < estimate(picks[0])


def test_a_zero_shot_placement_builds_no_optimizer():
    """torch's Optimizer imports torch._dynamo (seconds); zero-shot needs none."""
    import subprocess
    import sys
    code = ("import sys; from gplace.gnn.placer import GNNPlacer; from gplace.cluster import "
            "load_cluster; from gplace.placers import SimMeasurer; from gplace.problem import "
            "PlacementProblem; from gplace.sim.random_graphs import RandomDagConfig, random_dag; "
            "p = PlacementProblem.build(random_dag(RandomDagConfig(ops=30), 0), "
            "load_cluster('post-4gpu')); GNNPlacer().place(p, SimMeasurer(p), 0); "
            "print('torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False"


def test_an_expert_search_keeps_its_rule_whatever_the_defaults(monkeypatch):
    """A cached expert is a function of its key: the search fine-tunes with EXPERT_RULE
    (zero-shot by the network's own rollouts), not with FinetuneConfig's defaults."""
    from gplace.gnn import placer
    from gplace.gnn.experts import EXPERT_RULE, search_expert
    seen = []

    class Spy(GNNPlacer):
        def __init__(self, *args, **kwargs):
            seen.append(kwargs.get("config"))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(placer, "GNNPlacer", Spy)
    p, _ = setup(3)
    search_expert(p, SimMeasurer(p), [], budget=4, seed=0, hidden_channels=8, num_layers=1)
    assert seen == [EXPERT_RULE] and not EXPERT_RULE.zero_shot_prior
    assert FinetuneConfig().zero_shot_prior  # the default differs, so this test can fail
    assert not EXPERT_RULE.estimate_contention  # set apart from the default, which may change



def test_the_screen_keeps_the_distinct_moves_of_lowest_estimate():
    """_Screen.lowest: rows that differ from the base, no duplicates, lowest dispatch-order
    estimate first (each checked against a whole ESTIMATE replay), at most ``count``."""
    from gplace.gnn.decision import ESTIMATE
    from gplace.gnn.placer import _Screen
    from gplace.gnn.schedule import DYN_FEATURES, build_sched, rollout
    p, _ = setup(4)
    sched = build_sched(p, dispatch=True)
    rng = np.random.default_rng(0)
    base = rng.integers(0, p.num_devices, p.num_units)
    cands = np.repeat(base[None], 40, axis=0)
    for row in range(30):  # 10 rows stay the base; moves repeat
        u = rng.integers(0, 6)
        cands[row, u] = (base[u] + 1 + rng.integers(0, p.num_devices - 1)) % p.num_devices
    zero = np.zeros((p.num_units, p.num_devices), np.float32)
    w = np.zeros((p.num_units, DYN_FEATURES), np.float32)

    def whole(rows):
        return rollout(sched, zero, w, ESTIMATE, forced=rows).estimate_s

    screen = _Screen(sched)
    kept = screen.lowest(base, cands, 5)
    distinct = np.unique(cands[(cands != base).any(axis=1)], axis=0)
    assert len(kept) == min(5, len(distinct)) and len(distinct) > 5
    assert (kept != base).any(axis=1).all() and len(np.unique(kept, axis=0)) == len(kept)
    est = whole(kept)
    assert (np.diff(est) >= 0).all()
    assert est[-1] <= np.sort(whole(distinct))[len(kept) - 1] * (1 + 1e-12)
    # asked again from the same base: what it handed out is left out
    again = screen.lowest(base, cands, 5)
    assert not {r.tobytes() for r in again} & {r.tobytes() for r in kept}
    # a new base: the screen replays near it, and the earlier moves may come back
    moved = kept[0].copy()
    back = screen.lowest(moved, cands, 50)
    assert np.array_equal(screen.near.base, moved) and len(back) == len(distinct)
    assert (np.diff(whole(back[~(back == moved).all(axis=1)])) >= 0).all()


def test_the_screen_puts_moves_that_overfill_a_device_last():
    from gplace.gnn.placer import _Screen
    from gplace.gnn.schedule import build_sched
    p, _ = setup(6)
    sched = build_sched(p, dispatch=True)
    base = np.zeros(p.num_units, np.int64)
    cands = np.repeat(base[None], 3, axis=0)
    cands[0, :] = 1  # everything on device 1
    cands[1, 0] = 2
    cands[2, 1] = 3
    capacity = np.full(p.num_devices, sched.need.sum())
    capacity[1] *= 0.5  # device 1 cannot hold everything
    tight = sched._replace(capacity=capacity)
    order = _Screen(tight).lowest(base, cands, 3)
    assert (order[-1] == 1).all()  # the move that does not fit is measured last
    assert not (order[:2] == 1).all(axis=1).any()


def test_local_screen_one_draws_and_measures_as_before(monkeypatch):
    """local_screen 1 (the expert searches' rule): no screen, the drawn moves measured as
    drawn, so cached experts stay what they were."""
    from gplace.gnn import placer as placer_module

    def no_screen(*args):
        raise AssertionError("the screen ran")

    monkeypatch.setattr(placer_module._Screen, "lowest", no_screen)
    p, policy = setup(5, "hetero")
    r = GNNPlacer(seed=1, policy=policy, config=FinetuneConfig(local_screen=1)).place(
        p, SimMeasurer(p), 60)
    assert r.samples == 60


def test_the_budget_is_spent_where_no_move_is_left():
    """One device: every drawn move is the best placement itself, so the screen hands out
    nothing; the drawn ones are measured and the run ends."""
    from gplace.cluster import Cluster
    torch.manual_seed(0)
    one = Cluster("one", load_cluster("post-4gpu").devices[:1])
    p = PlacementProblem.build(random_dag(RandomDagConfig(ops=30), 0), one)
    r = GNNPlacer(seed=0, policy=GNNPolicy(hidden_channels=8, num_layers=1)).place(
        p, SimMeasurer(p), 100)
    assert r.samples == 100


def test_screened_local_moves_cost_no_samples_and_keep_the_budget():
    """With the screen, the budget is still spent exactly and the result is deterministic;
    local_screen 1 draws differently from 16 (the screen changes what is measured)."""
    p, policy = setup(5, "hetero")
    runs = {}
    for screen in (1, 16, 16):
        m = Counting(p)
        cfg = FinetuneConfig(local_screen=screen)
        r = GNNPlacer(seed=1, policy=policy, config=cfg).place(p, m, 60)
        assert r.samples == 60 and m.calls == 60 + 1
        runs.setdefault(screen, []).append((r.placement, r.history.step_time_s))
    (a, ta), (b, tb) = runs[16]
    assert np.array_equal(a, b) and np.array_equal(ta, tb)
    assert not np.array_equal(runs[1][0][1], ta)


def test_unique_rows_is_np_unique_over_rows():
    """The screen's distinct moves in np.unique's order (ties among equal estimates keep
    it), device numbers past one byte included."""
    from gplace.gnn.placer import unique_rows
    rng = np.random.default_rng(0)
    for _ in range(200):
        units, devices = int(rng.integers(1, 40)), int(rng.integers(2, 700))
        rows = np.repeat(rng.integers(devices, size=units)[None], int(rng.integers(1, 20)), 0)
        for row in rows:
            row[rng.integers(units, size=int(rng.integers(0, 3)))] = rng.integers(devices)
        assert np.array_equal(unique_rows(rows), np.unique(rows, axis=0))
