"""The answers of baselines/RESULTS.md, computed from baselines/results.csv: a compact headline
table, Post against policy gradient and the search baselines, and the ablation of its objective.

Usage: .venv/bin/python baselines/analyze.py [results.csv] > baselines/summary.md
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np

HEURISTICS = ("single", "expert", "chunks", "heft", "m-topo", "m-etf", "m-sct")
SAMPLED = ("post", "post-sum", "ce", "ppo", "pg", "random", "hill", "anneal", "genetic")


def load(path: Path) -> dict:
    """{(graph, cluster): {method: row}} with floats in ms."""
    table: dict = {}
    with open(path) as f:
        for r in csv.DictReader(f):
            r["ms"] = float(r["mean_step_time_s"]) * 1e3
            r["sd"] = float(r["std_step_time_s"]) * 1e3
            r["lb"] = r["ms"] / float(r["vs_lower_bound"])
            table.setdefault((r["graph"], r["cluster"]), {})[r["method"]] = r
    return table


def best_heuristic(rows: dict) -> tuple[str, float]:
    name = min((m for m in HEURISTICS if m in rows), key=lambda m: rows[m]["ms"])
    return name, rows[name]["ms"]


def headline(table: dict) -> str:
    cols = ("post", "pg", "random", "hill", "anneal", "genetic")
    out = ["| graph | cluster | units | lower bound | single | best heuristic | "
           + " | ".join(cols) + " |", "|---" * (6 + len(cols)) + "|"]
    for (g, c), rows in table.items():
        name, t = best_heuristic(rows)
        cells = []
        best = min(rows[m]["ms"] for m in rows)
        for m in cols:
            cell = f"{rows[m]['ms']:.4g} ± {rows[m]['sd']:.2g}"
            cells.append(f"**{cell}**" if rows[m]["ms"] == best else cell)
        out.append(f"| {g} | {c} | {rows['post']['units']} | {rows['post']['lb']:.4g} | "
                   f"{rows['single']['ms']:.4g} | {name} {t:.4g} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def versus(table: dict, a: str, others: tuple[str, ...]) -> str:
    """Per pair: a's step time over each other's (< 1: a is faster), and the change in %."""
    out = ["| graph | cluster | " + " | ".join(f"{a} / {o}" for o in others) + " |",
           "|---|---|" + "---|" * len(others)]
    ratios = {o: [] for o in others}
    for (g, c), rows in table.items():
        cells = []
        for o in others:
            ref = best_heuristic(rows)[1] if o == "best heuristic" else rows[o]["ms"]
            ratio = rows[a]["ms"] / ref
            ratios[o].append(ratio)
            cells.append(f"{ratio:.2f} ({100 * (ratio - 1):+.0f}%)")
        out.append(f"| {g} | {c} | " + " | ".join(cells) + " |")
    out.append("| **faster in / geo-mean / best** | | " + " | ".join(
        f"{sum(x < 1 for x in ratios[o])}/{len(ratios[o])}, "
        f"{np.exp(np.mean(np.log(ratios[o]))):.2f}, {min(ratios[o]):.2f}" for o in others) + " |")
    return "\n".join(out)


def ablation(table: dict) -> str:
    ms = ("post", "post-sum", "ce", "ppo", "pg")
    out = ["| graph | cluster | " + " | ".join(ms) + " | best |",
           "|---|---|" + "---|" * (len(ms) + 1)]
    ranks = {m: [] for m in ms}
    for (g, c), rows in table.items():
        order = sorted(ms, key=lambda m: rows[m]["ms"])
        for i, m in enumerate(order):
            ranks[m].append(i + 1)
        out.append(f"| {g} | {c} | " + " | ".join(
            f"{rows[m]['ms']:.4g} ± {rows[m]['sd']:.2g}" for m in ms) + f" | {order[0]} |")
    out.append("| **mean rank** | | " + " | ".join(f"{np.mean(ranks[m]):.2f}" for m in ms) + " | |")
    return "\n".join(out)


def pairwise(table: dict, pairs: tuple) -> str:
    out = ["| A | B | A faster in | geo-mean A/B | best A/B | worst A/B |",
           "|---|---|---|---|---|---|"]
    for a, b in pairs:
        r = np.array([rows[a]["ms"] / rows[b]["ms"] for rows in table.values()])
        out.append(f"| {a} | {b} | {(r < 1).sum()}/{len(r)} | {np.exp(np.log(r).mean()):.3f} | "
                   f"{r.min():.2f} | {r.max():.2f} |")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    path = Path(argv[0]) if argv else Path(__file__).resolve().parent / "results.csv"
    table = load(path)
    print("## Headline (ms, mean ± std over 3 seeds; bold = best of all 16 methods)\n")
    print(headline(table))
    print("\n## Post's step time over the others' (< 1 and negative %: Post is faster)\n")
    print(versus(table, "post", ("pg", "random", "hill", "anneal", "genetic", "best heuristic")))
    print("\n## The halves of Post's objective (ms)\n")
    print(ablation(table))
    print("\n## Pairwise: A's step time over B's (< 1: A is faster)\n")
    print(pairwise(table, (("post", "ce"), ("post", "ppo"), ("post-sum", "ce"),
                           ("post-sum", "ppo"), ("post-sum", "post"), ("ppo", "ce"),
                           ("ppo", "pg"), ("ce", "pg"), ("post", "pg"))))
    print("\n## Hill climbing's step time over the others'\n")
    print(versus(table, "hill", ("post", "anneal", "genetic", "best heuristic")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
