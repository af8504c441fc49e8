"""CostModel: the time and memory of every op on every device.

Measured where we can, estimated where we must, and always saying which (alpa's profiling
database idea: measured tables and analytic estimates behind one interface, saved and loaded):

* measured: op ``o`` on device ``d`` takes the median time a :class:`CostProfile` of ``d.kind``
  recorded for ``o`` (matched by graph name, then op name);
* estimated (roofline, Williams et al., CACM 2009): ``launch + max(flops / (peak * eff),
  bytes / (bandwidth * eff))`` where bytes touched = input + output bytes and ``peak``,
  ``bandwidth`` are the device figures shared by its ``lanes`` (each lane gets 1/lanes of them).
  ``peak`` is the device's ``half_flops`` (tensor cores) for an op that computes in float16 or
  bfloat16 (its first output's dtype: mixed precision's matrix products), where it has one.
  ``eff`` is fitted per device kind on measured profiles (least squares in log space, i.e. the
  geometric mean of estimate / measured) and otherwise a documented default.

TF1 loops: a profile counts each op's executions per step (``CostProfile.op_runs``), and its
times are sums over them. The simulator runs a loop body once, so a roofline estimate (the
time of one execution) is multiplied by the op's runs, and a tensor that crosses devices is
sent once per run of its consumer (:func:`transfer_repeats`): in TensorFlow a Send/Recv pair
inside a loop frame runs every iteration. Without recorded runs every op runs once. Not
modelled: the memory a loop's stacks hold for the backward pass (one tensor per iteration; the
simulator counts one), and iterations overlapping across devices (a body split over devices is
charged as if its iterations ran one after another).

Ops that run no kernel (:func:`host_ops`: constants, handles, reads of a resource variable,
views, identities, shape queries, loop-frame bookkeeping) run on the host whatever device they
are placed on and touch no tensor data: their estimate is their type's median host time
measured on the corpus' CPU profiles (``HOST_OP_S``, 0.06-2.2 us), not a launch and a pass
over the bytes they forward.

Functional While loops (one op each): the import counts their body's FLOPs times the trip
count where the graph fixes it, once otherwise; a profile of the graph that measured the trips
of a loop counted once (``meta["loop_trips"]``, gplace.profiler) multiplies its roofline
estimates by them (``OpCosts.loop_trips``).
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import NamedTuple, Sequence

import numpy as np

from gplace.cluster import Cluster, Device
from gplace.errors import ConfigError
from gplace.graph import OpGraph
from gplace.io import read_gzip_json, write_gzip_json
from gplace.profile import CostProfile

FORMAT_VERSION = 1
# The estimate's rules: part of every cached problem's key (gplace.gnn.cache), so that seeds and
# experts found under other estimates are not reused. 2: no-kernel ops take their host time.
COST_MODEL_VERSION = 2


@dataclass(frozen=True)
class CostModelConfig:
    """Knobs of the roofline estimate."""

    # Fraction of datasheet peak an average fp32 DL kernel reaches when nothing is measured.
    # 0.5: cuDNN convolutions / cuBLAS GEMMs reach 60-80% of peak, element-wise and small ops far
    # less; the roofline's max() already charges memory-bound ops by bandwidth.
    default_efficiency: float = 0.5
    efficiency: dict[str, float] = field(default_factory=dict)  # per-kind override, e.g. {"k80": .4}
    min_efficiency: float = 1e-4   # clamp for fitted values (a badly covered profile)
    min_fit_ops: int = 20          # fewer usable measured ops than this: keep the default


class OpCosts(NamedTuple):
    """What the simulator needs about each (op, device) pair."""

    time_s: np.ndarray        # (ops, devices) float64 seconds
    temp_bytes: np.ndarray    # (ops, devices) int64: kernel scratch memory (profiled only)
    output_bytes: np.ndarray  # (ops,) int64: bytes of the op's outputs
    measured: np.ndarray      # (ops, devices) bool: time_s came from a profile
    estimated: np.ndarray     # (devices,) bool: some op's time on the device is a roofline estimate
    notes: tuple[str, ...]    # one line per device: "gpu0 (k80): roofline, efficiency 0.50"
    runs: np.ndarray | None = None  # (ops,) int64 executions per step (None: 1 each)
    loop_trips: dict | None = None  # While op counted once by the import -> measured trips

    @property
    def summary(self) -> str:
        return "; ".join(self.notes)


def bytes_touched(graph: OpGraph) -> np.ndarray:
    """(ops,) float64: input bytes (forward data edges) + output bytes of each op."""
    keep = ~graph.edge_back
    inputs = np.bincount(graph.edge_dst[keep], weights=graph.edge_bytes[keep].astype(np.float64),
                         minlength=graph.num_ops)
    return inputs + graph.output_bytes.astype(np.float64)


# Median time of one execution of each no-kernel op type over the corpus' CPU profiles
# (datasets/corpus/*.profile.json.gz: 204 graphs, per-type medians of time / runs).
HOST_OP_S: dict[str, float] = {
    "NoOp": 0.06e-6, "ControlTrigger": 0.11e-6, "Const": 0.13e-6, "Enter": 0.13e-6,
    "LoopCond": 0.14e-6, "NextIteration": 0.16e-6, "Identity": 0.16e-6, "Merge": 0.20e-6,
    "Switch": 0.25e-6, "Exit": 0.27e-6, "StopGradient": 0.32e-6, "VarHandleOp": 0.37e-6,
    "ExpandDims": 0.44e-6, "Shape": 0.50e-6, "Reshape": 0.57e-6,
    "BroadcastGradientArgs": 0.67e-6, "Squeeze": 0.98e-6, "ReadVariableOp": 1.00e-6,
    "ShapeN": 1.12e-6, "IdentityN": 2.19e-6,
}
# No-kernel types the profiles did not measure (fed, or absent from the corpus).
HOST_OP_DEFAULT_S = 0.5e-6
HOST_TYPES = frozenset(HOST_OP_S) | {
    "PreventGradient", "Snapshot", "Placeholder", "PlaceholderWithDefault", "Size", "Rank",
    "VariableV2", "Variable", "_Arg", "_Retval", "RefEnter", "RefExit", "RefMerge",
    "RefSwitch", "RefNextIteration", "RefIdentity"}
# ATen ops that return a view of their input (a PyTorch program's no-kernel ops besides its
# parameters, buffers, optimizer state and constants); their TensorFlow types (Transpose,
# StridedSlice, BroadcastTo, ...) do run kernels in a GraphDef.
VIEW_ATEN = frozenset({
    "view", "_unsafe_view", "t", "transpose", "permute", "expand", "expand_as", "unsqueeze",
    "squeeze", "slice", "select", "narrow", "as_strided", "unbind", "split",
    "split_with_sizes", "chunk", "alias", "detach", "diagonal", "unfold", "view_as",
    "view_as_real", "view_as_complex", "_reshape_alias"})
TORCH_HOST_TYPES = frozenset({"VarHandleOp", "Placeholder", "Const"})


def host_ops(graph: OpGraph) -> np.ndarray:
    """(ops,) bool: the ops that run no kernel: HOST_TYPES in a GraphDef; in a PyTorch
    program (``meta["torch"]``) its views (VIEW_ATEN) and its parameters, buffers, optimizer
    state, inputs and constants."""
    torch_meta = graph.meta.get("torch")
    if torch_meta:
        aten = np.asarray(torch_meta.get("aten", []), str)
        views = (np.isin(aten, list(VIEW_ATEN)) if aten.size == graph.num_ops
                 else np.zeros(graph.num_ops, bool))
        return views | np.isin(graph.op_types, list(TORCH_HOST_TYPES))
    return np.isin(graph.op_types, list(HOST_TYPES))


def host_s(graph: OpGraph) -> np.ndarray:
    """(ops,) seconds of one execution of each no-kernel op (:func:`host_ops`) by its type's
    measured median (HOST_OP_S, HOST_OP_DEFAULT_S where unmeasured); 0 for the other ops."""
    types, which = np.unique(graph.op_types, return_inverse=True)
    per_type = np.array([HOST_OP_S.get(t, HOST_OP_DEFAULT_S) for t in types.tolist()])
    return np.where(host_ops(graph), per_type[which.reshape(-1)] if types.size else 0.0, 0.0)


HALF_DTYPES = ("float16", "bfloat16")


def half_precision(graph: OpGraph) -> np.ndarray:
    """(ops,) bool: the ops whose first output is a 16-bit float (HALF_DTYPES)."""
    half = np.isin(graph.out_dtype, HALF_DTYPES)
    if not half.any():
        return np.zeros(graph.num_ops, bool)
    first, end = graph.out_ptr[:-1], graph.out_ptr[1:]
    return (end > first) & half[np.minimum(first, half.size - 1)]


def roofline_s(graph: OpGraph, device: Device, efficiency: float,
               runs: np.ndarray | None = None) -> np.ndarray:
    """(ops,) seconds by the roofline, times each op's ``runs`` per step where given; each of
    ``device.lanes`` lanes gets 1/lanes of it. 16-bit ops (:func:`half_precision`) run at the
    device's ``half_flops`` where it has one. Ops that run no kernel take their host time
    (:func:`host_s`) on every device."""
    peak = device.peak_flops * efficiency / device.lanes
    if device.half_flops is not None:
        peak = np.where(half_precision(graph), device.half_flops * efficiency / device.lanes,
                        peak)
    bandwidth = device.mem_bandwidth * efficiency / device.lanes
    once = device.launch_overhead_s + np.maximum(graph.flops / peak,
                                                 bytes_touched(graph) / bandwidth)
    once = np.where(host_ops(graph), host_s(graph), once)
    return once if runs is None else once * runs


def transfer_repeats(graph: OpGraph, runs: np.ndarray | None) -> np.ndarray:
    """(outputs,) float64: how many times per step an output crosses to a device that reads
    it: the most runs of its forward consumers (consumers of one output share a loop frame:
    a loop-invariant Enter's output is read every iteration, an Exit's once), 1 without runs."""
    n_out = int(graph.out_ptr[-1])
    repeats = np.ones(n_out, np.float64)
    if runs is None:
        return repeats
    fwd = ~graph.edge_back
    out = graph.out_ptr[graph.edge_src[fwd]] + graph.edge_src_out[fwd]
    np.maximum.at(repeats, out, runs[graph.edge_dst[fwd]].astype(np.float64))
    return repeats


def fit_efficiency(graph: OpGraph, profile: CostProfile, device: Device) -> tuple[float, int]:
    """Efficiency e minimizing sum (log(R/e) - log(t - launch))^2 over measured ops that run
    a kernel (not :func:`host_ops`) with time above the launch overhead and nonzero work, R
    the roofline at e = 1 without launch; the closed form is the geometric mean of
    R / (t - launch). Returns (e, ops used)."""
    times, found = profile.times_for(graph.names)
    runs = profile.runs_for(graph.names)
    work = (roofline_s(graph, device, 1.0) - device.launch_overhead_s) * runs
    net = times - device.launch_overhead_s * runs
    use = found & (net > 0) & (work > 0) & ~host_ops(graph)
    if not use.any():
        return math.nan, 0
    return float(np.exp(np.mean(np.log(work[use]) - np.log(net[use])))), int(use.sum())


class CostModel:
    """Measured profiles per device kind plus fitted roofline efficiencies; save/load as JSON."""

    def __init__(self, config: CostModelConfig | None = None,
                 profiles: Sequence[CostProfile] = (), fitted: dict[str, float] | None = None):
        self.config = config or CostModelConfig()
        self.profiles: dict[tuple[str, str], CostProfile] = {}
        for p in profiles:
            self.add_profile(p)
        self.fitted: dict[str, float] = dict(fitted or {})

    def add_profile(self, profile: CostProfile) -> None:
        """Uses ``profile`` for devices of ``profile.device_kind`` running ``profile.graph``."""
        self.profiles[(profile.device_kind, profile.graph)] = profile

    def fit(self, pairs: Sequence[tuple[OpGraph, CostProfile]], cluster: Cluster) -> dict[str, float]:
        """Adds the profiles and fits one efficiency per kind that ``cluster`` has a device of
        (pooled over that kind's graphs: geometric mean weighted by ops). Returns the fits."""
        logs: dict[str, list[tuple[float, int]]] = {}
        for graph, profile in pairs:
            self.add_profile(profile)
            device = next((d for d in cluster.devices if d.kind == profile.device_kind), None)
            if device is None:
                continue
            eff, used = fit_efficiency(graph, profile, device)
            if used:
                logs.setdefault(profile.device_kind, []).append((math.log(eff), used))
        for kind, items in logs.items():
            total = sum(n for _, n in items)
            if total >= self.config.min_fit_ops:
                mean = sum(l * n for l, n in items) / total
                self.fitted[kind] = min(1.0, max(self.config.min_efficiency, math.exp(mean)))
        return dict(self.fitted)

    def efficiency(self, kind: str) -> tuple[float, str]:
        """(efficiency, where it came from) for a device kind."""
        if kind in self.fitted:
            return self.fitted[kind], "fitted"
        if kind in self.config.efficiency:
            return self.config.efficiency[kind], "configured"
        return self.config.default_efficiency, "default"

    def costs(self, graph: OpGraph, cluster: Cluster) -> OpCosts:
        """Time and memory of every op of ``graph`` on every device of ``cluster``."""
        n, nd = graph.num_ops, cluster.num_devices
        time_s = np.zeros((n, nd))
        temp = np.zeros((n, nd), np.int64)
        measured = np.zeros((n, nd), bool)
        notes = []
        runs = self.runs(graph)
        trips = self.loop_trips(graph)
        looped = np.array([graph.index(name) for name in trips], np.int64)
        for d, device in enumerate(cluster.devices):
            eff, source = self.efficiency(device.kind)
            time_s[:, d] = roofline_s(graph, device, eff, runs)
            time_s[looped, d] *= np.array(list(trips.values()), np.float64)
            profile = self.profiles.get((device.kind, graph.meta.get("name", "")))
            skipped = ""
            if profile is not None and not same_size(profile, graph):
                skipped = (f"; its profile, measured with unknown dimensions of "
                           f"{profile.meta.get('unknown_dim', 1)} (the graph's: "
                           f"{import_size(graph)}),"
                           " not used")
                profile = None
            if profile is not None:
                t, found = profile.times_for(graph.names)
                time_s[found, d] = t[found]
                measured[:, d] = found
                temp[:, d] = _temp_for(profile, graph.names)
            count = int(measured[:, d].sum())
            what = ("measured" if count == n else
                    f"measured {count}/{n} ops, rest roofline" if count else "roofline")
            notes.append(f"{device.name} ({device.kind}): {what}"
                         + ("" if count == n else f", efficiency {eff:.3g} ({source})")
                         + skipped)
        return OpCosts(time_s, temp, graph.output_bytes, measured, ~measured.all(axis=0)
                       if n else np.zeros(nd, bool), tuple(notes), runs, trips or None)

    def loop_trips(self, graph: OpGraph) -> dict[str, int]:
        """{While op: trips} measured by a profile of ``graph`` for the functional loops its
        import counted as one trip (the graph does not fix their trip count)."""
        once = set(graph.meta.get("import", {}).get("while_counted_once", []))
        for (_, name), profile in self.profiles.items():
            measured = profile.meta.get("loop_trips") or {}
            if name == graph.meta.get("name", "") and measured and once and \
                    same_size(profile, graph):
                return {op: int(t) for op, t in sorted(measured.items())
                        if op in once and int(t) > 0}
        return {}

    def runs(self, graph: OpGraph) -> np.ndarray | None:
        """(ops,) executions per step from the first profile of ``graph`` that recorded them
        (they depend on the graph, not the device); None where none did."""
        for (_, name), profile in self.profiles.items():
            if name == graph.meta.get("name", "") and profile.op_runs is not None and \
                    same_size(profile, graph):
                return profile.runs_for(graph.names)
        return None

    # ---- persistence -----------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> None:
        record = {"format_version": FORMAT_VERSION, "config": asdict(self.config),
                  "fitted": self.fitted, "profiles": [_profile_record(p) for p in
                                                      self.profiles.values()]}
        write_gzip_json(path, record)

    @classmethod
    def load(cls, path: str | os.PathLike) -> CostModel:
        record = read_gzip_json(path, "cost model", FORMAT_VERSION)
        try:
            config = CostModelConfig(**record["config"])
            profiles = [CostProfile(
                graph=p["graph"], device_kind=p["device_kind"], machine=p["machine"],
                op_names=np.asarray(p["op_names"], str),
                op_time_s=np.asarray(p["op_time_s"], np.float64),
                op_output_bytes=np.asarray(p["op_output_bytes"], np.int64),
                op_temp_bytes=np.asarray(p["op_temp_bytes"], np.int64),
                step_time_s=float(p["step_time_s"]), meta=p.get("meta", {}),
                op_runs=np.asarray(p["op_runs"], np.int64) if "op_runs" in p else None)
                for p in record["profiles"]]
        except (KeyError, TypeError, ValueError, OverflowError) as e:
            raise ConfigError(f"{path}: cost model is missing or has a wrong field "
                              f"({' '.join(str(e).split())[:120]})") from None
        for profile in profiles:
            profile.check(path)  # NaN or negative times crash the compiled simulator
        return cls(config, profiles, record.get("fitted", {}))


def import_size(graph: OpGraph) -> int:
    """The size the import gave ``graph``'s unknown dimensions (a None batch: the import's
    ``--unknown-dim``), or 1 where it sized none: a graph without unknown dimensions is the
    same graph, with the same costs, whatever size was asked for."""
    im = graph.meta.get("import", {})
    if not (im.get("sized_inputs") or im.get("outputs_with_unknown_dims")):
        return 1
    return int(im.get("unknown_dim", 1))


def same_size(profile: CostProfile, graph: OpGraph) -> bool:
    """Whether ``profile`` was measured with the size ``graph`` gives its unknown dimensions
    (gplace profile and the import's ``--unknown-dim``; 1 where either is silent or sized
    nothing)."""
    return int(profile.meta.get("unknown_dim", 1)) == import_size(graph)


def _temp_for(profile: CostProfile, names: np.ndarray) -> np.ndarray:
    lookup = {n: i for i, n in enumerate(profile.op_names.tolist())}
    idx = np.array([lookup.get(n, -1) for n in names.tolist()], np.int64)
    out = np.zeros(len(names), np.int64)
    out[idx >= 0] = profile.op_temp_bytes[idx[idx >= 0]]
    return out


def _profile_record(p: CostProfile) -> dict:
    return {"graph": p.graph, "device_kind": p.device_kind, "machine": p.machine,
            "op_names": p.op_names.tolist(), "op_time_s": p.op_time_s.tolist(),
            "op_output_bytes": p.op_output_bytes.tolist(),
            "op_temp_bytes": p.op_temp_bytes.tolist(), "step_time_s": p.step_time_s,
            "meta": p.meta, **({} if p.op_runs is None else {"op_runs": p.op_runs.tolist()})}


def profile_path_for(model: str | os.PathLike) -> Path:
    """Where a model file's profile lives: ``<name>.profile.json.gz`` beside it, named by the
    file name up to its first dot (as ``datasets/`` and ``gplace profile`` write them)."""
    path = Path(model)
    return path.parent / f"{path.name.split('.')[0]}.profile.json.gz"


def cost_model_for(source, name: str | None = None) -> CostModel:
    """The one cost rule of every entry point (place, bench, the studies): the measured profile
    that sits beside a model file (``<name>.profile.json.gz``, as ``datasets/`` writes them)
    for the devices of its kind, roofline estimates elsewhere (``OpCosts.estimated`` says
    which). The profile applies to the graph imported from that file under whatever name the
    profile recorded (a graph and its profile copied under a new name keep their costs); its op
    names still decide which ops it covers. ``name``: the graph's, where it is not the file's
    (``load_graph(path, name=...)``). A source that is not a path gets estimates only."""
    model = CostModel()
    if isinstance(source, (str, os.PathLike)):
        profile = profile_path_for(source)
        if profile.is_file():
            path = Path(source)
            name = name or (path.name if path.is_dir() else path.name.split(".")[0])
            model.add_profile(replace(CostProfile.load(profile), graph=name))
    return model
