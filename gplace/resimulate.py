"""Re-scoring a finished calibration run with the current simulator.

    report = resimulate([GraphSource("quick_mlp", "quick_mlp.pb", "mlp")], "calibration")

The real figures (step times, their intervals, repeats, load) are the run's, read from its
calibration.json; the simulated ones are new, from the run's profiles (``profiles/``), its
fitted link and step overhead, and the given :class:`CalibrateConfig`. No TensorFlow process
starts. The placements are those the run measured: calibration.json stores them; for runs made
before it did, they are made again as that run made them, and checked against its simulated
times. ``gplace calibrate --resimulate`` runs it.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Callable

import numpy as np

from gplace.calibrate import (CalibrateConfig, GraphSource, calibrated_cluster,
                              calibration_placements, scaled_profile, simulated_s)
from gplace.calibration_report import (CalibrationReport, GraphCalibration, build_report,
                                       describe_link, kendall_tau, median_rel_error,
                                       spearman_rho, write_report)
from gplace.cluster import Cluster, Link, load_cluster
from gplace.cost import CostModel
from gplace.errors import ConfigError
from gplace.problem import CoarsenConfig, PlacementProblem
from gplace.profile import CostProfile
from gplace.real.links import LinkFit, StepOverhead


def resimulate(sources: list[GraphSource], out_dir: str | Path,
               cluster: str | Cluster = "local-procs",
               config: CalibrateConfig = CalibrateConfig(),
               log: Callable[[str], None] = lambda s: None) -> CalibrationReport:
    """Re-scores the run in ``out_dir`` (its calibration.json, profiles/) with the current
    simulator and ``config``: the real figures are the run's, the simulated ones new. No
    TensorFlow process starts. ``sources`` give each graph of the run (by name). Rewrites
    the JSON and PNG."""
    out_dir = Path(out_dir)
    path = out_dir / "calibration.json"
    try:
        run = json.loads(path.read_text())
        link = LinkFit(**{k: run["link"][k] for k in LinkFit._fields})
        overhead = StepOverhead(**run["step_overhead"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"{path}: not a calibration run to re-simulate ({e})") from None
    cluster = load_cluster(cluster) if isinstance(cluster, (str, os.PathLike)) else cluster
    fitted = calibrated_cluster(cluster, link, config.transfer_cpu_s_per_byte,
                                config.transfer_cpu_at)
    log(f"simulated link: {describe_link(fitted.default_link)}")
    by_name = {s.name: s for s in sources}
    graphs = []
    for record in run["graphs"]:
        name = record.get("name") if isinstance(record, dict) else None
        if name not in by_name:
            raise ConfigError(f"{path}: graph {name!r} has no source to load")
        try:
            graphs.append(_resimulated_graph(by_name[name], record, run, fitted, cluster,
                                             overhead, out_dir, config))
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise ConfigError(f"{path}: graph {name}: not a calibration record to re-simulate "
                              f"({type(e).__name__}: {e})") from None
        g = graphs[-1]
        log(f"{g.name}: tau {g.kendall_tau:.3f}, median rel. error {g.median_rel_error:.1%} "
            f"(the run's real-vs-real tau {g.repeat_tau:.3f})")
    report = build_report(cluster.name, graphs, link, overhead, fitted.default_link)
    write_report(report, out_dir)
    return report


def _resimulated_graph(source: GraphSource, record: dict, run: dict, fitted: Cluster,
                       cluster: Cluster, overhead: StepOverhead, out_dir: Path,
                       config: CalibrateConfig) -> GraphCalibration:
    from gplace.importer import load_graph
    from gplace.real.load import LoadFigures
    cached = out_dir / "profiles" / f"{source.name}.profile.json.gz"
    if not cached.is_file():
        raise ConfigError(f"{cached} is missing: re-simulating needs the run's profiles")
    profile = CostProfile.load(cached)
    profile = scaled_profile(profile) if config.scale_to_wall else profile
    graph = load_graph(source.path, name=source.name)
    build = lambda c: PlacementProblem.build(graph, c, CostModel(profiles=[profile]),  # noqa: E731
                                             CoarsenConfig(config.max_units))
    problem = build(fitted)
    if record["units"] != problem.num_units:
        raise ConfigError(f"{source.name}: the run coarsened to {record['units']} units, this "
                          f"build gives {problem.num_units}: pass --units {record['units']}")
    rows = record["placements"]
    if all("units" in r for r in rows):
        placements = np.array([r["units"] for r in rows], np.int64)
        if placements.shape != (len(rows), problem.num_units):
            raise ValueError(f"stored placements of shape {placements.shape}")
    else:
        placements = _rebuilt_placements(build, record, run, cluster, overhead, config)
    sim = simulated_s(problem, placements, overhead, config)
    value = lambda x: float("inf") if x is None else float(x)  # noqa: E731
    meas = np.array([value(r["measured_s"]) for r in rows])
    repeats = np.array([[value(x) for x in r["repeats_s"]] for r in rows]).T
    ok = np.isfinite(meas) & np.isfinite(sim)
    load = tuple(LoadFigures(**{k: v for k, v in f.items() if k != "loaded"})
                 for f in record.get("load", []))
    return GraphCalibration(
        source.name, record.get("family", source.family), record["ops"], problem.num_units,
        [r["label"] for r in rows], meas, np.array([value(r["spread_s"]) for r in rows]), sim,
        [r["reason"] for r in rows], kendall_tau(sim[ok], meas[ok]),
        spearman_rho(sim[ok], meas[ok]), median_rel_error(sim[ok], meas[ok]),
        record["repeat_tau"], repeats, record["seconds_per_placement"], load, placements)


def _rebuilt_placements(build, record: dict, run: dict, cluster: Cluster,
                        overhead: StepOverhead, config: CalibrateConfig) -> np.ndarray:
    """The placements a run made before calibration.json stored them: made again as that run
    made them, on its own simulated link (the heuristics consult the simulator), and checked
    against its labels and simulated times."""
    rows, own = record["placements"], run["simulated_link"]
    old = dataclasses.replace(cluster, links=(), default_link=Link(
        (), own["bandwidth"], own["latency_s"], recv_cpu_s=own.get("recv_cpu_s", 0.0),
        recv_cpu_s_per_byte=own.get("recv_cpu_s_per_byte", 0.0)))
    problem = build(old)
    placements, labels = calibration_placements(problem, len(rows), config.seed)
    if labels != [r["label"] for r in rows]:
        placements, labels = calibration_placements(problem, len(rows), config.seed, False)
    stored = np.array([np.nan if r["simulated_s"] is None else r["simulated_s"] for r in rows])
    if (labels != [r["label"] for r in rows] or not np.allclose(
            simulated_s(problem, placements, overhead, config), stored, rtol=1e-9,
            equal_nan=True)):
        raise ConfigError(f"{record['name']}: cannot rebuild the placements this run measured "
                          "(it predates stored placements and its simulator or profile differ)")
    return placements
