"""The pretrained GNN placer behind the common interface: zero-shot placement by the learned
list scheduler, then fine-tuning with Post's objective.

    placer = gplace.load()                       # the checkpoint shipped with the package
    result = placer.place(problem, SimMeasurer(problem), budget=300, seeds=heuristic_placements)

Zero-shot spends no samples: the best of the greedy rollout and 16 sampled rollouts in each of
the list scheduler's two orders, and as many rollouts of the untrained network's scores in the
order the policy was not trained in (``zero_shot_prior``), by the dispatch-order schedule's
makespan estimate, then hill-climbed on that estimate (``zero_shot_polish`` replays of moved
units; nothing measured; gplace.gnn.infer.best_rollout, polish). Fine-tuning spends the
budget in rounds through the budget-counting Tracker; each round splits its samples between
- policy rollouts, to which Post's objective (gplace.gnn.learn: PPO + elite cross-entropy) is
  applied, and
- local moves of the best placement so far: one unit, or a chain of it and its
  heaviest-traffic neighbours, moved to a device drawn from the policy's decision
  probabilities along that placement, mixed with uniform; ``local_screen`` times as many are
  drawn, and the distinct ones with the lowest dispatch-order makespan estimate are measured
  (gplace.gnn.replay: each replay resumed where the move departs; nothing measured to rank).
The local share ramps from ``local_start`` to ``local_fraction`` over ``local_ramp`` samples.
The elite set starts with the zero-shot placement and the seeds (the cheap heuristics), so the
result is never slower than the best of them.
"""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import torch

from gplace.errors import ConfigError, check_whole
from gplace.gnn.adam import Adam
from gplace.gnn.config import FinetuneConfig
from gplace.gnn.infer import NO_SHIPPED, SHIPPED, policy_weights, zero_shot
from gplace.gnn.learn import ProblemState, decision_logp, loss_and_logp, sample, tempered
from gplace.gnn.policy import GNNPolicy
from gplace.gnn.replay import NearReplays
from gplace.gnn.schedule import chain_of, heaviest_neighbour
from gplace.placers.base import Measurer, PlaceResult, Tracker, register
from gplace.problem import PlacementProblem


@register("gnn")
class GNNPlacer:
    """The learned placer; ``place`` has the signature of every placer, plus seed placements."""

    def __init__(self, seed: int = 0, checkpoint: str | Path | None = None,
                 policy: GNNPolicy | None = None, meta: dict | None = None,
                 config: FinetuneConfig | None = None):
        check_whole("seed", seed, 0, 2**32 - 1)  # numpy's seed range
        self.source = None  # the checkpoint file the policy was read from
        if policy is None:
            policy, meta = load_policy(checkpoint)
            self.source = str(checkpoint if checkpoint is not None else SHIPPED)
        self.policy, self.meta, self.seed = policy, dict(meta or {}), int(seed)
        self.config = config or FinetuneConfig()

    def __repr__(self) -> str:
        where = f"checkpoint={self.source!r}" if self.source else "a policy in memory"
        return f"GNNPlacer(seed={self.seed}, {where})"

    def zero_shot(self, problem: PlacementProblem, state: ProblemState | None = None,
                  progress=None) -> np.ndarray:
        """The placement fine-tuning starts from, with no samples spent (:meth:`_zero_shot`);
        ``state``: the problem's ProblemState, if the caller has one (its features and
        scheduler arrays are then not built again); ``progress(stage, done, total)``: its
        rollouts and its polish's replays (gplace.gnn.infer.zero_shot)."""
        _check_problem(problem, "zero_shot")
        return self._zero_shot(self.policy, state or ProblemState(
            problem, _NoMeasurer(), dispatch=self.policy.dispatch), progress)

    def _zero_shot(self, policy: GNNPolicy, state: ProblemState, progress=None) -> np.ndarray:
        """The best of the policy's greedy and ``zero_shot_rollouts`` sampled rollouts (at the
        fine-tuning temperature) in both of the list scheduler's orders (and the untrained
        network's with ``zero_shot_prior``), ranked by the dispatch-order schedule's makespan
        estimate: nothing is measured. The scores come from the numpy forward, as without
        torch (gplace.gnn.infer)."""
        return zero_shot(policy_weights(policy), state.numpy_features, state.sched, self.seed,
                         self.config, progress)

    def place(self, problem: PlacementProblem, measurer: Measurer | None = None,
              budget: int = 0, seeds: list[np.ndarray] = (), progress=None,
              start: np.ndarray | None = None, zero_progress=None) -> PlaceResult:
        """Zero-shot, then ``budget`` fine-tuning samples; the best feasible placement.
        ``start``: the zero-shot placement, where the caller has it (:meth:`zero_shot`);
        ``progress(used, best_s)``: the samples; ``zero_progress(stage, done, total)``:
        zero-shot's rollouts and polish (gplace.gnn.infer.zero_shot). It seeds torch
        (gplace.place.place keeps its caller's random state)."""
        _check_problem(problem, "place")
        if measurer is None:
            raise TypeError("GNNPlacer.place needs a measurer: gplace.placers.SimMeasurer("
                            "problem), or a RealMeasurer")
        cfg = self.config.learn
        torch.manual_seed(self.seed)
        policy = copy.deepcopy(self.policy).train()
        tracker = Tracker(problem, measurer, budget)
        state = ProblemState(problem, measurer, elite_size=cfg.elite_size,
                             dispatch=policy.dispatch)
        zero = start if start is not None else self._zero_shot(policy, state, zero_progress)
        candidates = np.stack([zero, *seeds])
        m = measurer.measure(candidates)  # zero-shot and seeds: no samples charged
        state.offer(candidates, m.step_time_s, m.feasible, m.low_s, m.high_s)
        state.ref_time_s = state.best_time_s if state.elites else None
        for p, t, ok in zip(candidates, m.step_time_s, m.feasible):
            if ok:  # the best start: the result so far, the control of real batches
                tracker.offer_free(p, float(t))
        zero_time = float(m.step_time_s[0]) if m.feasible[0] else np.inf
        start_time = state.best_time_s
        # torch.optim's Adam, step for step, without importing torch._dynamo (gplace.gnn.adam)
        opt = Adam(policy.param_groups(cfg.lr, cfg.w0_lr_scale)) if budget else None
        rng = np.random.default_rng(self.seed)
        screen = _Screen(state.sched._replace(contention=self.config.estimate_contention))
        rounds = 0
        while tracker.left > 0:
            n = min(cfg.samples, tracker.left)
            n_local = int(round(n * self._local_share(tracker.used))) if state.elites else 0
            batch = None
            if n - n_local > 0:
                # its old log-probabilities come from the first update, at the same weights
                batch = sample(policy, state, n - n_local, self.seed * 100_003 + rounds,
                               tracker.evaluate, cfg.temperature, old_logp=False)
            if n_local and tracker.left > 0:
                self._local_moves(policy, state, tracker, n_local, rng, screen)
            if tracker.stopped:  # Ctrl-C (gplace.stopping): the best so far is the result
                break
            for _ in range(cfg.ppo_epochs):
                opt.zero_grad()
                total, logp = loss_and_logp(policy, state, batch, cfg)
                if batch is not None and batch.old_logp is None:
                    batch = batch._replace(old_logp=logp)
                total.backward()
                opt.step()
            rounds += 1
            if progress:
                progress(tracker.used, state.best_time_s)
        return tracker.result("gnn", zero, zero_shot_step_time_s=zero_time,
                              start_step_time_s=start_time, zero_shot_placement=zero)

    def _local_moves(self, policy, state: ProblemState, tracker: Tracker, count: int, rng,
                     screen: _Screen) -> None:
        """``count`` independent moves of the best placement, the best ``local_screen``-th of
        those drawn by the estimate (see the module docstring)."""
        best = state.elites[0]
        with torch.no_grad():
            scores = tempered(policy(state.features), self.config.learn.temperature)
            _, logp = decision_logp(scores, best.rollout)
        probs = logp[0].exp().numpy()                                          # (U, D)
        mix = self.config.policy_mix
        q = mix * probs + (1 - mix) / probs.shape[1]
        heaviest = _heaviest_neighbour(state)
        drawn = count * max(1, self.config.local_screen)
        cands = np.repeat(best.placement[None], drawn, axis=0)
        for row, u in enumerate(rng.integers(0, best.placement.shape[0], drawn)):
            w = q[u].copy()
            w[best.placement[u]] = 0.0
            if w.sum() <= 0:
                continue
            moved = chain_of(u, heaviest, rng, self.config.chain_moves)
            cands[row, moved] = rng.choice(w.shape[0], p=w / w.sum())
        if drawn > count:
            screened = screen.lowest(best.placement, cands, count)
            # none left (one device, or every move measured): the drawn ones, so that the
            # budget is still spent
            cands = screened if len(screened) else cands[:count]
        m = tracker.evaluate(cands)
        state.offer(cands[: len(m.step_time_s)], m.step_time_s, m.feasible, m.low_s, m.high_s)

    def _local_share(self, used: int) -> float:
        """Ramps from ``local_start`` to ``local_fraction`` over ``local_ramp`` samples; it
        depends on samples used, not on the budget, so a run's first N samples are those of a
        run with budget N."""
        c = self.config
        if c.local_ramp <= 0:
            return c.local_fraction
        return c.local_start + (c.local_fraction - c.local_start) * min(1.0, used / c.local_ramp)


def _check_problem(problem, method: str) -> None:
    """A TypeError that says how to place a graph, for a graph or a path where a
    PlacementProblem belongs (the placer interface's first argument)."""
    if not isinstance(problem, PlacementProblem):
        raise TypeError(f"GNNPlacer.{method} takes a PlacementProblem (got "
                        f"{type(problem).__name__}); to place a graph or a model file: "
                        "gplace.place.place(graph, checkpoint=placer, cluster=...)")


class _Screen:
    """Ranks moves of one placement by the dispatch-order makespan estimate (NearReplays of
    that placement, kept while it stays the best), leaving out the moves it has already
    handed out from that placement."""

    def __init__(self, sched):
        self.sched, self.near, self.handed = sched, None, set()

    def lowest(self, base: np.ndarray, cands: np.ndarray, count: int) -> np.ndarray:
        """At most ``count`` distinct rows of ``cands`` that differ from ``base`` and were not
        handed out before from it: those whose groups fit every device's memory (the groups'
        memory estimate, ``sched.need``, against ``sched.capacity``) first, each set by lowest
        estimate (ties: the rows' order in np.unique, unique_rows)."""
        if self.near is None:
            self.near = NearReplays(self.sched, base)
        elif not np.array_equal(self.near.base, base):
            self.near, self.handed = self.near.rebased(base), set()
        rows = unique_rows(cands)
        rows = rows[(rows != base).any(axis=1)
                    & np.array([r.tobytes() not in self.handed for r in rows], np.bool_)]
        if rows.shape[0] == 0:
            return rows
        est = self.near.estimates(rows)
        nd, k = self.sched.num_devices, rows.shape[0]
        used = np.bincount((np.arange(k)[:, None] * nd + rows).ravel(),
                           weights=np.tile(self.sched.need, k), minlength=k * nd).reshape(k, nd)
        fits = (used <= self.sched.capacity).all(axis=1)
        picked = rows[np.lexsort((est, ~fits))[:count]]
        self.handed.update(row.tobytes() for row in picked)
        return picked


def unique_rows(rows: np.ndarray) -> np.ndarray:
    """``np.unique(rows, axis=0)`` of non-negative integer rows (placements), in its order:
    the big-endian bytes of non-negative integers sort as the numbers do. np.unique views a
    row as a record of one field per column, which is slow on rows of many units."""
    keys = {row.astype(">i8").tobytes(): k for k, row in enumerate(rows)}
    return rows[[keys[key] for key in sorted(keys)]]


def _heaviest_neighbour(state: ProblemState) -> np.ndarray:
    """gplace.gnn.schedule.heaviest_neighbour of the state's problem, computed once."""
    cached = getattr(state, "_heaviest", None)
    if cached is None:
        cached = state._heaviest = heaviest_neighbour(state.sched)
    return cached


class _NoMeasurer:
    """Zero-shot needs no measurement; calling this one is a bug."""

    def measure(self, placements):
        raise AssertionError("zero-shot placement must not measure")


def load_policy(path: str | Path | None = None) -> tuple[GNNPolicy, dict]:
    """(policy, meta) from a checkpoint; with no path, the one shipped with gplace."""
    path = Path(path) if path is not None else SHIPPED
    if path == SHIPPED and not SHIPPED.exists():
        raise ConfigError(NO_SHIPPED)
    return GNNPolicy.load(path)


def load(path: str | Path | None = None, seed: int = 0) -> GNNPlacer:
    """A GNNPlacer from a policy checkpoint; with no path, the one shipped with gplace."""
    return GNNPlacer(seed=seed, checkpoint=path)
