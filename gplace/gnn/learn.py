"""Post's objective applied to the list-scheduler policy: one problem's rollout and loss, shared
by pretraining (gplace.gnn.pretrain) and fine-tuning (gplace.gnn.placer).

For each problem: roll out K placements with the policy (gplace.gnn.schedule), measure them,
turn step times into rewards -sqrt(t / t_ref) (t_ref: the best placement known when the problem
was built, so rewards compare across graphs), normalize advantages within the problem, and
minimize the weighted-sum form of Post's objective (gplace.post):
PPO's clipped surrogate + ce_weight x cross-entropy towards the elite set (the best placements
seen, seeded with the heuristics' placements: imitation of the best heuristic is the first
thing the cross-entropy asks for) - entropy bonus.

A placement is a sequence of unit decisions, and the surrogate is taken per decision (the
ratio of each decision's probability, the placement's advantage), as token-level PPO does: a
ratio of whole-placement probabilities over thousands of units clips at once.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

import gplace.post as post
from gplace.gnn.config import LearnConfig
from gplace.gnn.features import problem_features
from gplace.gnn.policy import FeatureTensors, GNNPolicy, Scores
from gplace.gnn.schedule import (DYN_FEATURES, FORCED, GREEDY, MASKED, MIXED, MIXED_SAMPLE,
                                 SAMPLE, Rollouts, build_sched, rollout)
from gplace.measure import Measurer, overlap
from gplace.sim.measurer import SimMeasurer
from gplace.problem import PlacementProblem


class Elite:
    """A placement of the elite set: its step time, its (units,) int64 ``placement``, a real
    measurement's (low, high) ``interval`` (None: exact), and its decision features (a FORCED
    rollout along it, for the cross-entropy), computed when first asked for: an elite displaced
    by faster placements before any loss reads it never needs them."""

    __slots__ = ("step_time_s", "placement", "interval", "_sched", "_rollout")

    def __init__(self, step_time_s: float, placement: np.ndarray, sched,
                 interval: tuple[float, float] | None = None, ro: Rollouts | None = None):
        """``ro``: the placement's decision features if known (a sampled rollout's: a FORCED
        rollout along a placement the policy sampled reaches the same states, so it records
        the same features, mask and estimate)."""
        self.step_time_s, self.placement, self.interval = step_time_s, placement, interval
        self._sched, self._rollout = sched, ro

    @property
    def rollout(self) -> Rollouts:
        if self._rollout is None:
            nu, nd = self._sched.unit_cost.shape
            self._rollout = rollout(self._sched, np.zeros((nu, nd)),
                                    np.zeros((nu, DYN_FEATURES)), FORCED,
                                    forced=self.placement[None])
        return self._rollout


class Batch(NamedTuple):
    """One problem's measured rollouts, ready for the loss."""

    ro: Rollouts
    old_logp: torch.Tensor | None  # (K, units) float64, per decision; None: not computed yet
                                   # (loss_and_logp then takes its own: see there)
    rewards: np.ndarray      # (K,)
    step_time_s: np.ndarray  # (K,)
    feasible: np.ndarray     # (K,) bool


class ProblemState:
    """What learning needs about one problem: features, scheduler arrays, measurer, elites."""

    def __init__(self, problem: PlacementProblem, measurer: Measurer | None = None,
                 seeds: list[np.ndarray] = (), elite_size: int = 4, dispatch: bool = False):
        """``dispatch``: the scheduler's op order is the simulator's dispatch order (a policy
        whose ``order`` is "dispatch"), else HEFT's rank order."""
        self.problem = problem
        self.numpy_features = problem_features(problem)
        self.features = FeatureTensors.from_numpy(self.numpy_features)
        self.sched = build_sched(problem, dispatch)
        self.measurer = measurer or SimMeasurer(problem)
        self.elite_size = elite_size
        self.elites: list[Elite] = []
        self.ref_time_s: float | None = None
        if len(seeds):
            m = self.measurer.measure(np.stack(seeds))
            self.offer(np.stack(seeds), m.step_time_s, m.feasible)
        self.ref_time_s = self.best_time_s if self.elites else None
        self._stake: np.ndarray | None = None

    @property
    def stake(self) -> np.ndarray:
        """(units,) :func:`unit_stake` of the problem, computed once (every imitation step
        weighs its decisions by it)."""
        if self._stake is None:
            self._stake = unit_stake(self.problem, self.sched.unit_cost)
        return self._stake

    @property
    def best_time_s(self) -> float:
        return self.elites[0].step_time_s if self.elites else np.inf

    def offer(self, placements: np.ndarray, times: np.ndarray, feasible: np.ndarray,
              low: np.ndarray | None = None, high: np.ndarray | None = None,
              rollouts: Rollouts | None = None) -> None:
        """Adds feasible placements to the elite set, keeping the ``elite_size`` fastest
        distinct ones (ties: the one offered first). With ``low``/``high`` (a real
        measurement's intervals, gplace.measure), a newcomer takes the best elite's place only
        if its interval lies wholly below the incumbent's: overlapping intervals are a tie, and
        the elite the fine-tuning imitates first does not follow noise. ``rollouts``: the
        sampled rollouts the placements come from, whose features the elites then reuse."""
        known = {e.placement.tobytes() for e in self.elites}
        fresh = []
        for k, (p, t, ok) in enumerate(zip(np.asarray(placements, np.int64), times, feasible)):
            key = p.tobytes()
            if ok and key not in known and (len(self.elites) < self.elite_size
                                             or t < self.elites[-1].step_time_s):
                span = None if low is None or high is None else (float(low[k]), float(high[k]))
                ro = None if rollouts is None else Rollouts(*(x[k:k + 1].copy() for x in rollouts))
                fresh.append((float(t), p.copy(), span, ro))
                known.add(key)
        if not fresh:
            return
        incumbent = self.elites[0] if self.elites else None
        ranked = sorted([(e.step_time_s, i, e) for i, e in enumerate(self.elites)]
                        + [(t, len(self.elites) + j, (p, span, ro))
                           for j, (t, p, span, ro) in enumerate(fresh)],
                        key=lambda x: (x[0], x[1]))[: self.elite_size]
        elites = [x[2] if isinstance(x[2], Elite) else self._elite(x[0], *x[2]) for x in ranked]
        if (incumbent is not None and elites[0] is not incumbent
                and overlap(elites[0].interval, incumbent.interval)):
            elites = [incumbent] + [e for e in elites if e is not incumbent][: self.elite_size - 1]
        self.elites = elites

    def fill_rollouts(self) -> None:
        """Computes the decision features of every elite that has none yet in one batch of
        FORCED rollouts, which runs over the rollout threads (gplace.gnn.schedule): the same
        rows as one rollout each (Elite.rollout), in a fraction of the time."""
        todo = [e for e in self.elites if e._rollout is None]
        if len(todo) < 2:
            return  # one is computed where it is asked for
        nu, nd = self.sched.unit_cost.shape
        ro = rollout(self.sched, np.zeros((nu, nd)), np.zeros((nu, DYN_FEATURES)), FORCED,
                     forced=np.stack([e.placement for e in todo]))
        for k, e in enumerate(todo):
            e._rollout = Rollouts(*(x[k:k + 1].copy() for x in ro))

    def _elite(self, t: float, placement: np.ndarray,
               interval: tuple[float, float] | None = None,
               ro: Rollouts | None = None) -> Elite:
        """An elite whose decision features are ``ro``, or come from the rollout forced along
        its placement."""
        return Elite(t, placement, self.sched, interval, ro)


def decision_logits(scores: Scores, phi: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(K, units, D) logits s + w . phi (+ the state head's v . relu(a phi + b)) at each
    unit's decision, masked devices at MASKED."""
    phi = phi.double()
    logits = scores.s.double()[None] + torch.einsum("kudf,uf->kud", phi, scores.w.double())
    if scores.a is not None:
        z = torch.relu(torch.einsum("kudf,hf->kudh", phi, scores.a.double())
                       + scores.b.double()[None, :, None, :])
        logits = logits + torch.einsum("kudh,uh->kud", z, scores.v.double())
    return torch.where(mask, logits, torch.full_like(logits, MASKED))


def decision_logp(scores: Scores, ro: Rollouts,
                  taken: np.ndarray | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(K, units) log-probability of each decision taken (``taken``: other (K, units) devices
    to score at the rollout's states), and (K, units, D) log-probabilities."""
    logits = decision_logits(scores, torch.as_tensor(ro.phi), torch.as_tensor(ro.mask))
    logp = torch.log_softmax(logits, -1)
    taken = torch.as_tensor(ro.placements if taken is None else taken)[..., None]
    return logp.gather(-1, taken).squeeze(-1), logp


def greedy(policy: GNNPolicy, state: ProblemState) -> np.ndarray:
    """The greedy placement: every decision takes the most likely device. No samples (the
    zero-shot placement, GNNPlacer.zero_shot, is the best of it and sampled rollouts)."""
    with torch.no_grad():
        scores = policy(state.features)
    return rollout(state.sched, *scores.numpy(), GREEDY,
                   head=scores.head_numpy()).placements[0]


def tempered(scores: Scores, temperature: float) -> Scores:
    """The scores of the policy whose logits are divided by ``temperature`` (logits are linear
    in s and w, so scaling both scales every decision's logits; the greedy rollout is
    unchanged)."""
    if temperature == 1.0:
        return scores
    return scores._replace(s=scores.s / temperature, w=scores.w / temperature,
                           v=None if scores.v is None else scores.v / temperature)


def sample(policy: GNNPolicy, state: ProblemState, count: int, seed: int,
           measure=None, temperature: float = 1.0, old_logp: bool = True) -> Batch:
    """Rolls out ``count`` placements and measures them (``measure`` defaults to the state's
    measurer; fine-tuning passes its Tracker's to count the budget). ``old_logp`` False
    leaves the decisions' log-probabilities to the first loss, which must then run at the
    sampling weights (:func:`loss_and_logp`)."""
    with torch.no_grad():
        scores = tempered(policy(state.features), temperature)
        ro = rollout(state.sched, *scores.numpy(), SAMPLE, count=count, seed=seed,
                     head=scores.head_numpy())
        old = decision_logp(scores, ro)[0] if old_logp else None
    m = (measure or state.measurer.measure)(ro.placements)
    n = len(m.step_time_s)
    ro = Rollouts(*(x[:n] for x in ro))
    state.offer(ro.placements, m.step_time_s, m.feasible, m.low_s, m.high_s, ro)
    if state.ref_time_s is None and m.feasible.any():
        state.ref_time_s = float(m.step_time_s[m.feasible].min())
    rewards = post.reward(m.step_time_s / (state.ref_time_s or 1.0), m.feasible)
    return Batch(ro, None if old is None else old[:n], rewards, m.step_time_s, m.feasible)


def masked_entropy(logp: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean entropy of the decisions that had a choice."""
    h = -(logp.exp() * logp).sum(-1)                                 # (K, units)
    choice = torch.as_tensor(mask).sum(-1) > 1
    return h[choice].mean() if choice.any() else h.sum() * 0.0


def unit_stake(problem: PlacementProblem, unit_cost: np.ndarray) -> np.ndarray:
    """(units,) seconds a unit's device decides: its work (time on its fastest device, from
    ``unit_cost``, (units, devices)) plus its tensors' time over the cluster's average link
    (the bytes it sends and receives over the mean of 1 / bandwidth between distinct
    devices). A variable's handle or an embedding table does no work, and its device still
    decides where megabytes travel."""
    n = unit_cost.shape[0]
    work = unit_cost.min(1) if unit_cost.size else np.zeros(n)
    if problem.num_devices < 2 or n == 0:
        return work
    bw = problem.cluster.link_table().bandwidth
    off = ~np.eye(bw.shape[0], dtype=bool)
    mean_inv_bw = float(np.mean(1.0 / bw[off]))
    t = problem.unit_traffic()
    traffic = (np.bincount(t.src, weights=t.nbytes, minlength=n)
               + np.bincount(t.dst, weights=t.nbytes, minlength=n))
    return work + traffic * mean_inv_bw


def decision_weights(state: ProblemState, work_share: float) -> torch.Tensor:
    """(units,) weights of the decisions in an imitation cross-entropy, summing to 1:
    ``1 - work_share`` spread evenly, ``work_share`` in proportion to the unit's stake
    (:func:`unit_stake`: its work and its traffic). Thousands of tiny groups, whose device
    barely matters, would otherwise outweigh the few that set the step time."""
    n = state.sched.num_units
    work = state.stake
    even = np.full(n, 1.0 / n)
    by_work = work / work.sum() if work.sum() > 0 else even
    return torch.as_tensor((1.0 - work_share) * even + work_share * by_work)


def elite_loss(scores: Scores, state: ProblemState, work_share: float = 0.0) -> torch.Tensor:
    """Cross-entropy towards the elite set, per decision (0 without elites); with
    ``work_share``, decisions weighted as :func:`decision_weights` says."""
    if not state.elites:
        return scores.s.sum() * 0.0
    state.fill_rollouts()
    terms = [decision_logp(scores, e.rollout)[0] for e in state.elites]
    if not work_share:
        return post.cross_entropy_loss(torch.cat([t.flatten() for t in terms]))
    weights = decision_weights(state, work_share)
    return -sum((t * weights).sum() for t in terms) / len(terms)


def onpolicy_loss(scores: Scores, state: ProblemState, follow: float, seed: int,
                  work_share: float = 0.0, explore: float = 0.0) -> torch.Tensor:
    """Cross-entropy towards the best elite's devices at the states of a rollout that follows
    the elite at each decision with probability ``follow`` and the policy's argmax otherwise
    (with ``explore`` > 0: a draw from the policy's softmax at ``explore`` times the
    temperature of ``scores``, the states fine-tuning's samples reach).

    Imitation along the elite's own schedule (elite_loss) teaches decisions in states the
    policy never reaches once one of its choices differs; on sampled training problems the
    policy matched 87% of the expert's decisions there, yet its greedy placements were 1.18x
    the expert's (DAgger's compounding error, Ross et al. 2011). Here the labels stay the
    elite's, the states become the policy's."""
    if not state.elites:
        return scores.s.sum() * 0.0
    target = state.elites[0].placement
    s, w = scores.numpy()
    head = scores.head_numpy()
    if explore > 0:
        hot = None if head is None else (head[0], head[1], head[2] / explore)
        ro = rollout(state.sched, s / explore, w / explore, MIXED_SAMPLE, seed=seed,
                     forced=target[None], follow=follow, head=hot)
    else:
        ro = rollout(state.sched, s, w, MIXED, seed=seed, forced=target[None], follow=follow,
                     head=head)
    logp = decision_logp(scores, ro, target[None])[0][0]
    mask = torch.as_tensor(ro.mask[0])
    t = torch.as_tensor(target)
    keep = mask.gather(-1, t[:, None]).squeeze(-1) & (mask.sum(-1) > 1)
    if not keep.any():
        return scores.s.sum() * 0.0
    if not work_share:
        return -logp[keep].mean()
    weights = decision_weights(state, work_share)[keep]
    return -(logp[keep] * weights).sum() / weights.sum()


def loss(policy: GNNPolicy, state: ProblemState, batch: Batch | None,
         cfg: LearnConfig, seed: int = 0) -> torch.Tensor:
    """The weighted-sum form of Post's objective on one problem (PPO term only with a batch;
    the on-policy imitation term only with ``cfg.dagger``)."""
    return loss_and_logp(policy, state, batch, cfg, seed)[0]


def loss_and_logp(policy: GNNPolicy, state: ProblemState, batch: Batch | None,
                  cfg: LearnConfig, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor | None]:
    """:func:`loss`, and the batch's (K, units) decision log-probabilities at these weights,
    detached (None without a batch). A batch without ``old_logp`` takes them as its old ones:
    at the sampling weights they are the numbers ``sample`` would have computed (the same
    scores and operations), so fine-tuning computes them once, not twice."""
    scores = tempered(policy(state.features), cfg.temperature)
    total = (cfg.ce_weight * elite_loss(scores, state, cfg.ce_work) if cfg.ce_weight
             else scores.s.sum() * 0.0)
    if cfg.dagger:
        total = total + cfg.dagger * onpolicy_loss(scores, state, cfg.dagger_follow, seed,
                                                   cfg.ce_work,
                                                   cfg.dagger_temperature / cfg.temperature)
    if batch is None or not len(batch.rewards):
        return total, None
    logp, all_logp = decision_logp(scores, batch.ro)
    old = logp.detach() if batch.old_logp is None else batch.old_logp
    adv = post.normalize(torch.as_tensor(batch.rewards))[:, None]         # (K, 1)
    total = total + post.ppo_loss(logp, old, adv, cfg.clip)
    if cfg.entropy_coef:
        total = total - cfg.entropy_coef * masked_entropy(all_logp, batch.ro.mask)
    return total, logp.detach()
