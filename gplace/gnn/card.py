"""The card that ``gplace pretrain`` writes beside its policy: what was trained on, how, each
round's figures and the chosen round's validation curve (all step times simulated)."""

from __future__ import annotations

import csv
import math
import os
from dataclasses import asdict
from pathlib import Path

from gplace.io import atomic_write_text


def validation_rows(run: Path) -> list[tuple[int, float, float, float]]:
    """(step, zero-shot / best heuristic, greedy / best heuristic, share at or below 1 of the
    figure validated) of every validation in the Lightning CSV logs of one round's folder; nan
    where a figure was not logged."""
    from gplace.gnn.validation import VAL_METRICS
    rows = {}
    for path in sorted((run / "csv").glob("version_*/metrics.csv")):
        for row in csv.DictReader(path.open()):
            if row.get(VAL_METRICS["greedy"]):
                rows[int(row["step"]) + 1] = tuple(
                    float(row.get(k) or "nan") for k in (VAL_METRICS["zero-shot"],
                                                         VAL_METRICS["greedy"],
                                                         "val/share_at_or_below"))
    return [(s, *figures) for s, figures in sorted(rows.items())]


VALIDATED = {"zero-shot": "zero-shot placement by the policy's own rollouts (the best of the "
                          "greedy and sampled rollouts in both of the list scheduler's orders; "
                          "`gplace place` adds the untrained network's)",
             "greedy": "greedy placement (the greedy rollout in the policy's order)"}


def _experts_from(r) -> str:
    """Where a round's experts came from, for the card's table."""
    if r.round == 0:
        return "none: the starting policy (--init)"
    if r.start is None:
        return "the untrained network" if r.searched else "the cache (none searched)"
    folder = Path(r.start).parent.name
    return folder if folder.startswith("round") else r.start


def card_text(cfg, results, best, run_dir: Path, start=None, ranks: int = 1) -> str:
    """The card's text; ``start``: the starting policy's validation (a run with ``--init``),
    which ``best`` is where no round beat it; ``ranks``: Lightning's processes (--devices x
    --num-nodes), which split each step's problems and so change the weights."""
    from gplace.gnn.pretrain import ProblemPool
    train = len(ProblemPool(cfg, "train", search=False))
    val = len(ProblemPool(cfg, "validation", search=False))
    which = ("the policy of the row in bold below, the best on validation" if best.round
             else f"the starting policy {cfg.init_from}, which no round beat")
    init = (f" --init {cfg.init_from}" if cfg.init_from else "") + (
        f" --unknown-dim {cfg.unknown_dim}" if cfg.unknown_dim != 1 else "") + (
        f" --optimizer {cfg.optimizer}" if cfg.optimizer != "sgd" else "") + (
        " --trust-pt2" if cfg.trust_pt2 else "")
    lines = [f"# Policy card: `gplace pretrain --corpus {cfg.corpus}{init}`", "",
             f"Written: {which}.", "",
             "Expert iteration (gplace.gnn.iteration): each round searches an expert for every "
             "training problem from the round's starting policy, imitates the best expert of "
             f"each, and validates the {VALIDATED[cfg.validate]} of every validation "
             "problem against its best cheap heuristic (geometric mean): the round and "
             "checkpoint with the best figure are chosen. Step times are simulated "
             "(measured op times for devices of a kind the corpus' profiles were taken on, "
             "the roofline model otherwise; the profiles also give TF1 loops their run "
             "counts): "
             "estimates, not hardware measurements.", "",
             f"Training problems: {train}; validation problems: "
             f"{val or f'none (validated on the {train} training problems)'}.", "",
             "| round | experts from | searched | experts / best heuristic | validation "
             f"({cfg.validate}) | chosen checkpoint | seconds |", "|---|---|---|---|---|---|---|"]
    for r in ([start] if start else []) + results:
        mark = "**" if r is best else ""
        lines.append(f"| {mark}{r.round}{mark} | {_experts_from(r)} | "
                     f"{r.searched} | {_experts_figure(r)} | {mark}{r.val:.4f}{mark} | "
                     f"{r.selected} | {r.seconds:.0f} |")
    lines += ["", time_line([r.seconds for r in results])]
    if best.round:
        lines += ["", f"Round {best.round}'s validations:", "",
                  "| step | zero-shot / best heuristic | greedy / best heuristic | at or below 1 "
                  f"({cfg.validate}) |", "|---|---|---|---|"]
        lines += [f"| {s} | {z:.4f} | {g:.4f} | {share:.0%} |"
                  for s, z, g, share in validation_rows(run_dir / f"round{best.round}")]
    else:
        lines += ["", f"No round validated better than the starting policy ({best.val:.4f}), "
                  "so the command wrote it unchanged."]
    lines += ["", "Configuration:", "", "```"]
    lines += [f"{k}: {v}" for k, v in asdict(cfg).items() if k != "learn"]
    lines += [f"learn.{k}: {v}" for k, v in asdict(cfg.learn).items()]
    lines += [f"ranks: {ranks} (--devices x --num-nodes)"] if ranks > 1 else []
    lines += ["```", ""]
    return "\n".join(lines)


def time_line(seconds: list[float]) -> str:
    """The rounds' wall time and the machine that wrote the card (a resumed run's rounds may
    have run on another)."""
    total = sum(seconds)
    hours, minutes = divmod(round(total / 60), 60)
    clock = f" ({hours} h {minutes} min)" if hours else f" ({minutes} min)" if total >= 60 else ""
    try:
        memory = (f" and {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} "
                  f"GiB of memory")
    except (AttributeError, ValueError, OSError):  # no sysconf (Windows) or no such name
        memory = ""
    return (f"Time: the rounds took {total:,.0f} s{clock} of wall time, "
            f"reading the corpus before them not counted; this card was written on a machine "
            f"with {os.cpu_count()} CPU cores{memory}.")


def _experts_figure(r) -> str:
    return "none" if math.isnan(r.experts_vs_heuristic) else f"{r.experts_vs_heuristic:.4f}"


def write_card(path: Path, cfg, results, best, run_dir: Path, start=None,
               ranks: int = 1) -> Path:
    atomic_write_text(path, card_text(cfg, results, best, run_dir, start, ranks))
    return path
