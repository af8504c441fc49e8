"""Does pretraining pay? The generalization study of issue 9.

    .venv/bin/python -m finetune.study --checkpoint gplace/checkpoints/policy.pt --out finetune

On every test-split graph of the corpus (families never seen in pretraining) and on two
clusters (post-4gpu, seen in pretraining; hdp-8gpu: 9 devices and a GPU kind, K40, never
seen), all on the same problem (the same coarsened units, the same simulator):
  gplace zero-shot; gplace fine-tuned with 50, 100 and 300 samples; Post from scratch with 300
  and 2400; random search with 2400; the best heuristic (no samples). 3 seeds.
Budget-prefix runs: the 50/100-sample figures are the best found within the first 50/100
samples of the 300-sample run (nothing in fine-tuning depends on the total budget), and
Post@300 is the first 300 samples of Post@2400, for the same reason.
The "gplace" rows start from the policy alone (no heuristic seeds), to measure what
pretraining gives; the "gplace+h" rows are fine-tuning as `gplace place` runs it, with the
heuristics' placements (which cost no samples) in the starting elite set.
Writes RESULTS.md (from RESULTS.head.md + tables), results.csv and curves_*.png.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
import time
from pathlib import Path

import numpy as np

CLUSTERS = {"post-4gpu": "seen in pretraining", "hdp-8gpu": "unseen: 9 devices, K40 kind"}
HEURISTICS = ("single", "expert", "chunks", "heft", "m-topo", "m-etf", "m-sct")


def run_case(entry, cluster, checkpoint, seeds, units, log):
    import gplace
    from gplace.cluster import load_cluster
    from gplace.corpus import load_corpus_graph
    from gplace.placers import SimMeasurer, get_placer
    from gplace.problem import CoarsenConfig, PlacementProblem
    from gplace.sim import lower_bound
    graph = load_corpus_graph(entry)
    problem = PlacementProblem.build(graph, load_cluster(cluster), coarsen=CoarsenConfig(units))
    m = SimMeasurer(problem)
    heur = {h: get_placer(h).place(problem, m, 0) for h in HEURISTICS}
    feasible = {h: r.step_time_s for h, r in heur.items() if r.feasible}
    best_h = min(feasible, key=feasible.get)
    rows = {"best heuristic": [feasible[best_h]] * seeds}
    curves = {}
    for seed in range(seeds):
        t0 = time.perf_counter()
        g = gplace.load(checkpoint, seed=seed).place_problem(problem, m, 300)
        c = g.history.best_so_far()
        rows.setdefault("gplace zero-shot", []).append(g.info["zero_shot_step_time_s"])
        for n in (50, 100, 300):
            rows.setdefault(f"gplace ft {n}", []).append(min(c[n - 1], g.info["zero_shot_step_time_s"]))
        curves.setdefault("gplace (pretrained)", []).append(
            np.minimum(c, g.info["zero_shot_step_time_s"]))
        gh = gplace.load(checkpoint, seed=seed).place_problem(
            problem, m, 300, seeds=[r.placement for r in heur.values()])
        rows.setdefault("gplace+h ft 300", []).append(gh.step_time_s)
        p = get_placer("post", seed=seed).place(problem, m, 2400)
        cp = p.history.best_so_far()
        rows.setdefault("post 300", []).append(cp[299])
        rows.setdefault("post 2400", []).append(cp[-1])
        curves.setdefault("post (from scratch)", []).append(cp)
        r = get_placer("random", seed=seed).place(problem, m, 2400)
        rows.setdefault("random 2400", []).append(r.step_time_s)
        print(f"study: {entry.name} on {cluster} seed {seed}: zero-shot "
              f"{rows['gplace zero-shot'][-1] * 1e3:.2f} ms, ft300 {rows['gplace ft 300'][-1] * 1e3:.2f}, "
              f"post2400 {cp[-1] * 1e3:.2f}, best heuristic {best_h} {feasible[best_h] * 1e3:.2f} "
              f"({time.perf_counter() - t0:.0f} s)", file=log, flush=True)
    return rows, curves, {"lower_bound_s": lower_bound(problem).bound_s, "best_heuristic": best_h}


METHODS = ("gplace zero-shot", "gplace ft 50", "gplace ft 100", "gplace ft 300",
           "gplace+h ft 300", "post 300", "post 2400", "random 2400", "best heuristic")


def table(results) -> str:
    head = "| graph | cluster | " + " | ".join(METHODS) + " |\n" + "|---" * (len(METHODS) + 2) + "|\n"
    lines = []
    for (g, c), (rows, _, _) in results.items():
        cells = [f"{np.mean(rows[m]) * 1e3:.2f} ± {np.std(rows[m]) * 1e3:.2f}" for m in METHODS]
        lines.append(f"| {g} | {c} | " + " | ".join(cells) + " |")
    return head + "\n".join(lines) + "\n"


def verdict(results) -> str:
    wins, wins_h, zs_gap, cases = 0, 0, [], 0
    for rows, _, _ in results.values():
        cases += 1
        wins += np.mean(rows["gplace ft 300"]) <= np.mean(rows["post 2400"]) * (1 + 1e-9)
        wins_h += np.mean(rows["gplace+h ft 300"]) <= np.mean(rows["post 2400"]) * (1 + 1e-9)
        zs_gap.append(np.mean(rows["gplace zero-shot"]) / np.mean(rows["post 2400"]) - 1)
    return (f"- gplace fine-tuned with 300 samples is at least as fast as Post from scratch with "
            f"2400 on {wins} of {cases} cases ({100 * wins / max(cases, 1):.0f}%; the goal is 80%); "
            f"with the heuristics' placements as starts (gplace+h, as `gplace place` runs it): "
            f"{wins_h} of {cases} ({100 * wins_h / max(cases, 1):.0f}%).\n"
            f"- gplace zero-shot is {100 * np.mean(zs_gap):+.1f}% against Post with 2400 on "
            f"average (the goal: within 15%); per case: "
            + ", ".join(f"{100 * z:+.0f}%" for z in zs_gap) + ".\n")


def plot(out: Path, results) -> list[str]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = []
    for (g, c), (rows, curves, meta) in results.items():
        fig, ax = plt.subplots(figsize=(6.5, 4))
        for label, cs in curves.items():
            n = min(len(x) for x in cs)
            arr = np.stack([x[:n] for x in cs]) * 1e3
            x = np.arange(1, n + 1)
            ax.plot(x, arr.mean(0), label=label)
            ax.fill_between(x, arr.min(0), arr.max(0), alpha=0.2)
        ax.axhline(np.mean(rows["best heuristic"]) * 1e3, ls=":", color="0.3",
                   label=f"best heuristic ({meta['best_heuristic']})")
        ax.axhline(meta["lower_bound_s"] * 1e3, ls="-", lw=0.8, color="0.6", label="lower bound")
        ax.set_xscale("log")
        ax.set(xlabel="evaluated placements (log)", ylabel="best step time (ms, simulated)",
               title=f"{g} on {c}")
        ax.legend(fontsize=7)
        name = f"curves_{g}_{c}.png"
        fig.savefig(out / name, dpi=100, bbox_inches="tight")
        plt.close(fig)
        names.append(name)
    return names


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default="gplace/checkpoints/policy.pt")
    parser.add_argument("--corpus", default="datasets")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--units", type=int, default=64)
    parser.add_argument("--graphs", nargs="*", help="test graphs (default: the whole test split)")
    parser.add_argument("--out", default="finetune")
    args = parser.parse_args(argv)
    import torch
    torch.set_num_threads(1)
    from gplace.corpus import list_corpus
    from gplace.io import atomic_write_text
    tests = [e for e in list_corpus(args.corpus) if e.split == "test"
             and (not args.graphs or e.name in args.graphs)]
    out = Path(args.out)
    results = {}
    for entry in tests:
        for cluster in CLUSTERS:
            results[(entry.name, cluster)] = run_case(entry, cluster, args.checkpoint, args.seeds,
                                                      args.units, sys.stderr)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["graph", "cluster", "method", "mean_step_time_s", "std_step_time_s", "seeds"])
    for (g, c), (rows, _, _) in results.items():
        for m in METHODS:
            w.writerow([g, c, m, np.mean(rows[m]), np.std(rows[m]), len(rows[m])])
    atomic_write_text(out / "results.csv", buf.getvalue())
    pngs = plot(out, results)
    head = (out / "RESULTS.head.md").read_text() if (out / "RESULTS.head.md").exists() else ""
    tail = (out / "RESULTS.tail.md").read_text() if (out / "RESULTS.tail.md").exists() else ""
    atomic_write_text(out / "RESULTS.md", head + "\n## Results\n\nStep times in ms (mean ± std "
                      f"over {args.seeds} seeds), simulated with the roofline cost model "
                      "(estimates, not hardware).\n\n" + table(results) + "\n" + verdict(results)
                      + "\n" + "".join(f"![{p}]({p})\n" for p in pngs) + tail)
    print(table(results) + verdict(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
