"""Post's objective applied to the GNN policy: one problem's rollout and loss, shared by
pretraining (gplace.pretrain) and fine-tuning (gplace.gnn_placer).

For each problem: sample K placements from the policy, measure them, turn step times into
rewards -sqrt(t / t_ref) (t_ref: the best heuristic's step time, so rewards are comparable
across graphs), normalize advantages within the problem, and minimize the weighted-sum form of
Post's objective: PPO's clipped surrogate + ce_weight x cross-entropy towards the problem's
elite set (the best placements seen, seeded with the heuristics' placements: the
cross-entropy method keeps the best samples whatever produced them) - entropy bonus.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch

from gplace import post
from gplace.features import canonical, problem_features
from gplace.placers.base import Measurer, SimMeasurer
from gplace.policy import FeatureTensors, GNNPolicy, sample
from gplace.problem import PlacementProblem


@dataclass(frozen=True)
class LearnConfig:
    samples: int = 16            # K: placements sampled per problem per step
    ppo_epochs: int = 4          # gradient steps on each rollout (Post: ~10 for its table)
    clip: float = 0.2            # PPO clip range
    ce_weight: float = 2.0       # weight of the elite cross-entropy (weighted-sum form); 2:
                                 # zero-shot quality comes from imitating the elite set
    entropy_coef: float = 0.01   # keeps exploration alive while the elites pull the policy
    elite_size: int = 8          # placements kept in each problem's elite set
    lr: float = 1e-3             # Adam


class Rollout(NamedTuple):
    placements: torch.Tensor   # (K, units) int64
    old_logp: torch.Tensor     # (K,) float64
    rewards: np.ndarray        # (K,) float64
    step_time_s: np.ndarray    # (K,)
    feasible: np.ndarray       # (K,) bool


class ProblemState:
    """What learning needs about one problem: features, a measurer, the elite set."""

    def __init__(self, problem: PlacementProblem, measurer: Measurer | None = None,
                 seeds: list[np.ndarray] = (), ref_time_s: float | None = None,
                 elite_size: int = 8):
        self.problem = problem
        self.features = FeatureTensors.from_numpy(problem_features(problem))
        self.measurer = measurer or SimMeasurer(problem)
        self.elite_size = elite_size
        self.elites: list[tuple[float, bytes, np.ndarray]] = []  # (time, key, placement)
        if seeds:
            m = self.measurer.measure(np.stack(seeds))
            self.offer(np.stack(seeds), m.step_time_s, m.feasible)
        self.ref_time_s = ref_time_s or (self.elites[0][0] if self.elites else None)

    def offer(self, placements: np.ndarray, times: np.ndarray, feasible: np.ndarray) -> None:
        """Adds feasible placements to the elite set, keeping the ``elite_size`` fastest distinct."""
        known = {key for _, key, _ in self.elites}
        for p, t, ok in zip(placements, times, feasible):
            key = np.asarray(p, np.int8 if self.problem.num_devices < 128 else np.int64).tobytes()
            if ok and key not in known:
                self.elites.append((float(t), key, np.asarray(p, np.int64)))
                known.add(key)
        self.elites.sort(key=lambda e: (e[0], e[1]))
        del self.elites[self.elite_size:]

    def elite_tensor(self) -> torch.Tensor | None:
        """The elites as cross-entropy targets, interchangeable devices in canonical order."""
        if not self.elites:
            return None
        return torch.as_tensor(np.stack([canonical(self.problem, e[2]) for e in self.elites]))


def rollout(policy: GNNPolicy, state: ProblemState, count: int, generator: torch.Generator,
            measure=None) -> Rollout:
    """Samples ``count`` placements and measures them (``measure`` defaults to the state's
    measurer; a fine-tuning Tracker passes its own to count the budget)."""
    with torch.no_grad():
        logits = policy(state.features)
        placements = sample(logits, count, generator)
        old_logp = post.placement_logp(logits.double(), placements)
    m = (measure or state.measurer.measure)(placements.numpy())
    n = len(m.step_time_s)
    placements, old_logp = placements[:n], old_logp[:n]
    state.offer(placements.numpy(), m.step_time_s, m.feasible)
    if state.ref_time_s is None and m.feasible.any():
        state.ref_time_s = float(m.step_time_s[m.feasible].min())
    ref = state.ref_time_s or 1.0
    rewards = post.reward(m.step_time_s / ref, m.feasible)
    return Rollout(placements, old_logp, rewards, m.step_time_s, m.feasible)


def elite_loss(policy: GNNPolicy, state: ProblemState, cfg: LearnConfig) -> torch.Tensor:
    """Post's cross-entropy half alone: towards the elite set, whatever sampled it."""
    logits = policy(state.features).double()
    elites = state.elite_tensor()
    total = -cfg.entropy_coef * post.entropy(logits)
    if elites is not None:
        total = total + cfg.ce_weight * post.cross_entropy_loss(
            post.placement_logp(logits, elites) / logits.shape[0])
    return total


def loss(policy: GNNPolicy, state: ProblemState, ro: Rollout, cfg: LearnConfig) -> torch.Tensor:
    """The weighted-sum form of Post's objective on one problem's rollout."""
    logits = policy(state.features).double()                              # (U, D)
    units = logits.shape[0]
    adv = post.normalize(torch.as_tensor(ro.rewards))
    total = post.ppo_loss(post.placement_logp(logits, ro.placements), ro.old_logp, adv, cfg.clip)
    elites = state.elite_tensor()
    if elites is not None and cfg.ce_weight:
        total = total + cfg.ce_weight * post.cross_entropy_loss(
            post.placement_logp(logits, elites) / units)
    if cfg.entropy_coef:
        total = total - cfg.entropy_coef * post.entropy(logits)
    return total
