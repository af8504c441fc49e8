"""Which estimator of a placement's step time repeats best on this shared machine? (issue 17)

    .venv/bin/python calibration/estimator_study.py measure OUT.json G.pb [G.pb ...] [--steps 24]
    .venv/bin/python calibration/estimator_study.py analyse OUT.json [OUT2.json ...]

``measure``: the calibration placements of each graph (gplace.calibrate.calibration_placements,
24 per graph), each measured for a fixed number of timed steps by the interleaved protocol
(rounds of 1 warm-up + 3 timed steps per placement), all steps kept in the order they ran.
``analyse``: splits every placement's visits into two interleaved halves (odd and even visits:
both halves saw the same stretch of load), computes each estimator on each half and reports
the Kendall tau between the halves over a graph's placements (how well the estimator ranks
against itself) and the median relative difference between the halves; the estimator with the
highest tau at the same steps is the one to use.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ESTIMATORS = {
    "min": lambda t: float(np.min(t)),
    "q10": lambda t: float(np.quantile(t, 0.10)),
    "q25": lambda t: float(np.quantile(t, 0.25)),
    "median": lambda t: float(np.median(t)),
    "trim10": lambda t: trimmed_mean(t, 0.1),
    "trim20": lambda t: trimmed_mean(t, 0.2),
    "trim25": lambda t: trimmed_mean(t, 0.25),
    "mean": lambda t: float(np.mean(t)),
}


def trimmed_mean(t, cut: float) -> float:
    t = np.sort(t)
    g = int(cut * len(t))
    return float(np.mean(t[g: len(t) - g]))


def measure(out: Path, graphs: list[Path], steps: int, per_visit: int = 3,
            pick=lambda placements, labels: (placements, labels)) -> None:
    """Each graph's calibration placements, or what ``pick`` makes of them (the session study
    measures each twice), for exactly ``steps`` timed steps, all steps kept in ``out``."""
    import gplace
    from gplace.calibrate import calibration_placements
    from gplace.cluster import load_cluster
    from gplace.cost import cost_model_for
    from gplace.problem import CoarsenConfig, PlacementProblem
    from gplace.real.load import LoadProbe
    from gplace.real.measurer import RealConfig, RealMeasurer
    from gplace.real.procs import LocalProcs
    from gplace.real.protocol import ProtocolConfig
    proto = ProtocolConfig(steps_per_visit=per_visit, min_steps=steps, max_steps=steps,
                           rel_width=0.0, max_s_per_placement=600.0)
    record = {"steps": steps, "per_visit": per_visit, "graphs": []}
    with LocalProcs(2) as procs:
        for path in graphs:
            graph = gplace.load_graph(path)
            problem = PlacementProblem.build(graph, load_cluster("local-procs"),
                                             cost_model_for(path), CoarsenConfig(32))
            placements, labels = pick(*calibration_placements(problem, 24, 0))
            probe, start = LoadProbe(procs.pids), time.monotonic()
            with RealMeasurer(problem, path, RealConfig(protocol=proto, verbose=False),
                              tasks=procs) as real:
                real.measure(placements)
                results = real.last_results
            load = probe.stop()
            print(f"{path.stem}: {time.monotonic() - start:.0f} s; {load.describe()}",
                  file=sys.stderr)
            record["graphs"].append({"name": path.stem, "labels": labels,
                                     "times": [list(r.times_s) for r in results],
                                     "load": load.as_dict()})
    out.write_text(json.dumps(record))


def analyse(paths: list[Path]) -> None:
    from gplace.calibrate import kendall_tau
    for path in paths:
        record = json.loads(path.read_text())
        k = record["per_visit"]
        print(f"{path.name}: {record['steps']} steps per placement, halves of "
              f"{record['steps'] // 2} (odd / even visits of {k})")
        print(f"{'graph':<10} {'load':>22} " + " ".join(f"{e:>13}" for e in ESTIMATORS))
        for g in record["graphs"]:
            keep = [t for t in g["times"] if t]
            halves = [([x for v, x in enumerate(t) if (v // k) % 2 == 0],
                       [x for v, x in enumerate(t) if (v // k) % 2 == 1]) for t in keep]
            cells = []
            for f in ESTIMATORS.values():
                a = np.array([f(h[0]) for h in halves])
                b = np.array([f(h[1]) for h in halves])
                rel = np.median(np.abs(a - b) / np.minimum(a, b))
                cells.append(f"{kendall_tau(a, b):.3f} {rel:5.1%}")
            load = g["load"]
            where = f"others {load['others']:.0%}, load {load['load1']:.1f}"
            print(f"{g['name']:<10} {where:>22} " + " ".join(f"{c:>13}" for c in cells))
        print("cells: Kendall tau between the halves, median relative difference")
        print(intervals_check(record) + "\n")


def intervals_check(record: dict) -> str:
    """How often the other half's trimmed mean falls inside one half's 90% interval: the
    protocol's bootstrap over visits against a bootstrap over single steps (about 75% is what
    two equally noisy halves give for a well-sized interval)."""
    from gplace.real.protocol import ProtocolConfig, estimate, interval, trimmed_mean
    cfg, k = ProtocolConfig(), record["per_visit"]
    rng = np.random.default_rng(0)
    inside = {"visits": 0, "steps": 0}
    n = 0
    for g in record["graphs"]:
        for t in g["times"]:
            if not t:
                continue
            v = np.asarray(t).reshape(-1, k)
            a, b = v[0::2].ravel(), v[1::2].ravel()
            other = estimate(b, cfg)
            lo, hi = interval(a, cfg)
            inside["visits"] += lo <= other <= hi
            boot = trimmed_mean(a[rng.integers(0, len(a), (cfg.resamples, len(a)))], cfg.trim)
            lo, hi = np.quantile(boot, [0.05, 0.95])
            inside["steps"] += lo <= other <= hi
            n += 1
    return (f"other half inside a half's 90% interval: bootstrap over visits {inside['visits']}"
            f"/{n}, over steps {inside['steps']}/{n}")


def main() -> int:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure")
    m.add_argument("out", type=Path)
    m.add_argument("graphs", type=Path, nargs="+")
    m.add_argument("--steps", type=int, default=24)
    a = sub.add_parser("analyse")
    a.add_argument("files", type=Path, nargs="+")
    args = p.parse_args()
    if args.cmd == "measure":
        measure(args.out, args.graphs, args.steps)
    else:
        analyse(args.files)
    return 0


if __name__ == "__main__":
    sys.exit(main())
