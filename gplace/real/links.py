"""Link model of a real cluster, fitted from a transfer benchmark.

The simulator charges a tensor sent between devices ``latency + bytes / bandwidth`` (gplace.sim).
Here both are measured: a float32 tensor of ``n`` bytes hops back and forth
between tasks ``a`` and ``b`` along a chain of identities (each hop waits for the whole tensor),
against a baseline step in which the same chain stays on ``a``; the extra step time divided by
the number of hops (32 for small tensors, 2 for large ones) is the cost of one transfer. Least squares of extra time on bytes gives the latency (intercept)
and 1 / bandwidth (slope), as in Hockney's alpha-beta model (Parallel Computing, 1994).

The same benchmark reports the fixed cost of a step that the simulator does not see: the client
-> master -> worker RPCs around every ``Session.run`` (``StepOverhead``), once for a step on one
task and once for a step on two.

Each pair of variants (baseline and cross; one task and two) is timed interleaved, one step of
each in turn, and summarized by the 20% trimmed mean, as placements are
(:mod:`gplace.real.protocol`): on a shared machine a burst of other work then slows both
variants of a pair alike instead of one of them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from gplace.tfimport import tensorflow

SIZES = (4 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20)  # bytes, 4 KiB .. 16 MiB


@dataclass(frozen=True)
class LinkBenchConfig:
    sizes: tuple[int, ...] = SIZES
    repeats: int = 21        # timed steps per size and variant, interleaved; trimmed means
    warmup: int = 3
    timeout_s: float = 60.0
    busy_matmuls: int = 0    # > 0: both tasks also run a chain of this many 256x256 matmuls in
                             # every step (baseline and cross), so transfers compete for the
                             # one core of each task as they do inside a training step


class LinkFit(NamedTuple):
    latency_s: float               # intercept: per-transfer cost
    bandwidth: float               # bytes/s: 1 / slope
    sizes: tuple[int, ...]
    extra_s: tuple[float, ...]     # measured extra step time per transfer, per size
    residual_rel: tuple[float, ...]  # (fit - measured) / measured per size


class StepOverhead(NamedTuple):
    one_task_s: float    # wall time of a trivial step on one task (trimmed mean)
    two_task_s: float    # ... of a trivial step that runs on two tasks, nothing crossing


def fit_link(sizes, extra_s) -> tuple[float, float]:
    """(latency, bandwidth) by least squares of extra_s = latency + bytes / bandwidth, each
    residual relative to its measurement: unweighted, the 64 MiB point alone would set the
    line, and most tensors of a training step are KiB to a few MiB."""
    x, y = np.asarray(sizes, np.float64), np.asarray(extra_s, np.float64)
    w = 1.0 / np.maximum(np.abs(y), 1e-5)
    (intercept, slope), *_ = np.linalg.lstsq(np.stack([w, w * x], 1), w * y, rcond=None)
    return float(max(intercept, 0.0)), float(1.0 / max(slope, 1e-15))


def _time_interleaved(runs: list, cfg: LinkBenchConfig, options) -> list[float]:
    """20% trimmed mean step time of each (session, fetch), one step of each in turn."""
    from gplace.real.protocol import trimmed_mean
    for sess, fetch in runs:
        for _ in range(cfg.warmup):
            sess.run(fetch, options=options)
    times = [[] for _ in runs]
    for _ in range(cfg.repeats):
        for k, (sess, fetch) in enumerate(runs):
            t0 = time.perf_counter()
            sess.run(fetch, options=options)
            times[k].append(time.perf_counter() - t0)
    return [float(trimmed_mean(np.array(t), 0.2)) for t in times]


def _busy(tf, device: str, matmuls: int):
    with tf.device(device):
        m = tf.ones([256, 256]) * 1e-3
        for _ in range(matmuls):
            m = tf.matmul(m, m)
        return m[0, 0]


def _bench_graph(tf, n_bytes: int, count: int, src: str, dst: str, cross: bool,
                 busy: int = 0):
    """(graph, init, fetch): a variable of ``n_bytes`` on ``src`` passed along a chain of
    ``count`` identities that alternate between ``dst`` and ``src`` (cross), or all on ``src``
    (baseline). Each hop waits for the whole tensor of the one before, so the hops are
    dependent, as transfers on a training step's critical path are (concurrent tensors would
    overlap in gRPC and understate the cost of one). ``dst`` runs a trivial op in both."""
    g = tf.Graph()
    with g.as_default():
        with tf.device(src):
            v = tf.Variable(tf.zeros([max(1, n_bytes // 4)], tf.float32))
            x = v.read_value()
        for hop in range(count):
            with tf.device((dst if hop % 2 == 0 else src) if cross else src):
                x = tf.identity(x)
        with tf.device(src):
            used = [tf.identity(x)[0]]  # reads the data; Size would be folded
        with tf.device(dst):
            used.append(tf.identity(tf.constant([1.0]))[0])
        if busy:
            used += [_busy(tf, src, busy), _busy(tf, dst, busy)]
        fetch = tf.group(*used)
        init = tf.compat.v1.global_variables_initializer()
    return g, init, fetch


def transfers_per_step(n_bytes: int) -> int:
    """Hops per benchmark step (even: the chain ends where it began): many for small tensors
    (one 4 KiB transfer is lost in a step's noise on a busy machine), 2 from 4 MiB up."""
    return int(np.clip((8 << 20) // max(n_bytes, 1), 2, 32)) // 2 * 2


def _trivial_graph(tf, devices: list[str]):
    g = tf.Graph()
    with g.as_default():
        outs = []
        for d in devices:
            with tf.device(d):
                outs.append(tf.identity(tf.constant([1.0]))[0])
        fetch = tf.group(*outs)
    return g, fetch


def remote_session_config():
    """The profiler's session config (grappler off, no constant folding: ``tf.size`` of a
    static shape would otherwise be folded away), minus per-session pools, which a
    distributed session rejects."""
    from gplace import profiler as prof
    config = prof.session_config(prof.ProfileConfig())
    config.use_per_session_threads = False
    return config


def benchmark(target: str, src: str, dst: str,
              cfg: LinkBenchConfig = LinkBenchConfig()) -> tuple[LinkFit, StepOverhead]:
    """Runs the benchmark between TF devices ``src`` and ``dst`` of the servers at ``target``."""
    tf = tensorflow()
    options = tf.compat.v1.RunOptions(timeout_in_ms=int(cfg.timeout_s * 1000))
    config = remote_session_config()
    config.isolate_session_state = True  # the two variants' variables apart
    runs = []
    for devices in ([src], [src, dst]):
        g, fetch = _trivial_graph(tf, devices)
        runs.append((tf.compat.v1.Session(target=target, graph=g, config=config), fetch))
    try:
        overhead = _time_interleaved(runs, cfg, options)
    finally:
        for sess, _ in runs:
            sess.close()
    extra = []
    for n in cfg.sizes:
        count, runs = transfers_per_step(n), []
        try:
            for cross in (False, True):
                g, init, fetch = _bench_graph(tf, n, count, src, dst, cross, cfg.busy_matmuls)
                sess = tf.compat.v1.Session(target=target, graph=g, config=config)
                runs.append((sess, fetch))
                sess.run(init, options=options)
            base, crossing = _time_interleaved(runs, cfg, options)
        finally:
            for sess, _ in runs:
                sess.close()
        extra.append((crossing - base) / count)
    latency, bandwidth = fit_link(cfg.sizes, extra)
    fitted = latency + np.asarray(cfg.sizes) / bandwidth
    resid = tuple(float(r) for r in (fitted - extra) / np.maximum(np.abs(extra), 1e-9))
    return (LinkFit(latency, bandwidth, tuple(cfg.sizes), tuple(extra), resid),
            StepOverhead(*overhead))
