"""CostProfile: per-op costs of one graph measured on one kind of device.

A profile is what ``datasets.build`` and ``gplace profile`` measure with TensorFlow's
``RunMetadata.step_stats`` under ``FULL_TRACE``; the cost model (gplace.cost) reads it
for every cluster device of the same ``device_kind``. Stored as gzip-compressed JSON so that it
diffs, compresses well (about 10x) and never needs unpickling.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from gplace.errors import ConfigError
from gplace.io import read_gzip_json, write_gzip_json

FORMAT_VERSION = 1


@dataclass(frozen=True, eq=False)
class CostProfile:
    graph: str                 # OpGraph.meta["name"] of the profiled graph
    device_kind: str           # matches Device.kind of a cluster, e.g. "cpu", "k80"
    machine: str               # where it was measured: CPU model / GPU name, host
    op_names: np.ndarray       # (profiled ops,) str
    op_time_s: np.ndarray      # (profiled ops,) float64: median compute time over traced steps
    op_output_bytes: np.ndarray  # (profiled ops,) int64: bytes the op's outputs allocated
    op_temp_bytes: np.ndarray  # (profiled ops,) int64: temporary memory the kernel allocated
    step_time_s: float         # median wall time of one traced training step
    meta: dict[str, Any] = field(default_factory=dict)  # tf version, threads, steps, coverage
    op_runs: np.ndarray | None = None  # (profiled ops,) int64: executions per step (a TF1
    #                                    loop's ops run once per iteration); None: not recorded

    @property
    def coverage(self) -> float:
        """Sum of profiled op times over the measured step time (1.0 = fully explained)."""
        return float(self.op_time_s.sum() / self.step_time_s) if self.step_time_s > 0 else 0.0

    def times_for(self, names: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(times, found) aligned with ``names``: measured seconds and whether each was profiled."""
        lookup = {n: i for i, n in enumerate(self.op_names.tolist())}
        idx = np.array([lookup.get(n, -1) for n in names.tolist()], np.int64)
        found = idx >= 0
        times = np.zeros(len(names), np.float64)
        times[found] = self.op_time_s[idx[found]]
        return times, found

    def runs_for(self, names: np.ndarray) -> np.ndarray:
        """(names,) int64 executions per step of each op: the recorded count, at least 1 (an
        untaken branch's ops, unrecorded counts and ops outside the profile count once)."""
        runs = np.ones(len(names), np.int64)
        if self.op_runs is None:
            return runs
        lookup = {n: i for i, n in enumerate(self.op_names.tolist())}
        idx = np.array([lookup.get(n, -1) for n in names.tolist()], np.int64)
        found = idx >= 0
        runs[found] = np.maximum(self.op_runs[idx[found]], 1)
        return runs

    def save(self, path: str | os.PathLike) -> None:
        record = asdict(self)
        for key in ("op_names", "op_time_s", "op_output_bytes", "op_temp_bytes"):
            record[key] = getattr(self, key).tolist()
        if self.op_runs is None:
            del record["op_runs"]
        else:
            record["op_runs"] = self.op_runs.tolist()
        record["format_version"] = FORMAT_VERSION
        write_gzip_json(path, record)

    @classmethod
    def load(cls, path: str | os.PathLike) -> CostProfile:
        record = read_gzip_json(path, "profile", FORMAT_VERSION)
        try:
            profile = cls(
                graph=record["graph"], device_kind=record["device_kind"],
                machine=record["machine"], step_time_s=float(record["step_time_s"]),
                op_names=np.asarray(record["op_names"], dtype=str),
                op_time_s=np.asarray(record["op_time_s"], np.float64),
                op_output_bytes=np.asarray(record["op_output_bytes"], np.int64),
                op_temp_bytes=np.asarray(record["op_temp_bytes"], np.int64),
                meta=record.get("meta", {}),
                op_runs=(np.asarray(record["op_runs"], np.int64) if "op_runs" in record
                         else None))
        except KeyError as e:
            raise ConfigError(f"{path}: profile is missing the field {e.args[0]!r}") from None
        except (TypeError, ValueError, OverflowError) as e:
            raise ConfigError(f"{path}: a profile field has the wrong type "
                              f"({type(e).__name__})") from None
        profile.check(path)
        return profile

    def check(self, path) -> None:
        """ConfigError unless every array has one entry per op and every time, byte and run
        count is finite, non-negative and below a day, an exbibyte, a billion runs per op."""
        if not all(isinstance(v, str) for v in (self.graph, self.device_kind, self.machine)):
            raise ConfigError(f"{path}: profile fields 'graph', 'device_kind' and 'machine' "
                              "must be text")
        if self.op_names.ndim != 1:
            raise ConfigError(f"{path}: profile field 'op_names' is not a list of names")
        n = len(self.op_names)
        arrays = {"op_time_s": self.op_time_s, "op_output_bytes": self.op_output_bytes,
                  "op_temp_bytes": self.op_temp_bytes}
        if self.op_runs is not None:
            arrays["op_runs"] = self.op_runs
        for name, values in arrays.items():
            if values.shape != (n,):
                raise ConfigError(f"{path}: profile field {name!r} has {values.size} entries "
                                  f"for {n} ops")
        times = np.append(self.op_time_s, self.step_time_s)
        if not np.all(np.isfinite(times)) or times.min(initial=0) < 0 or times.max() > 86400:
            raise ConfigError(f"{path}: profile times must be finite seconds in 0..86400")
        counts = np.concatenate([self.op_output_bytes, self.op_temp_bytes])
        if counts.min(initial=0) < 0 or counts.max(initial=0) > 2**60:
            raise ConfigError(f"{path}: profile byte counts must be in 0..2**60")
        if self.op_runs is not None and (self.op_runs.min(initial=0) < 0 or
                                         self.op_runs.max(initial=0) > 10**9):
            raise ConfigError(f"{path}: profile run counts must be in 0..10**9 per step")
