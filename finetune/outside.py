"""Architectures outside the corpus: the shipped policy on graphs of architectures it has never
seen, against the same network untrained and against local search.

    nice .venv/bin/python -m finetune.outside              # runs what is missing, then the page
    .venv/bin/python -m finetune.outside --page-only       # the page from the records alone
    nice .venv/bin/python -m finetune.outside --policy P   # another policy's columns, printed

Every graph of datasets.outside.OUTSIDE (families that neither the corpus nor any generated
family has) is built once into runs/outside/<name>.pb and placed on CLUSTERS as `gplace place`
builds the problem (full granularity; roofline costs: these graphs have no measured profile),
seeds ``--seeds``. Per case and seed:

* ``best heuristic``: the best cheap heuristic (no samples); ``lower bound``;
* ``zero-shot`` and ``ft 100`` (100 fine-tuning samples without heuristic starts) of the
  shipped policy and of the same network untrained (the ablation);
* ``ft 300 +h`` (`gplace place --finetune 300`) of both, and hill climbing and annealing from
  the best heuristic with 2400 samples (``hill 2400 +h``, ``anneal 2400 +h``).

A record names the policy file that made its shipped-policy columns (``policy``, the start of
its SHA-256) and the fine-tuning settings of both networks' columns (``finetune``:
finetune.study.FINETUNE_TAG). Where the shipped policy has changed since, a run recomputes its
columns alone (:data:`SHIPPED_COLUMNS`); where the fine-tuning settings have, both networks'
(and the :data:`UNTRAINED_COLUMNS`); the heuristics and the local searches, which depend on
neither, are kept.

The definitions are finetune.study's (without_heuristics, with_heuristics, baselines), so the
figures read as on finetune/RESULTS.md and pretrain/DOMAINS.md. Records go to
finetune/outside.jsonl (one per case and seed; delete a line and run its seed to redo it), the
page to finetune/OUTSIDE.md. Every step time is simulated.

``--policy P`` places the cases of the records with the policy file P instead of the shipped
one (the shipped policy's columns alone, records in runs/outside/policy-<digest>.jsonl) and
prints the summary table with P's columns beside the records' ablation and searches: how
another pretraining would read on this page, without touching it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
from pretrain.domains import geomean, local_search  # noqa: E402
RUNS = ROOT / "runs" / "outside"
RECORDS = HERE / "outside.jsonl"
PAGE = HERE / "OUTSIDE.md"
CLUSTERS = ("post-4gpu", "hetero", "hdp-8gpu")  # hdp-8gpu: unseen in pretraining
SHIPPED_COLUMNS = ("zero-shot", "ft 100", "ft 100 +h", "ft 300 +h")  # the shipped policy's
UNTRAINED_COLUMNS = tuple(f"untrained {c}" for c in SHIPPED_COLUMNS)  # the ablation's


def graph_file(spec, log) -> Path:
    """runs/outside/<name>.pb, built once (atomically)."""
    from gplace.io import atomic_write_bytes
    path = RUNS / f"{spec.name}.pb"
    if not path.exists():
        t0 = time.perf_counter()
        RUNS.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, spec.build().SerializeToString())
        print(f"outside: built {path} ({time.perf_counter() - t0:.0f} s)", file=log, flush=True)
    return path


def problem_of(path: Path, cluster: str):
    """finetune.study.problem_case of a built graph: (problem, measurer, heuristics, bound)."""
    from finetune.study import problem_case
    from gplace import load_graph
    from gplace.cluster import load_cluster
    from gplace.cost import cost_model_for
    from gplace.problem import PlacementProblem
    return problem_case(PlacementProblem.build(load_graph(str(path)), load_cluster(cluster),
                                               cost_model_for(path)))


def build_case(name: str, cluster: str):
    """:func:`problem_of` the graph of datasets.outside.OUTSIDE called ``name``."""
    from datasets.outside import OUTSIDE
    spec = next(s for s in OUTSIDE if s.name == name)
    return problem_of(graph_file(spec, sys.stderr), cluster)


def evaluate(spec, path: Path, cluster: str, seed: int, columns: str = "all",
             policy: Path | None = None) -> dict:
    """Every figure of the module docstring for one case and seed; ``columns`` "shipped": the
    shipped policy's columns (:data:`SHIPPED_COLUMNS`) alone, of ``policy`` if given;
    "finetune": those and the untrained network's (:data:`UNTRAINED_COLUMNS`)."""
    from finetune.study import (FINETUNE_TAG, baselines, fresh_network, with_heuristics,
                                without_heuristics)
    from gplace.gnn.placer import SHIPPED, load_policy
    from pretrain.domains import policy_digest
    problem, m, heur, bound = problem_of(path, cluster)
    shipped = load_policy(policy)[0]
    rec = {**without_heuristics(problem, m, shipped, seed),
           **with_heuristics(problem, m, heur, shipped, seed),
           "policy": policy_digest(policy or SHIPPED), "finetune": FINETUNE_TAG}
    if columns == "shipped":
        return rec
    if columns == "finetune":
        untrained = fresh_network(shipped, seed)
        return {**rec, **without_heuristics(problem, m, untrained, seed, "untrained "),
                **with_heuristics(problem, m, heur, untrained, seed, "untrained ")}
    feasible = {h: r.step_time_s for h, r in heur.items() if r.feasible}
    best = min(feasible, key=feasible.get)
    rec = {"graph": spec.name, "family": spec.family, "cluster": cluster, "seed": seed,
           "ops": problem.graph.num_ops, "units": problem.num_units,
           "best heuristic": feasible[best], "best_heuristic": best, "lower bound": bound, **rec}
    untrained = fresh_network(shipped, seed)
    rec.update(without_heuristics(problem, m, untrained, seed, "untrained "))
    rec.update(with_heuristics(problem, m, heur, untrained, seed, "untrained "))
    rec.update(baselines(problem, m, heur, seed))
    return rec


def load_records() -> list[dict]:
    if not RECORDS.exists():
        return []
    return [json.loads(line) for line in RECORDS.read_text().splitlines() if line.strip()]


def run(seeds: list[int], log) -> None:
    """Every missing case of ``seeds``; the shipped policy's columns of every record (of any
    seed) another policy file made, and both networks' of every record made with other
    fine-tuning settings (each record rewritten in place, atomically: one writer at a
    time)."""
    import torch
    from datasets.outside import OUTSIDE, check_outside
    from finetune.costs import is_current, stamped
    from finetune.study import FINETUNE_TAG
    from gplace.gnn.placer import SHIPPED
    from gplace.io import atomic_write_text
    from pretrain.domains import _commit, policy_digest
    torch.set_num_threads(1)
    check_outside()
    digest = policy_digest(SHIPPED)
    recorded = {case_of(r) for r in load_records()}
    for spec in OUTSIDE:
        path = None
        for cluster in CLUSTERS:
            for seed in sorted(set(seeds) | {s for g, c, s in recorded
                                             if (g, c) == (spec.name, cluster)}):
                key = (spec.name, cluster, seed)
                old = next((r for r in load_records() if case_of(r) == key), None)
                stale = old is not None and not is_current(old)  # another cost model's
                old = None if stale else old
                columns = ("all" if old is None else
                           "finetune" if old.get("finetune") != FINETUNE_TAG else
                           "shipped" if old.get("policy") != digest else None)
                if columns is None:
                    continue
                path = path or graph_file(spec, log)
                t0 = time.perf_counter()
                new = evaluate(spec, path, cluster, seed, columns)
                rec = stamped({**(old or {}), **new, "commit": _commit(),
                               "wall_s": round(time.perf_counter() - t0, 1)})
                if old is not None:  # the case's first run keeps its commit and time
                    rec.update(commit=old["commit"], wall_s=old["wall_s"],
                               policy_commit=_commit(), policy_wall_s=rec["wall_s"])
                records = [rec if case_of(r) == key else r for r in load_records()]
                if old is None and not stale:
                    records.append(rec)
                atomic_write_text(RECORDS, "".join(json.dumps(r) + "\n" for r in records))
                print(f"outside: {spec.name} {cluster} s{seed}: {rec['units']} units, zero-shot "
                      f"/ best heuristic {rec['zero-shot'] / rec['best heuristic']:.3f}, "
                      f"pretrained / untrained ft 100 "
                      f"{rec['ft 100'] / rec['untrained ft 100']:.3f} ({rec['wall_s']:.0f} s)",
                      file=log, flush=True)


# ---- the page -------------------------------------------------------------------------------
FIGURES = (  # (row, per-record ratio, what is counted: "at" at or below 1, "below" below 1)
    ("zero-shot / best heuristic", lambda r: r["zero-shot"] / r["best heuristic"], "at"),
    ("the same network untrained, zero-shot / best heuristic",
     lambda r: r["untrained zero-shot"] / r["best heuristic"], "at"),
    ("pretrained / untrained, zero-shot", lambda r: r["zero-shot"] / r["untrained zero-shot"],
     "below"),
    ("pretrained / untrained, 100 samples, no heuristic starts",
     lambda r: r["ft 100"] / r["untrained ft 100"], "below"),
    ("`ft 300 +h` / best heuristic", lambda r: r["ft 300 +h"] / r["best heuristic"], "at"),
    ("`ft 300 +h` / best of hill and annealing from the best heuristic at 2400",
     lambda r: r["ft 300 +h"] / local_search(r), "at"),
    ("untrained `ft 300 +h` / the same", lambda r: r["untrained ft 300 +h"] / local_search(r),
     "at"),
    ("`ft 300 +h` / lower bound", lambda r: r["ft 300 +h"] / r["lower bound"], None),
)


def cell(records: list[dict], ratio, count) -> str:
    x = [ratio(r) for r in records]
    if not x:
        return ""
    n = (sum(v <= 1 + 1e-9 for v in x) if count == "at" else
         sum(v < 1 - 1e-9 for v in x) if count == "below" else None)
    return f"{geomean(x):.3f}" + ("" if n is None else f" ({n} of {len(x)})")


def summary_table(records: list[dict]) -> str:
    families = list(dict.fromkeys(r["family"] for r in records))
    groups = ([(f, [r for r in records if r["family"] == f]) for f in families]
              + [("all", records),
                 ("hdp-8gpu only", [r for r in records if r["cluster"] == "hdp-8gpu"])])
    out = ["| figure (geomean; in brackets: cases below or at or below 1) | "
           + " | ".join(f"{name}, {len(rs)}" for name, rs in groups) + " |",
           "|---|" + "---|" * len(groups)]
    for row, ratio, count in FIGURES:
        out.append(f"| {row} | " + " | ".join(cell(rs, ratio, count) for _, rs in groups) + " |")
    return "\n".join(out)


def case_table(records: list[dict]) -> str:
    out = ["| graph | family | cluster | seed | ops | units | best heuristic ms | zero-shot / "
           "best h. | untrained zero-shot / best h. | pretrained / untrained, ft 100 | ft 300 +h "
           "/ hill and annealing | ft 300 +h / lower bound | s |", "|---" * 13 + "|"]
    for r in sorted(records, key=lambda r: (r["family"], r["units"], r["graph"],
                                            CLUSTERS.index(r["cluster"]), r["seed"])):
        out.append(f"| {r['graph']} | {r['family']} | {r['cluster']} | {r['seed']} | {r['ops']} | "
                   f"{r['units']} | {r['best heuristic'] * 1e3:.2f} ({r['best_heuristic']}) | "
                   f"{r['zero-shot'] / r['best heuristic']:.3f} | "
                   f"{r['untrained zero-shot'] / r['best heuristic']:.3f} | "
                   f"{r['ft 100'] / r['untrained ft 100']:.3f} | "
                   f"{r['ft 300 +h'] / local_search(r):.3f} | "
                   f"{r['ft 300 +h'] / r['lower bound']:.2f} | {r['wall_s']:.0f} |")
    return "\n".join(out)


def write_page(records: list[dict]) -> None:
    import textwrap
    from gplace.io import atomic_write_text
    if not records:
        return
    commits = ", ".join(sorted({r["commit"] for r in records}
                               | {r["policy_commit"] for r in records if "policy_commit" in r}))
    seeds = ", ".join(map(str, sorted({r["seed"] for r in records})))
    families = ", ".join(dict.fromkeys(r["family"] for r in records))
    intro = textwrap.fill(
        "How the shipped policy places training steps of architectures that neither its "
        f"pretraining corpus nor any generated family has ({families}; datasets/outside.py), "
        "next to the same network untrained (the ablation) and to local search. Each graph is "
        "placed at full granularity as `gplace place` builds the problem, on "
        f"{', '.join(CLUSTERS)} (hdp-8gpu unseen in pretraining), seeds {seeds} (each seed a "
        "case). The figures are "
        "those of finetune/RESULTS.md and pretrain/DOMAINS.md: `ft 100` is 100 fine-tuning "
        "samples without heuristic starts, `ft 300 +h` is `gplace place --finetune 300`. "
        "**Every step time is simulated**, with roofline costs for every device (these graphs "
        "have no measured profile): estimates, not measurements on hardware.", 96)
    text = f"""# Architectures outside the corpus

{intro}

Rebuilt by `nice .venv/bin/python -m finetune.outside --seeds 0 1 2` (records in
finetune/outside.jsonl; delete a line to rerun its case), code at commit {commits}.

{summary_table(records)}

## Per case

{case_table(records)}
"""
    atomic_write_text(PAGE, text)


def case_of(record: dict) -> tuple[str, str, int]:
    """A record's case: (graph, cluster, seed)."""
    return record["graph"], record["cluster"], record["seed"]


def run_other(policy: Path, seeds: list[int], log) -> list[dict]:
    """The records of ``seeds`` with the shipped policy's columns placed by ``policy`` instead
    (each case once, kept in runs/outside/policy-<digest>.jsonl to resume; those placed with
    other fine-tuning settings again)."""
    import torch
    from datasets.outside import OUTSIDE
    from finetune.costs import current
    from finetune.study import FINETUNE_TAG
    from gplace.io import atomic_write_text
    from pretrain.domains import policy_digest
    torch.set_num_threads(1)
    mine = RUNS / f"policy-{policy_digest(policy)}.jsonl"
    done = ([json.loads(line) for line in mine.read_text().splitlines() if line.strip()]
            if mine.exists() else [])
    done = [r for r in done if r.get("finetune") == FINETUNE_TAG]
    have = {case_of(r) for r in done}
    specs = {s.name: s for s in OUTSIDE}
    for old in current(load_records()):
        if case_of(old) in have or old["graph"] not in specs or old["seed"] not in seeds:
            continue
        t0 = time.perf_counter()
        path = graph_file(specs[old["graph"]], log)
        done.append({**old, **evaluate(specs[old["graph"]], path, old["cluster"], old["seed"],
                                       "shipped", policy=policy)})
        atomic_write_text(mine, "".join(json.dumps(r) + "\n" for r in done))
        r = done[-1]
        print(f"outside: {policy}: {case_of(r)}: zero-shot / best heuristic "
              f"{r['zero-shot'] / r['best heuristic']:.3f}, pretrained / untrained ft 100 "
              f"{r['ft 100'] / r['untrained ft 100']:.3f} ({time.perf_counter() - t0:.0f} s)",
              file=log, flush=True)
    return [r for r in done if r["seed"] in seeds]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0],
                    help="fine-tuning seeds (and the untrained network's), each a case")
    ap.add_argument("--page-only", action="store_true", help="write the page from the records")
    ap.add_argument("--policy", type=Path, default=None,
                    help="place the recorded cases of --seeds with this policy file instead "
                         "of the shipped one and print the summary beside the shipped "
                         "policy's (the page is left as it is)")
    args = ap.parse_args(argv)
    if args.policy is not None:
        other = run_other(args.policy, args.seeds, sys.stderr)
        cases = {case_of(r) for r in other}
        print(f"The shipped policy, seeds {args.seeds}:\n")
        print(summary_table([r for r in load_records() if case_of(r) in cases]))
        print(f"\n{args.policy}, the same cases:\n")
        print(summary_table(other))
        return 0
    if not args.page_only:
        run(args.seeds, sys.stderr)
    write_page(load_records())
    return 0


if __name__ == "__main__":
    sys.exit(main())
