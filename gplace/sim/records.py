"""The typed records the simulators return (one placement, or a batch of them)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Transfers(NamedTuple):
    """Every tensor that crossed devices in one simulated step, in the order they were sent."""

    output: np.ndarray    # (transfers,) int64: global output id (OpGraph.out_ptr numbering)
    src: np.ndarray       # (transfers,) int64: sending device
    dst: np.ndarray       # (transfers,) int64: receiving device
    start_s: np.ndarray   # (transfers,) float64: the link starts carrying it
    done_s: np.ndarray    # (transfers,) float64: the link is free again (start + bytes / bw)
    arrive_s: np.ndarray  # (transfers,) float64: usable at dst (done + latency)
    nbytes: np.ndarray    # (transfers,) int64


class SimResult(NamedTuple):
    """One simulated training step of one placement."""

    step_time_s: float        # end of the last op
    busy_s: np.ndarray        # (devices,) float64: summed op time (lane-seconds for CPUs)
    peak_bytes: np.ndarray    # (devices,) int64: parameters + peak live tensors and scratch
    oom: bool                 # some device's peak exceeds its memory_bytes
    op_device: np.ndarray     # (ops,) int64
    op_start_s: np.ndarray    # (ops,) float64
    op_end_s: np.ndarray      # (ops,) float64
    transfers: Transfers


class BatchResult(NamedTuple):
    """Many placements of one problem; row b is placement b."""

    step_time_s: np.ndarray   # (batch,) float64
    busy_s: np.ndarray        # (batch, devices) float64
    peak_bytes: np.ndarray    # (batch, devices) int64
    oom: np.ndarray           # (batch,) bool
    num_transfers: np.ndarray  # (batch,) int64: tensors that crossed devices
