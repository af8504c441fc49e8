"""Family statistics of the corpus and its plot, from datasets/manifest.yaml.

    python -m datasets.stats [--plot datasets/corpus.png]

Prints the markdown table that datasets/README.md carries (per family: split, graphs, measured
share, op count, depth, branching, share of memory in parameters; medians and ranges; see
datasets.graphstats for the definitions) and draws op count against branching factor by split.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

import numpy as np

from datasets import manifest

ROOT = Path(__file__).resolve().parent.parent
SPLITS = ("train", "validation", "test")


def family_rows(rows: list[dict]) -> dict[str, list[dict]]:
    by = defaultdict(list)
    for r in rows:
        by[r["family"]].append(r)
    return dict(sorted(by.items(), key=lambda kv: (SPLITS.index(kv[1][0]["split"]), kv[0])))


def _med(rows, key, fmt):
    vals = [r[key] for r in rows if r.get(key) is not None]
    if not vals:
        return "-"
    return f"{fmt(np.median(vals))} ({fmt(min(vals))}-{fmt(max(vals))})" if len(vals) > 1 \
        else fmt(vals[0])


def table(rows: list[dict]) -> str:
    head = ("| family | split | graphs | measured | ops | depth | branching | param share |\n"
            "|---|---|---:|---:|---|---|---|---|")
    lines = [head]
    for fam, rs in family_rows(rows).items():
        measured = sum(r.get("costs", "measured") == "measured" for r in rs)
        lines.append(
            f"| {fam} | {rs[0]['split']} | {len(rs)} | {measured} | "
            f"{_med(rs, 'ops', lambda v: f'{v:.0f}')} | {_med(rs, 'depth', lambda v: f'{v:.0f}')} | "
            f"{_med(rs, 'branching', lambda v: f'{v:.2f}')} | "
            f"{_med(rs, 'param_share', lambda v: f'{v:.2f}')} |")
    return "\n".join(lines)


def totals(rows: list[dict]) -> str:
    fams = family_rows(rows)
    per = {s: (sum(r["split"] == s for r in rows),
               sum(rs[0]["split"] == s for rs in fams.values())) for s in SPLITS}
    measured = sum(r.get("costs", "measured") == "measured" for r in rows)
    return (f"{len(rows)} graphs from {len(fams)} families; "
            + ", ".join(f"{s}: {g} graphs / {f} families" for s, (g, f) in per.items())
            + f"; {measured} measured ({measured / max(1, len(rows)):.0%}), "
            f"{len(rows) - measured} estimated")


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for split, marker in zip(SPLITS, ("o", "s", "^")):
        rs = [r for r in rows if r["split"] == split and r.get("branching")]
        ax.scatter([r["branching"] for r in rs], [r["ops"] for r in rs], marker=marker, s=18,
                   alpha=0.7, label=f"{split} ({len(rs)})")
    ax.set_yscale("log")
    ax.set_xlabel("branching factor (mean distinct consumers per producing op)")
    ax.set_ylabel("ops in the training-step graph")
    ax.set_title("gplace corpus: size against branching, by split")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m datasets.stats", description=__doc__.split("\n")[0])
    p.add_argument("--manifest", type=Path, default=ROOT / "datasets" / "manifest.yaml")
    p.add_argument("--plot", type=Path, default=ROOT / "datasets" / "corpus.png")
    args = p.parse_args(argv)
    rows = list(manifest.load(args.manifest).values())
    print(totals(rows) + "\n\n" + table(rows))
    plot(rows, args.plot)
    print(f"\nplot: {args.plot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
