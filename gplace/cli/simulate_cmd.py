"""``gplace simulate MODEL --cluster C (--placement FILE | --random N)``: one simulated step.

Prints the step time, the lower bound, per-device busy time and peak memory against capacity,
and the OOM flag; ``--trace`` writes a Chrome / Perfetto trace; ``--json`` prints one object.
With ``--random N`` it simulates N seeded uniform placements in one batch and reports the best
(traced and detailed), the median and the simulator's speed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from gplace.cli import checks, models
from gplace.errors import ConfigError, GplaceError
from gplace.io import plain_json


def add_parser(sub, name: str) -> argparse.ArgumentParser:
    p = sub.add_parser(name, help="simulate one training step of a placement",
                       description="Simulate one training step of a graph placed on a cluster.")
    p.add_argument("model", help="graph: a gplace .npz, or anything `gplace inspect` reads")
    p.add_argument("--cluster", default=None, metavar="C",
                   help="preset name (see `gplace clusters`) or a cluster YAML file; default "
                        "with --placement: the cluster its placement.json was placed on, as it "
                        "was (the file records its devices, links and memory limits)")
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("--placement", metavar="FILE",
                     help='JSON {"op name": "device name or TF device"} or {"placement": {...}}')
    how.add_argument("--random", type=checks.count(1, checks.MAX_BATCH, "placements in one batch"),
                     metavar="N", help="N seeded random placements (at most 10**5)")
    p.add_argument("--seed", type=checks.seed, default=0,
                   help="seed of --random, 0 <= seed < 2**32 (default 0)")
    p.add_argument("--max-units", type=int, metavar="U",
                   help="coarsen the colocation groups to at most U units (problem.py rule)")
    p.add_argument("--cost-model", metavar="FILE",
                   help="a saved CostModel (.json.gz); default: the measured profile beside the "
                        "model (<name>.profile.json.gz, `gplace profile`) for its devices' kind, "
                        "roofline estimates elsewhere, as `gplace place` costs it")
    p.add_argument("--trace", metavar="FILE", help="write a Chrome/Perfetto trace JSON here")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    models.add_import_arguments(p)
    return p


def read_placement_file(path: str) -> dict[str, str]:
    try:
        record = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise ConfigError(f"{path}: cannot read placement JSON ({e})") from None
    if isinstance(record, dict) and isinstance(record.get("placement"), dict):
        record = record["placement"]
    if not isinstance(record, dict) or not all(isinstance(v, str) for v in record.values()):
        raise ConfigError(f"{path}: expected {{\"op name\": \"device\"}} or "
                          f"{{\"placement\": {{...}}}}")
    return record


def _recorded(path: str, *keys: str):
    """A field of a placement.json that `gplace place` wrote (``"torch", "optimizer"``: the
    optimizer a PyTorch step was placed with; ``"summary", "cluster"``: the cluster); None when
    the file has none (read_placement_file reports a bad file)."""
    try:
        value = json.loads(Path(path).read_text())
        for key in keys:
            value = value[key]
        return value or None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _cluster(args):
    """--cluster, else the cluster the placement.json records (devices, links and memory
    limits as placed), else the preset it names (files written before it recorded them)."""
    from gplace.cluster import cluster_from_dict, load_cluster
    name = _recorded(args.placement, "summary", "cluster") if args.placement else None
    spec = _recorded(args.placement, "cluster") if args.placement else None
    placed = cluster_from_dict(spec, f"{args.placement}: its cluster") if spec else None
    if args.cluster is not None:
        cluster = load_cluster(args.cluster)
        differs = placed.summary() != cluster.summary() if placed else \
            name is not None and name != cluster.name
        if differs and not args.json:
            what = f"cluster {name!r}" if name else "another cluster"
            print(f"note: {args.placement} was placed on {what}" + (
                  f", whose devices, links or memory differ from {args.cluster}'s" if placed
                  else "") + f"; simulating it on {args.cluster}", file=sys.stderr)
        return cluster
    if placed is not None:
        return placed
    if not name:
        raise ConfigError("--cluster: give the cluster to simulate on (a placement.json that "
                          "`gplace place` wrote names its own)")
    try:
        return load_cluster(name)
    except ConfigError:
        raise ConfigError(f"{args.placement} was placed on cluster {name!r}, which is no "
                          f"preset; pass --cluster with its YAML file") from None


def run(args) -> int:
    from gplace.cost import CostModel, cost_model_for
    from gplace.problem import CoarsenConfig, PlacementProblem
    from gplace.sim import FastSimulator, lower_bound
    from gplace.sim.trace import write_trace

    checks.model_path(args.model)
    if args.trace:
        checks.output_file(args.trace, "--trace")
    cluster = _cluster(args)
    options = models.import_options(args)
    if args.placement and str(args.model).lower().endswith(".pt2") and "optimizer" not in options:
        recorded = _recorded(args.placement, "torch", "optimizer")  # what was placed
        if recorded:
            options["optimizer"] = recorded
    if args.placement and "signature" not in options and not str(args.model).lower().endswith(
            (".pt2", ".npz")):
        recorded = _recorded(args.placement, "signature")  # the SavedModel signature placed
        if recorded:
            options["signature"] = recorded
    if args.placement and "unknown_dim" not in options and not str(args.model).lower().endswith(
            (".pt2", ".npz")):
        recorded = _recorded(args.placement, "unknown_dim")  # the size it was placed with
        if isinstance(recorded, int) and recorded >= 1:
            options["unknown_dim"] = recorded
    graph = models.load_model(args.model, **options)
    model = CostModel.load(args.cost_model) if args.cost_model else cost_model_for(args.model)
    problem = PlacementProblem.build(graph, cluster, model, CoarsenConfig(args.max_units))
    sim = FastSimulator(problem)
    report: dict[str, Any] = {}
    if args.placement:
        placement = problem.from_names(read_placement_file(args.placement))
    else:  # per placement: its units, busy and peak per device, step time, transfers, OOM
        checks.batch_fits(args.random, 8 * (problem.num_units + 2 * cluster.num_devices) + 17)
        placements = problem.random_placements(args.random, args.seed)
        sim.run_batch(placements[:1])  # compile / load the numba cache outside the timing
        t0 = time.perf_counter()
        batch = sim.run_batch(placements)
        seconds = time.perf_counter() - t0
        best = int(np.argmin(np.where(batch.oom, np.inf, batch.step_time_s)))
        if batch.oom.all():
            best = int(np.argmin(batch.step_time_s))
        placement = placements[best]
        events = args.random * (graph.num_ops + float(batch.num_transfers.mean()))
        report["random"] = {
            "n": args.random, "seed": args.seed, "best_index": best,
            "best_step_time_s": float(batch.step_time_s[best]),
            "median_step_time_s": float(np.median(batch.step_time_s)),
            "oom_count": int(batch.oom.sum()), "seconds": seconds}
        report["sim_events_per_s"] = events / seconds if seconds > 0 else None
        report["sim_ops_per_s"] = args.random * graph.num_ops / seconds if seconds > 0 else None
    result = sim.run(placement)
    bound = lower_bound(problem)
    report = {**_summary(problem, result, bound), **report}
    print(plain_json(report) if args.json else render(report))
    if args.trace:
        try:
            write_trace(args.trace, problem, result)
        except OSError as e:  # checked before the work, but a disk can fill up meanwhile
            raise GplaceError(f"could not write the trace {args.trace} ({e.strerror or e}); "
                              f"the result is printed above") from None
    return 0


def _summary(problem, result, bound) -> dict[str, Any]:
    from gplace.summary import half_caveat
    costs = problem.costs
    devices = {}
    for d, dev in enumerate(problem.cluster.devices):
        devices[dev.name] = {
            "kind": dev.kind, "busy_s": float(result.busy_s[d]),
            "peak_bytes": int(result.peak_bytes[d]), "capacity_bytes": int(dev.memory_bytes),
            "ops": int((result.op_device == d).sum()), "estimated": bool(costs.estimated[d])}
    return {
        "model": problem.graph.meta.get("name", ""), "cluster": problem.cluster.name,
        "ops": problem.graph.num_ops, "units": problem.num_units,
        "step_time_s": result.step_time_s, "lower_bound_s": bound.bound_s,
        "critical_path_s": bound.critical_path_s, "work_bound_s": bound.work_s,
        "simple_bound_s": bound.simple_s, "path_bound_s": bound.path_s,
        "unit_bound_s": bound.unit_s, "packing_bound_s": bound.packing_s,
        "oom": result.oom, "transfers": int(result.transfers.output.shape[0]),
        "transfer_bytes": int(result.transfers.nbytes.sum()), "devices": devices,
        "estimated_devices": [n for n, v in devices.items() if v["estimated"]],
        "cost_notes": list(costs.notes) + ([half[2:]] if (half := half_caveat(
            problem.graph, problem)) else [])}


def _ms(s: float) -> str:
    return f"{s * 1e3:.3f} ms"


def render(r: dict[str, Any]) -> str:
    lines = [f"{r['model']} on {r['cluster']}: {r['ops']} ops in {r['units']} units",
             f"step time   {_ms(r['step_time_s'])}" + ("   OOM" if r["oom"] else ""),
             f"lower bound {_ms(r['lower_bound_s'])} (path with transfers "
             f"{_ms(r['path_bound_s'])}, units {_ms(r['unit_bound_s'])}, packing "
             f"{_ms(r['packing_bound_s'])}; simple {_ms(r['simple_bound_s'])}: critical path "
             f"{_ms(r['critical_path_s'])}, work / lanes {_ms(r['work_bound_s'])})",
             f"transfers   {r['transfers']} ({r['transfer_bytes'] / 1e6:.1f} MB)",
             f"{'device':<10} {'kind':<8} {'ops':>6} {'busy':>12} {'peak MB':>10} {'capacity MB':>12}"]
    for name, d in r["devices"].items():
        flag = " OOM" if d["peak_bytes"] > d["capacity_bytes"] else ""
        lines.append(f"{name:<10} {d['kind']:<8} {d['ops']:>6} {_ms(d['busy_s']):>12} "
                     f"{d['peak_bytes'] / 1e6:>10.1f} {d['capacity_bytes'] / 1e6:>12.1f}{flag}")
    if "random" in r:
        x = r["random"]
        lines.append(f"random: {x['n']} placements (seed {x['seed']}): best "
                     f"{_ms(x['best_step_time_s'])}, median {_ms(x['median_step_time_s'])}, "
                     f"{x['oom_count']} OOM; simulator {r['sim_events_per_s'] / 1e6:.2f} M events/s")
    lines.append("costs: " + "; ".join(r["cost_notes"]))
    if r["estimated_devices"]:
        lines.append("estimated (roofline, not measured): " + ", ".join(r["estimated_devices"]))
    return "\n".join(lines)
