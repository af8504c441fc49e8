"""Every sampling placer: budget, colocation, memory, determinism; and that it learns."""

import numpy as np
import pytest

from gplace.cluster import cluster_from_dict
from gplace.graph import OpGraph
from gplace.placers import SimMeasurer, get_placer
from gplace.placers.base import placer_names
from gplace.problem import PlacementProblem
from gplace.errors import ConfigError

SAMPLING = ["post", "post-sum", "ce", "ppo", "pg", "random", "hill", "anneal", "genetic"]


def cluster(memory=16e9):
    gpu = {"kind": "gpu", "peak_flops": 1e12, "mem_bandwidth": 1e11, "memory_bytes": memory,
           "launch_overhead_s": 1e-5}
    return cluster_from_dict({
        "name": "two-gpu",
        "devices": [dict(gpu, name="gpu0", tf_device="/device:GPU:0"),
                    dict(gpu, name="gpu1", tf_device="/device:GPU:1")],
        "default_link": {"bandwidth": 1e10, "latency_s": 1e-5}}, "test")


def two_chains(memory=16e9, params=0):
    """Two independent chains of 6 heavy ops each, in colocation pairs: one chain per GPU halves
    the single-device step time."""
    edges = [(i, i + 1) for i in range(5)] + [(i, i + 1) for i in range(6, 11)]
    g = OpGraph.from_lists([1e9] * 12, [1000] * 12, edges, group=[i // 2 for i in range(12)],
                           param_bytes=[params] * 12)
    return PlacementProblem.build(g, cluster(memory))


def test_every_name_of_the_issue_is_registered():
    for name in SAMPLING:
        assert name in placer_names()


def test_unknown_name_lists_the_choices():
    with pytest.raises(ConfigError, match="unknown placer 'postt'; choose one of .*post"):
        get_placer("postt")


@pytest.mark.parametrize("name", SAMPLING)
def test_budget_colocation_and_determinism(name):
    p = two_chains()
    a = get_placer(name, seed=3).place(p, SimMeasurer(p), budget=60)
    b = get_placer(name, seed=3).place(p, SimMeasurer(p), budget=60)
    assert a.samples == 60 == len(a.history.step_time_s)
    assert np.array_equal(a.placement, b.placement) and a.step_time_s == b.step_time_s
    assert a.placement.shape == (p.num_units,)       # one device per colocation group
    assert a.feasible and a.step_time_s == a.history.best_so_far()[-1]


@pytest.mark.parametrize("name", ["post", "ce", "hill", "genetic"])
def test_finds_the_parallel_placement(name):
    p = two_chains()
    single = SimMeasurer(p).measure(p.single_device(0)[None]).step_time_s[0]
    r = get_placer(name, seed=0).place(p, SimMeasurer(p), budget=200)
    assert r.step_time_s < 0.6 * single


@pytest.mark.parametrize("name", ["post", "random", "genetic"])
def test_never_returns_an_infeasible_placement_when_a_feasible_one_was_seen(name):
    # Parameters of 12 x 1 GB on 8 GB devices: only a split over both GPUs fits.
    p = two_chains(memory=8e9, params=10**9)
    r = get_placer(name, seed=0).place(p, SimMeasurer(p), budget=100)
    assert r.feasible
    peak = SimMeasurer(p).measure(r.placement[None]).peak_bytes[0]
    assert (peak <= 8e9).all()


def test_post_can_start_from_a_prior_and_seeds():
    """Post's table started at a prior samples from it; elite seeds join the first refit."""
    from gplace.placers.post_table import PostPlacer
    p = two_chains()
    best = np.array([0, 0, 0, 1, 1, 1])[: p.num_units]     # one chain per GPU
    prior = np.log(np.eye(p.num_devices)[best] * 0.98 + 0.02 / p.num_devices)
    r = PostPlacer(seed=0, init_logits=prior, elite_seeds=best[None]).place(p, SimMeasurer(p), 40)
    first = r.history.step_time_s[:20]
    uniform = get_placer("post", seed=0).place(p, SimMeasurer(p), 40).history.step_time_s[:20]
    assert np.median(first) < np.median(uniform)
    assert r.step_time_s <= SimMeasurer(p).measure(best[None]).step_time_s[0] * 1.5


class _Scripted:
    """A measurer that returns the given step times and intervals, in turn (a real one's)."""

    def __init__(self, *rows):
        self.rows = list(rows)

    def measure(self, placements):
        from gplace.measure import Measurement
        t, low, high = (np.array(x, np.float64) for x in self.rows.pop(0))
        n = len(t)
        return Measurement(t, np.ones(n, bool), np.zeros((n, 2), np.int64),
                           None if np.isnan(low).all() else low,
                           None if np.isnan(high).all() else high)


class _Drifting:
    """A real machine in miniature: placement k (units 0-2's devices as k's bits) runs in
    ``true[k]`` seconds times the machine's speed of that batch, +-1%."""
    drifts = True

    def __init__(self, true, speeds):
        self.true, self.speeds, self.sizes = true, list(speeds), []

    def measure(self, placements):
        from gplace.measure import Measurement
        speed = self.speeds.pop(0)
        self.sizes.append(len(placements))
        t = np.array([self.true[4 * p[0] + 2 * p[1] + p[2]] for p in placements]) * speed
        n = len(t)
        return Measurement(t, np.ones(n, bool), np.zeros((n, 2), np.int64), t * 0.99, t * 1.01)


def test_a_control_in_every_batch_keeps_a_faster_machine_from_crowning_a_slower_placement():
    from gplace.placers.base import Tracker
    problem = two_chains()
    batch = lambda *ks: np.array([[k >> 2 & 1, k >> 1 & 1, k & 1]  # noqa: E731
                                  + [0] * (problem.num_units - 3) for k in ks])
    true = {0: 10.0, 1: 10.5, 2: 11.0, 3: 12.0, 5: 9.0}  # placement 1 is 5% slower than 0
    # batch 2 runs on a machine 15% faster: placement 1 reads 8.9, below 0's first 10.0
    m = _Drifting(true, [1.0, 0.85, 0.85, 0.995])
    tracker = Tracker(problem, m, 16)
    tracker.evaluate(batch(0, 2, 3, 3))
    assert tracker.best_time == 10.0 and m.sizes == [4]  # no incumbent yet: no control
    got = tracker.evaluate(batch(1, 2, 3, 3))
    assert m.sizes == [4, 5]  # the incumbent went along as a control
    assert tracker.drift == [pytest.approx(1 / 0.85)]
    assert got.step_time_s.tolist() == pytest.approx([10.5, 11.0, 12.0, 12.0])  # batch 1's units
    assert tracker.best_time == 10.0 and tracker.best_placement[:3].tolist() == [0, 0, 0]
    tracker.evaluate(batch(5, 2, 3, 3))  # 10% faster than the incumbent, in the same batch
    assert tracker.best_time == pytest.approx(9.0)
    assert tracker.best_placement[:3].tolist() == [1, 0, 1]
    tracker.evaluate(batch(2, 2, 3, 3))  # the machine moved less than the control's noise
    assert tracker.drift[-1] == 1.0  # so nothing is scaled
    assert tracker.used == 16  # the controls are not charged to the budget
    without = Tracker(problem, _Drifting(true, [1.0, 0.85]), 8)  # the same, no control
    without.measurer.drifts = False
    without.evaluate(batch(0, 2, 3, 3))
    without.evaluate(batch(1, 2, 3, 3))
    assert without.best_placement[:3].tolist() == [0, 0, 1]  # crowned by the machine's drift


def test_tracker_keeps_the_best_until_an_interval_lies_wholly_below_it():
    from gplace.placers.base import Tracker
    problem, nan, inf = two_chains(), float("nan"), float("inf")
    p = np.zeros((1, problem.num_units), np.int64)
    tracker = Tracker(problem, _Scripted(([10.0], [9.0], [11.0]),   # incumbent 9-11
                                         ([9.5], [8.5], [10.5]),    # faster, overlapping: tie
                                         ([7.0], [6.0], [8.0]),     # wholly below: replaces
                                         ([6.9], [nan], [nan]),      # simulated: by the time
                                         ([6.5], [6.0], [inf])), 5)  # one visit: by the time
    for k, expect in enumerate([10.0, 10.0, 7.0, 6.9, 6.5]):
        tracker.evaluate(p + (k % 2))
        assert tracker.best_time == expect
    assert tracker.best_placement[0] == 0  # the last one's placement (k = 4)
