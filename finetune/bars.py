"""The pretraining bars, from the records: finetune/tables_bars.md (finetune/run.sh puts it on
finetune/RESULTS.md).

    .venv/bin/python -m finetune.bars

Reads what the other recipes wrote: the test split's zero-shot and fine-tuning records
(finetune/results_test*.csv, finetune/study.py), the leave-one-domain-out records of the linear
policy (pretrain/domains.jsonl, pretrain.domains; each seed a case, as on its page), the floors
of pretrain/headroom.jsonl (pretrain.headroom: best placement known / untrained ft 100) and the
certified optima of finetune/optimality.jsonl. Runs nothing. Every step time is simulated.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = ROOT / "finetune" / "tables_bars.md"
TEST, TEST_ZERO = (ROOT / "finetune" / f"results_test{s}.csv" for s in ("", "-zero-shot"))


def geomean(x) -> float:
    x = np.asarray(list(x), np.float64)
    return float(np.exp(np.log(x).mean())) if x.size else float("nan")


def read_csv(path: Path) -> list[dict]:
    keep = ("graph", "family", "cluster", "best_heuristic")
    with path.open() as f:
        return [{k: v if k in keep else float(v) for k, v in r.items() if v != ""}
                for r in csv.DictReader(f)]


def per_case(records: list[dict], value) -> list[float]:
    """``value(record)`` per (graph, cluster), seeds averaged in log space (finetune.study)."""
    cases: dict[tuple[str, str], list[float]] = {}
    for r in records:
        cases.setdefault((r["graph"], r["cluster"]), []).append(value(r))
    return [geomean(v) for _, v in sorted(cases.items())]


def figure(x: list[float], count: str = "below") -> str:
    """Geomean and how many cases are below 1 (``count`` "below") or at or below it."""
    n = sum(v < 1 - 1e-9 for v in x) if count == "below" else sum(v <= 1 + 1e-9 for v in x)
    word = "better on" if count == "below" else "at or below on"
    return f"{geomean(x):.3f} ({word} {n} of {len(x)})"


def verdict(overall: float, bar: float, parts: dict[str, float] = None) -> str:
    """"yes" / "no" against ``bar``; with ``parts``, which of them miss it."""
    if overall > bar:
        return "**no**"
    missing = [k for k, v in (parts or {}).items() if v > bar]
    return "yes" + (f" over all; {', '.join(missing)} no" if missing else "")


def rows() -> list[tuple[str, str, str]]:
    """(bar, figure, met?) for every bar whose records exist."""
    from finetune.optimality import ablation_floors, load_records as optimality_records
    from finetune.optimality import small_rows
    from pretrain import domains, headroom
    out = []
    test = read_csv(TEST) if TEST.exists() else []
    zero = read_csv(TEST_ZERO) if TEST_ZERO.exists() else []
    held = [r for r in domains.load_records(domains.RECORDS) if r["variant"] == "linear"]
    floors = headroom.rows(headroom.LONG) if headroom.RECORDS.exists() else []

    def floor(study_prefix: str, cluster: str | None = None) -> float:
        return geomean(r["bound"] for r in floors if r["study"].startswith(study_prefix)
                       and cluster in (None, r["cluster"]))

    def by_domain(value) -> dict[str, float]:
        return {d: geomean(value(r) for r in held if r["domain"] == d) for d in domains.DOMAINS
                if any(r["domain"] == d for r in held)}

    def domain_cells(parts: dict[str, float], bar: float) -> str:
        return ", ".join(f"{d} " + (f"**{v:.3f}**" if v > bar else f"{v:.3f}")
                         for d, v in parts.items())

    ablation = lambda r: r["ft 100"] / r["untrained ft 100"]  # noqa: E731
    held_ablation = lambda r: r["held-out ft 100"] / r["untrained ft 100"]  # noqa: E731
    if test:
        x = per_case(test, ablation)
        out.append(("pretrained / untrained at 100 samples without heuristic starts <= 0.85, "
                    "test split", f"**{figure(x)}**; the floor (best placement known / "
                    f"untrained) {floor('test split'):.3f}", verdict(geomean(x), 0.85)))
    if held:
        parts = by_domain(held_ablation)
        x = [held_ablation(r) for r in held]
        out.append(("the same <= 0.92 on each held-out domain, its own pretraining",
                    f"**{figure(x)}**: {domain_cells(parts, 0.92)}; the floor "
                    f"{floor('domain'):.3f}", verdict(geomean(x), 0.92, parts)))
    small = small_rows(optimality_records())
    for f in ablation_floors(small)[:1]:
        out.append(("the same where the optimum is certified (small problems, shipped policy)",
                    f"{f['ratio']:.3f} over {f['count']} problems; the floor (optimum / "
                    f"untrained) {f['floor']:.3f}, lowest {f['lowest']:.3f}",
                    "no: the bar is below the floor" if f["floor"] > 0.85 else verdict(f["ratio"], 0.85)))
    if zero:
        x = per_case(zero, lambda r: r["zero-shot"] / r["best heuristic"])
        out.append(("zero-shot <= 0.85x the best heuristic, test split", figure(x, "at"),
                    verdict(geomean(x), 0.85)))
    if held:
        parts = by_domain(lambda r: r["held-out zero-shot"] / r["best heuristic"])
        x = [r["held-out zero-shot"] / r["best heuristic"] for r in held]
        untrained = geomean(r["untrained zero-shot"] / r["best heuristic"] for r in held)
        out.append(("zero-shot <= 0.85x the best heuristic, held-out domains",
                    f"{figure(x, 'at')}: {domain_cells(parts, 0.85)}; the untrained network "
                    f"{untrained:.3f}", verdict(geomean(x), 0.85, parts)))
    if test:
        x = per_case(test, lambda r: r["ft 300 +h"] / min(r["hill 2400 +h"], r["anneal 2400 +h"]))
        gap = per_case(test, lambda r: r["ft 300 +h"] / r["lower bound"])
        out.append(("`ft 300 +h` <= 0.90x the best of hill climbing and annealing from the best "
                    "heuristic at 2400, test split", f"{figure(x, 'at')}; {geomean(gap):.2f}x "
                    f"the lower bound ({min(gap):.2f}-{max(gap):.2f})",
                    verdict(geomean(x), 0.90)))
    searched = [r for r in held if all(c in r for c in domains.SEARCH)]
    if searched:
        ours = lambda r: r["held-out ft 300 +h"] / domains.local_search(r)  # noqa: E731
        parts = {d: geomean(ours(r) for r in searched if r["domain"] == d)
                 for d in domains.DOMAINS if any(r["domain"] == d for r in searched)}
        x = [ours(r) for r in searched]
        hdp = geomean(ours(r) for r in searched if r["cluster"] == "hdp-8gpu")
        untrained = geomean(r["untrained ft 300 +h"] / domains.local_search(r) for r in searched)
        gap = [r["held-out ft 300 +h"] / r["lower bound"] for r in searched]
        out.append(("the same, held-out domains, each domain's own pretraining",
                    f"{figure(x, 'at')}: {domain_cells(parts, 0.90)}; hdp-8gpu {hdp:.3f}; the "
                    f"untrained network {untrained:.3f}; {geomean(gap):.2f}x the lower bound "
                    f"({min(gap):.2f}-{max(gap):.2f}, per case on pretrain/DOMAINS.md)",
                    verdict(geomean(x), 0.90, parts)))
    hdp = []
    if test:
        x = per_case([r for r in test if r["cluster"] == "hdp-8gpu"], ablation)
        hdp.append((geomean(x), f"**{geomean(x):.3f}** on the test split (floor "
                                f"{floor('test split', 'hdp-8gpu'):.3f})"))
    if held:
        x = geomean(held_ablation(r) for r in held if r["cluster"] == "hdp-8gpu")
        hdp.append((x, f"**{x:.3f}** on the held-out domains (floor "
                       f"{floor('domain', 'hdp-8gpu'):.3f})"))
    if hdp:
        out.append(("hdp-8gpu (unseen): pretrained / untrained at 100 samples <= 0.95",
                    ", ".join(text for _, text in hdp), verdict(max(v for v, _ in hdp), 0.95)))
    return out


def table() -> str:
    lines = ["| bar | figure (geomean) | met? |", "|---|---|---|"]
    lines += [f"| {bar} | {fig} | {met} |" for bar, fig, met in rows()]
    return "\n".join(lines)


def main() -> int:
    from gplace.io import atomic_write_text
    text = table()
    atomic_write_text(OUT, text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
