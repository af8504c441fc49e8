"""Post's losses: closed-form checks."""

import numpy as np
import torch

from gplace import post


def test_reward_is_minus_sqrt_and_infeasible_is_below_every_feasible():
    r = post.reward(np.array([4.0, 9.0, 1.0]), np.array([True, True, False]))
    assert r[:2].tolist() == [-2.0, -3.0]
    assert r[2] < r[:2].min()
    assert post.reward(np.array([1.0]), np.array([False]), fail_reward=-7.0).tolist() == [-7.0]


def test_elites_are_the_top_fraction_best_first_ties_to_earlier():
    rewards = np.array([-3.0, -1.0, -2.0, -1.0] + [-9.0] * 16)
    assert post.elite_indices(rewards, 0.1).tolist() == [1, 3]


def test_elite_distribution_is_the_mle_mixed_with_uniform():
    elites = np.array([[0, 1], [0, 0], [0, 1], [1, 1]])
    dist = post.elite_distribution(elites, num_devices=2, eps=0.2)
    assert np.allclose(dist, [[0.8 * 0.75 + 0.1, 0.8 * 0.25 + 0.1], [0.8 * 0.25 + 0.1, 0.8 * 0.75 + 0.1]])
    assert np.allclose(dist.sum(1), 1.0)


def test_ppo_clips_the_ratio():
    old = torch.zeros(2, dtype=torch.float64)
    adv = torch.tensor([1.0, -1.0], dtype=torch.float64)
    # ratio e^1 ~ 2.7 with a positive advantage is clipped at 1.2; ratio e^-1 with a negative
    # advantage is clipped at 0.8 (the max of the two negated terms)
    loss = post.ppo_loss(torch.tensor([1.0, -1.0], dtype=torch.float64), old, adv, clip=0.2)
    assert torch.isclose(loss, torch.tensor((-1.2 + 0.8) / 2, dtype=torch.float64))


def test_placement_logp_sums_per_unit_log_probs():
    logits = torch.log(torch.tensor([[0.5, 0.5], [0.9, 0.1]], dtype=torch.float64))
    lp = post.placement_logp(logits, torch.tensor([[0, 1], [1, 0]]))
    assert torch.allclose(lp, torch.log(torch.tensor([0.05, 0.45], dtype=torch.float64)))


def test_sampling_follows_the_distribution_and_is_seeded():
    probs = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.5, 0.5, 0.0]])
    a = post.sample_placements(probs, 4000, np.random.default_rng(0))
    b = post.sample_placements(probs, 4000, np.random.default_rng(0))
    assert np.array_equal(a, b)
    assert (a[:, 0] == 0).all() and (a[:, 1] == 2).all()
    assert abs(a[:, 2].mean() - 0.5) < 0.05 and set(a[:, 2].tolist()) == {0, 1}
