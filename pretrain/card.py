"""The pretraining curves of the released checkpoint, from its Lightning CSV log.

    .venv/bin/python -m pretrain.card pretrain/metrics.csv --out pretrain/curves.png

Prints the validation rows (zero-shot / best heuristic, geometric mean over the validation
problems, and the share at or below 1) and plots them with the training signal (best of the
step's samples / best heuristic, smoothed over 20 steps; for a run without samples, the
imitation loss).
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import numpy as np


def read(path: Path) -> tuple[list[tuple[int, float, float]], list[tuple[int, float]]]:
    val, train = [], []
    for row in csv.DictReader(path.open()):
        if row.get("val/zero_shot_vs_heuristic"):
            val.append((int(row["step"]) + 1, float(row["val/zero_shot_vs_heuristic"]),
                        float(row.get("val/share_at_or_below") or "nan")))
        elif row.get("train/best_sample_vs_heuristic"):
            train.append((int(row["step"]) + 1, float(row["train/best_sample_vs_heuristic"])))
    return val, train


def read_loss(path: Path) -> list[tuple[int, float]]:
    """(step, training loss): the signal of an imitation-only run (no samples to plot)."""
    return [(int(r["step"]) + 1, float(r["train/loss"])) for r in csv.DictReader(path.open())
            if r.get("train/loss")]


def plot(val, train, out: Path, untrained: float | None = None, loss=()) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 3.8))
    if train:
        steps, r = np.array(train).T
        k = min(20, len(r))
        smooth = np.exp(np.convolve(np.log(r), np.ones(k) / k, mode="valid"))
        ax.plot(steps[k - 1:], smooth, lw=1, color="0.6",
                label="train: best of the step's samples (20-step geomean)")
    if loss and not train:
        steps, l = np.array(loss).T
        k = min(50, len(l))
        twin = ax.twinx()
        twin.plot(steps[k - 1:], np.convolve(l, np.ones(k) / k, mode="valid"), lw=1,
                  color="0.6")
        twin.set_ylabel("training loss: imitation cross-entropy (50-step mean)", color="0.4",
                        fontsize=8)
    if val:
        steps, g, _ = np.array(val).T
        ax.plot(steps, g, "o-", label="validation: zero-shot (geomean)")
    ax.axhline(1.0, color="k", lw=0.8)
    if untrained is not None:
        ax.axhline(untrained, color="C1", ls="--", lw=1,
                   label=f"validation: the untrained network (step 0), {untrained:.3f}")
    ax.set_xlabel("training step")
    ax.set_ylabel("step time / best heuristic (estimated)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("metrics", type=Path)
    ap.add_argument("--out", type=Path, default=Path("pretrain/curves.png"))
    ap.add_argument("--untrained", type=float, default=None,
                    help="the untrained network's validation figure, drawn as a line")
    args = ap.parse_args(argv)
    val, train = read(args.metrics)
    print("| step | zero-shot / best heuristic (geomean) | at or below 1 |")
    print("|---|---|---|")
    for step, g, share in val:
        print(f"| {step} | {g:.3f} | {share:.0%} |")
    plot(val, train, args.out, args.untrained, read_loss(args.metrics))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
