"""Leave one domain out: does pretraining carry to architectures it has not seen?

    nice .venv/bin/python -m pretrain.domains              # runs what is missing, then the page
    .venv/bin/python -m pretrain.domains --page-only       # the page from the records alone

The families of pretrain/corpus139 fall into the domains of DOMAINS (the rest, OTHER, always
trains). For each domain D: ``gplace pretrain`` on the training and validation graphs outside
D, at a smaller budget than the shipped policy (one round imitating the archived experts of
pretrain/corpus139/experts.npz, the preset clusters only, ``--max-steps`` steps), then, on
held-out graphs of D (the median-sized graph of each of D's families, at most EVAL_GRAPHS) and
CLUSTERS, at full granularity as ``gplace place`` builds the problem, seeds SEEDS:

* ``best heuristic``: the best cheap heuristic (no samples);
* ``zero-shot`` and ``ft 100`` (100 fine-tuning samples, no heuristic starts) of the policy
  pretrained without D, of the same network freshly initialized (the ablation) and of the
  shipped policy (pretrained with D's families: what relatives in the corpus add);
* for the linear policy, the strongest things a user could do instead (SEARCH): hill climbing
  and annealing from the best heuristic with 2400 samples, against ``ft 300 +h`` (300
  fine-tuning samples started from the heuristics' placements, as ``gplace place --finetune
  300``) of the held-out policy and of its untrained network. Records made before these
  columns existed gain them on the next run.

A run also recomputes the shipped policy's columns (SHIPPED_COLUMNS) of every record another
shipped policy file made (``shipped_policy``, the start of its SHA-256), and only those; and
every network's columns (NETWORK_COLUMNS) of every linear record made with other fine-tuning
settings (``finetune``: finetune.study.FINETUNE_TAG), keeping the heuristics and local searches.

``--head-hidden H`` runs the same protocol with the policy's state head (GNNPolicy
head_hidden; the ablation of the linear decision rule), as the variant "head H";
``--type-channels 0`` with a network that reads no op types (the ablation of what a family's
op vocabulary teaches), as the variant "no op types".
``--corpus datasets`` trains on the whole corpus (datasets/: 303 training graphs instead of
corpus139's 125, the domain's families left out as before; the ablation of breadth), as the
variant "whole corpus"; its experts are datasets/experts.npz: corpus139's archived ones and,
for the other graphs, those of ``gplace pretrain --corpus datasets --random-clusters 0
--expert-from gplace/checkpoints/policy.pt``.

Runs live in runs/domains/<variant>/<domain>/ (rerun to resume); records go to
pretrain/domains.jsonl, one per finished case; the page is pretrain/DOMAINS.md. The page keeps
the records of earlier zero-shot rules (ARCHIVES), with the variants measured then, each in a
section of its own. Every step time is simulated.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
import yaml

from finetune.costs import current, is_current, stamped

HERE = Path(__file__).parent
ROOT = HERE.parent
CORPUS = HERE / "corpus139"  # the held-out cases come from its manifest, for every variant
TRAIN_CORPORA = {"corpus139": CORPUS, "datasets": ROOT / "datasets"}
RUNS = ROOT / "runs" / "domains"
RECORDS = HERE / "domains.jsonl"
NO_PRIOR_RECORDS = HERE / "domains_no_prior.jsonl"  # zero-shot: the policy's rollouts alone
RANK_ORDER_RECORDS = HERE / "domains_rank_order.jsonl"  # zero-shot in HEFT's rank order alone
NO_POLISH_RECORDS = HERE / "domains_no_polish.jsonl"  # zero-shot: the best rollout, unpolished
RECORDS_COMMIT = "f347844"  # the code that made the records without a "commit" field
PAGE = HERE / "DOMAINS.md"
DOMAINS = {
    "convolutional": ("inception", "resnet", "resnet_gen", "densenet", "xception", "convnext",
                      "efficientnet", "efficientnet_v2", "mobilenet", "nasnet", "nas_cell",
                      "randwire_conv", "regnet", "unet", "vgg", "multibranch", "wavenet"),
    "recurrent": ("lstm_lm", "gru_lm", "nmt", "rnn_loop", "rnn_unrolled"),
    "attention": ("transformer", "bert", "gpt", "attn_stack", "moe", "mlp_mixer"),
    "recommendation": ("dcn", "dlrm", "two_tower", "wide_deep"),
}
OTHER = ("mlp", "vae", "gnn", "randwire_mlp")  # never held out
CLUSTERS = ("post-4gpu", "hetero", "hdp-8gpu")  # hdp-8gpu: unseen by every policy here
EVAL_GRAPHS = 4
EVAL_MAX_OPS = 6000
STEPS = 800
SEED = 0     # of the corpus draw and of each pretraining run
SEEDS = (0, 1, 2)  # of the untrained network and of fine-tuning, per held-out case


def manifest_rows(corpus: Path = CORPUS) -> list[dict]:
    return yaml.safe_load((corpus / "manifest.yaml").read_text())["graphs"]


def domain_of(family: str) -> str:
    for d, families in DOMAINS.items():
        if family in families:
            return d
    if family in OTHER:
        return "other"
    raise KeyError(f"family {family!r} is in no domain of pretrain/domains.py")


def held_out(domain: str) -> list[dict]:
    """The median-sized graph of each of the domain's families (of its graphs with at most
    EVAL_MAX_OPS ops), the EVAL_GRAPHS smallest of these."""
    by_family: dict[str, list[dict]] = {}
    for r in manifest_rows():
        if domain_of(r["family"]) == domain and r["ops"] <= EVAL_MAX_OPS:
            by_family.setdefault(r["family"], []).append(r)
    medians = [sorted(rs, key=lambda r: (r["ops"], r["name"]))[(len(rs) - 1) // 2]
               for rs in by_family.values()]
    return sorted(medians, key=lambda r: (r["ops"], r["name"]))[:EVAL_GRAPHS]


class Variant(NamedTuple):
    head_hidden: int = 0      # the state head's width (0: the linear policy)
    corpus: str = "corpus139"  # the training corpus, a key of TRAIN_CORPORA
    type_channels: int = 16   # the op-type embedding's width (0: no op types)
    train_orders: str = "policy"  # "both": imitation in both of the scheduler's orders

    @property
    def name(self) -> str:
        parts = [f"head {self.head_hidden}"] if self.head_hidden else []
        parts += ["whole corpus"] if self.corpus == "datasets" else []
        parts += ["no op types"] if self.type_channels == 0 else []
        parts += ["both orders"] if self.train_orders == "both" else []
        return ", ".join(parts) or "linear"

    @property
    def slug(self) -> str:
        """The variant's prefix in case keys and its runs/ folder ("" for the linear policy)."""
        return "-".join(([f"head{self.head_hidden}"] if self.head_hidden else [])
                        + (["whole"] if self.corpus == "datasets" else [])
                        + (["notypes"] if self.type_channels == 0 else [])
                        + (["both"] if self.train_orders == "both" else []))


def run_folder(domain: str, variant: Variant) -> Path:
    """The held-out policy's run: one per cost model (a policy trained on other step times
    is not reused)."""
    from gplace.cost import COST_MODEL_VERSION
    runs = RUNS / f"costs-{COST_MODEL_VERSION}"
    return runs / variant.slug / domain if variant.slug else runs / domain


def write_corpus(domain: str, variant: Variant) -> Path:
    """runs/domains/[<variant>/]<domain>/corpus/manifest.yaml: the training corpus' training
    and validation graphs outside the domain (the test split stays out, as for the shipped
    policy)."""
    folder = run_folder(domain, variant) / "corpus"
    folder.mkdir(parents=True, exist_ok=True)
    rows = [r for r in manifest_rows(TRAIN_CORPORA[variant.corpus])
            if r["split"] in ("train", "validation") and domain_of(r["family"]) != domain]
    corpus_dir = os.path.relpath((ROOT / "datasets/corpus").resolve(), folder)
    text = yaml.safe_dump({"corpus_dir": corpus_dir, "graphs": rows}, sort_keys=False)
    path = folder / "manifest.yaml"
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return folder


def pretrain(domain: str, steps: int, variant: Variant, log) -> Path:
    """The policy pretrained without the domain (resumed where a run stopped)."""
    out = run_folder(domain, variant) / "policy.pt"
    if out.exists():
        return out
    corpus = write_corpus(domain, variant)
    cmd = [sys.executable, "-m", "gplace", "pretrain", "--corpus", str(corpus),
           "--restore", str(TRAIN_CORPORA[variant.corpus] / "experts.npz"),
           "--random-clusters", "0", "--rounds", "1",
           "--max-steps", str(steps), "--seed", str(SEED),
           "--head-hidden", str(variant.head_hidden),
           "--type-channels", str(variant.type_channels),
           "--train-orders", variant.train_orders,
           "--out", str(out), "--no-progress",
           "--validate", "greedy"]  # the rule every policy of the records was chosen by
    print(f"domains: {domain}: {' '.join(cmd[1:])}", file=log, flush=True)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=log, stderr=log)
    print(f"domains: {domain}: pretrained in {time.perf_counter() - t0:.0f} s", file=log,
          flush=True)
    return out


def evaluate(row: dict, cluster: str, seed: int, policy_path: Path) -> dict:
    """Every figure of the module docstring for one held-out case and seed."""
    from finetune.study import build_case, without_heuristics
    from gplace.gnn.corpus import list_corpus
    entry = next(e for e in list_corpus(CORPUS) if e.name == row["name"])
    problem, m, heur, bound = build_case(entry, cluster)
    feasible = {h: r.step_time_s for h, r in heur.items() if r.feasible}
    rec = {"graph": row["name"], "family": row["family"], "cluster": cluster, "seed": seed,
           "units": problem.num_units, "best heuristic": min(feasible.values()),
           "lower bound": bound}
    for tag, net in networks(policy_path, seed).items():
        rec.update(without_heuristics(problem, m, net, seed, f"{tag} "))
    return rec


SEARCH = ("hill 2400 +h", "anneal 2400 +h", "held-out ft 100 +h", "held-out ft 300 +h",
          "untrained ft 100 +h", "untrained ft 300 +h")


def search(row: dict, cluster: str, seed: int, policy_path: Path) -> dict:
    """The SEARCH columns of one held-out case and seed."""
    from finetune.study import baselines, build_case, with_heuristics
    from gplace.gnn.corpus import list_corpus
    entry = next(e for e in list_corpus(CORPUS) if e.name == row["name"])
    problem, m, heur, _ = build_case(entry, cluster)
    rec = baselines(problem, m, heur, seed)
    nets = networks(policy_path, seed)
    for tag in ("held-out", "untrained"):
        rec.update(with_heuristics(problem, m, heur, nets[tag], seed, f"{tag} "))
    return rec


def networks(policy_path: Path, seed: int) -> dict:
    import torch
    from gplace.gnn.placer import load_policy
    from gplace.gnn.policy import GNNPolicy
    held = load_policy(policy_path)[0]
    torch.manual_seed(seed)
    return {"held-out": held, "untrained": GNNPolicy(**held.kwargs), "shipped": load_policy()[0]}


def run(domains: list[str], steps: int, variant: Variant, log) -> None:
    import torch
    from gplace.gnn.placer import SHIPPED
    torch.set_num_threads(1)
    done = {r["key"]: r for r in current(load_records())}  # another cost model's: again
    for domain in domains:
        cases = [(row, c, s) for row in held_out(domain) for c in CLUSTERS for s in SEEDS]
        keys = [case_key(domain, row["name"], c, s, variant) for row, c, s in cases]
        extra = [c for columns, _ in EXTRA.values() for c in columns]
        if all(k in done and (variant.slug or all(c in done[k] for c in extra)) for k in keys):
            continue
        policy = pretrain(domain, steps, variant, log)
        for row, cluster, seed in cases:
            key = case_key(domain, row["name"], cluster, seed, variant)
            if key in done:
                continue
            t0 = time.perf_counter()
            rec = {"key": key, "domain": domain, "steps": steps,
                   "variant": variant.name, "commit": _commit(), "policy": policy_digest(policy),
                   "shipped_policy": policy_digest(SHIPPED), "finetune": finetune_tag(),
                   **evaluate(row, cluster, seed, policy)}
            rec["wall_s"] = round(time.perf_counter() - t0, 1)
            append_record(rec)
            print(f"domains: {key}: held-out/untrained ft 100 "
                  f"{rec['held-out ft 100'] / rec['untrained ft 100']:.3f}, zero-shot / best "
                  f"heuristic {rec['held-out zero-shot'] / rec['best heuristic']:.3f} "
                  f"({rec['wall_s']:.0f} s)", file=log, flush=True)
        if not variant.slug:
            for name, (columns, compute) in EXTRA.items():
                add_columns(domain, cases, policy, name, columns, compute, log)


def add_columns(domain: str, cases: list, policy: Path, name: str, columns: tuple, compute,
                log) -> None:
    """``compute``'s ``columns`` for the linear policy's records of ``cases`` that lack them,
    with ``name_commit``, ``name_wall_s`` and ``name_policy`` (the policy file's digest); a
    record made with another policy file (its ``policy``) is left alone. The record file is
    read again and rewritten (atomically) after each case; one writer at a time."""
    from gplace.io import atomic_write_text
    digest = policy_digest(policy)
    for row, cluster, seed in cases:
        key = case_key(domain, row["name"], cluster, seed)
        record = next(r for r in _raw_records() if r["key"] == key)
        if all(c in record for c in columns) or not is_current(record):
            continue
        if record.get("policy", digest) != digest:
            print(f"domains: {key}: made with another {policy}; delete its line to rerun it",
                  file=log, flush=True)
            continue
        t0 = time.perf_counter()
        new = {**compute(row, cluster, seed, policy), f"{name}_commit": _commit(),
               f"{name}_wall_s": round(time.perf_counter() - t0, 1), f"{name}_policy": digest}
        records = [{**r, **new} if r["key"] == key else r for r in _raw_records()]
        atomic_write_text(RECORDS, "".join(json.dumps(r) + "\n" for r in records))
        print(f"domains: {key}: " + ", ".join(f"{c} {new[c] * 1e3:.3f} ms" for c in columns),
              file=log, flush=True)


SHIPPED_COLUMNS = ("shipped zero-shot", "shipped ft 100")


def refresh_shipped(log) -> None:
    """The shipped policy's columns of every record that another shipped policy file made (its
    ``shipped_policy`` digest; a record without one predates it and is refreshed too). The held-
    out and untrained columns do not depend on it and stay. One writer at a time."""
    from finetune.study import build_case, without_heuristics
    from gplace.gnn.corpus import list_corpus
    from gplace.gnn.placer import SHIPPED, load_policy
    from gplace.io import atomic_write_text
    digest = policy_digest(SHIPPED)
    shipped = load_policy()[0]
    entries = {e.name: e for e in list_corpus(CORPUS)}
    for key in [r["key"] for r in current(_raw_records())
                if r.get("shipped_policy") != digest]:
        record = next(r for r in load_records() if r["key"] == key)
        t0 = time.perf_counter()
        problem, m, _, _ = build_case(entries[record["graph"]], record["cluster"])
        new = {**without_heuristics(problem, m, shipped, record["seed"], "shipped "),
               "shipped_commit": _commit(), "shipped_policy": digest,
               "shipped_wall_s": round(time.perf_counter() - t0, 1)}
        records = [{**r, **new} if r["key"] == key else r for r in _raw_records()]
        atomic_write_text(RECORDS, "".join(json.dumps(r) + "\n" for r in records))
        print(f"domains: {key}: shipped zero-shot {new['shipped zero-shot'] * 1e3:.3f} ms, "
              f"ft 100 {new['shipped ft 100'] * 1e3:.3f} ms", file=log, flush=True)


NETWORK_COLUMNS = tuple(f"{net} {c}" for net in ("held-out", "untrained", "shipped")
                        for c in ("zero-shot", "ft 100")) + SEARCH[2:]


def finetune_tag() -> str:
    from finetune.study import FINETUNE_TAG
    return FINETUNE_TAG


def refresh_finetune(log) -> None:
    """NETWORK_COLUMNS of every linear record made with other fine-tuning settings (its
    ``finetune``; a record without one predates it), by the held-out policy that made it (its
    ``policy`` digest; a record whose policy file is gone or changed is left, with a line
    saying so), its untrained network and the shipped policy. One writer at a time."""
    from finetune.study import build_case, with_heuristics, without_heuristics
    from gplace.gnn.corpus import list_corpus
    from gplace.gnn.placer import SHIPPED
    from gplace.io import atomic_write_text
    tag = finetune_tag()
    entries = {e.name: e for e in list_corpus(CORPUS)}
    for key in [r["key"] for r in current(load_records(RECORDS))
                if r["variant"] == "linear" and r.get("finetune") != tag]:
        record = next(r for r in load_records(RECORDS) if r["key"] == key)
        policy = run_folder(record["domain"], Variant()) / "policy.pt"
        if not policy.exists() or policy_digest(policy) != record["policy"]:
            print(f"domains: {key}: its held-out policy {policy} is gone or changed; delete "
                  "its line to rerun it", file=log, flush=True)
            continue
        t0 = time.perf_counter()
        problem, m, heur, _ = build_case(entries[record["graph"]], record["cluster"])
        seed, new = record["seed"], {}
        for net_tag, net in networks(policy, seed).items():
            new.update(without_heuristics(problem, m, net, seed, f"{net_tag} "))
            if net_tag != "shipped":
                new.update(with_heuristics(problem, m, heur, net, seed, f"{net_tag} "))
        new.update(finetune=tag, finetune_commit=_commit(), shipped_policy=policy_digest(SHIPPED),
                   finetune_wall_s=round(time.perf_counter() - t0, 1))
        records = [{**r, **new} if r["key"] == key else r for r in _raw_records()]
        atomic_write_text(RECORDS, "".join(json.dumps(r) + "\n" for r in records))
        print(f"domains: {key}: held-out/untrained ft 100 "
              f"{new['held-out ft 100'] / new['untrained ft 100']:.3f} "
              f"({new['finetune_wall_s']:.0f} s)", file=log, flush=True)


def _raw_records() -> list[dict]:
    """The record file's lines as they are (load_records adds defaults)."""
    return [json.loads(line) for line in RECORDS.read_text().splitlines() if line.strip()]


def policy_digest(path: Path) -> str:
    """Which policy file made a record: the start of its SHA-256."""
    import hashlib
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:12]


EXTRA = {"search": (SEARCH, search)}  # columns of the linear policy's records only


def case_key(domain: str, graph: str, cluster: str, seed: int,
             variant: Variant = Variant()) -> str:
    return ((f"{variant.slug} " if variant.slug else "") + f"{domain} {graph} {cluster}"
            + (f" s{seed}" if seed else ""))


def load_records(path: Path = RECORDS) -> list[dict]:
    """The records, each with its seed (0 where a record predates seeds)."""
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [{"seed": 0, "variant": "linear", **r} for r in rows]


def append_record(record: dict) -> None:
    """``record``, stamped with today's cost model, in place of one of its key made under
    another (finetune.costs), else at the end; atomically."""
    from gplace.io import atomic_write_text
    record = stamped(record)
    rows = _raw_records() if RECORDS.exists() else []
    rows = [r for r in rows if r["key"] != record["key"]] + [record]
    atomic_write_text(RECORDS, "".join(json.dumps(r) + "\n" for r in rows))


# ---- the page -------------------------------------------------------------------------------
RATIOS = (  # (column, numerator, denominator)
    ("held-out / untrained, ft 100", "held-out ft 100", "untrained ft 100"),
    ("held-out / untrained, zero-shot", "held-out zero-shot", "untrained zero-shot"),
    ("held-out zero-shot / best heuristic", "held-out zero-shot", "best heuristic"),
    ("untrained zero-shot / best heuristic", "untrained zero-shot", "best heuristic"),
    ("shipped / held-out, ft 100", "shipped ft 100", "held-out ft 100"),
    ("shipped zero-shot / best heuristic", "shipped zero-shot", "best heuristic"),
)


def geomean(x) -> float:
    x = np.asarray(list(x), np.float64)
    return float(np.exp(np.log(x).mean())) if x.size else float("nan")


def variant_table(records: list[dict]) -> str:
    """Each variant against the linear policy on the cases both ran (geomean, per domain)."""
    linear = {r["key"]: r for r in records if r["variant"] == "linear"}
    out = ["| variant | held out | cases | variant / linear, ft 100 | variant / linear, "
           "zero-shot | variant / its untrained network, ft 100 | linear / untrained, "
           "ft 100 | its untrained / linear's untrained, ft 100 (min-max) |",
           "|---|---|---|---|---|---|---|---|"]
    for variant in sorted({r["variant"] for r in records} - {"linear"}):
        mine = [r for r in records if r["variant"] == variant]
        pairs = [(r, linear[r["key"].split(" ", 1)[1]]) for r in mine
                 if r["key"].split(" ", 1)[1] in linear]
        for name in [d for d in DOMAINS if any(r["domain"] == d for r, _ in pairs)] + ["all"]:
            ps = [(r, q) for r, q in pairs if name == "all" or r["domain"] == name]
            cells = [geomean(r[a] / q[a] for r, q in ps) for a in ("held-out ft 100",
                                                                   "held-out zero-shot")]
            own = geomean(r["held-out ft 100"] / r["untrained ft 100"] for r, _ in ps)
            lin = geomean(q["held-out ft 100"] / q["untrained ft 100"] for _, q in ps)
            noise = [r["untrained ft 100"] / q["untrained ft 100"] for r, q in ps]
            out.append(f"| {variant} | {name} | {len(ps)} | {cells[0]:.3f} | {cells[1]:.3f} | "
                       f"{own:.3f} | {lin:.3f} | {geomean(noise):.3f} "
                       f"({min(noise):.3f}-{max(noise):.3f}) |")
    return "\n".join(out) if len(out) > 2 else ""


def groups(records: list[dict]) -> list[tuple[str, list[dict]]]:
    """The rows of a summary table: each domain, all of them, and the unseen cluster alone."""
    out = [(d, [r for r in records if r["domain"] == d]) for d in DOMAINS]
    return [(d, rs) for d, rs in out if rs] + [
        ("all domains", records),
        ("hdp-8gpu only (unseen cluster)", [r for r in records if r["cluster"] == "hdp-8gpu"])]


def summary_table(records: list[dict]) -> str:
    out = ["| held out | cases | " + " | ".join(c for c, _, _ in RATIOS) + " |",
           "|---|---|" + "---|" * len(RATIOS)]
    for name, rs in groups(records):
        cells = []
        for _, a, b in RATIOS:
            x = [r[a] / r[b] for r in rs]
            cells.append(f"{geomean(x):.3f} ({sum(v < 1 for v in x)} below 1)")
        out.append(f"| {name} | {len(rs)} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def local_search(r: dict) -> float:
    return min(r["hill 2400 +h"], r["anneal 2400 +h"])


SEARCH_RATIOS = (  # (column, numerator, denominator: a column or a function of the record)
    ("held-out ft 300 +h / best of hill and annealing at 2400", "held-out ft 300 +h",
     local_search),
    ("untrained ft 300 +h / the same", "untrained ft 300 +h", local_search),
    ("held-out / untrained, ft 300 +h", "held-out ft 300 +h", "untrained ft 300 +h"),
    ("held-out / untrained, ft 100 +h", "held-out ft 100 +h", "untrained ft 100 +h"),
    ("held-out ft 300 +h / best heuristic", "held-out ft 300 +h", "best heuristic"),
    ("best of hill and annealing / best heuristic", local_search, "best heuristic"),
)


def _value(r: dict, column) -> float:
    return column(r) if callable(column) else r[column]


def search_table(records: list[dict]) -> str:
    """SEARCH_RATIOS per domain, geomean (how many below 1), and the gap to the lower bound."""
    out = ["| held out | cases | " + " | ".join(c for c, _, _ in SEARCH_RATIOS)
           + " | held-out ft 300 +h / lower bound (min-max) |",
           "|---|---|" + "---|" * (len(SEARCH_RATIOS) + 1)]
    for name, rs in groups(records):
        cells = []
        for _, a, b in SEARCH_RATIOS:
            x = [_value(r, a) / _value(r, b) for r in rs]
            cells.append(f"{geomean(x):.3f} ({sum(v < 1 for v in x)} below 1)")
        gap = [r["held-out ft 300 +h"] / r["lower bound"] for r in rs]
        cells.append(f"{geomean(gap):.2f} ({min(gap):.2f}-{max(gap):.2f})")
        out.append(f"| {name} | {len(rs)} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def case_table(records: list[dict]) -> str:
    out = ["| domain | graph | cluster | seed | units | best heuristic ms | held-out ft 100 / "
           "untrained ft 100 | held-out zero-shot / best h. | untrained zero-shot / best h. | "
           "shipped ft 100 / held-out ft 100 | ft 300 +h / best of hill and annealing | "
           "ft 300 +h / lower bound | s |", "|---" * 13 + "|"]
    for r in sorted(records, key=lambda r: (list(DOMAINS).index(r["domain"]), r["graph"],
                                            CLUSTERS.index(r["cluster"]), r["seed"])):
        out.append(f"| {r['domain']} | {r['graph']} | {r['cluster']} | {r['seed']} | "
                   f"{r['units']} | "
                   f"{r['best heuristic'] * 1e3:.2f} | "
                   f"{r['held-out ft 100'] / r['untrained ft 100']:.3f} | "
                   f"{r['held-out zero-shot'] / r['best heuristic']:.3f} | "
                   f"{r['untrained zero-shot'] / r['best heuristic']:.3f} | "
                   f"{r['shipped ft 100'] / r['held-out ft 100']:.3f} | "
                   + (f"{r['held-out ft 300 +h'] / local_search(r):.3f} | "
                      f"{r['held-out ft 300 +h'] / r['lower bound']:.2f} | "
                      if all(c in r for c in SEARCH) else "| | ")
                   + f"{r['wall_s'] + r.get('search_wall_s', 0):.0f} |")
    return "\n".join(out)


VARIANTS = {  # what each variant changes, for the page
    "head": """\
- **head H**, the decision rule (`--head-hidden H`): each decision's logit gains
  v[u] . relu(A phi + b[u]) over the partial-schedule features phi, learned with the rest; its
  output weights start at zero, so the untrained networks of both variants are the same
  function.""",
    "whole corpus": """\
- **whole corpus**, breadth (`--corpus datasets`): pretrained on the training and
  validation graphs of all of datasets/ outside the domain (303 training graphs instead of
  corpus139's 125) on the same preset clusters, imitating the archived experts where
  corpus139 has them and, for the other graphs, the experts of `gplace pretrain --corpus
  datasets --expert-from gplace/checkpoints/policy.pt --random-clusters 0` (400 samples from
  the shipped policy, which saw every domain, as the archived experts' searches did).""",
    "both orders": """\
- **both orders**, the order the policy is placed in (`--train-orders both`): zero-shot rolls
  the policy out in HEFT's rank order and in the dispatch order, and the other variants
  learn in the rank order only; here every other problem of a training step is imitated in
  the dispatch order.""",
    "no op types": """\
- **no op types**, what a family's op vocabulary teaches (`--type-channels 0`): the
  network reads each unit's numbers (FLOPs, bytes, depth, degree, ...) but not the histogram
  of its op types; untrained, it is the linear policy's function (their output layers start
  at zero), with fewer weights to fine-tune.""",
}


UNTRAINED_COLUMN = {  # what the last column of the variants' table compares, per variant
    "whole corpus": "for the whole corpus the same network and seeds, run on another machine "
                    "and day than the linear policy's records (torch's last bits follow the "
                    "CPU's kernels, and 100 samples of fine-tuning amplify them), so it "
                    "measures how far the ft 100 figures move between runs",
    "head": "for the head, a network with more weights (the same function at the start, not "
            "during fine-tuning)",
    "both orders": "for both orders, the same network",
    "no op types": "without op types, a network with fewer weights (the same function at "
                   "the start, not during fine-tuning)",
}


def variant_prose(records: list[dict]) -> str:
    """The variants' descriptions, for those in ``records``."""
    import textwrap
    changes = {"head" if part.startswith("head ") else part
               for r in records for part in r["variant"].split(", ")}
    bullets = [text for key, text in VARIANTS.items() if key in changes]
    column = "; ".join(text for key, text in UNTRAINED_COLUMN.items() if key in changes)
    return ("The same protocol, cases and seeds with one change each:\n\n" + "\n".join(bullets)
            + "\n\n" + textwrap.fill("The last column compares the two untrained networks' "
                                      f"runs: {column}.", 96) + "\n\n")


def search_section(linear: list[dict]) -> str:
    """Against local search, on the cases that have the SEARCH columns."""
    rs = [r for r in linear if all(c in r for c in SEARCH)]
    if not rs:
        return ("Local search (hill climbing and annealing from the best heuristic) was not run "
                "on these cases.")
    at_most = sum(r["held-out ft 300 +h"] <= local_search(r) for r in rs)
    commits = ", ".join(sorted({r["search_commit"] for r in rs}
                               | {r["finetune_commit"] for r in rs if "finetune_commit" in r}))
    return f"""
## Against local search

What a user could do instead of pretraining and fine-tuning: hill climbing and simulated
annealing started from the best heuristic's placement with 2,400 samples (8x the budget of
`ft 300 +h`), against `ft 300 +h` (`gplace place --finetune 300`: 300 fine-tuning samples
started from the heuristics' placements) of the policy pretrained without the domain and of
its untrained network; the same seeds, each seed a case. `ft 300 +h` is at or below the better
of the two searches on {at_most} of {len(rs)} cases. {len(rs)} cases, code at commit {commits}.

{search_table(rs)}
"""


def commits_of(records: list[dict]) -> str:
    return ", ".join(sorted({r.get("commit", RECORDS_COMMIT) for r in records}
                            | {r[k] for r in records for k in ("shipped_commit", "finetune_commit")
                               if k in r}))


def gain(records: list[dict], column: str) -> float:
    """The held-out policy against its untrained network (geomean), "ft 100" or "zero-shot"."""
    return geomean(r[f"held-out {column}"] / r[f"untrained {column}"] for r in records)


ARCHIVES = (  # (records, section title, the rule in a phrase, what the section says first,
    #            whether the graphs with TF1 loops were dropped from the records)
    (NO_POLISH_RECORDS, "Before the polish", "without the polish", """\
The records of pretrain/domains_no_polish.jsonl (code at commit {commits}), made when zero-shot
was the best of its rollouts by the dispatch-order estimate, not hill-climbed on that estimate
afterwards (today's rule with `FinetuneConfig.zero_shot_polish` 0), with the held-out policies
of then. runs/ is not kept, so the policies of the section above were pretrained again by the
same command (another machine and day: a policy pretrained again differs by about 1% on its
validation figure). No arm was polished then, the shipped policy neither.""",
     False),
    (NO_PRIOR_RECORDS, "Before the untrained network's rollouts",
     "with the policy's rollouts alone", """\
The records of pretrain/domains_no_prior.jsonl (code at commit {commits}), made when zero-shot
rolled out the policy alone in both orders (today's rule without
`FinetuneConfig.zero_shot_prior`), with the held-out policies of then (the recurrent one is
that of "Before the polish"; the other three were pretrained again since, on the archive that
holds the rnn_loop graphs' per-iteration experts). Every linear policy here learned in HEFT's
rank order, and in the dispatch order its weights are out of distribution: there the
pretrained policy placed attention and recommendation worse than its untrained network.
Adding the untrained network's scores in the dispatch order reduced that (with those policies:
attention 1.020 -> 1.006 at 100 samples, recommendation 1.010 -> 0.987); the "+prior" fields
of these records are that rule, measured then on the same cases.""", True),
    (RANK_ORDER_RECORDS, "Before the two-order zero-shot",
     "with zero-shot in HEFT's rank order alone", """\
The records of pretrain/domains_rank_order.jsonl (code at commit {commits}), made when
zero-shot was the best of the greedy and 64 sampled rollouts in HEFT's rank order by that
schedule's own estimate (pretrain.order_probe.RULE), with the held-out policies' first
training. runs/ is not kept, so the policies of the sections above were pretrained again by the
same command on another machine and day; under the rule before, the smallest case of each
domain (seed 0) placed zero-shot at 0.988-1.007x its time here (1 of 4 identical: torch's last
bits and the numpy forward move near-tied decisions).""", True),
)


LOOPS_DROPPED = (
    "Its records of graphs with TF1 loops (gru_lm, lstm_lm, rnn_loop) were dropped at commit\n"
    "18cd6d0, when the simulator began to charge a loop's estimated op times and crossing\n"
    "transfers once per iteration: simulated as one trip, they no longer compare with today's.\n"
    "git keeps them.")


def archive_section(records: list[dict], title: str, prose: str, loops_dropped: bool) -> str:
    """An earlier rule's records: the summary, local search where measured, the variants."""
    linear = [r for r in records if r["variant"] == "linear"]
    searched = [r for r in linear if all(c in r for c in SEARCH)]
    variants = variant_table(records)
    dropped = f"{LOOPS_DROPPED}\n\n" if loops_dropped else ""
    return (f"## {title}\n\n{prose.format(commits=commits_of(linear))}\n\n{dropped}"
            f"{summary_table(linear)}\n\n"
            + (f"### Against local search\n\n{search_table(searched)}\n\n" if searched else "")
            + (f"### Variants against the linear policy\n\n{variant_prose(records)}"
               f"{variants}\n\n" if variants else ""))


def write_page(records: list[dict]) -> None:
    """The page from the records of today's code and, each in a section of its own, those of
    ARCHIVES (with their variants)."""
    import textwrap
    from gplace.gnn.config import FinetuneConfig
    from gplace.io import atomic_write_text
    linear = [r for r in records if r["variant"] == "linear"]
    if not linear:
        return
    variants = variant_table(records)
    domains = "\n".join(f"- **{d}**: {', '.join(f)}" for d, f in DOMAINS.items())
    steps = sorted({r["steps"] for r in linear})
    k, polish = FinetuneConfig().zero_shot_rollouts, FinetuneConfig().zero_shot_polish
    then, sections = [], []
    for path, title, rule, prose, loops_dropped in ARCHIVES:
        old = load_records(path)
        old_linear = [r for r in old if r["variant"] == "linear"]
        if old_linear:
            cases = f"{len(old_linear)} cases" + (" without the looped graphs" if loops_dropped
                                                   else "")
            then.append(f"{rule} (\"{title}\" below, {cases}), "
                        f"{gain(old_linear, 'ft 100'):.3f}x and "
                        f"{gain(old_linear, 'zero-shot'):.3f}x")
            sections.append(archive_section(old, title, prose, loops_dropped))
    gains = textwrap.fill(
        f"Pretrained without the domain, the policy is {gain(linear, 'ft 100'):.3f}x its "
        f"untrained network at 100 samples and {gain(linear, 'zero-shot'):.3f}x zero-shot on the "
        "domain." + (" It was " + "; ".join(then) + "." if then else ""), 96)
    before_section = "".join(sections)
    text = f"""# Leave one domain out

Does pretraining carry to architectures the corpus does not have? Each domain below is held
out in turn: a policy is pretrained on pretrain/corpus139's other training and validation
graphs, then placed on held-out graphs of the domain, next to the same network untrained
(the ablation) and to the shipped policy, which saw the domain's families. Always trained:
{', '.join(OTHER)}.

{domains}

Budget, smaller than the shipped policy's: one round imitating the archived experts
(pretrain/corpus139/experts.npz) on the preset clusters only, {', '.join(map(str, steps))}
steps (the shipped round: 1,600 steps, with random clusters), the checkpoint chosen by the
greedy rollout's validation figure (`--validate greedy`, the rule of every record here).
Cases: the median-sized graph of each of the domain's families (at most {EVAL_MAX_OPS:,} ops,
at most {EVAL_GRAPHS} per domain) on {', '.join(CLUSTERS)} (hdp-8gpu unseen by every policy),
full granularity, seeds {', '.join(str(x) for x in sorted({r['seed'] for r in linear}))} (of
the untrained network and of fine-tuning; every seed of a case counts as a case below).
"zero-shot" is `gplace place`'s: the greedy and {k} sampled rollouts in each of the list
scheduler's two orders (HEFT's rank order and the simulator's dispatch order) and as many again
of the untrained network's scores (each group to the device where it finishes first) in the
dispatch order, the one the policy was not trained in; the placement the dispatch-order
schedule estimates fastest
(gplace.gnn.infer.best_rollout), hill-climbed on that estimate for {polish:,} replays
(gplace.gnn.infer.polish; nothing measured). The untrained arm gets the same rule.
"ft 100": 100 fine-tuning samples without heuristic starts (the best of them and the zero-shot
placement). **Every step time is simulated** (the roofline model on every device; the graphs'
profiles, measured on another CPU, give the TF1 loops their run counts): estimates, not
measurements on hardware.

Rebuilt by `nice .venv/bin/python -m pretrain.domains` (records in pretrain/domains.jsonl;
delete a line to rerun its case), code at commit {commits_of(linear)}.

## Geometric means (below 1: the first is faster)

{summary_table(linear)}

{gains}
{search_section(linear)}
{"## Variants against the linear policy" + chr(10) * 2 + variant_prose(records) + variants
 + chr(10)
 if variants else ""}
{before_section}
## Per case (the linear policy)

{case_table(linear)}
"""
    atomic_write_text(PAGE, text)


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, check=True,
                              capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--domains", nargs="*", default=list(DOMAINS), choices=list(DOMAINS))
    ap.add_argument("--steps", type=int, default=STEPS, help="imitation steps of each policy")
    ap.add_argument("--head-hidden", type=int, default=0,
                    help="the variant with a state head of this width (0: the linear policy)")
    ap.add_argument("--type-channels", type=int, default=16, choices=(0, 16),
                    help="the variant whose network reads no op types (0)")
    ap.add_argument("--train-orders", default="policy", choices=("policy", "both"),
                    help="the variant that imitates in both of the scheduler's orders (both)")
    ap.add_argument("--corpus", default="corpus139", choices=list(TRAIN_CORPORA),
                    help="the training corpus (datasets: the variant 'whole corpus')")
    ap.add_argument("--page-only", action="store_true", help="write the page from the records")
    args = ap.parse_args(argv)
    if not args.page_only:
        variant = Variant(args.head_hidden, args.corpus, args.type_channels, args.train_orders)
        run(args.domains, args.steps, variant, sys.stderr)
        refresh_finetune(sys.stderr)
        refresh_shipped(sys.stderr)
    write_page(load_records())
    return 0


if __name__ == "__main__":
    sys.exit(main())
