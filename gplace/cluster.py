"""Cluster: the devices a graph is placed on and the links between them.

A cluster is read from YAML (``Cluster.from_yaml``) or picked by preset name
(``load_cluster("post-4gpu")``); the presets live in ``gplace/clusters/*.yaml`` and carry the
datasheet source of every figure in a comment. ``local`` is built on use from the devices
TensorFlow sees on this machine (``tf.config.list_physical_devices``).

Links. Every ordered device pair ``(a, b)`` gets a *channel*: a FIFO queue that serializes its
transfers (the simulator's link). A ``links`` entry with ``shared: false`` (the default) gives each
ordered pair of its devices its own channel (full-duplex point-to-point links, PCIe or NVLink);
``shared: true`` puts every pair of its devices on one channel (a bus, e.g. the one PCIe x16 slot
the two GPUs of a K80 board share). Pairs no entry lists use ``default_link``, one channel each.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from gplace.cluster_yaml import DEVICE_KINDS, cluster_fields, read_yaml, same_tf_device  # noqa: F401
from gplace.errors import ConfigError

PRESET_DIR = Path(__file__).parent / "clusters"


@dataclass(frozen=True)
class Device:
    """One device. Throughput figures are for the whole device, shared by its lanes."""

    name: str                 # short name used in placements, e.g. "gpu0"
    tf_device: str            # "/job:localhost/replica:0/task:0/device:GPU:0"
    kind: str                 # cost-model key; measured profiles apply per kind ("cpu", "k80")
    peak_flops: float         # FLOP/s, fp32 peak from the datasheet
    mem_bandwidth: float      # bytes/s, device memory bandwidth
    memory_bytes: int         # capacity; a simulated peak above it is an OOM
    launch_overhead_s: float = 5e-6  # per-op kernel launch / executor cost (TF GPU ~5-10 us)
    lanes: int = 1            # ops that run at once (TF inter-op threads on CPUs; GPUs 1 stream)
    # FLOP/s of ops computing in float16 or bfloat16 (tensor cores), from the datasheet; None:
    # peak_flops (a device without a faster 16-bit path)
    half_flops: float | None = None


@dataclass(frozen=True)
class Link:
    """Bandwidth and latency among ``devices``; ``shared`` makes it one bus (one channel)."""

    devices: tuple[str, ...]  # two or more device names
    bandwidth: float          # bytes/s, effective (not the signalling rate)
    latency_s: float          # per transfer, added after the bytes are on the wire
    shared: bool = False      # True: all pairs share one FIFO channel (a bus)
    # CPU time a transfer takes on the receiving device's lane once it has arrived, fixed and
    # per byte, before its consumers may use it: gRPC receipt and copy on a TF task of one
    # core (local-procs, fitted by `gplace calibrate`). 0 for links served by DMA engines.
    recv_cpu_s: float = 0.0
    recv_cpu_s_per_byte: float = 0.0


class LinkTable(NamedTuple):
    """Per ordered device pair: the channel that carries it, its bandwidth and latency."""

    channel: np.ndarray       # (D, D) int64; -1 on the diagonal
    bandwidth: np.ndarray     # (D, D) float64 bytes/s; inf on the diagonal
    latency_s: np.ndarray     # (D, D) float64; 0 on the diagonal
    num_channels: int
    channel_names: tuple[str, ...]  # e.g. "gpu0->gpu1", "pcie-board0"
    recv_cpu_s: np.ndarray | None = None           # (D, D) float64; 0 on the diagonal
    recv_cpu_s_per_byte: np.ndarray | None = None  # (D, D) float64; 0 on the diagonal


@dataclass(frozen=True)
class Cluster:
    name: str
    devices: tuple[Device, ...]
    links: tuple[Link, ...] = ()
    default_link: Link = Link((), 12e9, 10e-6)  # PCIe 3.0 x16 effective; see presets
    description: str = ""

    @property
    def num_devices(self) -> int:
        return len(self.devices)

    @property
    def device_names(self) -> list[str]:
        return [d.name for d in self.devices]

    def device_index(self, name: str) -> int:
        """Index of the device called ``name`` or with TF device string ``name``."""
        for i, d in enumerate(self.devices):
            if name in (d.name, d.tf_device) or same_tf_device(name, d.tf_device):
                return i
        raise ConfigError(f"cluster {self.name!r} has no device {name!r}; devices: "
                          f"{', '.join(self.device_names)}")

    def link_table(self) -> LinkTable:
        return _link_table(self)

    def summary(self) -> dict[str, Any]:
        """Plain-data view for ``gplace clusters --json``."""
        return {
            "name": self.name, "description": self.description,
            "devices": [_device_record(d) for d in self.devices],
            "links": [{"devices": list(l.devices), "bandwidth": l.bandwidth,
                       "latency_s": l.latency_s, "shared": l.shared, **_recv_cpu(l)}
                      for l in self.links],
            "default_link": {"bandwidth": self.default_link.bandwidth,
                             "latency_s": self.default_link.latency_s,
                             **_recv_cpu(self.default_link)},
        }

    @classmethod
    def from_yaml(cls, path: str | os.PathLike) -> Cluster:
        path = Path(path)
        return cluster_from_dict(read_yaml(path), str(path))


def _device_record(device: Device) -> dict[str, Any]:
    """A device's fields; ``half_flops`` only where set (devices without it leave it out)."""
    return {f.name: getattr(device, f.name) for f in fields(Device)
            if f.name != "half_flops" or device.half_flops is not None}


def _recv_cpu(link: Link) -> dict[str, float]:
    """The receive-CPU fields of ``link`` where set (presets leave them out)."""
    return {k: getattr(link, k) for k in ("recv_cpu_s", "recv_cpu_s_per_byte")
            if getattr(link, k)}


# ---- memory limits --------------------------------------------------------------------------
_SIZE = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(e[+-]?\d+)?\s*([kmgtp]i?)?b?", re.I)
_SCALE = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "p": 10**15,
          "ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40, "pi": 2**50}
MAX_MEMORY_BYTES = 2**50  # as a cluster YAML's memory_bytes (gplace.cluster_yaml.RANGES)


def parse_bytes(text: str) -> int:
    """'8GB', '512MiB', '1e9', '1.5k', '100' -> bytes: decimal units for kB/MB/GB/TB/PB,
    binary for KiB/MiB/GiB/TiB/PiB, the B optional, case ignored. A ConfigError for anything
    else, and for a size under 1 byte or over 1 PiB."""
    m = _SIZE.fullmatch(str(text).strip())
    if not m:
        raise ConfigError(f"memory limit {str(text)[:40]!r} is not a size such as 8GB, 512MiB "
                          f"or 1e9")
    number = float(m.group(1) + (m.group(2) or ""))
    n = number * _SCALE[(m.group(3) or "").lower()]
    if not 1 <= n <= MAX_MEMORY_BYTES:
        raise ConfigError(f"memory limit {text.strip()!r} is {n:.4g} bytes; a limit is from "
                          f"1 byte to 1 PiB (a device with no memory can hold no op)")
    return int(n)


def memory_caps(limit: str) -> dict[str | None, int]:
    """'8GB' -> {None: 8e9} (every device); 'gpu0=8GB,gpu1=4GB' -> {'gpu0': 8e9, 'gpu1': 4e9}.
    Sizes as :func:`parse_bytes`; a ConfigError for an empty limit, part or device name."""
    if not str(limit).strip():
        raise ConfigError("empty memory limit: give a size such as 8GB, or gpu0=8GB,gpu1=4GB "
                          "(leave the option out for no limit)")
    caps: dict[str | None, int] = {}
    for part in str(limit).split(","):
        name, eq, size = part.rpartition("=")
        if not part.strip() or (eq and not name.strip()):
            raise ConfigError(f"memory limit {limit[:60]!r}: an empty part or device name; "
                              f"write 8GB, or gpu0=8GB,gpu1=4GB")
        if eq and not size.strip():
            raise ConfigError(f"memory limit {part.strip()[:60]!r}: no size after '='")
        key = name.strip() if eq else None
        if key in caps:
            raise ConfigError(f"memory limit {limit[:60]!r}: "
                              f"{'every device' if key is None else key} is capped twice")
        caps[key] = parse_bytes(size)
    return caps


def with_memory_limit(cluster: Cluster, limit: str | None) -> Cluster:
    """``8GB`` caps every device; ``gpu0=8GB,gpu1=4GB`` caps the named ones; None: no cap."""
    if limit is None:
        return cluster
    caps: dict[str, int] = {}
    for name, size in memory_caps(limit).items():
        for d in [cluster.device_index(name)] if name else range(cluster.num_devices):
            caps[cluster.devices[d].name] = size  # device_index raises for an unknown name
    devices = tuple(replace(d, memory_bytes=min(d.memory_bytes, caps.get(d.name, d.memory_bytes)))
                    for d in cluster.devices)
    return replace(cluster, devices=devices)


# ---- link table ------------------------------------------------------------------------------
def _link_table(cluster: Cluster) -> LinkTable:
    n = cluster.num_devices
    index = {d.name: i for i, d in enumerate(cluster.devices)}
    channel = np.full((n, n), -2, np.int64)
    bw = np.full((n, n), cluster.default_link.bandwidth)
    lat = np.full((n, n), cluster.default_link.latency_s)
    rc = np.full((n, n), cluster.default_link.recv_cpu_s)
    rcb = np.full((n, n), cluster.default_link.recv_cpu_s_per_byte)
    names: list[str] = []
    for k, link in enumerate(cluster.links):  # later entries override earlier ones
        ids = [index[x] for x in link.devices]
        if link.shared:
            names.append(f"bus{k}:" + "+".join(link.devices))
        for a in ids:
            for b in ids:
                if a == b:
                    continue
                if link.shared:
                    channel[a, b] = len(names) - 1
                else:
                    names.append(f"{cluster.devices[a].name}->{cluster.devices[b].name}")
                    channel[a, b] = len(names) - 1
                bw[a, b], lat[a, b] = link.bandwidth, link.latency_s
                rc[a, b], rcb[a, b] = link.recv_cpu_s, link.recv_cpu_s_per_byte
    for a in range(n):
        for b in range(n):
            if a != b and channel[a, b] == -2:
                names.append(f"{cluster.devices[a].name}->{cluster.devices[b].name}")
                channel[a, b] = len(names) - 1
    np.fill_diagonal(channel, -1)
    np.fill_diagonal(bw, np.inf)
    np.fill_diagonal(lat, 0.0)
    np.fill_diagonal(rc, 0.0)
    np.fill_diagonal(rcb, 0.0)
    # channels numbered in first-use order; drop ids overridden by later entries
    used = sorted(set(channel[channel >= 0].tolist()))
    remap = {c: i for i, c in enumerate(used)}
    channel = np.vectorize(lambda c: remap.get(c, -1))(channel).astype(np.int64)
    return LinkTable(channel, bw, lat, len(used), tuple(names[c] for c in used), rc, rcb)


# ---- presets ---------------------------------------------------------------------------------
# ---- interchangeable devices ------------------------------------------------------------
def interchangeable(cluster: Cluster) -> np.ndarray:
    """(devices,) class of each device: devices i and j share a class when swapping them
    changes nothing the simulator sees (the same device figures, the same links to every
    other device), e.g. the two tasks of local-procs."""
    devs, table = cluster.devices, cluster.link_table()
    spec = [replace(d, name="", tf_device="") for d in devs]
    cls = np.arange(len(devs))
    for j in range(len(devs)):
        for i in range(j):
            if cls[i] == i and spec[i] == spec[j] and _swap_keeps(table, i, j):
                cls[j] = i
                break
    return cls


def _swap_keeps(table, i: int, j: int) -> bool:
    perm = np.arange(len(table.bandwidth))
    perm[[i, j]] = perm[[j, i]]
    same = all(np.array_equal(m, m[np.ix_(perm, perm)])
               for m in (table.bandwidth, table.latency_s, table.recv_cpu_s,
                         table.recv_cpu_s_per_byte))
    ch = table.channel  # and the same pairs share a channel (a bus)
    return same and np.array_equal(_groups(ch), _groups(ch[np.ix_(perm, perm)]))


def _groups(channel: np.ndarray) -> np.ndarray:
    """The channel matrix with ids renamed in order of first appearance (row-major)."""
    _, first, inverse = np.unique(channel.ravel(), return_index=True, return_inverse=True)
    return np.argsort(np.argsort(first))[inverse.ravel()]


def canonical(p: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """``p`` with the devices of each class renamed in order of first use (the class's
    lowest-numbered device first): equal for a placement and its mirrors."""
    out = p.copy()
    for c in np.unique(classes):
        members = np.flatnonzero(classes == c)
        if len(members) < 2:
            continue
        used = [d for d in dict.fromkeys(p.tolist()) if classes[d] == c]
        for new, old in zip(members, used):
            out[p == old] = new
    return out


def mirror(classes: np.ndarray, s: int) -> np.ndarray:
    """(devices,) permutation that moves every device ``s`` places on within its class (the
    ``s``-th mirror of a placement: ``mirror(classes, s)[p]``); the identity for s = 0 and
    for devices without a twin. The simulator sees a placement and its mirrors alike."""
    perm = np.arange(len(classes))
    for c in np.unique(classes):
        members = np.flatnonzero(classes == c)
        perm[members] = np.roll(members, -(s % len(members)))
    return perm


def preset_names() -> list[str]:
    """Names accepted by :func:`load_cluster`: the YAML presets plus ``local``."""
    return sorted([p.stem for p in PRESET_DIR.glob("*.yaml")] + ["local"])


def load_cluster(name_or_path: str | os.PathLike) -> Cluster:
    """A preset by name (see :func:`preset_names`) or a cluster YAML file by path."""
    text = str(name_or_path)
    if text == "local":
        return local_cluster()
    preset = PRESET_DIR / f"{text}.yaml"
    if "/" not in text and not text.endswith((".yaml", ".yml")) and preset.is_file():
        return Cluster.from_yaml(preset)
    path = Path(text)
    if path.is_file():
        return Cluster.from_yaml(path)
    raise ConfigError(f"unknown cluster {text!r}: not a preset or a YAML file; presets: "
                      f"{', '.join(preset_names())}")


@lru_cache(maxsize=1)
def local_cluster() -> Cluster:
    """The devices TensorFlow sees here. Figures are rough estimates (no datasheet for an
    arbitrary machine): CPU peak = cores x 2.5 GHz x 16 fp32 FLOP/cycle (AVX2 FMA, one unit),
    20 GB/s memory bandwidth; GPUs get generic V100-class figures (fp32 only: no half_flops,
    as on the presets). The CPU kind is "cpu" so that
    profiles measured on this machine (datasets/) apply to it."""
    cores = os.cpu_count() or 1
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        pages = 8 << 30
    kinds = tf_devices()
    devices, gpu = [], 0
    for dev_type, index in kinds:
        if dev_type == "CPU":
            devices.append(Device(
                name=f"cpu{index}" if index else "cpu",
                tf_device=f"/job:localhost/replica:0/task:0/device:CPU:{index}", kind="cpu",
                peak_flops=cores * 2.5e9 * 16, mem_bandwidth=20e9, memory_bytes=int(pages),
                launch_overhead_s=2e-6, lanes=max(1, min(cores, 4))))
        elif dev_type == "GPU":
            devices.append(Device(
                name=f"gpu{gpu}", tf_device=f"/job:localhost/replica:0/task:0/device:GPU:{index}",
                kind="gpu", peak_flops=14e12, mem_bandwidth=900e9, memory_bytes=16 << 30,
                launch_overhead_s=8e-6, lanes=1))
            gpu += 1
    return Cluster(name="local", devices=tuple(devices), default_link=Link((), 12e9, 10e-6),
                   description=f"devices TensorFlow sees on this machine ({cores} CPU cores); "
                               "figures are estimates")


def tf_devices() -> list[tuple[str, int]]:
    """(type, index) of the physical devices TF lists; one CPU if TF is not installed or
    cannot see more (tf_sees_one_device, which needs no import of TF)."""
    from gplace.errors import GplaceError
    from gplace.tfimport import tensorflow
    if tf_sees_one_device():
        return [("CPU", 0)]
    try:
        tf = tensorflow()
        found = []
        for t in ("CPU", "GPU"):
            found += [(t, i) for i, _ in enumerate(tf.config.list_physical_devices(t))]
        return found or [("CPU", 0)]
    except GplaceError:  # TensorFlow is not installed
        return [("CPU", 0)]


def tf_sees_one_device() -> bool:
    """True when TensorFlow would list only this machine's CPU, known without importing it
    (seconds): its build has no CUDA or ROCm, or the driver library does not load, and no
    pluggable device is installed. False means: ask TensorFlow (tf_devices)."""
    import ctypes
    import importlib.util
    import site
    spec = importlib.util.find_spec("tensorflow")
    if spec is None or not spec.submodule_search_locations:
        return True  # no TensorFlow: local_cluster counts one CPU too
    if os.environ.get("TF_PLUGGABLE_DEVICE_LIBRARY_PATH") or any(
            os.path.isdir(os.path.join(d, "tensorflow-plugins"))
            for d in [*getattr(site, "getsitepackages", list)(), *sys.path]):
        return False
    info = Path(spec.submodule_search_locations[0]) / "python" / "platform" / "build_info.py"
    try:
        text = info.read_text()
    except OSError:
        return False
    for flag, driver in (("is_cuda_build", "libcuda.so.1"), ("is_rocm_build", "libamdhip64.so")):
        if f"'{flag}', True" in text:
            try:
                ctypes.CDLL(driver)
                return False  # a driver: TF may see GPUs
            except OSError:
                continue
        elif f"'{flag}', False" not in text:
            return False  # a build_info this check does not know
    return True


def cluster_from_dict(record: Any, where: str) -> Cluster:
    """Builds and checks a Cluster from parsed YAML (gplace.cluster_yaml); errors name
    ``where`` and the field."""
    f = cluster_fields(record, where)
    return Cluster(name=f["name"], devices=tuple(Device(**d) for d in f["devices"]),
                   links=tuple(Link(**l) for l in f["links"]),
                   default_link=Link(**f["default_link"]), description=f["description"])
