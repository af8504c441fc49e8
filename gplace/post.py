"""Post's objective (Gao, Chen, Li, "Spotlight/Post", NeurIPS 2018), as small pure functions.

Every learner calls these: the logit-table Post (gplace.placers.post) and, later, the GNN policy.
Post's Algorithm 1 interleaves two steps over a per-op softmax policy:

* a cross-entropy (KL) step: fit the policy to the elite set, the top ``elite_fraction`` of the
  placements sampled so far (for a per-unit softmax the maximum-likelihood fit is closed form:
  the device frequencies among the elites), then mix in ``eps / D`` uniform probability;
* a PPO step (Schulman et al. 2017): ~10 gradient steps of the clipped surrogate on the recent
  batch, with advantages normalized within the batch.

The weighted-sum form adds the elite cross-entropy to the PPO loss in one gradient step.
Reward: -sqrt(step time) as HDP (Mirhoseini et al. 2018); an infeasible placement gets a fixed
failing reward, below every feasible one.
"""

from __future__ import annotations

import numpy as np
import torch


def reward(step_time_s: np.ndarray, feasible: np.ndarray, fail_reward: float | None = None) -> np.ndarray:
    """-sqrt(step time in seconds); infeasible samples get ``fail_reward`` (default: twice the
    worst feasible reward in the batch, or -10 as HDP when none is feasible)."""
    r = -np.sqrt(np.asarray(step_time_s, np.float64))
    feasible = np.asarray(feasible, bool)
    if fail_reward is None:
        fail_reward = 2.0 * r[feasible].min() if feasible.any() else -10.0
    return np.where(feasible, r, fail_reward)


def elite_indices(rewards: np.ndarray, fraction: float = 0.1) -> np.ndarray:
    """Indices of the top ``fraction`` of samples by reward (at least one), best first; ties go
    to the earlier sample so that the choice is deterministic."""
    k = max(1, int(round(fraction * len(rewards))))
    order = np.lexsort((np.arange(len(rewards)), -np.asarray(rewards)))
    return order[:k]


def elite_distribution(elites: np.ndarray, num_devices: int, eps: float) -> np.ndarray:
    """(units, devices) maximum-likelihood softmax fit to (k, units) elite placements, mixed
    with eps / D uniform probability (Post, Algorithm 1, the KL-minimization step)."""
    k, units = elites.shape
    counts = np.zeros((units, num_devices))
    np.add.at(counts, (np.broadcast_to(np.arange(units), elites.shape), elites), 1.0)
    return (1.0 - eps) * counts / k + eps / num_devices


def normalize(advantages: torch.Tensor) -> torch.Tensor:
    """Zero mean, unit variance within the batch (PPO's advantage normalization)."""
    if advantages.numel() < 2:
        return advantages - advantages.mean()
    return (advantages - advantages.mean()) / (advantages.std() + 1e-8)


def ppo_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor,
             clip: float = 0.2) -> torch.Tensor:
    """PPO's clipped surrogate, to be minimized (CleanRL's three lines)."""
    ratio = torch.exp(logp - old_logp)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip, 1.0 + clip)
    return torch.max(unclipped, clipped).mean()


def cross_entropy_loss(elite_logp: torch.Tensor) -> torch.Tensor:
    """Negative log-likelihood of the elite placements: the cross-entropy / KL term."""
    return -elite_logp.mean()


def reinforce_loss(logp: torch.Tensor, advantages: torch.Tensor) -> torch.Tensor:
    """REINFORCE (Williams 1992) with a baseline already subtracted, as ColocRL/HDP."""
    return -(advantages.detach() * logp).mean()


def entropy(logits: torch.Tensor) -> torch.Tensor:
    """Mean entropy of the per-unit device distributions; logits (units, devices)."""
    logp = torch.log_softmax(logits, dim=-1)
    return -(logp.exp() * logp).sum(-1).mean()


def placement_logp(logits: torch.Tensor, placements: torch.Tensor) -> torch.Tensor:
    """(batch,) log-probability of whole placements (batch, units) under per-unit softmaxes."""
    logp = torch.log_softmax(logits, dim=-1)                       # (units, devices)
    return logp.gather(1, placements.T).sum(0)                     # (batch,)


def sample_placements(probs: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    """(count, units) placements, device of each unit drawn from its row of ``probs``."""
    cdf = np.cumsum(probs, axis=1)
    cdf[:, -1] = 1.0
    u = rng.random((count, probs.shape[0], 1))
    return (u > cdf[None, :, :]).sum(-1).astype(np.int64)
