"""How much room does the ablation leave? The best placement a long search finds, against the
untrained network's 100-sample fine-tuning.

    nice .venv/bin/python -m pretrain.headroom              # runs what is missing, then the page
    .venv/bin/python -m pretrain.headroom --page-only       # the page from the records alone

"pretrained / untrained at 100 samples" is bounded below by "best known / untrained": a
pretrained policy that reached, with 100 samples, the fastest placement any method here found
would score exactly that. For every case (graph x cluster) of the leave-one-domain-out study
(pretrain/domains.jsonl; the placements of the records of earlier zero-shot rules,
pretrain.domains.ARCHIVES, count as known too) and of the test split's fine-tuning study
(finetune/results_test.csv) and of the architectures outside the corpus
(finetune/outside.jsonl, finetune.outside), this runs one long search, ``gplace place``'s fine-tuning from
the shipped policy with the cheap heuristics' placements as starts, LONG samples, seed 0 (``ft LONG +h``), and takes as
"best known" the fastest of it and of every placement the three studies recorded for the case
(every variant, seed and method, hill climbing and annealing at 2400 samples included).
Records go to pretrain/headroom.jsonl, the page to pretrain/HEADROOM.md. Every step time is
simulated.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

import numpy as np

from finetune.costs import current, stamped
from pretrain.domains import ARCHIVES, _commit, geomean

HERE = Path(__file__).parent
ROOT = HERE.parent
RECORDS = HERE / "headroom.jsonl"
PAGE = HERE / "HEADROOM.md"
DOMAIN_RECORDS = HERE / "domains.jsonl"
EARLIER_DOMAIN_RECORDS = tuple(path for path, *_ in ARCHIVES)  # their placements count as known
TEST_RECORDS = ROOT / "finetune" / "results_test.csv"
OUTSIDE_RECORDS = ROOT / "finetune" / "outside.jsonl"
OUTSIDE = "outside the corpus"  # the study name of finetune.outside's cases
LONG = 1200
LOCAL_SEARCH = ("hill 2400 +h", "anneal 2400 +h")  # the bars' local search: the better one
TIME_COLUMNS = ("zero-shot", "ft 100", "ft 100 +h", "ft 300 +h", "hill 2400 +h",
                "anneal 2400 +h", "best heuristic")  # any variant's prefix before them


def study_cases() -> dict[tuple[str, str], dict]:
    """(graph, cluster) -> {"study", "untrained", "pretrained", "heuristic", "local",
    "known"}: the geomean over seeds of the ablation's and the pretrained policy's 100-sample
    figures, of the best heuristic and of local search (the better of hill climbing and
    annealing at 2,400; None where not run), and the fastest placement recorded for the case."""
    cases: dict[tuple[str, str], dict] = {}

    def add(study, graph, cluster, row, pretrained_key):
        c = cases.setdefault((graph, cluster), {"study": study, "untrained": [], "pretrained": [],
                                                 "known": np.inf, "heuristic": [], "local": []})
        c["untrained"].append(float(row["untrained ft 100"]))
        c["pretrained"].append(float(row[pretrained_key]))
        c["heuristic"].append(float(row["best heuristic"]))
        if all(_number(row.get(k)) for k in LOCAL_SEARCH):
            c["local"].append(min(float(row[k]) for k in LOCAL_SEARCH))
        times = [float(v) for k, v in row.items()
                 if isinstance(k, str) and k.endswith(TIME_COLUMNS) and _number(v)]
        c["known"] = min([c["known"], *times])

    domain = current(_records(DOMAIN_RECORDS))
    earlier = [r for path in EARLIER_DOMAIN_RECORDS for r in current(_records(path))]
    for r in domain:
        if r.get("variant", "linear") == "linear":
            add(f"domain {r['domain']}", r["graph"], r["cluster"], r, "held-out ft 100")
    others = [r for r in domain if r.get("variant", "linear") != "linear"] + earlier
    for r in others:  # other variants' and earlier records' placements are known too
        if (r["graph"], r["cluster"]) in cases:
            c = cases[r["graph"], r["cluster"]]
            c["known"] = min([c["known"], *(float(v) for k, v in r.items()
                                            if k.endswith(TIME_COLUMNS) and _number(v))])
    if TEST_RECORDS.exists():
        with TEST_RECORDS.open() as f:
            for r in csv.DictReader(f):
                add("test split", r["graph"], r["cluster"], r, "ft 100")
    for r in current(_records(OUTSIDE_RECORDS)):
        add(OUTSIDE, r["graph"], r["cluster"], r, "ft 100")
    for c in cases.values():
        for key in ("untrained", "pretrained", "heuristic", "local"):
            c[key] = geomean(c[key]) if c[key] else None
    return cases


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _number(v) -> bool:
    try:
        return np.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def long_search(graph: str, cluster: str, budget: int, study: str = "") -> dict:
    """``ft budget +h`` from the shipped policy on the case, seed 0."""
    from gplace.gnn.placer import GNNPlacer, load_policy
    if study == OUTSIDE:
        from finetune.outside import build_case
        problem, m, heur, bound = build_case(graph, cluster)
    else:
        from finetune.study import build_case
        from gplace.gnn.corpus import list_corpus
        entry = next(e for e in list_corpus(ROOT / "datasets") if e.name == graph)
        problem, m, heur, bound = build_case(entry, cluster)
    t0 = time.perf_counter()
    r = GNNPlacer(seed=0, policy=load_policy()[0]).place(
        problem, m, budget, seeds=[h.placement for h in heur.values()])
    return {"graph": graph, "cluster": cluster, "units": problem.num_units,
            f"ft {budget} +h": float(r.step_time_s), "lower bound": bound,
            "wall_s": round(time.perf_counter() - t0, 1)}


def load_records(every: bool = False) -> dict[tuple[str, str], dict]:
    """(graph, cluster) -> its long search's record, those of today's cost model
    (finetune.costs; ``every``: all)."""
    if not RECORDS.exists():
        return {}
    rows = [json.loads(line) for line in RECORDS.read_text().splitlines() if line.strip()]
    return {(r["graph"], r["cluster"]): r for r in (rows if every else current(rows))}


def run(budget: int, log) -> None:
    import torch
    torch.set_num_threads(1)
    done = load_records()
    for (graph, cluster), case in sorted(study_cases().items()):
        if (graph, cluster) in done:
            continue
        rec = stamped(long_search(graph, cluster, budget, case["study"]))
        with RECORDS.open("a") as f:
            f.write(json.dumps(rec) + "\n")
        print(f"headroom: {graph} {cluster}: ft {budget} +h {rec[f'ft {budget} +h'] * 1e3:.3f} "
              f"ms ({rec['wall_s']:.0f} s)", file=log, flush=True)


def rows(budget: int) -> list[dict]:
    """One row per case with the figures of the page."""
    long = load_records()
    out = []
    for (graph, cluster), c in sorted(study_cases().items(), key=lambda kv: (kv[1]["study"],
                                                                              kv[0])):
        r = long.get((graph, cluster))
        if r is None:
            continue
        known = min(c["known"], r[f"ft {budget} +h"])
        out.append({"study": c["study"], "graph": graph, "cluster": cluster,
                    "units": r["units"], "bound": known / c["untrained"],
                    "pretrained": c["pretrained"] / c["untrained"],
                    "long found": r[f"ft {budget} +h"] <= c["known"],
                    "long / recorded": r[f"ft {budget} +h"] / c["known"],
                    "known / lower bound": known / r["lower bound"],
                    "known / best heuristic": known / c["heuristic"],
                    "known / local search": known / c["local"] if c["local"] else None})
    return out


def summary(rs: list[dict], budget: int) -> str:
    groups = {}
    for r in rs:
        groups.setdefault(r["study"], []).append(r)
    domain = [r for r in rs if r["study"].startswith("domain")]
    named = sorted(groups.items()) + ([("all held-out domains", domain)] if domain else [])
    named += [("hdp-8gpu, held-out domains",
               [r for r in domain if r["cluster"] == "hdp-8gpu"])] if domain else []
    out = [f"| cases | count | best known / untrained ft 100 (the floor) | pretrained / untrained "
           f"ft 100 (today) | share of the room taken | ft {budget} +h / best recorded before | "
           "best known / lower bound | best known / best heuristic | best known / local "
           "search |", "|---|---|---|---|---|---|---|---|---|"]
    for name, g in named:
        floor, today = geomean(r["bound"] for r in g), geomean(r["pretrained"] for r in g)
        share = (1 - today) / (1 - floor) if floor < 1 else float("nan")
        out.append(f"| {name} | {len(g)} | {floor:.3f} | {today:.3f} | {share:.0%} | "
                   f"{geomean(r['long / recorded'] for r in g):.3f} | "
                   f"{geomean(r['known / lower bound'] for r in g):.2f} | "
                   f"{geomean(r['known / best heuristic'] for r in g):.3f} | "
                   f"{_geomean_or_dash([r['known / local search'] for r in g])} |")
    return "\n".join(out)


def _geomean_or_dash(x: list) -> str:
    return f"{geomean(x):.3f}" if x and None not in x else "-"


def case_table(rs: list[dict], budget: int) -> str:
    out = ["| cases | graph | cluster | units | best known / untrained ft 100 | pretrained / "
           f"untrained ft 100 | ft {budget} +h is the best known | best known / lower bound |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rs:
        out.append(f"| {r['study']} | {r['graph']} | {r['cluster']} | {r['units']} | "
                   f"{r['bound']:.3f} | {r['pretrained']:.3f} | "
                   f"{'yes' if r['long found'] else 'no'} | {r['known / lower bound']:.2f} |")
    return "\n".join(out)


def write_page(budget: int, commit: str) -> None:
    from gplace.io import atomic_write_text
    rs = rows(budget)
    if not rs:
        return
    text = f"""# Headroom: how far can pretraining move the 100-sample ablation?

The bars on pretraining are ratios at 100 fine-tuning samples without heuristic starts:
pretrained / the same network untrained. A pretrained policy that found, within those 100
samples, the fastest placement known for a case would score "best known / untrained ft 100":
that ratio is the floor of what this study can show, unless a policy beats every search run
here. "Best known" is the fastest of a long search (`ft {budget} +h`: `gplace place`'s
fine-tuning from the policy shipped when its record was made (the one before commit a63242c)
with the heuristics' placements as starts, {budget} samples, seed 0) and of every placement the three studies recorded for the case (every
variant, seed and method, hill climbing and annealing from the best heuristic at 2,400 samples
and `ft 300 +h` included). "Share of the room taken": (1 - today) / (1 - floor).
The last two columns are the same floor for the other bars: a zero-shot placement can score
no lower than "best known / best heuristic", `ft 300 +h` no lower than "best known / local
search" (local search: the better of hill climbing and annealing from the best heuristic at
2,400 samples; seeds 0-2 where the study ran several), unless it beats every search here.
The lower bound (gplace.sim.bounds) is far below every placement found, so it does not say how
much room there is. **Every step time is simulated** (the roofline model on every device; the
graphs' profiles, measured on another CPU, give the TF1 loops their run counts): estimates, not
measurements on hardware.

Cases: the leave-one-domain-out study's (pretrain/DOMAINS.md: "pretrained" is the policy
pretrained without the case's domain, ratios are geomeans over seeds 0-2 per case), the
test split's fine-tuning cases (finetune/RESULTS.md: "pretrained" is the shipped policy) and
the architectures outside the corpus (finetune/OUTSIDE.md: the shipped policy, seeds 0-2,
roofline costs).
Rebuilt by `nice .venv/bin/python -m pretrain.headroom` (records in pretrain/headroom.jsonl),
code at commit {commit}.

## Geometric means over cases

{summary(rs, budget)}

## Per case

{case_table(rs, budget)}
"""
    atomic_write_text(PAGE, text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=int, default=LONG, help="samples of the long search")
    ap.add_argument("--page-only", action="store_true", help="write the page from the records")
    args = ap.parse_args(argv)
    if not args.page_only:
        run(args.budget, sys.stderr)
    write_page(args.budget, _commit())
    return 0


if __name__ == "__main__":
    sys.exit(main())
