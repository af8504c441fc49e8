"""The numpy forward of a loaded policy (gplace.gnn.infer) against the torch one: the same
scores to float32 rounding, the same greedy and zero-shot placements, and a zero-shot
`gplace place` that never imports torch once the weights are cached."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from gplace.cluster import load_cluster
from gplace.gnn import infer
from gplace.gnn.config import FinetuneConfig
from gplace.gnn.features import problem_features
from gplace.gnn.learn import tempered
from gplace.gnn.placer import GNNPlacer, load_policy
from gplace.gnn.policy import FeatureTensors, GNNPolicy
from gplace.gnn.schedule import GREEDY, build_sched, rollout
from gplace.placers import SimMeasurer
from gplace.problem import PlacementProblem
from gplace.sim.random_graphs import RandomDagConfig, random_dag

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "gplace" / "examples" / "small_resnet.pb"


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GPLACE_CACHE_DIR", str(tmp_path / "cache"))


def problems():
    """Random DAGs of three sizes on two clusters, and the bundled example."""
    for ops, cluster in ((30, "post-4gpu"), (120, "hetero"), (300, "post-4gpu")):
        yield PlacementProblem.build(random_dag(RandomDagConfig(ops=ops), ops), load_cluster(cluster))


def torch_scores(policy: GNNPolicy, problem) -> infer.ScoresNp:
    with torch.no_grad():
        out = tempered(policy.train()(FeatureTensors.from_numpy(problem_features(problem))), 0.25)
    s, w = out.numpy()
    return infer.ScoresNp(s, w, out.head_numpy())


@pytest.mark.parametrize("k", range(3))
def test_the_numpy_scores_are_torchs_to_float32_rounding(k):
    problem = list(problems())[k]
    policy, _ = load_policy()
    weights = infer.load_weights()
    ours = infer.as_float64(infer.tempered(infer.scores(weights, problem_features(problem)), 0.25))
    theirs = torch_scores(policy, problem)
    np.testing.assert_allclose(ours.s, theirs.s, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(ours.w, theirs.w, rtol=1e-5, atol=1e-4)
    sched = build_sched(problem)
    greedy = [rollout(sched, sc.s, sc.w, GREEDY).placements[0] for sc in (ours, theirs)]
    assert np.array_equal(*greedy)


def test_a_state_head_is_computed_alike():
    policy = GNNPolicy(head_hidden=4, lean=True).eval()
    with torch.no_grad():  # the head's output weights start at zero: give them some
        for p in policy.head_v.parameters():
            p.normal_(0, 0.01)
    weights = infer.PolicyWeights(dict(policy.kwargs), {k: v.numpy()
                                                        for k, v in policy.state_dict().items()})
    problem = next(problems())
    ours = infer.as_float64(infer.tempered(infer.scores(weights, problem_features(problem)), 0.25))
    theirs = torch_scores(policy, problem)
    for a, b in zip((ours.s, ours.w, *ours.head), (theirs.s, theirs.w, *theirs.head)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-4)


def _perturbed(policy: GNNPolicy) -> GNNPolicy:
    """The policy with its zero-initialized output layers made nonzero (so the scores depend on
    what the encoder reads)."""
    with torch.no_grad():
        for p in [*policy.pair_head.parameters(), *policy.weight_head.parameters()]:
            p.normal_(0, 0.1)
    return policy


@pytest.mark.parametrize("type_channels", [0, 16])
def test_a_network_without_op_types_reads_none_and_is_computed_alike(tmp_path, type_channels):
    torch.manual_seed(0)
    _perturbed(GNNPolicy(type_channels=type_channels)).save(tmp_path / "p.pt")
    policy = GNNPolicy.load(tmp_path / "p.pt")[0].eval()
    assert (policy.type_embedding is None) == (type_channels == 0)
    weights = infer.PolicyWeights(dict(policy.kwargs), {k: v.numpy()
                                                        for k, v in policy.state_dict().items()})
    problem = next(problems())
    f = problem_features(problem)
    ours = infer.as_float64(infer.tempered(infer.scores(weights, f), 0.25))
    theirs = torch_scores(policy, problem)
    np.testing.assert_allclose(ours.s, theirs.s, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(ours.w, theirs.w, rtol=1e-5, atol=1e-4)
    retyped = infer.scores(weights, f._replace(unit_types=np.roll(f.unit_types, 1, axis=1)))
    assert np.array_equal(retyped.s, infer.scores(weights, f).s) == (type_channels == 0)


@pytest.mark.parametrize("contention", [False, True])
def test_the_zero_shot_result_is_gnnplacers(contention):
    config = FinetuneConfig(estimate_contention=contention)
    for problem in problems():
        seeds = [np.zeros(problem.num_units, np.int64)]
        a = GNNPlacer(seed=3, config=config).place(problem, SimMeasurer(problem), 0,
                                                   seeds=seeds)
        b = infer.ZeroShotPlacer(seed=3, config=config).place(problem, SimMeasurer(problem), 0,
                                                              seeds=seeds)
        assert np.array_equal(a.placement, b.placement)
        assert a.step_time_s == b.step_time_s
        for key in ("zero_shot_step_time_s", "start_step_time_s"):
            assert a.info[key] == b.info[key]
        assert np.array_equal(a.info["zero_shot_placement"], b.info["zero_shot_placement"])


def test_a_dispatch_order_policy_places_in_its_order_on_both_paths(tmp_path):
    """A policy pretrained in the dispatch order keeps it in its checkpoint, and the torch and
    numpy zero-shot in its own order alone both schedule in it: the placement is the one the
    dispatch-order rollout gives, not the rank order's. In both orders (the default) the two
    paths agree too."""
    import dataclasses
    own = dataclasses.replace(FinetuneConfig(), zero_shot_both_orders=False)
    torch.manual_seed(0)
    policy = GNNPolicy(lean=True, order="dispatch")
    with torch.no_grad():  # heads start at zero: give the scores some shape
        for p in policy.pair_head.parameters():
            p.normal_(0, 0.3)
    policy.save(tmp_path / "d.pt")
    loaded, _ = GNNPolicy.load(tmp_path / "d.pt")
    assert loaded.order == "dispatch" and loaded.dispatch
    rank = GNNPolicy.load(tmp_path / "d.pt")[0]
    rank.order = "rank"
    found_other = False
    for problem in problems():
        ours = infer.ZeroShotPlacer(seed=1, checkpoint=tmp_path / "d.pt",
                                    config=own).zero_shot(problem)
        theirs = GNNPlacer(seed=1, policy=loaded, config=own).zero_shot(problem)
        assert np.array_equal(ours, theirs)
        other = GNNPlacer(seed=1, policy=rank, config=own).zero_shot(problem)
        found_other |= not np.array_equal(theirs, other)
        both = infer.ZeroShotPlacer(seed=1, checkpoint=tmp_path / "d.pt").zero_shot(problem)
        assert np.array_equal(both, GNNPlacer(seed=1, policy=loaded).zero_shot(problem))
    assert found_other  # the order matters on some of these problems


def test_gnnplacer_places_zero_shot_from_the_numpy_scores(monkeypatch):
    """The torch placer takes its zero-shot from the numpy forward too: the two paths cannot
    part on a near tie of torch's and numpy's last bits."""
    problem = next(problems())
    called = []
    real = infer.scores
    monkeypatch.setattr(infer, "scores", lambda w, f: called.append(1) or real(w, f))
    zero = GNNPlacer(seed=0).zero_shot(problem)
    assert called and np.array_equal(zero, infer.ZeroShotPlacer(seed=0).zero_shot(problem))


def test_the_weights_are_cached_by_the_checkpoints_bytes(tmp_path):
    first = infer.load_weights()
    assert infer.is_cached(infer.SHIPPED)
    again = infer.load_weights()
    assert first.kwargs == again.kwargs and first.arrays.keys() == again.arrays.keys()
    assert all(np.array_equal(first.arrays[k], again.arrays[k]) for k in first.arrays)
    copy = tmp_path / "copy.pt"
    copy.write_bytes(infer.SHIPPED.read_bytes())
    assert infer.weights_cache(copy) == infer.weights_cache(infer.SHIPPED)


def test_a_corrupt_cache_entry_is_read_from_the_checkpoint_again():
    entry = infer.weights_cache(infer.SHIPPED)
    entry.parent.mkdir(parents=True)
    entry.write_bytes(b"not an npz")
    assert infer.load_weights().arrays.keys() == infer.load_weights().arrays.keys()
    assert infer.is_cached(infer.SHIPPED)


def test_zero_shot_place_imports_no_torch_once_the_weights_are_cached(tmp_path):
    infer.load_weights()  # the cache of this test (GPLACE_CACHE_DIR)
    code = ("import sys; from gplace.cli import main; "
            f"main(['place', {str(EXAMPLE)!r}, '--cluster', 'post-4gpu', '--out', "
            f"{str(tmp_path / 'o')!r}, '--json']); "
            "print('torch' in sys.modules, 'matplotlib' in sys.modules, file=sys.stderr)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stderr.strip().splitlines()[-1] == "False False"


def test_the_prior_is_the_untrained_networks_scores_and_only_adds_candidates():
    """prior_scores are an untrained network's scores, whatever its seed; zero-shot with
    zero_shot_prior picks from a superset of the candidates, by the same estimate."""
    from gplace.gnn.schedule import FORCED
    problem = list(problems())[1]
    f = problem_features(problem)
    for seed in (0, 1):
        torch.manual_seed(seed)
        w = infer.policy_weights(GNNPolicy())
        sc = infer.scores(w, f)
        prior = infer.prior_scores(w, f)
        np.testing.assert_array_equal(sc.s, prior.s)
        np.testing.assert_array_equal(sc.w, prior.w)
    weights = infer.load_weights()
    sc = infer.as_float64(infer.tempered(infer.scores(weights, f), 0.25))
    judge = build_sched(problem, True)

    def estimate(placement) -> float:
        return rollout(judge, sc.s, sc.w, FORCED, forced=placement[None]).estimate_s[0]
    plain, more = (infer.zero_shot(weights, f, build_sched(problem), 0,
                                   FinetuneConfig(zero_shot_prior=p, zero_shot_polish=0))
                   for p in (False, True))
    assert estimate(more) <= estimate(plain)


@pytest.mark.parametrize("contention", [False, True])
def test_polish_lowers_the_estimate_within_memory_and_is_seeded(contention):
    """polish hill-climbs on the dispatch-order estimate (transfers booked on the links or
    not): from every unit on one device it finds a placement estimated faster, never fills a
    device past its memory estimate, gives the same placement for the same seed, and with no
    estimates returns its start."""
    from gplace.gnn.schedule import DYN_FEATURES, ESTIMATE
    problem = list(problems())[2]
    sched = build_sched(problem)._replace(contention=contention)
    nu, nd = problem.num_units, problem.num_devices
    judge = sched._replace(dispatch=True)

    def estimate(placement) -> float:
        return rollout(judge, np.zeros((nu, nd)), np.zeros((nu, DYN_FEATURES)), ESTIMATE,
                       forced=placement[None]).estimate_s[0]
    start = np.ones(nu, np.int64)
    better = infer.polish(sched, start, 320, seed=0)
    assert estimate(better) < 0.9 * estimate(start)
    assert np.array_equal(better, infer.polish(sched, start, 320, seed=0))
    assert np.array_equal(infer.polish(sched, start, 0, seed=0), start)
    # device 2 holds nothing more than its memory estimate allows: here, nothing at all
    tight = sched._replace(capacity=np.where(np.arange(nd) == 2, 0.0, sched.capacity))
    assert (infer.polish(tight, start, 320, seed=0) != 2).all()


def test_with_booked_transfers_zero_shot_ranks_every_rollout_by_them():
    """Zero-shot's choice (no polish) is estimated, transfers booked on the links, no slower
    than either order's greedy rollout, which are among its candidates; the rule without
    booking is judged by its own estimate and chooses otherwise on some of these problems
    (random DAGs on hetero, whose two GPUs share a bus), where booking's choice is faster."""
    from gplace.gnn.schedule import DYN_FEATURES, ESTIMATE
    weights = infer.load_weights()
    otherwise = 0
    for seed in range(300, 312):
        problem = PlacementProblem.build(random_dag(RandomDagConfig(ops=300), seed),
                                         load_cluster("hetero"))
        feats, sched = problem_features(problem), build_sched(problem)
        nu, nd = problem.num_units, problem.num_devices
        judge = sched._replace(dispatch=True, contention=True)

        def booked(p):
            return rollout(judge, np.zeros((nu, nd)), np.zeros((nu, DYN_FEATURES)), ESTIMATE,
                           forced=np.atleast_2d(p)).estimate_s

        chosen = {c: infer.zero_shot(weights, feats, sched, 0, FinetuneConfig(
            zero_shot_polish=0, estimate_contention=c)) for c in (False, True)}
        sc = infer.as_float64(infer.tempered(infer.scores(weights, feats), 0.25))
        greedy = [rollout(sched._replace(dispatch=d), sc.s, sc.w, GREEDY).placements[0]
                  for d in (False, True)]
        assert booked(chosen[True])[0] <= booked(np.stack(greedy)).min()
        assert booked(chosen[True])[0] <= booked(chosen[False])[0]
        if not np.array_equal(chosen[False], chosen[True]):
            otherwise += 1
            assert booked(chosen[True])[0] < booked(chosen[False])[0]
    assert otherwise >= 1


@pytest.mark.parametrize("damage", ["empty", "changed array"])
def test_a_damaged_cache_entry_is_not_used(damage):
    """An empty entry, or one whose arrays no longer match their digest, is read again from
    the checkpoint instead of failing every later place (or placing with wrong weights)."""
    first = infer.load_weights()
    entry = infer.weights_cache(infer.SHIPPED)
    if damage == "empty":
        entry.write_bytes(b"")
    else:
        with np.load(entry) as z:
            arrays = {k: z[k] for k in z.files}
        key = next(k for k in arrays if not k.startswith("__"))
        arrays[key] = arrays[key] + 1
        with open(entry, "wb") as f:
            np.savez(f, **arrays)
    again = infer.load_weights()
    assert all(np.array_equal(first.arrays[k], again.arrays[k]) for k in first.arrays)
