"""How the two repeats of a calibration run agree, placement by placement (issue 17).

    python calibration/repeats.py calibration/calibration.json [more.json ...]

Per graph: how far each placement's step time moved from the first repeat to the second
(median, range), the real-vs-real Kendall tau, and the share of placement pairs whose order
the two repeats agree on, by how far apart the pair is (its pooled step times). A shift that
is the same for every placement leaves the order alone; one that differs by placement (a task
slower than its twin, a session's fixed effect) reorders the close pairs first.
"""

from __future__ import annotations

import json
import sys
from itertools import combinations

import numpy as np

BINS = ((0.0, 0.01), (0.01, 0.02), (0.02, 0.05), (0.05, np.inf))


def agreement(first: np.ndarray, second: np.ndarray, pooled: np.ndarray) -> list[tuple]:
    """Per bin of relative gap between a pair's pooled times: (pairs, concordant share)."""
    out = []
    for lo, hi in BINS:
        n = agree = 0
        for i, j in combinations(range(len(pooled)), 2):
            gap = abs(pooled[i] - pooled[j]) / min(pooled[i], pooled[j])
            if lo <= gap < hi:
                n += 1
                agree += (first[i] - first[j]) * (second[i] - second[j]) > 0
        out.append((n, agree / n if n else float("nan")))
    return out


def describe(path: str) -> None:
    record = json.load(open(path))
    print(f"{path}:")
    head = " ".join(f"{f'{lo:.0%}-{hi:.0%}' if np.isfinite(hi) else f'>={lo:.0%}':>13}"
                    for lo, hi in BINS)
    print(f"  {'graph':<10} {'tau':>6} {'change 1 -> 2: median (range)':>32}   pairs agreeing, "
          f"by gap: {head}")
    for g in record["graphs"]:
        ok = [p for p in g["placements"] if not p["reason"] and len(p["repeats_s"]) >= 2]
        first = np.array([p["repeats_s"][0] for p in ok])
        second = np.array([p["repeats_s"][1] for p in ok])
        pooled = np.array([p["measured_s"] for p in ok])
        change = second / first - 1
        cells = " ".join(f"{f'{share:.0%} of {n}' if n else '-':>13}"
                         for n, share in agreement(first, second, pooled))
        spread = (f"{np.median(change):+.1%} ({change.min():+.1%} to "
                  f"{change.max():+.1%})")
        print(f"  {g['name']:<10} {g['repeat_tau']:>6.3f} {spread:>32}   {'':>23}{cells}")


if __name__ == "__main__":
    for arg in sys.argv[1:] or ["calibration/calibration.json"]:
        describe(arg)
