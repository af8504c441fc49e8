"""Chrome / Perfetto trace of one simulated step (the Trace Event Format, "X" complete events).

Process 1 holds one track per device (one per lane for multi-lane devices; lanes are assigned
after the fact, first free lane in start order), process 2 one track per link channel with the
transfers it carried. Times are microseconds. Open the file in https://ui.perfetto.dev or
chrome://tracing.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from gplace.io import atomic_write_text
from gplace.problem import PlacementProblem
from gplace.sim.records import SimResult

_US = 1e6


def _lanes_of(start: np.ndarray, end: np.ndarray, lanes: int) -> np.ndarray:
    """A lane per op of one device so that ops on one lane do not overlap."""
    free = [0.0] * lanes
    lane = np.zeros(start.shape[0], np.int64)
    for i in np.lexsort((end, start)):
        k = min(range(lanes), key=lambda s: (free[s] > start[i], s))
        lane[i], free[k] = k, end[i]
    return lane


def _meta(pid: int, tid: int | None, name: str) -> dict[str, Any]:
    if tid is None:
        return {"ph": "M", "pid": pid, "name": "process_name", "args": {"name": name}}
    return {"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": name}}


def chrome_trace(problem: PlacementProblem, result: SimResult) -> dict[str, Any]:
    """The trace as a JSON-ready dict with ``traceEvents``."""
    g, cluster = problem.graph, problem.cluster
    events: list[dict[str, Any]] = [_meta(1, None, "devices"), _meta(2, None, "links")]
    tid = 0
    for d, device in enumerate(cluster.devices):
        ops = np.flatnonzero(result.op_device == d)
        lanes = _lanes_of(result.op_start_s[ops], result.op_end_s[ops], device.lanes)
        for k in range(device.lanes):
            label = device.name if device.lanes == 1 else f"{device.name} lane {k}"
            events.append(_meta(1, tid + k, label))
        for o, k in zip(ops.tolist(), lanes.tolist()):
            events.append({"ph": "X", "pid": 1, "tid": tid + k, "name": str(g.names[o]),
                           "cat": str(g.op_types[o]), "ts": result.op_start_s[o] * _US,
                           "dur": (result.op_end_s[o] - result.op_start_s[o]) * _US})
        tid += device.lanes
    links = cluster.link_table()
    owner = np.repeat(np.arange(g.num_ops), np.diff(g.out_ptr))
    x = result.transfers
    for ch, name in enumerate(links.channel_names):
        events.append(_meta(2, ch, name))
    for k in range(x.output.shape[0]):
        j, s, d = int(x.output[k]), int(x.src[k]), int(x.dst[k])
        op = owner[j]
        events.append({
            "ph": "X", "pid": 2, "tid": int(links.channel[s, d]),
            "name": f"{g.names[op]}:{j - g.out_ptr[op]} -> {cluster.devices[d].name}",
            "cat": "transfer", "ts": x.start_s[k] * _US, "dur": (x.done_s[k] - x.start_s[k]) * _US,
            "args": {"bytes": int(x.nbytes[k]), "arrive_us": x.arrive_s[k] * _US}})
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"graph": g.meta.get("name", ""), "cluster": cluster.name,
                          "step_time_s": result.step_time_s}}


def write_trace(path: str | os.PathLike, problem: PlacementProblem, result: SimResult) -> None:
    atomic_write_text(path, json.dumps(chrome_trace(problem, result)))
