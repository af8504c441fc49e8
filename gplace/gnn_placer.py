"""The pretrained GNN placer: zero-shot placement, then fine-tuning with Post's objective.

    placer = gplace.load()                       # the checkpoint shipped with the package
    result = placer.place_problem(problem, SimMeasurer(problem), budget=300)

Fine-tuning spends the budget in rounds through the budget-counting Tracker. Each round
splits its samples between two kinds:
- policy samples, to which the pretraining step (gplace.learn: PPO + elite cross-entropy) is
  applied;
- local moves of the best placement so far: one unit, or a chain of it and its
  heaviest-traffic neighbours, moved to a device drawn from the policy mixed with uniform.
  After them, Post's cross-entropy term pulls the network towards the elite set.

The local share ramps from 0.2 to 1 over the first 150 samples. Early policy samples beat a
poor zero-shot start; later local moves refine the best placement found.
finetune/RESULTS.md records the variants tried and what each did.
The elite set starts with the zero-shot placement and any
seed placements (the cheap heuristics), so the result is never slower than the best of them.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from gplace.learn import LearnConfig, ProblemState, elite_loss, loss, rollout
from gplace.placers.base import Measurer, PlaceResult, Tracker, register
from gplace.features import problem_features
from gplace.policy import FeatureTensors, GNNPolicy, greedy
from gplace.problem import PlacementProblem

SHIPPED = Path(__file__).resolve().parent / "checkpoints" / "policy.pt"


@dataclass(frozen=True)
class FinetuneConfig:
    units: int = 64          # coarsening of new graphs; must match pretraining's
    learn: LearnConfig = field(default_factory=lambda: LearnConfig(samples=10, ppo_epochs=4))
    local_fraction: float = 1.0  # share of each round spent on local moves of the best
                                 # placement so far; the rest are policy samples for PPO.
                                 # On InceptionV3/post-4gpu at 300 samples (3 seeds): policy
                                 # samples only 1012-1022 ms, 0.5 local 976-983, 0.8 local
                                 # 923-931; Post from scratch at 2400: 958-960 ms. 1.0 with the
                                 # chain moves below won in the study (finetune/RESULTS.md).
    local_start: float = 0.2     # local share of the first round (see _local_share)
    local_ramp: int = 150        # samples over which the local share reaches local_fraction
    policy_mix: float = 0.5  # weight of the policy in the local moves' device distribution
    chain_moves: float = 0.5 # share of local moves that also move the unit's heaviest-traffic
                             # neighbours (a geometric number of steps along them): one-unit
                             # moves are too small for branchy CNNs (Inception-V3 b8 on
                             # post-4gpu: 76-78 ms single moves, 72-73 ms with chains)
    ce_epochs: int = 2       # Post's cross-entropy steps on the elite set after each round


class GNNPlacer:
    def __init__(self, policy: GNNPolicy, meta: dict | None = None, seed: int = 0,
                 config: FinetuneConfig | None = None):
        self.policy, self.meta, self.seed = policy, dict(meta or {}), seed
        units = self.meta.get("config", {}).get("units", FinetuneConfig.units)
        self.config = config or FinetuneConfig(units=units)

    def place(self, model, cluster=None, finetune: int = 0, **options):
        """Places a graph (path, GraphDef, tf.Graph or OpGraph) with this policy: see
        :func:`gplace.place.place` for the options; returns a PlacementResult."""
        from gplace.place import place
        return place(model, cluster=cluster, checkpoint=self, finetune=finetune,
                     seed=options.pop("seed", self.seed), **options)

    def zero_shot(self, problem: PlacementProblem) -> np.ndarray:
        """The most likely device per unit; no samples spent."""
        with torch.no_grad():
            return greedy(self.policy(FeatureTensors.from_numpy(problem_features(problem))))

    def place_problem(self, problem: PlacementProblem, measurer: Measurer, budget: int,
                      seeds: list[np.ndarray] = (), progress=None) -> PlaceResult:
        """Zero-shot, then ``budget`` fine-tuning samples; the best feasible placement."""
        start, cfg = time.perf_counter(), self.config.learn
        torch.manual_seed(self.seed)
        generator = torch.Generator().manual_seed(self.seed)
        policy = copy.deepcopy(self.policy).train()
        tracker = Tracker(problem, measurer, budget)
        state = ProblemState(problem, measurer, elite_size=cfg.elite_size)
        with torch.no_grad():
            zero = greedy(policy(state.features))
        candidates = np.stack([zero, *seeds])
        m = measurer.measure(candidates)  # zero-shot and seeds: no samples charged
        state.offer(candidates, m.step_time_s, m.feasible)
        zero_time = float(m.step_time_s[0]) if m.feasible[0] else np.inf
        if state.elites:
            state.ref_time_s = state.elites[0][0]
        start_time = state.elites[0][0] if state.elites else np.inf
        opt = torch.optim.Adam(policy.parameters(), lr=cfg.lr)
        rng = np.random.default_rng(self.seed)
        while tracker.left > 0:
            n = min(cfg.samples, tracker.left)
            share = self._local_share(tracker.used)
            n_local = int(round(n * share)) if state.elites else 0
            if n - n_local > 0:
                ro = rollout(policy, state, n - n_local, generator, tracker.evaluate)
                for _ in range(cfg.ppo_epochs):
                    opt.zero_grad()
                    loss(policy, state, ro, cfg).backward()
                    opt.step()
            if n_local and tracker.left > 0:
                self._local_moves(policy, state, tracker, n_local, rng)
                for _ in range(self.config.ce_epochs):
                    opt.zero_grad()
                    elite_loss(policy, state, cfg).backward()
                    opt.step()
            if progress:
                progress(tracker.used, state.elites[0][0] if state.elites else np.inf)
        result = self._best(state, tracker, zero_time, start)
        result.info["start_step_time_s"] = start_time  # best of zero-shot and seeds
        return result

    def _local_moves(self, policy, state, tracker, count, rng) -> None:
        """Moves one unit of the best placement so far, ``count`` times independently; the
        new device is drawn from the (fine-tuned) policy mixed with uniform. Every result
        joins the elite set, so the cross-entropy term pulls the policy after the search."""
        with torch.no_grad():
            probs = torch.softmax(policy(state.features).double(), -1).numpy()
        mix = self.config.policy_mix
        q = mix * probs + (1 - mix) / probs.shape[1]
        best = state.elites[0][2]
        heaviest = self._heaviest_neighbour(state)
        cands = np.repeat(best[None], count, axis=0)
        for row, u in enumerate(rng.integers(0, best.shape[0], count)):
            w = q[u].copy()
            w[best[u]] = 0.0
            if w.sum() == 0:
                continue
            moved = [int(u)]
            if rng.random() < self.config.chain_moves:
                for _ in range(rng.geometric(0.5) - 1):
                    moved.append(int(heaviest[moved[-1]]))
            cands[row, moved] = rng.choice(w.shape[0], p=w / w.sum())
        m = tracker.evaluate(cands)
        state.offer(cands[: len(m.step_time_s)], m.step_time_s, m.feasible)

    def _local_share(self, used: int) -> float:
        """Share of the next round spent on local moves: it ramps from ``local_start`` to
        ``local_fraction`` over the first ``local_ramp`` samples, so that early rounds sample
        the policy (whose draws beat a poor zero-shot start) and later ones refine the best.
        It depends on samples used, not on the budget, so a run's first N samples are those of
        a run with budget N."""
        c = self.config
        if c.local_ramp <= 0:
            return c.local_fraction
        return c.local_start + (c.local_fraction - c.local_start) * min(1.0, used / c.local_ramp)

    @staticmethod
    def _heaviest_neighbour(state) -> np.ndarray:
        """(units,) the unit each unit exchanges the most bytes with (itself if none)."""
        if not hasattr(state, "_heaviest"):
            from gplace.features import unit_edges
            edges, attr = unit_edges(state.problem)
            heaviest = np.arange(state.problem.num_units)
            weight = np.full(state.problem.num_units, -1.0)
            for (s, d), a in zip(edges.T.tolist(), attr[:, 0].tolist()):
                if a > weight[s]:
                    weight[s], heaviest[s] = a, d
            state._heaviest = heaviest
        return state._heaviest

    def _best(self, state, tracker, zero_time, start) -> PlaceResult:
        best_time, best = (state.elites[0][0], state.elites[0][2]) if state.elites else (np.inf, None)
        found = best is not None
        if not found:
            with torch.no_grad():
                best = greedy(self.policy(state.features))  # features built once, reused
        placement = best
        return PlaceResult("gnn", placement, best_time, found, tracker.used,
                           time.perf_counter() - start, tracker.history(),
                           {"zero_shot_step_time_s": zero_time})


def load(path: str | Path | None = None, seed: int = 0) -> GNNPlacer:
    """A GNNPlacer from a policy checkpoint; with no path, the one shipped with gplace."""
    from gplace.errors import ConfigError
    path = Path(path) if path is not None else SHIPPED
    if path == SHIPPED and not SHIPPED.exists():
        raise ConfigError(f"no shipped checkpoint at {SHIPPED}; run `gplace pretrain` and pass "
                          "its --out file")
    policy, meta = GNNPolicy.load(path)
    return GNNPlacer(policy, meta, seed=seed)


@register("gnn")
class RegisteredGNN:
    """The shipped policy behind the common placer interface (for ``gplace bench``)."""

    def __init__(self, seed: int = 0, checkpoint: str | None = None):
        self.placer = load(checkpoint, seed=seed)

    def place(self, problem: PlacementProblem, measurer: Measurer, budget: int) -> PlaceResult:
        return self.placer.place_problem(problem, measurer, budget)

