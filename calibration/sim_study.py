"""Re-simulates a calibration run's placements with variants of the simulator (issue 17).

    python calibration/sim_study.py calibration/calibration.json [more.json ...]

Rebuilds each graph's problem and 24 placements as ``gplace calibrate`` did (graphs in
calibration/graphs, profiles in calibration/profiles, the run's fitted link and step overhead
from its JSON; the placements from the JSON where it stores them, else made again on the model
the run used), checks that variant A, that model, gives back a run's simulated times where the
run used it, then scores every variant against the run's measured times (Kendall tau per graph).
The variants run in this script's own event loop (``simulate``: the reference simulator's, plus
CPU at either end of a transfer); variant F is what gplace.sim now does on a link with
``recv_cpu_s`` (calibrate's default, ``transfer_cpu_at="receiver"``).
"""

from __future__ import annotations

import heapq
import json
import sys
from unittest import mock
from pathlib import Path

import numpy as np

from gplace.calibrate import (CalibrateConfig, calibrated_cluster, calibration_placements,
                              kendall_tau, median_rel_error, scaled_profile, step_overhead_s)
from gplace.cluster import load_cluster
from gplace.cost import CostModel
from gplace.importer import load_graph
from gplace.problem import CoarsenConfig, PlacementProblem
from gplace.profile import CostProfile
from gplace.real.links import LinkFit, StepOverhead
from gplace.sim.reference import forward_edges

HERE = Path(__file__).resolve().parent


def _find(name: str, folders: list[Path]) -> Path:
    """The first of ``folders``/name that exists."""
    return next((f / name for f in folders if (f / name).is_file()), folders[-1] / name)


def problems(run: dict, cpu_s_per_byte: float | None = None, latency_scale: float = 1.0,
             folder: Path = HERE):
    """(graph's JSON, problem, placements, labels) of each graph of ``run``, with the link's
    latency scaled by ``latency_scale`` and its transfer CPU folded in as ``cpu_s_per_byte``
    (None: calibrate's default). Runs made before placements were deduplicated up to
    interchangeable devices (both single-device placements listed) get that older set."""
    cfg = CalibrateConfig()
    link = LinkFit(**{k: run["link"][k] for k in LinkFit._fields})
    base = load_cluster("local-procs")
    as_run = calibrated_cluster(base, link, cfg.transfer_cpu_s_per_byte)
    cluster = calibrated_cluster(base, link._replace(latency_s=link.latency_s * latency_scale),
                                 cfg.transfer_cpu_s_per_byte if cpu_s_per_byte is None
                                 else cpu_s_per_byte)
    for g in run["graphs"]:
        graph = load_graph(_find(f"{g['name']}.pb", [folder / "graphs", HERE / "graphs",
                                                     HERE.parent / "datasets" / "corpus"]),
                           name=g["name"])
        profile = scaled_profile(CostProfile.load(_find(f"{g['name']}.profile.json.gz", [
            folder / "profiles", HERE / "profiles"])))
        def build(c, graph=graph, profile=profile):
            return PlacementProblem.build(graph, c, CostModel(profiles=[profile]),
                                          CoarsenConfig(cfg.max_units))
        problem, measured = build(cluster), build(as_run)
        # the placements the run measured: made on its own simulator's problem (the heuristics
        # and "expert" consult the simulator)
        if all("units" in p for p in g["placements"]):
            yield g, problem, np.array([p["units"] for p in g["placements"]]), None
            continue
        placements, labels = calibration_placements(measured, cfg.placements, cfg.seed)
        if labels != [p["label"] for p in g["placements"]]:
            with mock.patch("gplace.calibrate.interchangeable", lambda cluster: None):
                placements, labels = calibration_placements(measured, cfg.placements, cfg.seed)
        assert labels == [p["label"] for p in g["placements"]], f"{g['name']}: other placements"
        yield g, problem, placements, labels


def simulate(problem, op_device, send_s=0.0, send_per_b=0.0, recv_s=0.0, recv_per_b=0.0):
    """The reference event loop (gplace.sim.reference), plus the CPU a transfer takes on the
    one lane of each end: ``send_s + send_per_b * bytes`` on the sender's lane before the
    channel carries it, ``recv_s + recv_per_b * bytes`` on the receiver's lane after it
    arrives (the tensor is usable when that ends). Zeros give the reference's step time."""
    g, cluster = problem.graph, problem.cluster
    n, nd = g.num_ops, cluster.num_devices
    dev = [int(x) for x in op_device]
    cost = problem.costs.time_s
    links = cluster.link_table()
    rank = {int(op): r for r, op in enumerate(g.topo_order())}
    op_of_rank = {r: o for o, r in rank.items()}
    out_owner = np.repeat(np.arange(n), np.diff(g.out_ptr))
    consumers, ctrl, pending = forward_edges(g)
    ready, heap = [0.0] * n, []
    for o in range(n):
        if pending[o] == 0:
            heapq.heappush(heap, (0.0, 0, rank[o]))
    lane = [0.0] * nd
    chan = [0.0] * links.num_channels
    end = [0.0] * n
    sent = set()

    def avail(c, t):
        ready[c] = max(ready[c], t)
        pending[c] -= 1
        if pending[c] == 0:
            heapq.heappush(heap, (ready[c], 0, rank[c]))

    while heap:
        t, kind, key = heapq.heappop(heap)
        if kind == 0:  # an op
            o = op_of_rank[key]
            d = dev[o]
            s = max(t, lane[d])
            end[o] = lane[d] = s + cost[o, d]
            for j in range(int(g.out_ptr[o]), int(g.out_ptr[o + 1])):
                for c in consumers.get(j, []):
                    if dev[c] == d:
                        avail(c, end[o])
                    elif (j, dev[c]) not in sent:
                        sent.add((j, dev[c]))
                        heapq.heappush(heap, (end[o], 1, j * nd + dev[c]))
            for c in ctrl.get(o, []):
                avail(c, end[o] if dev[c] == d else end[o] + links.latency_s[d, dev[c]])
        elif kind == 1:  # a transfer leaves: sender CPU, then the channel
            j, dd = divmod(key, nd)
            src = dev[int(out_owner[j])]
            b = float(g.out_bytes[j])
            if send_s or send_per_b:
                s = max(t, lane[src])
                t = lane[src] = s + send_s + send_per_b * b
            ch = links.channel[src, dd]
            begin = max(t, chan[ch])
            chan[ch] = begin + b / links.bandwidth[src, dd]
            arrive = chan[ch] + links.latency_s[src, dd]
            heapq.heappush(heap, (arrive, 2, key))
        else:  # it arrives: receiver CPU
            j, dd = divmod(key, nd)
            b = float(g.out_bytes[j])
            if recv_s or recv_per_b:
                s = max(t, lane[dd])
                t = lane[dd] = s + recv_s + recv_per_b * b
            for c in consumers[j]:
                if dev[c] == dd:
                    avail(c, t)
    return max(end) if n else 0.0


def variants(latency: float) -> list[tuple[str, float | None, float, dict]]:
    """(name, transfer CPU folded into the link per byte (None: calibrate's 0.8 ns/B), the
    link latency's scale, receive/send CPU) of each simulator variant; L is the fitted latency
    and 0.8 ns/B calibrate's held-out transfer CPU figure."""
    L, ns = latency, 1e-9
    return [
        ("A  latency a delay; transfer CPU folded into bandwidth (before)", None, 1.0, {}),
        ("B  receiver CPU L + 0.8 ns/B; no delay", 0.0, 0.0,
         dict(recv_s=L, recv_per_b=0.8 * ns)),
        ("C  receiver CPU L; 0.8 ns/B in bandwidth; no delay", None, 0.0, dict(recv_s=L)),
        ("D  sender CPU L + 0.8 ns/B; no delay", 0.0, 0.0, dict(send_s=L, send_per_b=0.8 * ns)),
        ("E  both ends L/2 + 0.4 ns/B; no delay", 0.0, 0.0,
         dict(send_s=L / 2, recv_s=L / 2, send_per_b=0.4 * ns, recv_per_b=0.4 * ns)),
        ("F  delay L; receiver CPU L + 0.8 ns/B (shipped)", 0.0, 1.0,
         dict(recv_s=L, recv_per_b=0.8 * ns)),
        ("G  delay L; receiver CPU 0.8 ns/B", 0.0, 1.0, dict(recv_per_b=0.8 * ns)),
        ("H  both ends L + 0.8 ns/B each; no delay", 0.0, 0.0,
         dict(send_s=L, recv_s=L, send_per_b=0.8 * ns, recv_per_b=0.8 * ns)),
        ("I  receiver CPU L + 0.8 ns/B, sender CPU L; no delay", 0.0, 0.0,
         dict(send_s=L, recv_s=L, recv_per_b=0.8 * ns)),
    ] + [(f"F' delay L; receiver CPU {k:g} L + {b:g} ns/B", 0.0, 1.0,
          dict(recv_s=k * L, recv_per_b=b * ns))
         for k in (0.5, 1.0, 1.5, 2.0) for b in (0.4, 0.8, 1.2) if (k, b) != (1.0, 0.8)]


def main(paths: list[str]) -> None:
    runs = [json.loads(Path(p).read_text()) for p in paths]
    print("Kendall tau of each variant against each run's measured step times: mean over the "
          "run's graphs (in its order), then the median relative error over all placements\n")
    print(f"{'variant':<58}" + "".join(f" | {p:<42}" for p in paths))
    cache = {}
    for name, cpb, scale, cpu in variants(0.0):
        cells = []
        for path, run in zip(paths, runs):
            latency = run["link"]["latency_s"]
            cpu = next(v[3] for v in variants(latency) if v[0] == name)
            overhead = StepOverhead(**run["step_overhead"])
            if (path, cpb, scale) not in cache:
                cache[path, cpb, scale] = list(problems(run, cpb, scale, Path(path).parent))
            taus, sims, meas = [], [], []
            for g, problem, placements, _ in cache[path, cpb, scale]:
                m = np.array([np.nan if p["measured_s"] is None else p["measured_s"]
                              for p in g["placements"]])
                s = np.array([simulate(problem, problem.expand(p), **cpu) for p in placements])
                s = s + step_overhead_s(problem, placements, overhead)
                ok = np.isfinite(m)
                if name.startswith("A ") and not run["simulated_link"].get("recv_cpu_s"):
                    # the run's own model: its simulated times must come back
                    stored = [p["simulated_s"] for p in g["placements"]]
                    assert np.allclose(s, stored, rtol=1e-12), f"{g['name']}: not rebuilt"
                taus.append(kendall_tau(s[ok], m[ok]))
                sims += s[ok].tolist()
                meas += m[ok].tolist()
            cells.append(f"{np.mean(taus):.3f} ({' '.join(f'{t:.3f}' for t in taus)}) "
                         f"err {median_rel_error(sims, meas):5.1%}")
        print(f"{name:<58}" + "".join(f" | {c:<42}" for c in cells), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
