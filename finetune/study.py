"""Does pretraining pay? The generalization study of finetune/RESULTS.md.

    .venv/bin/python -m finetune.study --out finetune                     # test split
    .venv/bin/python -m finetune.study --split validation --out finetune

Every case is one (graph, cluster) problem at full granularity (colocation groups), built as
`gplace place` builds it: the graph's measured CPU profile where the device kind matches,
roofline estimates elsewhere, the same simulator for every figure (all step times are
estimates). Clusters: post-4gpu and hetero (seen in pretraining), hdp-8gpu (unseen: 9 devices,
the K40 kind). Per case and seed (3 seeds), at equal sample budgets:

* ``best heuristic``: the best of the cheap heuristics at full granularity (no samples);
* ``zero-shot``: the placement `gplace place` starts from, no samples
  (gplace.gnn.infer.best_rollout: the policy's rollouts in both of the list scheduler's orders
  and the untrained network's in the dispatch order, ranked by the dispatch-order schedule's
  makespan estimate, then gplace.gnn.infer.polish on that estimate; nothing measured); ``greedy``: the policy's greedy rollout in its own order
  alone; ``best of 16``: the best of 16 measured policy samples, reported apart;
* ``ft N +h``: fine-tuning as `gplace place` runs it (heuristic placements in the starting elite
  set), best within the first N samples; ``untrained ft N +h``: the same with the same network
  freshly initialized (the ablation);
* ``ft 100``, ``untrained ft 100``: the same without heuristic starts;
* ``hill 2400 +h``, ``anneal 2400 +h``: hill climbing and annealing started from the best
  heuristic's placement with 2400 samples;
* ``lower bound``: the simulator's bound (critical path, total work / devices).

The rows that do not depend on the checkpoint (local search, the untrained network) are cached
in ``<out>/cache/``: delete it after a change to the placers or the network's code.
``--mode zero-shot`` runs the no-sample rows only; ``--mode baselines`` fills the cache;
``--from-csv`` makes the tables from earlier runs' CSVs (e.g. shards run in parallel).
Writes tables_<split>.md, results_<split>.csv and ratios_<split>.png; finetune/run.sh
assembles RESULTS.md from RESULTS.head.md and the tables.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
import time
from pathlib import Path

import numpy as np

CLUSTERS = {"post-4gpu": "seen", "hetero": "seen", "hdp-8gpu": "unseen"}
BASELINE_BUDGET = 2400


def _finetune_tag() -> str:
    """Names the fine-tuning settings and the cost model's rules in the cache (the untrained
    rows depend on them): a hash of their canonical description (gplace.gnn.cache.canonical:
    floats to 6 digits)."""
    import hashlib
    from gplace.cost import COST_MODEL_VERSION
    from gplace.gnn.cache import canonical
    from gplace.gnn.config import FinetuneConfig
    settings = {"finetune": canonical(FinetuneConfig()), "costs": COST_MODEL_VERSION}
    text = json.dumps(settings, sort_keys=True)
    return hashlib.sha1(text.encode()).hexdigest()[:8]


FINETUNE_TAG = _finetune_tag()


def build_case(entry, cluster_name):
    from gplace.cluster import load_cluster
    from gplace.cost import CostModel
    from gplace.gnn.corpus import load_corpus_graph
    from gplace.problem import PlacementProblem
    from gplace.profile import CostProfile
    model = CostModel()
    if entry.profile is not None:
        model.add_profile(CostProfile.load(entry.profile))
    return problem_case(PlacementProblem.build(load_corpus_graph(entry), load_cluster(cluster_name),
                                               model))


def problem_case(problem):
    """(problem, its simulated measurer, the cheap heuristics' results, the lower bound)."""
    from gplace.placers import SimMeasurer, get_placer
    from gplace.placers.base import cheap_heuristics
    from gplace.sim import lower_bound
    m = SimMeasurer(problem)
    heur = {h: get_placer(h).place(problem, m, 0) for h in cheap_heuristics()}
    return problem, m, heur, lower_bound(problem).bound_s


def read_results(path: Path) -> list[dict]:
    """The records of a results_*.csv: numbers as floats, names as strings."""
    keep = ("graph", "family", "cluster", "best_heuristic")
    with Path(path).open() as f:
        return [{k: (v if k in keep else float(v)) for k, v in row.items() if v != ""}
                for row in csv.DictReader(f)]


def cached(cache: Path, key: str, compute) -> dict[str, float]:
    """``compute()``'s rows, stored under ``key`` in the case's cache file."""
    done = json.loads(cache.read_text()) if cache.exists() else {}
    if key not in done:
        from gplace.io import atomic_write_text
        done[key] = compute()
        atomic_write_text(cache, json.dumps(done, indent=1))
    return done[key]


def baselines(problem, m, heur, seed: int) -> dict[str, float]:
    """Hill climbing and annealing from the best heuristic, 2400 samples."""
    from gplace.placers import get_placer
    seeds = [r.placement for r in heur.values() if r.feasible]
    return {f"{name} 2400 +h": get_placer(name, seed=seed).place(
        problem, m, BASELINE_BUDGET, seeds=seeds).step_time_s for name in ("hill", "anneal")}


def with_heuristics(problem, m, heur, net, seed: int, tag: str = "") -> dict[str, float]:
    """``ft 100 +h`` and ``ft 300 +h``: one 300-sample fine-tuning run started from the
    heuristics' placements, its best after 100 and after 300 samples."""
    from gplace.gnn.placer import GNNPlacer
    r = GNNPlacer(seed=seed, policy=net).place(problem, m, 300,
                                               seeds=[h.placement for h in heur.values()])
    curve = np.minimum(r.history.best_so_far(), r.info["start_step_time_s"])
    return {f"{tag}ft 100 +h": float(curve[99]), f"{tag}ft 300 +h": float(curve[-1])}


def without_heuristics(problem, m, net, seed: int, tag: str = "",
                       config=None) -> dict[str, float]:
    """``zero-shot`` and ``ft 100``: one 100-sample fine-tuning run without heuristic starts
    (``config``: its FinetuneConfig, default the default one), its zero-shot placement and the
    better of that and its samples."""
    from gplace.gnn.placer import GNNPlacer
    r = GNNPlacer(seed=seed, policy=net, config=config).place(problem, m, 100)
    zero = r.info["zero_shot_step_time_s"]
    return {f"{tag}zero-shot": zero, f"{tag}ft 100": float(min(zero, r.step_time_s))}


def gnn_runs(problem, m, heur, net, seed: int, tag: str = "") -> dict[str, float]:
    """One network's fine-tuning rows for one seed (``tag`` "untrained ": a fresh one)."""
    return {**with_heuristics(problem, m, heur, net, seed, tag),
            **without_heuristics(problem, m, net, seed, tag)}


def untrained_key(policy, seed: int) -> str:
    """The cache key of the untrained rows: the seed, the fine-tuning settings and, where it
    is not the default one, the network's architecture (a fresh network of that shape)."""
    from gplace.gnn.policy import GNNPolicy
    shape = "" if policy.kwargs == GNNPolicy().kwargs else "-" + "-".join(
        f"{k}{v}" for k, v in sorted(policy.kwargs.items()))
    return f"untrained-{seed}-{FINETUNE_TAG}{shape}"


def fresh_network(policy, seed: int):
    """The ablation's network: the pretrained one's architecture, freshly initialized."""
    import torch
    from gplace.gnn.policy import GNNPolicy
    torch.manual_seed(seed)
    return GNNPolicy(**policy.kwargs)


def best_of_16(problem, m, policy, seed: int) -> float:
    from gplace.gnn.learn import ProblemState, sample
    b = sample(policy, ProblemState(problem, m, dispatch=policy.dispatch), 16, seed)
    return float(np.min(np.where(b.feasible, b.step_time_s, np.inf)))


COLUMNS = ("zero-shot", "greedy", "best of 16", "ft 100 +h", "ft 300 +h", "hill 2400 +h",
           "anneal 2400 +h", "untrained ft 100 +h", "untrained ft 300 +h", "ft 100",
           "untrained ft 100", "untrained zero-shot", "untrained greedy", "lower bound")


def zero_shot_runs(problem, m, policy, seed: int) -> dict[str, float]:
    """Zero-shot rows only: the pretrained and the freshly initialized network, no samples
    (zero-shot as `gplace place` makes it, and the greedy rollout alone), and the best of 16
    measured policy samples."""
    from gplace.gnn.learn import ProblemState, greedy
    from gplace.gnn.placer import GNNPlacer
    state = ProblemState(problem, m, dispatch=policy.dispatch)
    rows = {}
    for tag, net in (("", policy), ("untrained ", fresh_network(policy, seed))):
        zero = GNNPlacer(seed, policy=net).zero_shot(problem, state)
        for col, placement in ((f"{tag}zero-shot", zero),
                               (f"{tag}greedy", greedy(net, state))):
            r = m.measure(placement[None])
            rows[col] = float(r.step_time_s[0]) if r.feasible[0] else np.inf
    rows["best of 16"] = best_of_16(problem, m, policy, seed)
    return rows


def run(entries, seeds: int, checkpoint, out: Path, mode: str, log) -> list[dict]:
    from gplace.gnn.placer import load_policy
    policy = load_policy(checkpoint)[0]
    records = []
    for entry in entries:
        for cluster in CLUSTERS:
            t0 = time.perf_counter()
            problem, m, heur, bound = build_case(entry, cluster)
            feasible = {h: r.step_time_s for h, r in heur.items() if r.feasible}
            best_h = min(feasible, key=feasible.get)
            cache = out / "cache" / f"{entry.name}@{cluster}.json"
            if mode != "zero-shot":
                cache.parent.mkdir(parents=True, exist_ok=True)
            for seed in range(seeds):
                rec = {"graph": entry.name, "family": entry.family, "cluster": cluster,
                       "seed": seed, "units": problem.num_units, "best_heuristic": best_h,
                       "best heuristic": feasible[best_h], "lower bound": bound}
                if mode == "zero-shot":
                    rec.update(zero_shot_runs(problem, m, policy, seed))
                    records.append(rec)
                    break
                # rows that do not depend on the checkpoint are cached
                rec.update(cached(cache, str(seed), lambda: baselines(problem, m, heur, seed)))
                rec.update(cached(cache, untrained_key(policy, seed), lambda: gnn_runs(
                    problem, m, heur, fresh_network(policy, seed), seed, "untrained ")))
                if mode == "all":
                    rec.update(gnn_runs(problem, m, heur, policy, seed))
                    rec["best of 16"] = best_of_16(problem, m, policy, seed)
                records.append(rec)
            print(f"study: {entry.name} on {cluster}: best heuristic {best_h} "
                  f"{feasible[best_h] * 1e3:.2f} ms; " + ", ".join(
                      f"{k} {rec[k] / feasible[best_h]:.3f}" for k in COLUMNS if k in rec)
                  + f" (seed {rec['seed']}; {time.perf_counter() - t0:.0f} s)", file=log, flush=True)
    return records


def summarize(records: list[dict]) -> dict[str, dict]:
    """Per column: geometric mean of (value / best heuristic) over cases (seeds averaged in
    log space first), cases at or below 1, and the spread over seeds."""
    out = {}
    cases = sorted({(r["graph"], r["cluster"]) for r in records})
    for col in COLUMNS:
        per_case = []
        for g, c in cases:
            rs = [r[col] / r["best heuristic"] for r in records
                  if (r["graph"], r["cluster"]) == (g, c) and col in r]
            if rs:
                per_case.append(np.exp(np.mean(np.log(rs))))
        if per_case:
            x = np.array(per_case)
            out[col] = {"geomean": float(np.exp(np.log(x).mean())), "min": float(x.min()),
                        "max": float(x.max()), "at_or_below_1": int((x <= 1 + 1e-9).sum()),
                        "cases": len(x)}
    return out


def ablation(records: list[dict]) -> dict[str, dict]:
    """Pretrained / untrained at the same budget, per case (seeds in log space)."""
    out = {}
    cases = sorted({(r["graph"], r["cluster"]) for r in records})
    for a, b in (("ft 100 +h", "untrained ft 100 +h"), ("ft 300 +h", "untrained ft 300 +h"),
                 ("ft 100", "untrained ft 100"), ("zero-shot", "untrained zero-shot"),
                 ("greedy", "untrained greedy")):
        x = []
        for g, c in cases:
            rs = [r[a] / r[b] for r in records if (r["graph"], r["cluster"]) == (g, c) and a in r]
            if rs:
                x.append(np.exp(np.mean(np.log(rs))))
        if x:
            x = np.array(x)
            out[f"{a} / {b}"] = {"geomean": float(np.exp(np.log(x).mean())),
                                 "better": int((x < 1 - 1e-9).sum()),
                                 "not_worse": int((x <= 1 + 1e-9).sum()), "cases": len(x)}
    return out


def case_table(records: list[dict]) -> str:
    """Per case: every column over the best heuristic, mean over seeds (min-max)."""
    cols = [c for c in COLUMNS if any(c in r for r in records)]
    lines = ["| graph | cluster | best heuristic (ms) | " + " | ".join(cols) + " |",
             "|---" * (len(cols) + 3) + "|"]
    for g, c in sorted({(r["graph"], r["cluster"]) for r in records}):
        rs = [r for r in records if (r["graph"], r["cluster"]) == (g, c)]
        cells = []
        for col in cols:
            x = np.array([r[col] / r["best heuristic"] for r in rs if col in r])
            cells.append(f"{x.mean():.3f}" + (f" ({x.min():.3f}-{x.max():.3f})"
                                               if x.max() - x.min() > 5e-4 else ""))
        lines.append(f"| {g} | {c} | {rs[0]['best_heuristic']} {rs[0]['best heuristic'] * 1e3:.2f} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary_table(records: list[dict]) -> str:
    s, a = summarize(records), ablation(records)
    lines = ["| figure / best heuristic | geomean | range over cases | cases at or below 1 |",
             "|---|---|---|---|"]
    lines += [f"| {k} | {v['geomean']:.3f} | {v['min']:.3f}-{v['max']:.3f} | "
              f"{v['at_or_below_1']} of {v['cases']} |" for k, v in s.items()]
    lines += ["", "| ablation (pretrained / untrained) | geomean | pretrained better | not worse |",
              "|---|---|---|---|"]
    lines += [f"| {k} | {v['geomean']:.3f} | {v['better']} of {v['cases']} | "
              f"{v['not_worse']} of {v['cases']} |" for k, v in a.items()]
    return "\n".join(lines)


def search_ratios(records: list[dict]) -> list[float]:
    """Per case, ``ft 300 +h`` over the better of hill climbing and annealing from the best
    heuristic at 2400 (each the mean over seeds)."""
    ratios = []
    for g, c in sorted({(r["graph"], r["cluster"]) for r in records}):
        rs = [r for r in records if (r["graph"], r["cluster"]) == (g, c) and "ft 300 +h" in r]
        if rs:
            ratios.append(np.mean([r["ft 300 +h"] for r in rs]) / np.mean(
                [min(r["hill 2400 +h"], r["anneal 2400 +h"]) for r in rs]))
    return ratios


def head_to_head(records: list[dict]) -> str:
    """ft 300 +h against the best of hill and annealing from the best heuristic at 2400."""
    ratios = search_ratios(records)
    wins = sum(x <= 1 + 1e-9 for x in ratios)
    if not ratios:
        return ""
    return (f"`ft 300 +h` at or below the best of hill climbing and annealing from the best "
            f"heuristic with 2400 samples (mean over seeds) on **{wins} of {len(ratios)}** "
            f"cases; geomean ratio {np.exp(np.mean(np.log(ratios))):.3f}.")


HEADROOM = Path(__file__).resolve().parents[1] / "pretrain" / "headroom.jsonl"
SEARCHED = ("zero-shot", "best of 16", "ft 100", "ft 100 +h", "ft 300 +h", "hill 2400 +h",
            "anneal 2400 +h", "untrained zero-shot", "untrained ft 100", "untrained ft 100 +h",
            "untrained ft 300 +h")


def floor_line(records: list[dict], headroom: Path = HEADROOM) -> str:
    """The floor of the ablation at 100 samples: the best placement known for a case (every
    method of SEARCHED in ``records`` and the longer searches of pretrain/headroom.jsonl) over
    the untrained network's ``ft 100``, geometric mean over cases (seeds in log space): what a
    pretrained policy would score if its 100 samples found the best placement known. Only the
    longer searches of today's cost model count (finetune.costs)."""
    from finetune.costs import current
    longer = {}
    if headroom.exists():
        rows = [json.loads(line) for line in headroom.read_text().splitlines() if line.strip()]
        for r in current(rows):
            longer[(r["graph"], r["cluster"])] = r["ft 1200 +h"]
    x, used_longer = [], False
    for g, c in sorted({(r["graph"], r["cluster"]) for r in records}):
        rs = [r for r in records
              if (r["graph"], r["cluster"]) == (g, c) and "untrained ft 100" in r]
        if not rs:
            continue
        used_longer = used_longer or (g, c) in longer
        best = min([r[k] for r in rs for k in SEARCHED if k in r] + [longer.get((g, c), np.inf)])
        x.append(np.exp(np.mean(np.log([best / r["untrained ft 100"] for r in rs]))))
    if not x:
        return ""
    searches = " and pretrain/headroom.jsonl's 1,200-sample searches" if used_longer else ""
    return (f"The floor of the ablation at 100 samples (best placement known for the case, from "
            f"every run here{searches}, / untrained `ft 100`): geomean "
            f"**{np.exp(np.mean(np.log(x))):.3f}** over {len(x)} cases.")


def plot(records: list[dict], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    cols = [c for c in ("zero-shot", "ft 100 +h", "ft 300 +h", "hill 2400 +h",
                        "anneal 2400 +h", "untrained ft 300 +h", "lower bound")
            if any(c in r for r in records)]
    cases = sorted({(r["graph"], r["cluster"]) for r in records})
    fig, ax = plt.subplots(figsize=(max(8, 0.55 * len(cases)), 4.5))
    width = 0.8 / len(cols)
    for j, col in enumerate(cols):
        y = [np.mean([r[col] / r["best heuristic"] for r in records
                      if (r["graph"], r["cluster"]) == case and col in r]) for case in cases]
        ax.bar(np.arange(len(cases)) + j * width, y, width, label=col)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_ylim(0, 1.3)
    ax.set_xticks(np.arange(len(cases)) + 0.4, [f"{g}\n{c}" for g, c in cases], rotation=90,
                  fontsize=6)
    ax.set_ylabel("step time / best heuristic (estimated)")
    ax.legend(fontsize=7, ncol=4, loc="upper center")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", default=None, help="policy (default: the shipped one)")
    ap.add_argument("--corpus", default="datasets")
    ap.add_argument("--split", default="test", choices=["test", "validation"])
    ap.add_argument("--graphs", nargs="*", help="only these corpus graphs")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--out", default="finetune")
    ap.add_argument("--from-csv", nargs="*", type=Path,
                    help="make the tables from these results_*.csv files (runs nothing)")
    ap.add_argument("--mode", default="all", choices=["all", "zero-shot", "baselines"],
                    help="all rows; zero-shot rows only (no samples, one seed); or only run "
                         "and cache the hill/anneal baselines")
    args = ap.parse_args(argv)
    import torch
    torch.set_num_threads(1)
    from gplace.gnn.corpus import list_corpus
    entries = [e for e in list_corpus(args.corpus) if e.split == args.split
               and (not args.graphs or e.name in args.graphs)]
    out = Path(args.out)
    start = time.perf_counter()
    if args.from_csv:
        records = [r for path in args.from_csv for r in read_results(path)]
    else:
        records = run(entries, args.seeds, args.checkpoint, out, args.mode, sys.stderr)
    if args.mode == "baselines":
        return 0
    tag = args.split + ("-zero-shot" if args.mode == "zero-shot" else "")
    from gplace.io import atomic_write_text
    buf = io.StringIO()
    keys = sorted({k for r in records for k in r}, key=lambda k: (k not in ("graph", "cluster", "seed"), k))
    w = csv.DictWriter(buf, keys)
    w.writeheader()
    w.writerows(records)
    atomic_write_text(out / f"results_{tag}.csv", buf.getvalue())
    plot(records, out / f"ratios_{tag}.png")
    floor = floor_line(records)
    atomic_write_text(out / f"tables_{tag}.md", "\n\n".join([
        summary_table(records), head_to_head(records), *([floor] if floor else []),
        case_table(records),
        f"({len(records)} runs, {time.perf_counter() - start:.0f} s)"]) + "\n")
    print(summary_table(records))
    print(head_to_head(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
