"""Post's objective on the list scheduler: exact log-probabilities, elites, and learning that
moves the policy the way the objective says."""

import numpy as np
import torch

from gplace.cluster import load_cluster
from gplace.gnn.learn import (LearnConfig, ProblemState, decision_logp, decision_weights,
                              elite_loss, greedy, loss, onpolicy_loss, sample, tempered,
                              unit_stake)
from gplace.gnn.policy import GNNPolicy
from gplace.problem import PlacementProblem
from gplace.sim.random_graphs import RandomDagConfig, random_dag


def state(seed=0, cluster="post-2gpu"):
    g = random_dag(RandomDagConfig(ops=120), seed)
    return ProblemState(PlacementProblem.build(g, load_cluster(cluster)))


def test_decision_logp_matches_the_sampling_frequencies():
    """The torch log-probabilities are those the compiled rollout sampled from."""
    torch.manual_seed(0)
    st = state(1)
    policy = GNNPolicy(hidden_channels=8, num_layers=1, scale=0.5)  # soft: real choices
    b = sample(policy, st, 400, seed=3)
    with torch.no_grad():
        _, logp = decision_logp(policy(st.features), b.ro)
    u = int(np.argmax(b.ro.mask[0].sum(-1) > 1))   # the first unit with a choice at all
    first = np.flatnonzero(b.ro.mask[0].sum(-1) > 1)[0]
    # the first decision with a choice has the same features in every rollout before it diverges
    probs = logp[0, first].exp().numpy()
    freq = np.bincount(b.ro.placements[:, first], minlength=st.problem.num_devices) / 400
    assert u == first and np.abs(freq - probs).max() < 0.08


def test_elites_keep_the_fastest_distinct_placements():
    st = state(2)
    st.elite_size = 2
    p = np.zeros((3, st.problem.num_units), np.int64)
    p[1, 0], p[2, 1] = 1, 1
    st.offer(p, np.array([3.0, 1.0, 2.0]), np.array([True, True, True]))
    assert [e.step_time_s for e in st.elites] == [1.0, 2.0]
    st.offer(p[1:2], np.array([0.1]), np.array([True]))        # known: not added twice
    st.offer(p[:1], np.array([0.5]), np.array([False]))        # infeasible: never an elite
    assert [e.step_time_s for e in st.elites] == [1.0, 2.0]
    st.offer(p[:1], np.array([0.5]), np.array([True]))
    assert [e.step_time_s for e in st.elites] == [0.5, 1.0]
    assert np.array_equal(st.elites[0].rollout.placements[0], p[0])


def test_the_elites_features_in_one_batch_are_each_elites_own():
    """fill_rollouts's batch of FORCED rollouts records, row for row, what each elite's own
    rollout records."""
    batch, alone = state(3), state(3)
    rng = np.random.default_rng(0)
    p = rng.integers(0, batch.problem.num_devices, (3, batch.problem.num_units))
    for st in (batch, alone):
        st.offer(p, np.array([3.0, 1.0, 2.0]), np.array([True, True, True]))
    batch.fill_rollouts()
    assert all(e._rollout is not None for e in batch.elites)
    for b, a in zip(batch.elites, alone.elites):
        for x, y in zip(b.rollout, a.rollout):
            assert x.shape == y.shape and np.array_equal(x, y)


def test_a_measured_newcomer_displaces_the_best_elite_only_beyond_its_interval():
    """Real measurements carry intervals: a faster point estimate whose interval overlaps the
    best elite's is a tie and does not take first place; one wholly below does."""
    st = state(5)
    st.elite_size = 3
    p = np.zeros((4, st.problem.num_units), np.int64)
    p[1, 0], p[2, 1], p[3, 2] = 1, 1, 1
    ok = np.array([True])
    st.offer(p[:1], np.array([1.0]), ok, np.array([0.9]), np.array([1.1]))
    st.offer(p[1:2], np.array([0.95]), ok, np.array([0.85]), np.array([1.05]))  # overlaps
    assert [e.step_time_s for e in st.elites] == [1.0, 0.95]
    st.offer(p[2:3], np.array([0.7]), ok, np.array([0.65]), np.array([0.75]))   # wholly below
    assert [e.step_time_s for e in st.elites] == [0.7, 0.95, 1.0]
    exact = state(5)  # simulated (no intervals): the point estimates rank, as before
    exact.offer(p[:1], np.array([1.0]), ok)
    exact.offer(p[1:2], np.array([0.95]), ok)
    assert [e.step_time_s for e in exact.elites] == [0.95, 1.0]


def test_cross_entropy_steps_make_the_elite_the_greedy_placement():
    torch.manual_seed(0)
    st = state(3, "post-4gpu")
    policy = GNNPolicy(hidden_channels=16, num_layers=2)
    target = np.full(st.problem.num_units, st.problem.num_devices - 1)  # HEFT would spread
    st.offer(target[None], np.array([1.0]), np.array([True]))
    opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
    before = (greedy(policy, st) == target).mean()
    for _ in range(150):
        opt.zero_grad()
        elite_loss(policy(st.features), st).backward()
        opt.step()
    after = (greedy(policy, st) == target).mean()
    assert before < 0.5 and after > 0.9


def test_onpolicy_imitation_makes_the_elite_the_greedy_placement():
    """The DAgger-style term alone (labels: the elite's devices, states: the policy's own
    schedule) teaches the elite as the forced-schedule term does, and is 0 without elites."""
    torch.manual_seed(0)
    st = state(3, "post-4gpu")
    policy = GNNPolicy(hidden_channels=16, num_layers=2)
    assert float(onpolicy_loss(policy(st.features), st, 0.0, 0).detach()) == 0.0
    target = np.full(st.problem.num_units, st.problem.num_devices - 1)
    st.offer(target[None], np.array([1.0]), np.array([True]))
    opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
    before = (greedy(policy, st) == target).mean()
    for step in range(150):
        opt.zero_grad()
        onpolicy_loss(policy(st.features), st, 0.0, step).backward()
        opt.step()
    after = (greedy(policy, st) == target).mean()
    assert before < 0.5 and after > 0.9
    cfg = LearnConfig(ce_weight=0.0, dagger=1.0, temperature=1.0)
    with torch.no_grad():
        assert float(loss(policy, st, None, cfg)) == float(
            onpolicy_loss(policy(st.features), st, cfg.dagger_follow, 0))


def test_sampled_onpolicy_imitation_teaches_the_elite_and_reaches_other_states():
    """--dagger-temperature: the states come from the policy's draws, not its argmax; the
    labels stay the elite's, so the elite still becomes the greedy placement."""
    torch.manual_seed(0)
    st = state(3, "post-4gpu")
    policy = GNNPolicy(hidden_channels=16, num_layers=2)
    target = np.full(st.problem.num_units, st.problem.num_devices - 1)
    st.offer(target[None], np.array([1.0]), np.array([True]))
    with torch.no_grad():
        scores = policy(st.features)
        argmax = float(onpolicy_loss(scores, st, 0.0, 0))
        drawn = [float(onpolicy_loss(scores, st, 0.0, k, explore=1.0)) for k in range(3)]
    assert len(set(drawn)) > 1 and argmax not in drawn  # other states, seeded draws
    opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
    for step in range(150):
        opt.zero_grad()
        onpolicy_loss(policy(st.features), st, 0.0, step, explore=1.0).backward()
        opt.step()
    assert (greedy(policy, st) == target).mean() > 0.9
    cfg = LearnConfig(ce_weight=0.0, dagger=1.0, dagger_temperature=0.5, temperature=0.5)
    with torch.no_grad():  # the draws' temperature is absolute: here the loss' own
        assert float(loss(policy, st, None, cfg)) == float(onpolicy_loss(
            tempered(policy(st.features), 0.5), st, cfg.dagger_follow, 0, explore=1.0))


def test_work_weighted_cross_entropy_counts_each_decision_by_its_units_stake():
    """--ce-work: weights sum to 1, mix even and stake shares (work plus traffic), and the
    loss is the weighted negative log-likelihood of the elite's decisions (0: the plain
    mean, as before)."""
    torch.manual_seed(0)
    st = state(4, "post-4gpu")
    policy = GNNPolicy(hidden_channels=8, num_layers=1, scale=0.5)
    target = np.arange(st.problem.num_units) % st.problem.num_devices
    st.offer(target[None], np.array([1.0]), np.array([True]))
    work = unit_stake(st.problem, st.sched.unit_cost)
    assert (work >= st.sched.unit_cost.min(1)).all() and \
        (work > st.sched.unit_cost.min(1)).any()  # the traffic adds to the work
    w = decision_weights(st, 0.5).numpy()
    assert abs(w.sum() - 1) < 1e-12 and w[np.argmax(work)] > w[np.argmin(work)]
    assert np.allclose(decision_weights(st, 1.0).numpy(), work / work.sum())
    with torch.no_grad():
        scores = policy(st.features)
        logp = decision_logp(scores, st.elites[0].rollout)[0][0].numpy()
        assert np.isclose(float(elite_loss(scores, st, 1.0)), -(logp * work).sum() / work.sum())
        assert np.isclose(float(elite_loss(scores, st, 0.0)), -logp.mean())
        assert not np.isclose(float(elite_loss(scores, st, 1.0)), -logp.mean())
        assert float(onpolicy_loss(scores, st, 1.0, 0, 1.0)) > 0


def test_ppo_loss_is_finite_and_has_gradients():
    torch.manual_seed(0)
    st = state(4, "hetero")
    policy = GNNPolicy(hidden_channels=8, num_layers=1)
    b = sample(policy, st, 6, seed=0)
    total = loss(policy, st, b, LearnConfig())
    total.backward()
    assert torch.isfinite(total)
    assert policy.w0.grad is not None and torch.isfinite(policy.w0.grad).all()


def test_temperature_sharpens_samples_and_leaves_the_greedy_placement():
    """At temperature 0.25 the sampled decisions follow softmax(logits / 0.25): fewer
    departures from the greedy placement than at 1, and the log-probabilities match."""
    from gplace.gnn.learn import tempered
    torch.manual_seed(0)
    st = state(1)
    policy = GNNPolicy(hidden_channels=8, num_layers=1, scale=0.5)
    g = greedy(policy, st)
    hot, cold = (sample(policy, st, 200, seed=3, temperature=t) for t in (1.0, 0.25))
    departures = [float((b.ro.placements != g).mean()) for b in (hot, cold)]
    assert departures[1] < 0.5 * departures[0]
    with torch.no_grad():
        scores = tempered(policy(st.features), 0.25)
        logp, _ = decision_logp(scores, cold.ro)
    assert torch.allclose(logp.double(), cold.old_logp.double())


def test_the_state_head_is_one_function_in_the_rollout_and_the_loss(tmp_path):
    """The compiled rollout and the torch loss compute the same nonlinear head: each greedy
    decision takes the torch logits' argmax at the state it was taken in."""
    from gplace.gnn.learn import decision_logits
    from gplace.gnn.schedule import GREEDY, rollout
    torch.manual_seed(0)
    st = state(2, "post-4gpu")
    policy = GNNPolicy(hidden_channels=16, num_layers=1, head_hidden=8)
    assert "head_hidden" not in GNNPolicy(hidden_channels=16, num_layers=1).kwargs
    plain = greedy(policy, st)  # the head's output weights start at zero: the linear policy
    with torch.no_grad():
        for p in policy.head_v.parameters():
            p.normal_()
        scores = policy(st.features)
    ro = rollout(st.sched, *scores.numpy(), GREEDY, head=scores.head_numpy())
    logits = decision_logits(scores, torch.as_tensor(ro.phi), torch.as_tensor(ro.mask))
    chosen = logits.gather(-1, torch.as_tensor(ro.placements)[..., None]).squeeze(-1)
    assert torch.all(chosen >= logits.max(-1).values - 1e-9)
    assert not np.array_equal(ro.placements[0], plain)  # the head changes decisions
    assert np.array_equal(greedy(policy, st), ro.placements[0])
    policy.save(tmp_path / "p.pt")
    loaded = GNNPolicy.load(tmp_path / "p.pt")[0]
    assert np.array_equal(greedy(loaded, st), ro.placements[0])


def test_a_sampled_rollout_records_what_the_forced_rollout_along_it_records():
    """Elites taken from a batch of samples reuse the batch's decision features
    (ProblemState.offer's ``rollouts``): the FORCED rollout along each sampled placement
    gives the same placement, features, mask and estimate, bit for bit, with tight memories
    (masked devices) and the state head."""
    from gplace.gnn.schedule import DYN_FEATURES, FORCED, SAMPLE, rollout
    from gplace.sim.random_graphs import random_cluster
    for seed in range(6):
        g = random_dag(RandomDagConfig(ops=150), seed)
        st = ProblemState(PlacementProblem.build(g, random_cluster(2 + seed % 4, seed)))
        rng = np.random.default_rng(seed)
        nu, nd = st.problem.num_units, st.problem.num_devices
        s, w = rng.normal(size=(nu, nd)), rng.normal(size=(nu, DYN_FEATURES))
        head = (rng.normal(size=(3, DYN_FEATURES)), rng.normal(size=(nu, 3)),
                rng.normal(size=(nu, 3)))
        sampled = rollout(st.sched, s, w, SAMPLE, count=8, seed=seed, head=head)
        assert (~sampled.mask).any()  # some decisions had devices without room
        forced = rollout(st.sched, np.zeros((nu, nd)), np.zeros((nu, DYN_FEATURES)), FORCED,
                         forced=sampled.placements)
        for a, b in zip(sampled, forced):
            assert a.dtype == b.dtype and np.array_equal(a, b)
        st.offer(sampled.placements, np.arange(8.0), np.ones(8, bool), rollouts=sampled)
        for e, k in zip(st.elites, range(8)):
            assert all(np.array_equal(a, b[k:k + 1]) for a, b in zip(e.rollout, forced))


def test_a_batch_without_old_logp_takes_the_first_loss_numbers_bit_for_bit():
    """Fine-tuning samples without old log-probabilities (sample(old_logp=False)) and lets the
    first update at the sampling weights take them: the same loss, gradients and old ones."""
    from gplace.gnn.learn import loss_and_logp
    torch.manual_seed(0)
    policy = GNNPolicy(hidden_channels=8, num_layers=1, scale=0.5, lean=True).train()
    cfg = LearnConfig()
    runs = []
    for keep in (True, False):
        st = state(4)
        b = sample(policy, st, 6, seed=5, temperature=cfg.temperature, old_logp=keep)
        policy.zero_grad()
        total, logp = loss_and_logp(policy, st, b, cfg)
        total.backward()
        runs.append((total.detach(), logp, b.old_logp if keep else logp,
                     [p.grad.clone() for p in policy.parameters()]))
    (t1, l1, o1, g1), (t2, l2, o2, g2) = runs
    assert torch.equal(t1, t2) and torch.equal(l1, l2) and torch.equal(o1, o2)
    assert all(torch.equal(a, b) for a, b in zip(g1, g2))
