"""How a real step time is taken on a shared machine, and how sure it is (issue 17).

    est = estimate(times, cfg)                 # the cfg.quantile-quantile of the timed steps
    lo, hi = interval(times, cfg)              # its distribution-free confidence interval
    tight(times, cfg)                          # stop measuring this placement?

The protocol (run by :class:`gplace.real.measurer.RealMeasurer`): every placement of a batch
gets a session of its own, kept open; rounds visit the placements interleaved (A B C, then
C B A, ...), so drift and bursts of other work hit all of them alike (Chen & Revels, "Robust
benchmarking in noisy environments", 2016, on the effect of load that comes and goes). Each
visit runs ``warmup_per_visit`` untimed steps (the first step after switching placements runs
on cold caches) and ``steps_per_visit`` timed ones. After ``min_steps`` a placement leaves the
rotation once its interval is tight (half-width <= ``rel_width`` of the estimate); the rest go
on until ``max_steps`` or until the batch's time cap (``max_s_per_placement`` x placements).

The estimator is a low quantile, not the mean or the median: on a shared core, other work only
ever adds time to a step (descheduling, cache pollution), so the step-time distribution is the
machine's own time plus a load-dependent, right-skewed delay; a low quantile tracks the first
and ignores most of the second. The interval is the exact order-statistic interval for a
quantile (the number of steps below the true quantile is Binomial(n, q)), so it holds for any
distribution and needs no resampling. The choice of q is argued with measured data in
calibration/RESULTS.md (``estimator_study``).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb

import numpy as np


@dataclass(frozen=True)
class ProtocolConfig:
    quantile: float = 0.25       # estimator: this quantile of a placement's timed steps (a low
                                 # quantile ignores the delays other work adds; RESULTS.md)
    confidence: float = 0.90     # of the interval around the estimate
    rel_width: float = 0.03      # tight: interval half-width <= 3% of the estimate (placements
                                 # 5% apart are then told apart; closer ones are ties)
    steps_per_visit: int = 3     # timed steps each time a round visits a placement
    warmup_per_visit: int = 1    # untimed steps after switching to a placement (cold caches)
    min_steps: int = 9           # timed steps before the first stopping check (3 visits)
    max_steps: int = 45          # per placement: the interval of a very noisy one stays wide
    max_s_per_placement: float = 30.0  # time cap of a batch: this x its placements, seconds

    def __post_init__(self):
        from gplace.errors import ConfigError
        if not 0 < self.quantile < 1:
            raise ConfigError(f"quantile = {self.quantile} must be in (0, 1)")
        if not 0 < self.confidence < 1:
            raise ConfigError(f"confidence = {self.confidence} must be in (0, 1)")
        if self.steps_per_visit < 1 or self.min_steps < 1 or self.max_steps < self.min_steps:
            raise ConfigError(f"steps: per visit {self.steps_per_visit}, min {self.min_steps}, "
                              f"max {self.max_steps}: need >= 1 and max >= min")


def estimate(times, cfg: ProtocolConfig = ProtocolConfig()) -> float:
    """The ``cfg.quantile``-quantile of the step times (linear interpolation); nan if none."""
    t = np.asarray(times, np.float64)
    return float(np.quantile(t, cfg.quantile)) if t.size else float("nan")


def order_interval(n: int, q: float, confidence: float) -> tuple[int, int] | None:
    """0-based ranks (l, u) of the shortest interval [x_(l), x_(u)] of n sorted samples that
    holds the q-quantile with probability >= confidence: P(l < B <= u) with B ~ Binomial(n, q)
    the number of samples below the quantile. None when even [min, max] falls short."""
    pmf = [comb(n, k) * q ** k * (1 - q) ** (n - k) for k in range(n + 1)]
    best, key = None, None
    for lo in range(n):
        mass = 0.0
        for hi in range(lo + 1, n):
            mass += pmf[hi]  # x_(lo) <= quantile <= x_(hi) iff lo < B <= hi
            if mass >= confidence:
                if key is None or (hi - lo, -mass) < key:  # fewest ranks, then most mass
                    best, key = (lo, hi), (hi - lo, -mass)
                break
    return best


def interval(times, cfg: ProtocolConfig = ProtocolConfig()) -> tuple[float, float]:
    """The ``cfg.confidence`` interval of the quantile; (min, inf) when there are too few
    steps for that confidence, (nan, nan) with none."""
    t = np.sort(np.asarray(times, np.float64))
    if not t.size:
        return float("nan"), float("nan")
    ranks = order_interval(t.size, cfg.quantile, cfg.confidence)
    if ranks is None:
        return float(t[0]), float("inf")
    return float(t[ranks[0]]), float(t[ranks[1]])


def tight(times, cfg: ProtocolConfig = ProtocolConfig()) -> bool:
    """Enough steps and an interval no wider than +-``rel_width`` of the estimate."""
    if len(times) < cfg.min_steps:
        return False
    lo, hi = interval(times, cfg)
    return (hi - lo) / 2 <= cfg.rel_width * estimate(times, cfg)


def overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Do two intervals (lo, hi) overlap? Two placements whose intervals do are tied."""
    return a[0] <= b[1] and b[0] <= a[1]


def visit_order(active: list[int], round_index: int) -> list[int]:
    """A round's order: forwards on even rounds, backwards on odd ones, so no placement is
    always the first after a switch or always the last before a pause."""
    return list(active) if round_index % 2 == 0 else list(reversed(active))
