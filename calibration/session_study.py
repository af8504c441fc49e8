"""Does a placement's session matter, or only how many steps it ran? (issue 17)

    .venv/bin/python calibration/session_study.py measure OUT.json G.pb [G.pb ...] [--steps 30]
        [--placements 12]
    .venv/bin/python calibration/session_study.py analyse OUT.json

``measure``: 12 of each graph's calibration placements (every other one of
gplace.calibrate.calibration_placements; all 24 with ``--placements 24``), each opened in
**two** sessions (A and B) of the
same batch, all 24 sessions measured interleaved for a fixed number of timed steps (rounds of
1 warm-up + 3 timed steps), all steps kept. ``analyse`` compares two estimates of the same
placement from the same number of steps: the odd and even visits of one session against
session A's and session B's odd visits. If the two sessions differ more than the two halves
of one, something fixed when a session opens (how TensorFlow partitions and schedules the
graph, where its buffers land) moves the step time, and more steps in one session cannot
average it out; the protocol would then have to open several sessions per placement.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def measure(out: Path, graphs: list[Path], steps: int, count: int = 12) -> None:
    """``count`` placements per graph (every other one when fewer than 24), each measured in
    two sessions of one batch: A (the first half of the batch), then B."""
    from estimator_study import measure as measure_steps

    def twice(placements, labels):
        if count < len(placements):
            placements, labels = placements[::2][:count], labels[::2][:count]
        return np.concatenate([placements, placements]), labels
    measure_steps(out, graphs, steps, 3, twice)


def analyse(path: Path) -> None:
    from gplace.calibrate import kendall_tau
    from gplace.real.protocol import trimmed_mean
    record = json.loads(path.read_text())
    k = record["per_visit"]
    est = lambda t: float(trimmed_mean(np.asarray(t).ravel(), 0.2))  # noqa: E731
    print(f"{path.name}: {record['steps']} steps per session, halves of {record['steps'] // 2}")
    if record.get("note"):
        print(record["note"])
    print(f"{'graph':<10} {'A odd / A even':>22} {'B odd / B even':>22} "
          f"{'A odd / B odd':>22} {'A even / B even':>22} {'A / B (all steps)':>22}")
    for g in record["graphs"]:
        t = [np.asarray(x).reshape(-1, k) for x in g["times"]]
        n = len(t) // 2
        half = lambda s, par: np.array([est(t[i + s][par::2]) for i in range(n)])  # noqa: E731
        whole = lambda s: np.array([est(t[i + s]) for i in range(n)])  # noqa: E731
        pairs = [(half(0, 0), half(0, 1)), (half(n, 0), half(n, 1)), (half(0, 0), half(n, 0)),
                 (half(0, 1), half(n, 1)), (whole(0), whole(n))]
        cells = [f"tau {kendall_tau(a, b):.3f}, {np.median(np.abs(a - b) / np.minimum(a, b)):5.1%}"
                 for a, b in pairs]
        print(f"{g['name']:<10} " + " ".join(f"{c:>22}" for c in cells))
    print("cells: Kendall tau over the placements between the two estimates, and their "
          "median relative difference")


def main() -> int:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure")
    m.add_argument("out", type=Path)
    m.add_argument("graphs", type=Path, nargs="+")
    m.add_argument("--steps", type=int, default=30)
    m.add_argument("--placements", type=int, default=12)
    a = sub.add_parser("analyse")
    a.add_argument("file", type=Path)
    args = p.parse_args()
    if args.cmd == "measure":
        measure(args.out, args.graphs, args.steps, args.placements)
    else:
        analyse(args.file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
