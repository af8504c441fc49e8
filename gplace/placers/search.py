"""Search baselines at equal budget, as Post's reviewers asked: random search, hill climbing,
simulated annealing and a genetic algorithm. Every evaluated placement counts.

Hill climbing and annealing start from the best single-device placement (D samples), or from
the best of the ``seeds`` placements they are given (e.g. the cheap heuristics', measured
without charge as ``place`` does).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from gplace.placers.base import Measurer, PlaceResult, Tracker, register
from gplace.problem import PlacementProblem


def _objective(m) -> np.ndarray:
    """Step time with infeasible placements at +inf."""
    return np.where(m.feasible, m.step_time_s, np.inf)


def _single_device_start(problem: PlacementProblem, tracker: Tracker) -> tuple[np.ndarray, float]:
    starts = np.stack([problem.single_device(d) for d in range(problem.num_devices)])
    t = _objective(tracker.evaluate(starts))
    k = int(np.argmin(t)) if t.size else 0
    return starts[k].copy(), float(t[k]) if t.size else np.inf


def _start(problem: PlacementProblem, tracker: Tracker, measurer: Measurer,
           seeds) -> tuple[np.ndarray, float]:
    """The best seed (measured, not charged), or the best single device (charged)."""
    if not len(seeds):
        return _single_device_start(problem, tracker)
    seeds = np.stack(seeds).astype(np.int64)
    t = _objective(measurer.measure(seeds))
    k = int(np.argmin(t))
    tracker.offer_free(seeds[k], float(t[k]))
    return seeds[k].copy(), float(t[k])


def _move(placement: np.ndarray, rng: np.random.Generator, num_devices: int) -> np.ndarray:
    """The placement with one random unit moved to another random device."""
    out = placement.copy()
    u = rng.integers(len(out))
    out[u] = (out[u] + rng.integers(1, num_devices)) % num_devices
    return out


@register("random")
class RandomSearch:
    """Uniform random placements; keeps the best feasible."""

    def __init__(self, seed: int = 0, batch: int = 100):
        self.seed, self.batch = seed, batch

    def place(self, problem: PlacementProblem, measurer: Measurer, budget: int) -> PlaceResult:
        rng = np.random.default_rng(self.seed)
        tracker = Tracker(problem, measurer, budget)
        while tracker.left > 0:
            n = min(self.batch, tracker.left)
            tracker.evaluate(rng.integers(0, problem.num_devices, (n, problem.num_units)))
        return tracker.result(self.name, problem.single_device(0))


@register("hill")
class HillClimb:
    """First-improvement hill climbing: try ``batch`` one-unit moves of the current placement,
    move to the best of them if it is faster."""

    def __init__(self, seed: int = 0, batch: int = 10):
        self.seed, self.batch = seed, batch

    def place(self, problem: PlacementProblem, measurer: Measurer, budget: int,
              seeds=()) -> PlaceResult:
        rng = np.random.default_rng(self.seed)
        tracker = Tracker(problem, measurer, budget)
        current, best = _start(problem, tracker, measurer, seeds)
        while tracker.left > 0 and problem.num_devices > 1:
            n = min(self.batch, tracker.left)
            moves = np.stack([_move(current, rng, problem.num_devices) for _ in range(n)])
            t = _objective(tracker.evaluate(moves))
            k = int(np.argmin(t))
            if t[k] < best:
                current, best = moves[k], float(t[k])
        return tracker.result(self.name, current)


@dataclass(frozen=True)
class AnnealConfig:
    t_start: float = 0.05   # initial temperature, as a fraction of the current step time
    t_end: float = 1e-4     # final temperature; geometric schedule over the budget


@register("anneal")
class Anneal:
    """Simulated annealing over one-unit moves; accepts a slower placement with probability
    exp(-(t_new - t_cur) / (T * t_cur))."""

    def __init__(self, seed: int = 0, **config):
        self.seed, self.config = seed, replace(AnnealConfig(), **config)

    def place(self, problem: PlacementProblem, measurer: Measurer, budget: int,
              seeds=()) -> PlaceResult:
        rng, cfg = np.random.default_rng(self.seed), self.config
        tracker = Tracker(problem, measurer, budget)
        current, cur_t = _start(problem, tracker, measurer, seeds)
        steps = max(tracker.left, 1)
        for i in range(steps):
            if tracker.left <= 0 or problem.num_devices < 2:
                break
            temp = cfg.t_start * (cfg.t_end / cfg.t_start) ** (i / steps)
            cand = _move(current, rng, problem.num_devices)
            t = float(_objective(tracker.evaluate(cand[None]))[0])
            if t <= cur_t or (np.isfinite(t) and rng.random() < np.exp(-(t - cur_t) / (temp * cur_t))):
                current, cur_t = cand, t
        return tracker.result(self.name, current)


@dataclass(frozen=True)
class GeneticConfig:
    population: int = 40     # individuals per generation
    elite: int = 2           # best individuals copied unchanged
    tournament: int = 3      # tournament size for parent selection
    mutation: float = 2.0    # expected mutated units per child


@register("genetic")
class Genetic:
    """A genetic algorithm: tournament selection, uniform crossover, per-unit mutation,
    elitism; the first generation holds every single-device placement plus random ones."""

    def __init__(self, seed: int = 0, **config):
        self.seed, self.config = seed, replace(GeneticConfig(), **config)

    def place(self, problem: PlacementProblem, measurer: Measurer, budget: int) -> PlaceResult:
        rng, cfg = np.random.default_rng(self.seed), self.config
        tracker = Tracker(problem, measurer, budget)
        d, u = problem.num_devices, problem.num_units
        pop = np.concatenate([np.stack([problem.single_device(k) for k in range(d)]),
                              rng.integers(0, d, (max(cfg.population - d, 0), u))])
        fit = _objective(tracker.evaluate(pop))
        pop = pop[: len(fit)]
        while tracker.left > 0 and len(pop) > 0:
            children = self._children(pop, fit, rng, d, min(cfg.population - cfg.elite, tracker.left))
            child_fit = _objective(tracker.evaluate(children))
            keep = np.argsort(fit, kind="stable")[: cfg.elite]
            pop = np.concatenate([pop[keep], children[: len(child_fit)]])
            fit = np.concatenate([fit[keep], child_fit])
        return tracker.result(self.name, problem.single_device(0))

    def _children(self, pop, fit, rng, d, n) -> np.ndarray:
        cfg = self.config

        def pick():
            entrants = rng.integers(0, len(pop), cfg.tournament)
            return pop[entrants[np.argmin(fit[entrants])]]
        kids = []
        for _ in range(max(n, 0)):
            a, b = pick(), pick()
            child = np.where(rng.random(a.shape[0]) < 0.5, a, b)
            mutate = rng.random(a.shape[0]) < cfg.mutation / a.shape[0]
            child[mutate] = rng.integers(0, d, mutate.sum())
            kids.append(child)
        return np.stack(kids) if kids else np.zeros((0, pop.shape[1]), np.int64)
