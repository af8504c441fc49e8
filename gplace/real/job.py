"""The job a runner child reads on stdin: one JSON line, the GraphDef, the placements (.npy).

Through a pipe rather than a folder, so that a parent killed mid-run leaves no files behind.
"""

from __future__ import annotations

import io
import json
from typing import IO

import numpy as np


def write_job(stream: IO[bytes], job: dict, graph_bytes: bytes, placements) -> None:
    """The job as :func:`read_job` reads it: a JSON line, the GraphDef, the placements (.npy)."""
    buffer = io.BytesIO()
    np.save(buffer, np.asarray(placements), allow_pickle=False)
    npy = buffer.getvalue()
    header = {**job, "graph_bytes": len(graph_bytes), "placements_bytes": len(npy)}
    stream.write(json.dumps(header).encode() + b"\n")
    stream.write(graph_bytes)
    stream.write(npy)


def read_job(stream: IO[bytes]):
    """(job dict, GraphDef bytes, (B, ops) placements) from :func:`write_job`'s stream."""
    job = json.loads(stream.readline())
    graph_bytes = _read_exactly(stream, job["graph_bytes"])
    npy = _read_exactly(stream, job["placements_bytes"])
    return job, graph_bytes, np.load(io.BytesIO(npy), allow_pickle=False)


def _read_exactly(stream: IO[bytes], n: int) -> bytes:
    data = stream.read(n)
    if len(data) != n:
        raise EOFError(f"job truncated: {len(data)} of {n} bytes")
    return data
