"""The learned list scheduler's rollout: HEFT when told to, exact records, memory, seeds."""

import numpy as np
import pytest

from gplace.cluster import load_cluster
from gplace.gnn.schedule import (DYN_FEATURES, FORCED, GREEDY, MIXED, MIXED_SAMPLE, SAMPLE,
                                 build_sched,
                                 rollout)
from gplace.placers import SimMeasurer, get_placer
from gplace.problem import PlacementProblem
from gplace.sim.random_graphs import RandomDagConfig, random_dag


def problem(seed=0, cluster="post-4gpu", ops=300):
    return PlacementProblem.build(random_dag(RandomDagConfig(ops=ops), seed), load_cluster(cluster))


def heft_weights(p, feature=0, weight=-10.0):
    w = np.zeros((p.num_units, DYN_FEATURES))
    w[:, feature] = weight
    return np.zeros((p.num_units, p.num_devices)), w


@pytest.mark.parametrize("seed,cluster", [(0, "post-4gpu"), (1, "hetero"), (2, "hdp-8gpu")])
def test_greedy_on_the_finish_time_feature_is_heft(seed, cluster):
    p = problem(seed, cluster)
    heft = get_placer("heft").place(p, SimMeasurer(p), 0).placement
    ro = rollout(build_sched(p), *heft_weights(p), GREEDY)
    assert np.array_equal(ro.placements[0], heft)


def test_forced_rollout_follows_the_placement_and_records_its_features():
    p = problem(3)
    a = build_sched(p)
    target = np.random.default_rng(0).integers(0, p.num_devices, (2, p.num_units))
    ro = rollout(a, *heft_weights(p), FORCED, forced=target)
    assert np.array_equal(ro.placements, target)
    assert ro.mask[np.arange(2)[:, None], np.arange(p.num_units), target].all()
    # the finish-time feature is 0 on the best device of every decision, >= 0 elsewhere
    phi0 = ro.phi[..., 0]
    assert (phi0 >= 0).all() and np.allclose(phi0.min(-1), 0.0)


def test_mixed_rollout_follows_the_target_at_the_given_rate_and_is_greedy_elsewhere():
    p = problem(6)
    a = build_sched(p)
    s, w = heft_weights(p)
    heft = rollout(a, s, w, GREEDY).placements[0]
    target = (heft + 1) % p.num_devices  # never HEFT's own choice
    assert np.array_equal(rollout(a, s, w, MIXED, forced=target[None], follow=1.0).placements[0],
                          rollout(a, s, w, FORCED, forced=target[None]).placements[0])
    assert np.array_equal(rollout(a, s, w, MIXED, forced=target[None], follow=0.0).placements[0],
                          heft)
    half = rollout(a, s, w, MIXED, forced=target[None], follow=0.5, seed=3)
    again = rollout(a, s, w, MIXED, forced=target[None], follow=0.5, seed=3)
    assert np.array_equal(half.placements, again.placements)
    followed = (half.placements[0] == target).mean()
    assert 0.35 < followed < 0.75
    # where it did not follow, it took the argmax of its own state: HEFT's criterion there
    own = half.placements[0] != target
    allowed = np.where(half.mask[0], half.phi[0, :, :, 0], np.inf)
    assert (half.phi[0, own, half.placements[0, own], 0] == allowed[own].min(-1)).all()


def test_mixed_sample_rollout_follows_the_target_at_the_given_rate_and_samples_elsewhere():
    p = problem(6)
    a = build_sched(p)
    s, w = heft_weights(p)
    target = (rollout(a, s, w, GREEDY).placements[0] + 1) % p.num_devices
    assert np.array_equal(
        rollout(a, s, w, MIXED_SAMPLE, forced=target[None], follow=1.0).placements[0],
        rollout(a, s, w, FORCED, forced=target[None]).placements[0])
    # one device dominates every decision: off the target, the draws take it wherever allowed
    s2 = s.copy()
    s2[:, 2] = 50.0
    half = rollout(a, s2, w * 0, MIXED_SAMPLE, forced=target[None], follow=0.5, seed=3)
    assert np.array_equal(half.placements, rollout(a, s2, w * 0, MIXED_SAMPLE,
                                                   forced=target[None], follow=0.5,
                                                   seed=3).placements)
    own = half.placements[0] != target
    assert 0.25 < 1 - own.mean() < 0.85
    assert (half.placements[0, own] == 2).all()
    # with flat logits the draws off the target spread over the devices, unlike the argmax
    flat = rollout(a, s * 0, w * 0, MIXED_SAMPLE, forced=target[None], follow=0.5, seed=4)
    off = flat.placements[0][flat.placements[0] != target]
    assert len(np.unique(off)) > 1


def test_sampling_is_seeded_and_follows_the_logits():
    p = problem(4)
    a = build_sched(p)
    s, w = np.zeros((p.num_units, p.num_devices)), np.zeros((p.num_units, DYN_FEATURES))
    s[:, 2] = 50.0  # device 2 dominates every decision it may take
    one = rollout(a, s, w, SAMPLE, count=4, seed=9)
    two = rollout(a, s, w, SAMPLE, count=4, seed=9)
    assert np.array_equal(one.placements, two.placements)
    allowed = one.mask[np.arange(4)[:, None], np.arange(p.num_units), 2]
    assert (one.placements[allowed] == 2).all()
    uniform = rollout(a, s * 0, w, SAMPLE, count=8, seed=1)
    assert len(np.unique(uniform.placements)) == p.num_devices  # uniform draws spread out


def test_a_device_without_room_is_masked():
    from dataclasses import replace
    p = problem(5, "post-2gpu")
    cluster = p.cluster
    tiny = replace(cluster, devices=tuple(replace(d, memory_bytes=1) if i == 1 else d
                                          for i, d in enumerate(cluster.devices)))
    p2 = PlacementProblem.build(p.graph, tiny)
    a = build_sched(p2)
    ro = rollout(a, *heft_weights(p2), GREEDY)
    needs = a.need > 0
    assert not ro.mask[0, needs, 1].any()
    assert (ro.placements[0, needs] != 1).all()


def test_rollouts_over_threads_equal_those_of_one_thread(monkeypatch):
    import gplace.gnn.schedule as schedule
    p = problem(5, "hetero")
    a = build_sched(p)
    rng = np.random.default_rng(0)
    s, w = rng.normal(size=(p.num_units, p.num_devices)), rng.normal(size=(p.num_units, DYN_FEATURES))
    pooled = [rollout(a, s, w, SAMPLE, count=9, seed=3) for _ in range(2)]  # pool made, reused
    monkeypatch.setattr(schedule, "_for_each", lambda fn, count: [fn(k) for k in range(count)])
    alone = rollout(a, s, w, SAMPLE, count=9, seed=3)
    for ro in pooled:
        for x, y in zip(ro, alone):
            assert np.array_equal(x, y)


def test_a_forked_process_makes_its_own_rollout_threads():
    import multiprocessing
    p = problem(6)
    a = build_sched(p)
    s, w = np.zeros((p.num_units, p.num_devices)), np.zeros((p.num_units, DYN_FEATURES))
    here = rollout(a, s, w, SAMPLE, count=5, seed=2)  # this process's pool exists now
    with multiprocessing.get_context("fork").Pool(1) as pool:
        there = pool.apply_async(rollout, (a, s, w, SAMPLE, 5, 2)).get(timeout=60)
    assert np.array_equal(here.placements, there.placements)
