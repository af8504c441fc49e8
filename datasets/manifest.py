"""datasets/manifest.yaml: every corpus graph with its family, size, measured cost and split.

Graph statistics (ops, FLOPs, parameter bytes) come from ``gplace.load_graph(...).summary()``;
while the importer cannot read a graph, ops and parameter bytes are counted from the GraphDef
itself (``stats_source: graphdef``) and FLOPs are left empty, to be filled by a later run.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from datasets import graphstats
from gplace.io import atomic_write_text

# Split by architecture family: no validation or test family appears in train.
TEST_FAMILIES = ("inception", "nmt", "transformer")     # the HDP / Post / GDP benchmark trio
VALIDATION_FAMILIES = ("xception", "gru_lm", "wide_deep")

HEADER = """\
# gplace training-graph corpus. Rebuild: python -m datasets.build
#
# Every graph is one training step (forward, backward, optimizer update) in TF1 graph mode
# with control flow v1, profiled on this CPU (see gplace/profiler.py): per-op times are the
# median over >= 5 FULL_TRACE steps, inter-op and intra-op threads 1, grappler and oneDNN
# fusions off. step_time_s: median wall time of the traced steps; untraced_step_time_s: median
# of untraced steps (tracing slows small kernels). coverage: sum of profiled op times / step time;
# step_coverage: the same per traced step, median over steps (robust to a loaded machine).
# op_coverage: fraction of GraphDef ops seen in step_stats (untaken Switch branches are not run).
# Measured, not estimated: step times, coverage, per-op times/bytes in the profiles. Computed
# from shapes by gplace's importer: flops, param_bytes (variables and optimizer slots).
# Caveat: the 2-core machine was shared with other jobs (load average up to ~9) during the
# build; times carry that noise (compare resnet50_b16_96 with resnet50_classic_b16_96).
#
# Split by architecture family, so that validation and test measure generalization to
# architectures never seen in training:
#   test:       inception, nmt, transformer  (the graphs of HDP, Post and GDP's evaluations:
#               a CNN with branching modules, an RNN encoder-decoder with attention, a
#               self-attention encoder-decoder)
#   validation: xception, gru_lm, wide_deep  (one CNN, one RNN, one embedding model, for model
#               selection; each is a near neighbour of a test family, never the same one)
#   train:      every other family.
# Caveat: BERT/GPT (train) share their attention blocks with the Transformer (test); the split
# holds out architectures, not op types.
#
# Generated graphs (datasets/families.py): every row names its generator (the family),
# seed, builder, kwargs and recipe_hash (the cache key: python -m datasets.build rebuilds the
# same bytes, graph_sha256). costs: measured (a CPU profile as above; generated graphs: 1 warm-up,
# 5 traced, 2 timed steps) or estimated (profile: null; gplace's roofline cost model). Structure
# (datasets/graphstats.py): depth, branching, width, param_share, output_bytes. The generated
# families are all in train; none reuses a test or validation builder. Caveat: multibranch
# (split-transform-merge modules) and attn_stack (self-attention in TF ops) are near neighbours of
# inception and transformer by design; the split holds out the architectures, not the motifs.
"""


def split_of(family: str) -> str:
    if family in TEST_FAMILIES:
        return "test"
    return "validation" if family in VALIDATION_FAMILIES else "train"


def graphdef_stats(path: Path) -> dict:
    """Ops and parameter bytes counted from the GraphDef (variables' shapes and dtypes)."""
    import numpy as np
    import tensorflow as tf
    gd = tf.compat.v1.GraphDef()
    gd.ParseFromString(path.read_bytes())
    params = 0
    for n in gd.node:
        if n.op in ("VarHandleOp", "VariableV2"):
            dims = [d.size for d in n.attr["shape"].shape.dim]
            params += int(np.prod(dims)) * tf.as_dtype(n.attr["dtype"].type).size
    return {"ops": len(gd.node), "flops": None, "param_bytes": params,
            "stats_source": "graphdef"}


def importer_stats(path: Path) -> dict | None:
    """Ops, FLOPs and parameter bytes from the gplace importer, or None if it cannot read it."""
    try:
        import gplace
        s = gplace.load_graph(str(path)).summary()
    except Exception:  # the importer is optional here: any failure falls back to graphdef_stats
        return None
    return {"ops": int(s["ops"]), "flops": float(s["flops"]), "param_bytes": int(s["param_bytes"]),
            "stats_source": "gplace.load_graph"}


def graph_stats(path: Path, previous: dict | None) -> dict:
    """Stats for one graph, reusing ``previous`` when it came from the importer already."""
    keys = ("ops", "flops", "param_bytes", "stats_source")
    if previous and previous.get("stats_source") == "gplace.load_graph":
        return {k: previous[k] for k in keys}
    if not path.exists():
        return {k: (previous or {}).get(k) for k in keys}
    return importer_stats(path) or graphdef_stats(path)


STRUCTURE_KEYS = ("depth", "branching", "width", "param_share", "output_bytes")


def entry(spec, out: Path, previous: dict | None) -> dict | None:
    """The manifest row of one built graph: measured if it has a profile, estimated if it has
    only its statistics (a generated graph not profiled yet), None if neither."""
    ppath = out / f"{spec.name}.profile.json.gz"
    sidecar = graphstats.read(out / f"{spec.name}.pb")
    if ppath.exists():
        row = measured_entry(spec, out, ppath, previous)
    elif sidecar is not None:
        row = {"name": spec.name, "family": spec.family, "split": split_of(spec.family),
               "op_set": spec.op_set, "graph": f"{spec.name}.pb", "profile": None,
               **{k: sidecar[k] for k in ("ops", "flops", "param_bytes", "stats_source")},
               "builder": spec.builder, "kwargs": dict(spec.kwargs)}
    else:
        return None
    # Fields after the profiled graphs' first ones (none of those changes meaning): how the
    # costs are known, what made the graph, and its structure.
    row["costs"] = "measured" if ppath.exists() else "estimated"
    row["generator"] = spec.generator or None
    row["seed"] = spec.seed
    row["recipe_hash"] = spec.recipe_hash
    if sidecar is not None:
        row["graph_sha256"] = sidecar["graph_sha256"]
        row.update({k: sidecar[k] for k in STRUCTURE_KEYS})
    return row


def measured_entry(spec, out: Path, ppath: Path, previous: dict | None) -> dict:
    """The row of a profiled graph: its first fields, those of the hand-written graphs."""
    from gplace.profile import CostProfile
    prof = CostProfile.load(ppath)
    row = {"name": spec.name, "family": spec.family, "split": split_of(spec.family),
           "op_set": spec.op_set, "graph": f"{spec.name}.pb", "profile": ppath.name}
    row.update(graph_stats(out / f"{spec.name}.pb", previous))
    row.update({
        "step_time_s": round(prof.step_time_s, 6),
        "untraced_step_time_s": round(prof.meta.get("untraced_step_time_s") or 0.0, 6),
        "coverage": round(prof.coverage, 4),
        "step_coverage": round(prof.meta.get("step_coverage") or 0.0, 4),
        "op_coverage": round(prof.meta.get("op_coverage", 0.0), 4),
        "traced_steps": prof.meta.get("traced_steps"),
        "builder": spec.builder, "kwargs": dict(spec.kwargs)})
    return row


def load(path: Path) -> dict[str, dict]:
    if not path.exists():
        return {}
    data = yaml.safe_load(path.read_text()) or {}
    return {row["name"]: row for row in data.get("graphs", [])}


def write(path: Path, specs: list, out: Path, refresh: bool = False) -> list[dict]:
    """Rewrites the manifest for ``specs``; graphs built earlier but not in ``specs`` are kept.

    ``refresh`` recomputes graph statistics that an earlier run stored (after ``--force``)."""
    rows = load(path)
    for spec in specs:
        row = entry(spec, out, None if refresh else rows.get(spec.name))
        if row is not None:
            rows[spec.name] = row
    ordered = sorted(rows.values(), key=lambda r: (r["split"], r["family"], r["name"]))
    body = {"corpus_dir": os.path.relpath(out, path.parent), "machine": _machine(out, ordered), "graphs": ordered}
    atomic_write_text(path, HEADER + yaml.safe_dump(body, sort_keys=False, width=100))
    os.chmod(path, 0o644)
    return ordered


def _machine(out: Path, rows: list[dict]) -> str | None:
    from gplace.profile import CostProfile
    for row in rows:
        p = out / (row.get("profile") or "-")
        if row.get("profile") and p.exists():
            return CostProfile.load(p).machine
    return None
