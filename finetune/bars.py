"""The pretraining bars, from the records: finetune/tables_bars.md (finetune/run.sh puts it on
finetune/RESULTS.md).

    .venv/bin/python -m finetune.bars

Reads what the other recipes wrote: the test split's zero-shot and fine-tuning records
(finetune/results_test*.csv, finetune/study.py), the leave-one-domain-out records of the linear
policy (pretrain/domains.jsonl, pretrain.domains; each seed a case, as on its page), the floors
of pretrain/headroom.jsonl (pretrain.headroom: best placement known / untrained ft 100), the
certified optima of finetune/optimality.jsonl and the records of architectures outside the
corpus (finetune/outside.jsonl, finetune.outside; each seed a case). Runs nothing. Every step
time is simulated.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from finetune.costs import costs_of, current  # noqa: E402
from finetune.study import read_results  # noqa: E402
from pretrain.domains import geomean  # noqa: E402
OUT = ROOT / "finetune" / "tables_bars.md"
ZERO_SHOT_FLOOR, SEARCH_FLOOR = "known / best heuristic", "known / local search"
TEST, TEST_ZERO = (ROOT / "finetune" / f"results_test{s}.csv" for s in ("", "-zero-shot"))


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


def verdict(overall: float, bar: float, parts: dict[str, float] | None = None,
            floors: dict[str, float] | None = None) -> str:
    """"yes" / "no" against ``bar``; with ``parts``, which of them miss it, and of those which
    have a floor (``floors``) above the bar."""
    if overall > bar:
        return "**no**"
    missing = [k for k, v in (parts or {}).items() if v > bar]
    bound = [k for k in missing if (floors or {}).get(k, 0.0) > bar]
    return ("yes" + (f" over all; {', '.join(missing)} no" if missing else "")
            + (f" (the bar is below the floor of {', '.join(bound)})" if bound else ""))


class Records:
    """What the bars read: the test split's records, the held-out policies' records (the
    linear policy's, each seed a case) and the floors (pretrain.headroom.rows)."""

    def __init__(self):
        from finetune import optimality, outside
        from pretrain import domains, headroom
        self.test = read_results(TEST) if TEST.exists() else []
        self.zero = read_results(TEST_ZERO) if TEST_ZERO.exists() else []
        held = [r for r in domains.load_records(domains.RECORDS) if r["variant"] == "linear"]
        self.held = current(held)
        self.floors = headroom.rows(headroom.LONG) if headroom.RECORDS.exists() else []
        everything = outside.load_records()
        self.outside = current(everything)
        certified = list(optimality.load_records(every=True).values())
        self.certified = {r["key"]: r for r in current(certified)}
        long = list(headroom.load_records(every=True).values())
        # {page: its records' cost models} where every record is of another cost model
        self.stale = {page: sorted({costs_of(r) for r in records})
                      for page, records in (("pretrain/DOMAINS.md", held),
                                            ("finetune/OUTSIDE.md", everything),
                                            ("finetune/OPTIMALITY.md", certified),
                                            ("pretrain/HEADROOM.md (the floors)", long))
                      if records and not current(records)}

    def floor(self, study: str, cluster: str | None = None, words: str = "; the floor (best "
              "placement known / untrained) {}", field: str = "bound") -> str:
        """``words`` with the floor over the floors' cases of ``study`` (a prefix of their
        study) and ``cluster``, or "" where there are none. ``field``: which floor
        (pretrain.headroom.rows: "bound" for the ablation, "known / best heuristic" for
        zero-shot, "known / local search" for `ft 300 +h`)."""
        x = [r[field] for r in self.floors if r["study"].startswith(study)
             and cluster in (None, r["cluster"]) and r[field] is not None]
        return words.format(f"{geomean(x):.3f}") if x else ""

    def domain_floor_values(self, field: str) -> dict[str, float]:
        """{held-out domain: its floor} where the floors have its cases."""
        from pretrain.domains import DOMAINS
        return {d: float(v) for d in DOMAINS
                if (v := self.floor(f"domain {d}", words="{}", field=field))}

    def domain_floors(self, field: str) -> str:
        """"; the floors (best placement known / ...) d1 x, d2 y" per held-out domain."""
        cells = [f"{d} {v:.3f}" for d, v in self.domain_floor_values(field).items()]
        what = "best heuristic" if field == ZERO_SHOT_FLOOR else "local search"
        return (f"; the floors (best placement known / {what}) {', '.join(cells)}"
                if cells else "")

    def by_domain(self, value, records: list[dict] | None = None) -> dict[str, float]:
        from pretrain.domains import DOMAINS
        records = self.held if records is None else records
        return {d: geomean(value(r) for r in records if r["domain"] == d) for d in DOMAINS
                if any(r["domain"] == d for r in records)}


def domain_cells(parts: dict[str, float], bar: float) -> str:
    return ", ".join(f"{d} " + (f"**{v:.3f}**" if v > bar else f"{v:.3f}")
                     for d, v in parts.items())


def ablation(r: dict) -> float:
    return r["ft 100"] / r["untrained ft 100"]


def held_ablation(r: dict) -> float:
    return r["held-out ft 100"] / r["untrained ft 100"]


def ablation_test(rec: Records) -> list[tuple[str, str, str]]:
    if not rec.test:
        return []
    x = per_case(rec.test, ablation)
    return [("pretrained / untrained at 100 samples without heuristic starts <= 0.85, test "
             "split", f"**{figure(x)}**{rec.floor('test split')}", verdict(geomean(x), 0.85))]


def ablation_held_out(rec: Records) -> list[tuple[str, str, str]]:
    if not rec.held:
        return []
    parts, x = rec.by_domain(held_ablation), [held_ablation(r) for r in rec.held]
    return [("the same <= 0.92 on each held-out domain, its own pretraining",
             f"**{figure(x)}**: {domain_cells(parts, 0.92)}"
             + rec.floor("domain", words="; the floor {}"),
             verdict(geomean(x), 0.92, parts))]


def ablation_certified(rec: Records) -> list[tuple[str, str, str]]:
    from finetune.optimality import ablation_floors, small_rows
    if not rec.certified:
        return []
    return [("the same where the optimum is certified (small problems, shipped policy)",
             f"{f['ratio']:.3f} over {f['count']} problems; the floor (optimum / untrained) "
             f"{f['floor']:.3f}, lowest {f['lowest']:.3f}",
             "no: the bar is below the floor" if f["floor"] > 0.85 else verdict(f["ratio"], 0.85))
            for f in ablation_floors(small_rows(rec.certified))
            if f["cases"] == "certified optimum"]


def zero_shot_test(rec: Records) -> list[tuple[str, str, str]]:
    if not rec.zero:
        return []
    x = per_case(rec.zero, lambda r: r["zero-shot"] / r["best heuristic"])
    floor = rec.floor("test split", words="; the floor (best placement known / best "
                      "heuristic, the 12 fine-tuning cases) {}", field=ZERO_SHOT_FLOOR)
    return [("zero-shot <= 0.85x the best heuristic, test split", figure(x, "at") + floor,
             verdict(geomean(x), 0.85))]


def zero_shot_held_out(rec: Records) -> list[tuple[str, str, str]]:
    if not rec.held:
        return []
    ratio = lambda r: r["held-out zero-shot"] / r["best heuristic"]  # noqa: E731
    parts, x = rec.by_domain(ratio), [ratio(r) for r in rec.held]
    untrained = geomean(r["untrained zero-shot"] / r["best heuristic"] for r in rec.held)
    return [("zero-shot <= 0.85x the best heuristic, held-out domains",
             f"{figure(x, 'at')}: {domain_cells(parts, 0.85)}; the untrained network "
             f"{untrained:.3f}" + rec.domain_floors(ZERO_SHOT_FLOOR),
             verdict(geomean(x), 0.85, parts, rec.domain_floor_values(ZERO_SHOT_FLOOR)))]


def search_test(rec: Records) -> list[tuple[str, str, str]]:
    from finetune.study import search_ratios
    x = search_ratios(rec.test)
    if not x:
        return []
    gap = per_case(rec.test, lambda r: r["ft 300 +h"] / r["lower bound"])
    return [("`ft 300 +h` <= 0.90x the best of hill climbing and annealing from the best "
             "heuristic at 2400, test split", f"{figure(x, 'at')}; {geomean(gap):.2f}x the "
             f"lower bound ({min(gap):.2f}-{max(gap):.2f})"
             + rec.floor("test split", words="; the floor (best placement known / local "
                         "search) {}", field=SEARCH_FLOOR), verdict(geomean(x), 0.90))]


def search_held_out(rec: Records) -> list[tuple[str, str, str]]:
    from pretrain.domains import SEARCH, local_search
    searched = [r for r in rec.held if all(c in r for c in SEARCH)]
    if not searched:
        return []
    ours = lambda r: r["held-out ft 300 +h"] / local_search(r)  # noqa: E731
    parts, x = rec.by_domain(ours, searched), [ours(r) for r in searched]
    hdp = [ours(r) for r in searched if r["cluster"] == "hdp-8gpu"]
    untrained = geomean(r["untrained ft 300 +h"] / local_search(r) for r in searched)
    gap = [r["held-out ft 300 +h"] / r["lower bound"] for r in searched]
    return [("the same, held-out domains, each domain's own pretraining",
             f"{figure(x, 'at')}: {domain_cells(parts, 0.90)}"
             + (f"; hdp-8gpu {geomean(hdp):.3f}" if hdp else "")
             + f"; the untrained network {untrained:.3f}; {geomean(gap):.2f}x the lower bound "
             f"({min(gap):.2f}-{max(gap):.2f}, per case on pretrain/DOMAINS.md)"
             + rec.domain_floors(SEARCH_FLOOR),
             verdict(geomean(x), 0.90, parts, rec.domain_floor_values(SEARCH_FLOOR)))]


def unseen_cluster(rec: Records) -> list[tuple[str, str, str]]:
    parts = []
    test = [r for r in rec.test if r["cluster"] == "hdp-8gpu"]
    if test:
        x = geomean(per_case(test, ablation))
        parts.append((x, f"**{x:.3f}** on the test split"
                         + rec.floor("test split", "hdp-8gpu", " (floor {})")))
    held = [held_ablation(r) for r in rec.held if r["cluster"] == "hdp-8gpu"]
    if held:
        x = geomean(held)
        parts.append((x, f"**{x:.3f}** on the held-out domains"
                         + rec.floor("domain", "hdp-8gpu", " (floor {})")))
    if not parts:
        return []
    return [("hdp-8gpu (unseen): pretrained / untrained at 100 samples <= 0.95",
             ", ".join(text for _, text in parts), verdict(max(v for v, _ in parts), 0.95))]


def outside_corpus(rec: Records) -> list[tuple[str, str, str]]:
    """The bars on the architectures outside the corpus (finetune/OUTSIDE.md), one row each."""
    from finetune.outside import local_search
    from pretrain.headroom import OUTSIDE
    if not rec.outside:
        return []
    where = "architectures outside the corpus (finetune/OUTSIDE.md)"
    out = []
    for bar, name, ratio, count, field, of in (
            (0.85, "pretrained / untrained at 100 samples", ablation, "below", "bound",
             "untrained"),
            (0.85, "zero-shot / best heuristic", lambda r: r["zero-shot"] / r["best heuristic"],
             "at", ZERO_SHOT_FLOOR, "best heuristic"),
            (0.90, "`ft 300 +h` / the best of hill climbing and annealing at 2400",
             lambda r: r["ft 300 +h"] / local_search(r), "at", SEARCH_FLOOR, "local search")):
        x = [ratio(r) for r in rec.outside]
        floor = rec.floor(OUTSIDE, words=f"; the floor (best placement known / {of}) {{}}",
                          field=field)
        out.append((f"{name} <= {bar:.2f}, {where}", figure(x, count) + floor,
                    verdict(geomean(x), bar)))
    hdp = [ablation(r) for r in rec.outside if r["cluster"] == "hdp-8gpu"]
    if hdp:
        out.append((f"hdp-8gpu: pretrained / untrained at 100 samples <= 0.95, {where}",
                    figure(hdp) + rec.floor(OUTSIDE, "hdp-8gpu"), verdict(geomean(hdp), 0.95)))
    return out


BARS = (ablation_test, ablation_held_out, ablation_certified, zero_shot_test,
        zero_shot_held_out, search_test, search_held_out, unseen_cluster, outside_corpus)


def rows(rec: Records | None = None) -> list[tuple[str, str, str]]:
    """(bar, figure, met?) for every bar whose records exist under today's cost model."""
    rec = Records() if rec is None else rec
    return [row for bar in BARS for row in bar(rec)]


def table() -> str:
    from gplace.cost import COST_MODEL_VERSION
    rec = Records()
    lines = ["| bar | figure (geomean) | met? |", "|---|---|---|"]
    lines += [f"| {bar} | {fig} | {met} |" for bar, fig, met in rows(rec)]
    if rec.stale:
        pages = "; ".join(f"{page} (cost model {', '.join(map(str, v))})"
                          for page, v in rec.stale.items())
        lines += ["", f"Not in this table: the records of {pages}, made under another cost "
                  f"model than today's ({COST_MODEL_VERSION}), whose step times do not compare "
                  "with these; their bars come back when those pages are rebuilt."]
    return "\n".join(lines)


def main() -> int:
    from gplace.io import atomic_write_text
    text = table()
    atomic_write_text(OUT, text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
