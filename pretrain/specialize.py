"""Specializing the shipped policy on a user's own graphs: ``gplace pretrain --init``.

    nice .venv/bin/python -m pretrain.specialize           # runs what is missing, then the page
    .venv/bin/python -m pretrain.specialize --page-only

The shipped policy never saw the nmt family (LSTM encoder-decoders with attention; a test
family). A user's folder of nmt graphs (MINE: variants built here with the corpus' nmt builder,
as plain .pb files with no manifest, each profiled here by ``gplace profile``) specializes it:

    gplace profile runs/specialize/mine/<name>.pb        # for each graph: its profile beside it
    gplace pretrain --corpus runs/specialize/mine --init gplace/checkpoints/policy.pt
        --random-clusters 0 --rounds 1 --max-steps STEPS --out runs/specialize/policy.pt

(expert searches from the shipped policy on every graph x preset cluster, then imitation of
them starting from the shipped weights). Then, on the corpus' own nmt graphs, which the
specialization did not see, on CLUSTERS, for SEEDS: the best heuristic, and zero-shot and ft 100
(100 fine-tuning samples, no heuristic starts) of the shipped and of the specialized policy.
Records go to pretrain/specialize.jsonl, the page to pretrain/SPECIALIZE.md. Every step time is
simulated. The records and the specialized policy name the shipped policy file they start from
(``shipped_policy``, the start of its SHA-256); when it changes, a run specializes it again and
replaces them. Records made with other fine-tuning settings (``finetune``:
finetune.study.FINETUNE_TAG) are replaced too (the specialized policy is kept: its expert
searches have a rule of their own, gplace.gnn.experts.EXPERT_RULE).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
ROOT = HERE.parent
RUN = ROOT / "runs" / "specialize"
RECORDS = HERE / "specialize.jsonl"
PAGE = HERE / "SPECIALIZE.md"
PROFILE_MINUTES = RUN / "profile_minutes.txt"  # gplace profile's minutes over MINE
# The user's graphs: nmt variants unlike the corpus' nmt_2l / nmt_4l / nmt_8l in depth and width.
MINE = {"nmt_1l_h384": dict(layers=1, hidden=384), "nmt_3l_h192": dict(layers=3, hidden=192),
        "nmt_3l_h320": dict(layers=3, hidden=320), "nmt_6l_h256": dict(layers=6, hidden=256)}
HELD_OUT = ("nmt_2l", "nmt_4l", "nmt_8l")
CLUSTERS = ("post-4gpu", "hetero", "hdp-8gpu")
SEEDS = (0, 1)
STEPS = 400


def build_mine(log) -> Path:
    """runs/specialize/mine/<name>.pb for every graph of MINE and its profile beside it, by
    ``gplace profile`` as a user would (kept once built): measured CPU times, and the run counts
    that make the simulator charge the nmt loops per iteration."""
    from datasets.registry import GraphSpec
    folder = RUN / "mine"
    folder.mkdir(parents=True, exist_ok=True)
    for name, kw in MINE.items():
        path = folder / f"{name}.pb"
        if not path.exists():
            spec = GraphSpec(name, "nmt", "sequence:attention_nmt",
                             dict(vocab=8000, batch=32, src_len=20, tgt_len=20, **kw))
            path.write_bytes(spec.build().SerializeToString())
            print(f"specialize: built {path}", file=log, flush=True)
        if not path.with_name(f"{name}.profile.json.gz").exists():
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "gplace", "profile", str(path)], check=True,
                           stdout=log, stderr=log)
            spent = float(PROFILE_MINUTES.read_text()) if PROFILE_MINUTES.exists() else 0.0
            PROFILE_MINUTES.write_text(f"{spent + (time.perf_counter() - t0) / 60:.2f}\n")
    return folder


def specialize(steps: int, log) -> tuple[Path, float]:
    """The specialized policy and the minutes its pretraining took (resumed if stopped), from
    the shipped policy of today: a run from another one (its digest in ``init_policy.txt``) is
    removed first, with the experts it searched."""
    import shutil
    from gplace.gnn.placer import SHIPPED
    from pretrain.domains import policy_digest
    out = RUN / "policy.pt"
    minutes_file = RUN / "minutes.txt"
    stamp = RUN / "init_policy.txt"
    digest = policy_digest(SHIPPED)
    made_from = stamp.read_text().strip() if stamp.exists() else None
    if out.exists() and made_from != digest:
        print(f"specialize: {out} started from another shipped policy; specializing again",
              file=log, flush=True)
        for path in (out, out.with_suffix(".md"), minutes_file):
            path.unlink(missing_ok=True)
        shutil.rmtree(RUN / "runs", ignore_errors=True)
        shutil.rmtree(RUN / "mine" / ".gplace-cache" / "experts", ignore_errors=True)
    RUN.mkdir(parents=True, exist_ok=True)
    stamp.write_text(digest + "\n")
    if out.exists() and minutes_file.exists():
        return out, float(minutes_file.read_text())
    mine = build_mine(log)
    cmd = [sys.executable, "-m", "gplace", "pretrain", "--corpus", str(mine), "--init",
           str(ROOT / "gplace" / "checkpoints" / "policy.pt"), "--random-clusters", "0",
           "--rounds", "1", "--max-steps", str(steps), "--out", str(out), "--no-progress"]
    print(f"specialize: {' '.join(cmd[1:])}", file=log, flush=True)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=log, stderr=log)
    minutes = (time.perf_counter() - t0) / 60
    minutes_file.write_text(f"{minutes:.1f}\n")
    return out, minutes


def run(steps: int, log) -> None:
    import torch
    from finetune.study import FINETUNE_TAG, build_case
    from gplace.gnn.corpus import list_corpus
    from gplace.gnn.placer import GNNPlacer, load_policy
    from gplace.gnn.placer import SHIPPED
    from pretrain.domains import policy_digest
    torch.set_num_threads(1)
    digest = policy_digest(SHIPPED)
    done = current_keys(RECORDS, digest)
    todo = [(g, c, s) for g in HELD_OUT for c in CLUSTERS for s in SEEDS
            if f"{g} {c} {s}" not in done]
    if not todo:
        return
    path, minutes = specialize(steps, log)
    run_dir = RUN / "runs" / "policy"
    vals = {"start_val": json.loads((run_dir / "start.json").read_text())["val"],
            "round_val": json.loads((run_dir / "round1" / "result.json").read_text())["val"],
            "handed_back": path.read_bytes() == SHIPPED.read_bytes()}
    nets = {"shipped": load_policy()[0], "specialized": load_policy(path)[0]}
    entries = {e.name: e for e in list_corpus(ROOT / "datasets")}
    for graph, cluster, seed in todo:
        t0 = time.perf_counter()
        problem, m, heur, bound = build_case(entries[graph], cluster)
        rec = {"key": f"{graph} {cluster} {seed}", "graph": graph, "cluster": cluster,
               "seed": seed, "units": problem.num_units, "steps": steps, "shipped_policy": digest,
               "finetune": FINETUNE_TAG, **vals,
               "pretrain_minutes": minutes, "mine": len(MINE),
               "profile_minutes": (float(PROFILE_MINUTES.read_text())
                                   if PROFILE_MINUTES.exists() else None),
               "best heuristic": min(r.step_time_s for r in heur.values() if r.feasible)}
        for tag, net in nets.items():
            r = GNNPlacer(seed=seed, policy=net).place(problem, m, 100)
            zero = r.info["zero_shot_step_time_s"]
            rec[f"{tag} zero-shot"], rec[f"{tag} ft 100"] = zero, float(min(zero, r.step_time_s))
        rec["wall_s"] = round(time.perf_counter() - t0, 1)
        append_record(rec)
        print(f"specialize: {rec['key']}: specialized / shipped ft 100 "
              f"{rec['specialized ft 100'] / rec['shipped ft 100']:.3f}, zero-shot "
              f"{rec['specialized zero-shot'] / rec['shipped zero-shot']:.3f}", file=log,
              flush=True)


def current_keys(path: Path, digest: str) -> set[str]:
    """The keys of the records at ``path`` made with the shipped policy of ``digest`` and
    today's fine-tuning settings (finetune.study.FINETUNE_TAG); the others are dropped from
    the file (atomically), to be made again."""
    from finetune.study import FINETUNE_TAG
    from gplace.io import atomic_write_text
    every = load_records(path)
    kept = [r for r in every
            if r.get("shipped_policy") == digest and r.get("finetune") == FINETUNE_TAG]
    if len(kept) < len(every):  # another policy or settings
        atomic_write_text(path, "".join(json.dumps(r) + "\n" for r in kept))
    return {r["key"] for r in kept}


def study_main(doc: str, run, write_page, records: Path, argv=None) -> int:
    """The command line of a specialization study: ``run`` what is missing (--steps of
    imitation), then the page from the records (--page-only: only that)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--steps", type=int, default=STEPS, help="imitation steps")
    ap.add_argument("--page-only", action="store_true", help="write the page from the records")
    args = ap.parse_args(argv)
    if not args.page_only:
        run(args.steps, sys.stderr)
    from pretrain.domains import _commit
    write_page(load_records(records), _commit())
    return 0


def load_records(path: Path = RECORDS) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def append_record(record: dict) -> None:
    with RECORDS.open("a") as f:
        f.write(json.dumps(record) + "\n")


def geomean(x) -> float:
    x = np.asarray(list(x), np.float64)
    return float(np.exp(np.log(x).mean())) if x.size else float("nan")


def write_page(records: list[dict], commit: str) -> None:
    from gplace.io import atomic_write_text
    if not records:
        return
    ratios = (("specialized / shipped, ft 100", "specialized ft 100", "shipped ft 100"),
              ("specialized / shipped, zero-shot", "specialized zero-shot", "shipped zero-shot"),
              ("shipped zero-shot / best heuristic", "shipped zero-shot", "best heuristic"),
              ("specialized zero-shot / best heuristic", "specialized zero-shot",
               "best heuristic"))
    rows = ["| cases | " + " | ".join(r[0] for r in ratios) + " |", "|---|" + "---|" * len(ratios)]
    for name, rs in [(c, [r for r in records if r["cluster"] == c]) for c in CLUSTERS] + [
            ("all", records)]:
        if rs:
            cells = [f"{geomean(r[a] / r[b] for r in rs):.3f} "
                     f"({sum(r[a] < r[b] for r in rs)} of {len(rs)} below 1)" for _, a, b in ratios]
            rows.append(f"| {name} ({len(rs)}) | " + " | ".join(cells) + " |")
    cases = ["| graph | cluster | seed | units | best heuristic ms | shipped zero-shot | "
             "specialized zero-shot | shipped ft 100 | specialized ft 100 |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        h = r["best heuristic"]
        cases.append(f"| {r['graph']} | {r['cluster']} | {r['seed']} | {r['units']} | "
                     f"{h * 1e3:.2f} | {r['shipped zero-shot'] / h:.3f} | "
                     f"{r['specialized zero-shot'] / h:.3f} | {r['shipped ft 100'] / h:.3f} | "
                     f"{r['specialized ft 100'] / h:.3f} |")
    import textwrap
    mine = ", ".join(f"{n} ({kw['layers']} layer{'s' * (kw['layers'] > 1)}, hidden "
                     f"{kw['hidden']})" for n, kw in MINE.items())
    r0 = records[0]
    intro = textwrap.fill(
        "The shipped policy never saw the nmt family (an LSTM encoder-decoder with attention; "
        f"one of the test families). Given a folder of {r0['mine']} nmt graphs ({mine}; plain "
        ".pb files, no manifest), each profiled on this CPU by `gplace profile` ("
        + (f"{r0['profile_minutes']:.1f} minutes for the {r0['mine']}: "
           if r0.get("profile_minutes") is not None else "")
        + "measured CPU times and the run counts of their loops), one command specializes it:",
        96)
    if r0["handed_back"]:
        verdict = (f"The round validated at {r0['round_val']:.4f} (zero-shot / best heuristic "
                   "on the 12 problems of the folder's graphs, which has no validation split), "
                   f"the shipped policy at {r0['start_val']:.4f}, so the command handed the "
                   "shipped policy back unchanged: the specialized columns below are the "
                   "shipped ones by construction. Gentler imitation (learning rates down to "
                   "1e-5, both orders, no DAgger) and experts of 1,200 samples validated worse too "
                   "(finetune/HISTORY.md, \"specializing the shipped policy with other imitation "
                   "settings\"). Longer imitation (2,000 steps) and a held-out graph of the "
                   "folder as validation both wrote policies that validated better and placed "
                   "the held-out nmt graphs below worse (finetune/HISTORY.md, \"specializing on "
                   "the nmt folder with longer imitation\"). ")
    else:
        verdict = (f"The round validated at {r0['round_val']:.4f} against the shipped policy's "
                   f"{r0['start_val']:.4f} (zero-shot / best heuristic on the 12 problems of "
                   "the folder's graphs, which has no validation split). ")
    then = textwrap.fill(
        "It validated the shipped policy, searched an expert from it for every graph on "
        "post-2gpu, post-4gpu and hetero, then imitated them from the shipped weights: "
        f"**{r0['pretrain_minutes']:.1f} minutes** on this 2-core machine (shared with other "
        "jobs). " + verdict + "The folder's own figure does not say how a specialized policy "
        "places graphs it did not see: measure it on some before using it. Then on the "
        "corpus' nmt graphs, which it did not see "
        f"({', '.join(HELD_OUT)}), on {', '.join(CLUSTERS)} (hdp-8gpu seen by neither "
        f"policy), seeds {', '.join(map(str, SEEDS))}: zero-shot and \"ft 100\" (100 "
        "fine-tuning samples, no heuristic starts). Ratios are geometric means of step times; "
        "below 1 the first is faster. **Every step time is simulated**: estimates, not "
        "measurements on hardware.", 96)
    text = f"""# Specializing the shipped policy on your own graphs

{intro}

    for g in runs/specialize/mine/*.pb; do gplace profile "$g"; done
    gplace pretrain --corpus runs/specialize/mine --init gplace/checkpoints/policy.pt \\
        --random-clusters 0 --rounds 1 --max-steps {r0['steps']} --out runs/specialize/policy.pt

{then}

Rebuilt by `nice .venv/bin/python -m pretrain.specialize` (records in
pretrain/specialize.jsonl), code at commit {commit}.

{chr(10).join(rows)}

## Per case (step time / best heuristic)

{chr(10).join(cases)}
"""
    atomic_write_text(PAGE, text)


def main(argv=None) -> int:
    return study_main(__doc__, run, write_page, RECORDS, argv)

if __name__ == "__main__":
    sys.exit(main())
