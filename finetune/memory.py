"""Tight memory: `gplace place` when the GPUs cannot hold the model one by one.

    nice .venv/bin/python -m finetune.memory              # runs what is missing, then the page
    .venv/bin/python -m finetune.memory --page-only       # the page from the records alone

Each graph of GRAPHS on post-4gpu with every GPU's memory cut to FRACTIONS of the graph's
simulated peak on one GPU (the CPU keeps its 128 GB), placed by ``gplace.place.place`` with
FINETUNE samples, two arms:

* ``calibrated``: `gplace place` as it is: where the list schedulers' unit memory estimate
  (parameters plus every output, gplace.placers.heuristics_view) refuses units devices, it
  also tries the estimate scaled to the simulated peak (``calibrated``), and halfway where that
  binds too, and steers the search by the one whose zero-shot simulates fastest, the others'
  zero-shots among its starts (gplace.place._memory_estimate);
* ``full estimate``: the same with that step switched off (``estimate_binds`` answers no), as
  `gplace place` placed before it.

Both arms get the same cheap heuristics, seed 0. Records go to finetune/memory.jsonl (one per
case, arm and budget, with the shipped policy file's digest: a new policy runs every case again),
the page to finetune/MEMORY.md. Every step time is simulated (roofline
costs on the GPUs, the graph's measured profile on the CPU where it has one).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "finetune" / "memory.jsonl"
PAGE = ROOT / "finetune" / "MEMORY.md"
GRAPHS = ("small_resnet", "mlp_3x1024_b256", "vgg16_b8_64", "transformer_2l_d256", "nmt_2l",
          "wide_deep_8x100k", "bert_4l_d256", "xception_b8_96", "resnet_gen_14",
          "inception_v3_b8_96")
FRACTIONS = (0.5, 0.3)
FINETUNE = (0, 100)
ARMS = ("full estimate", "calibrated")
# the baselines of the calibrated arm: the same pipeline with the shipped network's
# architecture untrained (seed 0), and hill climbing from the cheap heuristics' placements with
# the same samples (samples > 0 only)
BASELINES = ("untrained", "hill +h")


def graph_path(name: str) -> Path:
    if name == "small_resnet":
        return ROOT / "gplace" / "examples" / "small_resnet.pb"
    return ROOT / "datasets" / "corpus" / f"{name}.pb"


def tight_cluster(name: str, fraction: float):
    """post-4gpu with every GPU holding ``fraction`` of the graph's peak on one GPU."""
    import gplace
    from gplace.cluster import load_cluster
    from gplace.cost import cost_model_for
    from gplace.problem import PlacementProblem
    from gplace.sim import FastSimulator
    base = load_cluster("post-4gpu")
    problem = PlacementProblem.build(gplace.load_graph(graph_path(name)), base,
                                     cost_model_for(graph_path(name)))
    gpu = base.device_index("gpu0")
    peak = FastSimulator(problem).run(np.full(problem.num_units, gpu)).peak_bytes[gpu]
    cap = int(fraction * peak)
    return replace(base, name=f"post-4gpu-{fraction:g}peak", devices=tuple(
        d if d.name == "cpu" else replace(d, memory_bytes=cap) for d in base.devices)), cap


def run_case(name: str, fraction: float, finetune: int, arm: str) -> dict:
    import gplace.place as place_module
    from gplace.errors import GplaceError
    cluster, cap = tight_cluster(name, fraction)
    binds = place_module.estimate_binds
    if arm == "full estimate":
        place_module.estimate_binds = lambda problem: False
    start = time.perf_counter()
    try:
        if arm == "hill +h":
            return {"graph": name, "fraction": fraction, "gpu_bytes": cap, "finetune": finetune,
                    "arm": arm, "step_time_s": _hill(name, cluster, finetune),
                    "wall_s": round(time.perf_counter() - start, 1), "commit": _commit(),
                    "policy": _policy()}
        r = place_module.place(str(graph_path(name)), cluster=cluster, finetune=finetune,
                               progress=False, log=io.StringIO(),
                               checkpoint=_untrained() if arm == "untrained" else None)
        result = {"step_time_s": r.step_time_s, "chosen": r.summary.chosen,
                  "zero_shot_s": r.summary.zero_shot_step_time_s,
                  "best_heuristic_s": r.summary.best_heuristic.step_time_s}
    except GplaceError as e:
        result = {"step_time_s": None, "error": str(e)[:200]}
    finally:
        place_module.estimate_binds = binds
    return {"graph": name, "fraction": fraction, "gpu_bytes": cap, "finetune": finetune,
            "arm": arm, **result, "wall_s": round(time.perf_counter() - start, 1),
            "commit": _commit(), "policy": _policy()}


def _untrained():
    """The ablation: the shipped network's architecture, freshly initialized (seed 0), as
    finetune.study builds it."""
    from finetune.study import fresh_network
    from gplace.gnn.placer import GNNPlacer
    from gplace.gnn.policy import GNNPolicy
    shipped = GNNPolicy.load(ROOT / "gplace" / "checkpoints" / "policy.pt")[0]
    return GNNPlacer(seed=0, policy=fresh_network(shipped, 0))


def _hill(name: str, cluster, samples: int) -> float | None:
    """Hill climbing from the cheap heuristics' placements, ``samples`` samples, on the
    problem `gplace place` builds."""
    from gplace.cost import cost_model_for
    from gplace.opgraph_cache import load_graph
    from gplace.placers import SimMeasurer, get_placer
    from gplace.placers.base import cheap_heuristics
    from gplace.problem import PlacementProblem
    problem = PlacementProblem.build(load_graph(graph_path(name)), cluster,
                                     cost_model_for(graph_path(name)))
    m = SimMeasurer(problem)
    seeds = [get_placer(h).place(problem, m, 0).placement for h in cheap_heuristics()]
    r = get_placer("hill", seed=0).place(problem, m, samples, seeds=seeds)
    return r.step_time_s if r.feasible else None


def _policy() -> str:
    """The shipped policy file's SHA-256, its start: a new one makes every case run again."""
    from pretrain.domains import policy_digest
    return policy_digest(ROOT / "gplace" / "checkpoints" / "policy.pt")


def _commit() -> str:
    import subprocess
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                         capture_output=True)
    return out.stdout.strip() or "unknown"


def load_records() -> list[dict]:
    if not RECORDS.exists():
        return []
    return [json.loads(line) for line in RECORDS.read_text().splitlines() if line.strip()]


def key(r: dict) -> tuple:
    return r["graph"], r["fraction"], r["finetune"], r["arm"]


def run(log) -> None:
    done = {key(r) for r in load_records() if r.get("policy") == _policy()}
    for fraction in FRACTIONS:
        for finetune in FINETUNE:
            for name in GRAPHS:
                for arm in ARMS + BASELINES:
                    if arm == "hill +h" and not finetune or (name, fraction, finetune,
                                                             arm) in done:
                        continue
                    record = run_case(name, fraction, finetune, arm)
                    with RECORDS.open("a") as f:
                        f.write(json.dumps(record) + "\n")
                    print(f"memory: {name} {fraction:g} ft {finetune} {arm}: "
                          f"{_ms(record['step_time_s'])} ({record['wall_s']} s)", file=log,
                          flush=True)


def _ms(t) -> str:
    return "none fits" if t is None else f"{t * 1e3:.2f} ms"


def page(records: list[dict]) -> str:
    by = {key(r): r for r in records}
    lines = [
        "# Tight memory",
        "",
        "`gplace place` on post-4gpu with every GPU's memory cut to a fraction of the graph's",
        "simulated peak on one GPU (the CPU keeps its 128 GB): the search as it is",
        "(**calibrated**: where the list schedulers' unit memory estimate, parameters plus every",
        "output all the time, refuses units devices, it also tries that estimate scaled to the",
        "simulated peak, and halfway where that binds too, steers the search by the one whose",
        "zero-shot simulates fastest and keeps the others' zero-shots as starts) against the",
        "same with that step off (**full estimate**, `gplace place` before it). Seed 0. **Every step",
        "time is simulated** (estimates). Rebuilt by `nice .venv/bin/python -m finetune.memory`",
        f"(records in finetune/memory.jsonl, code at commit {_commits(records)}).",
        "",
        "| GPU memory / peak | samples | cases | calibrated / full estimate (geomean) | faster | "
        "slower | none fits (full, calibrated) |",
        "|---|---|---|---|---|---|---|",
    ]
    for fraction in FRACTIONS:
        for finetune in FINETUNE:
            pairs = [(by.get((g, fraction, finetune, ARMS[0])),
                      by.get((g, fraction, finetune, ARMS[1]))) for g in GRAPHS]
            pairs = [(a, b) for a, b in pairs if a and b]
            both = [(a["step_time_s"], b["step_time_s"]) for a, b in pairs
                    if a["step_time_s"] and b["step_time_s"]]
            ratio = np.exp(np.mean([np.log(b / a) for a, b in both])) if both else float("nan")
            lines.append(
                f"| {fraction:g} | {finetune} | {len(pairs)} | {ratio:.3f} | "
                f"{sum(b < a * (1 - 1e-9) for a, b in both)} | "
                f"{sum(b > a * (1 + 1e-9) for a, b in both)} | "
                f"{sum(a['step_time_s'] is None for a, _ in pairs)}, "
                f"{sum(b['step_time_s'] is None for _, b in pairs)} |")
    lines += ["", "Against the strongest alternatives (calibrated / each, geomean over the cases "
              "where both fit; at or below it in parentheses): the best cheap heuristic, hill "
              "climbing from the heuristics' placements with the same samples, and the same "
              "pipeline with the network untrained (the ablation: what pretraining adds here). "
              "Of the graphs, inception, nmt and transformer are test families, held out of "
              "the shipped policy's pretraining; xception and wide_deep are validation "
              "families; the others, bar the example ResNet (no corpus graph), were trained on. "
              "No policy pretrained without a domain "
              "(pretrain/DOMAINS.md) was run here: the untrained column is this page's "
              "measure of what does not depend on the training families.",
              "", "| GPU memory / peak | samples | / best heuristic | / hill +h | / untrained |",
              "|---|---|---|---|---|"]
    for fraction in FRACTIONS:
        for finetune in FINETUNE:
            cells = []
            for other in ("best heuristic", "hill +h", "untrained"):
                pairs = []
                for g in GRAPHS:
                    mine = by.get((g, fraction, finetune, "calibrated"))
                    if other == "best heuristic":
                        theirs = mine and mine.get("best_heuristic_s")
                    else:
                        rec = by.get((g, fraction, finetune, other))
                        theirs = rec and rec["step_time_s"]
                    if mine and mine["step_time_s"] and theirs:
                        pairs.append(mine["step_time_s"] / theirs)
                cells.append(f"{np.exp(np.mean(np.log(pairs))):.3f} ({sum(r <= 1 + 1e-9 for r in pairs)} of {len(pairs)})"
                             if pairs else "-")
            lines.append(f"| {fraction:g} | {finetune} | " + " | ".join(cells) + " |")
    lines += ["", "## Per case", "",
              "| graph | GPU memory / peak | GPU MB | samples | best heuristic ms | "
              "full estimate ms (chosen) | calibrated ms (chosen) | ratio | "
              "wall s (full, calibrated) |",
              "|---|---|---|---|---|---|---|---|---|"]
    for fraction in FRACTIONS:
        for finetune in FINETUNE:
            for g in GRAPHS:
                a, b = by.get((g, fraction, finetune, ARMS[0])), by.get(
                    (g, fraction, finetune, ARMS[1]))
                if not (a and b):
                    continue
                ratio = (f"{b['step_time_s'] / a['step_time_s']:.3f}"
                         if a["step_time_s"] and b["step_time_s"] else "-")
                lines.append(
                    f"| {g} | {fraction:g} | {a['gpu_bytes'] / 1e6:.1f} | {finetune} | "
                    f"{_ms(a.get('best_heuristic_s'))} | "
                    f"{_ms(a['step_time_s'])} ({a.get('chosen', '-')}) | "
                    f"{_ms(b['step_time_s'])} ({b.get('chosen', '-')}) | {ratio} | "
                    f"{a['wall_s']}, {b['wall_s']} |")
    return "\n".join(lines) + "\n"


def _commits(records: list[dict]) -> str:
    return ", ".join(sorted({r["commit"] for r in records})) or "-"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--page-only", action="store_true")
    args = parser.parse_args(argv)
    if not args.page_only:
        run(sys.stderr)
    from gplace.io import atomic_write_text
    atomic_write_text(PAGE, page(load_records()))
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
