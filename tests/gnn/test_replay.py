import numpy as np
import pytest

from gplace.cluster import load_cluster
from gplace.gnn.replay import NearReplays
from gplace.gnn.schedule import DYN_FEATURES, ESTIMATE, FORCED, build_sched, rollout
from gplace.problem import PlacementProblem
from gplace.sim.random_graphs import RandomDagConfig, random_dag


def problem(seed, cluster, ops=400, group_fraction=None):
    config = RandomDagConfig(ops=ops) if group_fraction is None else \
        RandomDagConfig(ops=ops, group_fraction=group_fraction)
    return PlacementProblem.build(random_dag(config, seed), load_cluster(cluster))


def whole(a, placements):
    """The estimates of whole dispatch-order replays (with ``a``'s link contention)."""
    nu, nd = a.num_units, a.num_devices
    return rollout(a._replace(dispatch=True), np.zeros((nu, nd)), np.zeros((nu, DYN_FEATURES)),
                   ESTIMATE, forced=np.atleast_2d(placements)).estimate_s


def near(base, rng, count, nd):
    """``count`` placements that each move 1-3 random units of ``base``, and ``base`` itself."""
    out = np.repeat(base[None], count, 0)
    for row in out[1:]:
        units = rng.integers(base.size, size=rng.integers(1, 4))
        row[units] = rng.integers(nd, size=units.size)
    return out


@pytest.mark.parametrize("contention", [False, True])
@pytest.mark.parametrize("seed,cluster", [(0, "post-4gpu"), (1, "hetero"), (2, "local-procs")])
def test_near_replays_are_whole_replays(seed, cluster, contention):
    """Resumed from the base's kept states, every estimate is a whole replay's, to the last bit
    (local-procs: links that charge the receiver's CPU; hetero: a shared bus), with transfers
    booked on the links' channels too (each booking reads a consumer's device before that
    consumer's unit is decided)."""
    p = problem(seed, cluster)
    a = build_sched(p)._replace(contention=contention)
    rng = np.random.default_rng(seed)
    base = rng.integers(p.num_devices, size=p.num_units)
    replays = NearReplays(a, base, snapshots=5)
    cands = near(base, rng, 40, p.num_devices)
    assert replays.estimate_s == whole(a, base)[0]
    np.testing.assert_array_equal(replays.estimates(cands), whole(a, cands))
    # the earliest and the latest decided unit alone: from the first kept state, and the last
    for unit in (int(np.argmin(replays.decided)), int(np.argmax(replays.decided))):
        moved = base.copy()
        moved[unit] = (moved[unit] + 1) % p.num_devices
        assert replays.estimate(moved) == whole(a, moved)[0]


@pytest.mark.parametrize("contention", [False, True])
def test_a_rebased_replay_is_a_fresh_one(contention):
    """Moving the base keeps the states before it departs: the same estimates and decision
    order as replays built from the new base."""
    p = problem(3, "hdp-8gpu")
    a = build_sched(p)._replace(contention=contention)
    rng = np.random.default_rng(3)
    base = rng.integers(p.num_devices, size=p.num_units)
    replays = NearReplays(a, base, snapshots=6)
    for new in near(base, rng, 4, p.num_devices)[1:]:
        moved, fresh = replays.rebased(new), NearReplays(a, new, snapshots=6)
        assert moved.estimate_s == fresh.estimate_s == whole(a, new)[0]
        np.testing.assert_array_equal(moved.decided, fresh.decided)
        np.testing.assert_array_equal(moved.touched, fresh.touched)
        cands = near(new, rng, 12, p.num_devices)
        np.testing.assert_array_equal(moved.estimates(cands), whole(a, cands))
        replays = moved
    assert replays.rebased(replays.base) is replays


def test_each_kept_state_holds_the_units_placed_before_its_count():
    """``decided`` gives the ops run when each unit was placed: every unit with ops once, in
    [0, ops); the unit of the first op the simulator's order starts with nothing run; and each
    kept state has placed exactly the units placed before its count of ops run."""
    p = problem(4, "post-4gpu")
    a = build_sched(p)
    replays = NearReplays(a, np.zeros(p.num_units, np.int64), snapshots=6)
    assert replays.decided.min() == 0 and replays.decided.max() < a.position.size
    first_op = int(np.argmin(np.where(np.diff(a.pred_ptr) == 0, a.position, a.position.size)))
    assert replays.decided[a.unit_of_op[first_op]] == 0
    assert len(replays._kept) == 6
    for (unit_dev, _, _, _, scalars), stop in zip(replays._kept, replays._stops):
        assert scalars[1] == stop
        np.testing.assert_array_equal(unit_dev >= 0, replays.decided < stop)


@pytest.mark.parametrize("cluster", ["post-4gpu", "hetero", "local-procs"])
def test_estimates_place_ready_ops_at_once_and_agree_with_forced_rollouts(cluster):
    """ESTIMATE replays put an op that becomes ready straight on its device; FORCED rollouts
    (which record the decision features) wait for the unit's decision in the unplaced heaps:
    the same schedule, so the same estimate to the last bit. Small graphs with many grouped
    ops: a group's op ready from the start is still in the unplaced heaps when its group is
    placed through another op, and must reach its device's heap before the next op is taken."""
    for seed in range(40):
        p = problem(seed, cluster, ops=12, group_fraction=0.5)
        a = build_sched(p)._replace(dispatch=True)
        placements = np.random.default_rng(seed).integers(p.num_devices, size=(4, p.num_units))
        nu, nd = a.num_units, a.num_devices
        forced = rollout(a, np.zeros((nu, nd)), np.zeros((nu, DYN_FEATURES)), FORCED,
                         forced=placements)
        np.testing.assert_array_equal(whole(a, placements), forced.estimate_s)


def test_the_base_is_a_copy():
    """Changing the caller's array after the fact changes nothing the replays estimate."""
    p = problem(5, "hetero")
    a = build_sched(p)
    base = np.zeros(p.num_units, np.int64)
    replays = NearReplays(a, base)
    base[0] = 1
    assert replays.estimate(base) == whole(a, base)[0]


def test_contention_changes_the_estimates_it_is_asked_for():
    """The same placements, estimated with and without booking transfers on the links: the
    replays follow ``sched.contention`` (so the test above compares two different models)."""
    p = problem(6, "post-4gpu")
    rng = np.random.default_rng(6)
    cands = rng.integers(p.num_devices, size=(8, p.num_units))
    free, booked = (NearReplays(build_sched(p)._replace(contention=c), cands[0])
                    for c in (False, True))
    assert not np.array_equal(free.estimates(cands), booked.estimates(cands))
