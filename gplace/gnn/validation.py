"""Pretraining's validation figures: each validation problem's zero-shot placement by the
policy's own rollouts (VALIDATION_RULE) and its greedy rollout, against the problem's best cheap
heuristic, as geometric means over the problems, and the share at or below it
(gplace.gnn.pretrain logs them; expert iteration, gplace.gnn.iteration, picks rounds by them).
Step times are simulated."""

from __future__ import annotations

import numpy as np

from gplace.gnn.config import VALIDATIONS, FinetuneConfig, PretrainConfig
from gplace.gnn.infer import zero_shot
from gplace.gnn.learn import ProblemState, greedy

# the logged name of each validation figure: val/zero_shot_vs_heuristic, val/greedy_vs_heuristic
VAL_METRICS = {rule: f"val/{rule.replace('-', '_')}_vs_heuristic" for rule in VALIDATIONS}

# what validation measures: the policy's own zero-shot rollouts (without the untrained
# network's, which are the same for every checkpoint and would hide the differences between them)
VALIDATION_RULE = FinetuneConfig(zero_shot_prior=False, zero_shot_polish=0,
                                 estimate_contention=False)


def validation_rows(policy, weights, pool, indices) -> list[list[float]]:
    """(problem index, greedy / best heuristic, zero-shot / best heuristic) of each problem of
    ``pool`` (gplace.gnn.pretrain.ProblemPool) in ``indices``, for ``policy`` (a GNNPolicy) and
    its ``weights`` (gplace.gnn.infer.policy_weights): what :func:`validation_figures` reads."""
    rows = []
    for i in indices:
        state, best = pool.state(i), pool.best_heuristic(i)
        rows.append([i, greedy_time(policy, state) / best, zero_shot_time(weights, state) / best])
    return rows


def validation_figures(rows: np.ndarray, rule: str) -> dict[str, float]:
    """The logged validation figures from rows (problem index, greedy / best heuristic,
    zero-shot / best heuristic) of every rank: geometric means over the distinct problems (the
    distributed sampler repeats some to give ranks equal shares), and the share of ``rule``'s
    ratios at or below 1."""
    distinct = {int(r[0]): r[1:] for r in rows}
    ratios = dict(zip(("greedy", "zero-shot"), np.array(list(distinct.values())).T))
    return {**{VAL_METRICS[k]: geomean(v) for k, v in ratios.items()},
            "val/share_at_or_below": float(np.mean(ratios[rule] <= 1.0 + 1e-9))}


def greedy_time(policy, state: ProblemState) -> float:
    """Step time of the greedy rollout (inf if it does not fit)."""
    return _step_time(state, greedy(policy, state))


def zero_shot_time(weights, state: ProblemState, config: FinetuneConfig = VALIDATION_RULE) -> float:
    """Step time of the zero-shot placement with ``gplace place``'s default seed under ``config``
    (default: the validation's rule; inf if it does not fit)."""
    return _step_time(state, zero_shot(weights, state.numpy_features, state.sched, 0, config))


def _step_time(state: ProblemState, placement: np.ndarray) -> float:
    m = state.measurer.measure(placement[None])
    return float(m.step_time_s[0]) if m.feasible[0] else np.inf


def val_key(cfg: PretrainConfig) -> str:
    """The checkpoint metadata key of the validation figure a run chooses by."""
    return VAL_METRICS[cfg.validate].replace("/", "_")


def geomean(x) -> float:
    """The geometric mean of positive figures (nan for none)."""
    x = np.asarray(x, np.float64)
    return float(np.exp(np.log(x).mean())) if x.size else float("nan")
