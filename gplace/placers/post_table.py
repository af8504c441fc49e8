"""Post with a per-unit logit table (Gao, Chen, Li, NeurIPS 2018, Algorithm 1), its ablations,
and the policy-gradient placer it was compared with (ColocRL / HDP, Mirhoseini et al. 2017/18).

Registry names: ``post`` (CE refits interleaved with PPO, as Algorithm 1), ``post-sum`` (one
weighted-sum loss, PPO + ce_weight * elite cross-entropy), ``ce`` (cross-entropy refits only),
``ppo`` (PPO only), ``pg`` (REINFORCE with a moving-average baseline). All share the same
distribution family (a softmax per unit, logits starting at zero = uniform) and the losses of
:mod:`gplace.post`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

import gplace.post as post
from gplace.placers.base import Measurer, PlaceResult, Tracker, register
from gplace.problem import PlacementProblem


@dataclass(frozen=True)
class PostConfig:
    batch: int = 20              # K: placements sampled per PPO batch
    refit_every: int = 100       # N: samples between cross-entropy refits (prototype: 100)
    ppo_epochs: int = 10         # gradient steps per batch; Post: "about 10"
    lr: float = 0.05             # Adam on the logits; the logit table is one layer, so larger
                                 # than a deep net's 3e-4 (0.01 learned too slowly in 2400)
    clip: float = 0.2            # PPO clip range, Schulman et al. 2017
    elite_fraction: float = 0.1  # Post: the best 10% of samples
    eps: float = 0.05            # uniform mix after each refit, keeps every device reachable
    entropy_coef: float = 0.0    # optional entropy bonus on the PPO loss
    ce_weight: float = 1.0       # weight of the elite cross-entropy in the weighted-sum form
    use_ce: bool = True
    use_ppo: bool = True
    combine: str = "interleave"  # "interleave" (Algorithm 1) or "sum" (weighted sum)


class LogitTablePlacer:
    """Post's Algorithm 1 over a (units, devices) logit table."""

    defaults = PostConfig()

    def __init__(self, seed: int = 0, init_logits: np.ndarray | None = None,
                 elite_seeds: np.ndarray | None = None, **config):
        """``init_logits`` (units, devices): start there instead of uniform (a pretrained
        prior); ``elite_seeds`` (k, units): placements that join the elite set at the first
        refit without being sampled (as measured by the caller, they cost no budget here)."""
        self.seed = seed
        self.config = replace(self.defaults, **config)
        self.init_logits, self.elite_seeds = init_logits, elite_seeds

    def place(self, problem: PlacementProblem, measurer: Measurer, budget: int) -> PlaceResult:
        cfg, rng = self.config, np.random.default_rng(self.seed)
        tracker = Tracker(problem, measurer, budget)
        start = np.zeros((problem.num_units, problem.num_devices)) if self.init_logits is None \
            else np.asarray(self.init_logits, np.float64)
        logits = torch.tensor(start, dtype=torch.float64, requires_grad=True)
        opt = torch.optim.Adam([logits], lr=cfg.lr)
        seen, since_refit = [], 0
        while tracker.left > 0:
            probs = torch.softmax(logits.detach(), -1).numpy()
            batch = post.sample_placements(probs, min(cfg.batch, tracker.left), rng)
            m = tracker.evaluate(batch)
            seen.append(batch)
            since_refit += len(batch)
            rewards = post.reward(*tracker.history())
            if cfg.use_ppo:
                self._ppo(logits, opt, batch, rewards[-len(batch):], seen, rewards)
            if cfg.use_ce and cfg.combine == "interleave" and since_refit >= cfg.refit_every:
                pool, pool_rewards = np.concatenate(seen), rewards
                if self.elite_seeds is not None and len(self.elite_seeds):
                    # Seeds rank just above the best sample (they were measured as at least
                    # as good by the caller), so they always enter the elite set.
                    pool = np.concatenate([np.asarray(self.elite_seeds, np.int64), pool])
                    pool_rewards = np.concatenate(
                        [np.full(len(self.elite_seeds), rewards.max() + 1e-9), rewards])
                self._refit(logits, pool, pool_rewards, problem.num_devices)
                opt = torch.optim.Adam([logits], lr=cfg.lr)  # fresh moments after a jump
                since_refit = 0
            del m
        return tracker.result(self.name, problem.single_device(0), config=vars(cfg))

    def _ppo(self, logits, opt, batch, batch_rewards, seen, all_rewards) -> None:
        cfg = self.config
        placements = torch.as_tensor(batch)
        adv = post.normalize(torch.as_tensor(batch_rewards))
        old = post.placement_logp(logits.detach(), placements)
        elites = None
        if cfg.combine == "sum" and cfg.use_ce:
            everything = np.concatenate(seen)
            elites = torch.as_tensor(everything[post.elite_indices(all_rewards, cfg.elite_fraction)])
        for _ in range(cfg.ppo_epochs):
            loss = post.ppo_loss(post.placement_logp(logits, placements), old, adv, cfg.clip)
            if cfg.entropy_coef:
                loss = loss - cfg.entropy_coef * post.entropy(logits)
            if elites is not None:
                elite_logp = post.placement_logp(logits, elites) / logits.shape[0]
                loss = loss + cfg.ce_weight * post.cross_entropy_loss(elite_logp)
            opt.zero_grad()
            loss.backward()
            opt.step()

    def _refit(self, logits, placements, rewards, num_devices) -> None:
        cfg = self.config
        elites = placements[post.elite_indices(rewards, cfg.elite_fraction)]
        dist = post.elite_distribution(elites, num_devices, cfg.eps)
        with torch.no_grad():
            logits.copy_(torch.as_tensor(np.log(dist)))


@register("post")
class PostPlacer(LogitTablePlacer):
    defaults = PostConfig()


@register("post-sum")
class PostSumPlacer(LogitTablePlacer):
    defaults = PostConfig(combine="sum")


@register("ce")
class CrossEntropyPlacer(LogitTablePlacer):
    defaults = PostConfig(use_ppo=False)


@register("ppo")
class PPOPlacer(LogitTablePlacer):
    defaults = PostConfig(use_ce=False)


@dataclass(frozen=True)
class PGConfig:
    batch: int = 20       # samples per gradient step
    lr: float = 0.05      # Adam on the logits, as Post's table
    decay: float = 0.9    # moving-average baseline: b <- decay * b + (1 - decay) * mean reward


@register("pg")
class PolicyGradientPlacer:
    """REINFORCE with a moving-average baseline over the same per-unit softmax (ColocRL/HDP)."""

    def __init__(self, seed: int = 0, **config):
        self.seed = seed
        self.config = replace(PGConfig(), **config)

    def place(self, problem: PlacementProblem, measurer: Measurer, budget: int) -> PlaceResult:
        cfg, rng = self.config, np.random.default_rng(self.seed)
        tracker = Tracker(problem, measurer, budget)
        logits = torch.zeros(problem.num_units, problem.num_devices, dtype=torch.float64,
                             requires_grad=True)
        opt = torch.optim.Adam([logits], lr=cfg.lr)
        baseline = None
        while tracker.left > 0:
            probs = torch.softmax(logits.detach(), -1).numpy()
            batch = post.sample_placements(probs, min(cfg.batch, tracker.left), rng)
            tracker.evaluate(batch)
            r = post.reward(*tracker.history())[-len(batch):]
            baseline = r.mean() if baseline is None else cfg.decay * baseline + (1 - cfg.decay) * r.mean()
            adv = torch.as_tensor(r - baseline)
            loss = post.reinforce_loss(post.placement_logp(logits, torch.as_tensor(batch)), adv)
            opt.zero_grad()
            loss.backward()
            opt.step()
        return tracker.result(self.name, problem.single_device(0), config=vars(cfg))
