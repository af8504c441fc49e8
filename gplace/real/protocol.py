"""How a real step time is taken on a shared machine, and how sure it is.

    est = estimate(times, cfg)                 # 20% trimmed mean of the timed steps
    lo, hi = interval(times, cfg)              # its 90% interval (bootstrap over visits)
    tight(times, cfg)                          # stop measuring this placement?

The protocol (run by :class:`gplace.real.measurer.RealMeasurer`): every placement of a batch
gets sessions of its own, kept open; rounds visit the placements interleaved (A B C, then
C B A, ...), so drift and bursts of other work hit all of them alike (Chen & Revels, "Robust
benchmarking in noisy environments", 2016). Each visit runs ``warmup_per_visit`` untimed steps
(the first step after switching placements runs on cold caches) and ``steps_per_visit`` timed
ones. After ``min_steps`` a placement leaves the rotation once its interval is tight
(half-width <= ``rel_width`` of the estimate); the rest go on until ``max_steps`` (or more
steps where those take less than ``min_timed_s``: fast steps are noisy) or until the batch's
time cap (``max_s_per_placement`` x placements).

Sessions: each placement is opened in ``sessions`` sessions and its visits take them in turn;
session s runs the placement's s-th mirror (:func:`gplace.cluster.mirror`: every device moved
on within its class of interchangeable twins, e.g. the two tasks of local-procs swapped). A
session, and one twin, can run slower than another for a whole run; alternating a placement
with its mirror moves all placements alike and averages the sessions' fixed effects. On a
cluster without twins the sessions run the same placement.

Estimator: the 20% trimmed mean: bursts of other work add time to a few steps (trimmed from the
top), and the lowest steps are lucky moments that do not repeat (trimmed from the bottom).
Interval: a percentile bootstrap of the trimmed mean that resamples whole visits, not steps,
because the steps of one visit share the load of that moment. The measurements behind these
choices (rank agreement between halves of a run for each estimator, interval coverage) are on
calibration/RESULTS.md.
"""

from __future__ import annotations

from dataclasses import dataclass
import numpy as np


@dataclass(frozen=True)
class ProtocolConfig:
    trim: float = 0.2            # estimator: mean of the steps left after cutting this share
                                 # from each end (best of 8 estimators: module docstring)
    confidence: float = 0.90     # of the interval around the estimate
    rel_width: float = 0.03      # tight: interval half-width <= 3% of the estimate (placements
                                 # 6% apart are then told apart; closer ones may tie)
    steps_per_visit: int = 3     # timed steps each time a round visits a placement
    warmup_per_visit: int = 1    # untimed steps after switching to a placement (cold caches)
    min_steps: int = 15          # timed steps before the first stopping check: 5 visits (a
                                 # bootstrap over 3 visits has 10 distinct resamples: too few)
    max_steps: int = 45          # per placement: the interval of a very noisy one stays wide
    min_timed_s: float = 1.0     # unless fewer steps fill this much time: a 1 ms step's 45
                                 # took 0.05 s, its interval +-14% where +-3% is asked for
    max_s_per_placement: float = 30.0  # time cap of a batch: this x its placements, seconds
    resamples: int = 1000        # bootstrap resamples of the interval
    sessions: int = 2            # sessions per placement, visited in turn; session s runs the
                                 # placement's s-th mirror over interchangeable devices
                                 # (module docstring: a device slower than its twin, or a
                                 # session's fixed effect, then hits every placement alike)

    def __post_init__(self):
        from gplace.errors import ConfigError
        if not 0 <= self.trim < 0.5:
            raise ConfigError(f"trim = {self.trim} must be in [0, 0.5)")
        if not 0 < self.confidence < 1:
            raise ConfigError(f"confidence = {self.confidence} must be in (0, 1)")
        if self.sessions < 1:
            raise ConfigError(f"sessions = {self.sessions} must be >= 1")
        if self.steps_per_visit < 1 or self.min_steps < 1 or self.max_steps < self.min_steps:
            raise ConfigError(f"steps: per visit {self.steps_per_visit}, min {self.min_steps}, "
                              f"max {self.max_steps}: need >= 1 and max >= min")


def trimmed_mean(t: np.ndarray, trim: float) -> np.ndarray:
    """Mean over the last axis after dropping floor(trim x n) values from each end."""
    t = np.sort(t, axis=-1)
    cut = int(trim * t.shape[-1])
    return t[..., cut: t.shape[-1] - cut].mean(axis=-1)


def estimate(times, cfg: ProtocolConfig = ProtocolConfig()) -> float:
    """The trimmed mean of the step times; nan if there are none."""
    t = np.asarray(times, np.float64)
    return float(trimmed_mean(t, cfg.trim)) if t.size else float("nan")


def interval(times, cfg: ProtocolConfig = ProtocolConfig()) -> tuple[float, float]:
    """The ``cfg.confidence`` interval of the estimate, bootstrapping whole visits (runs of
    ``steps_per_visit`` consecutive steps); (min, inf) with fewer than 2 visits, (nan, nan)
    with no step. Deterministic: the resampling seed is fixed."""
    t = np.asarray(times, np.float64)
    if not t.size:
        return float("nan"), float("nan")
    k = cfg.steps_per_visit
    visits = len(t) // k
    if visits < 2:
        return float(t.min()), float("inf")
    blocks = t[: visits * k].reshape(visits, k)  # a short last visit (max_steps) is left out
    pick = np.random.default_rng(visits).integers(0, visits, (cfg.resamples, visits))
    boot = trimmed_mean(blocks[pick].reshape(cfg.resamples, -1), cfg.trim)   # (resamples,)
    alpha = (1 - cfg.confidence) / 2
    lo, hi = np.quantile(boot, [alpha, 1 - alpha])
    # the bootstrap's spread runs low by sqrt((v - 1) / v) with v visits: undo it around the
    # estimate (with 5 visits the interval widens by 12%)
    est, widen = float(trimmed_mean(t, cfg.trim)), np.sqrt(visits / (visits - 1))
    return float(min(est, est - widen * (est - lo))), float(max(est, est + widen * (hi - est)))


def step_limit(times, cfg: ProtocolConfig = ProtocolConfig()) -> int:
    """Timed steps a placement may take: ``max_steps``, or as many as fill ``min_timed_s`` at
    its estimate so far, if more."""
    est = estimate(times, cfg)
    if not times or not est > 0 or cfg.min_timed_s <= 0:
        return cfg.max_steps
    return max(cfg.max_steps, int(np.ceil(cfg.min_timed_s / est)))


def tight(times, cfg: ProtocolConfig = ProtocolConfig()) -> bool:
    """Enough steps and an interval no wider than +-``rel_width`` of the estimate."""
    if len(times) < cfg.min_steps:
        return False
    lo, hi = interval(times, cfg)
    return (hi - lo) / 2 <= cfg.rel_width * estimate(times, cfg)


def visit_order(active: list[int], round_index: int) -> list[int]:
    """A round's order: forwards on even rounds, backwards on odd ones, so no placement is
    always the first after a switch or always the last before a pause."""
    return list(active) if round_index % 2 == 0 else list(reversed(active))
