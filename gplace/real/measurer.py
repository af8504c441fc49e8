"""RealMeasurer: step times of placements run for real in TensorFlow.

    with RealMeasurer(problem, "model.pb") as real:      # local-procs: starts the servers
        m = real.measure(placements)                     # (B, units) -> Measurement
        m.low_s, m.high_s                                # each step time's interval
        real.last_results[0].reason                      # why a placement is infeasible

Post (Gao et al., NeurIPS 2018) and HDP (Mirhoseini et al., ICLR 2018) measured every placement
by running it; this is that measurement. For each placement NodeDef.device of every op is set
to its device's ``tf_device`` (``problem.expand``) and the batch is measured by the protocol of
:mod:`gplace.real.protocol`: two sessions per placement (it and its mirror over
interchangeable devices), rounds that visit the placements interleaved with a warm-up step
after each switch, until each placement's interval is tight or the time cap is reached (or,
after the first visit of each, a Ctrl-C asks the search to stop: gplace.stopping); the
step time is a trimmed mean of the timed steps and comes with its confidence interval. How
loaded the machine was (:mod:`gplace.real.load`) is logged with every batch, as a warning when
other work took a noticeable share of the CPU.

Never a crash: a placement whose simulated peak memory exceeds a device's ``memory_bytes`` is
refused before it runs (TF's CPU allocator has no hard limit to hit); a TF error
(ResourceExhausted, device or runtime errors), a hang past ``timeout_s`` and a server process
that dies each make that placement infeasible with the reason in ``last_results``; TF's
retryable errors (Aborted, Unavailable: :data:`gplace.real.batch.RETRYABLE`) first close and
reopen the session that raised one, up to ``RealConfig.retries`` times, and the protocol goes
on. The graph runs in a child process (:mod:`gplace.real.runner`) so a hang costs only that
child, which is killed with its process group; dead or hung servers are restarted and the
other placements' sessions reopened. The protocol's loop over one chunk of a batch is
:class:`gplace.real.batch.Batch`.
"""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from gplace import stopping
from gplace.errors import ConfigError
from gplace.importer.step import step_graph_def
from gplace.measure import Measurement
from gplace.problem import PlacementProblem
from gplace.real.batch import Batch, RealResult, failed_result
from gplace.real.child import RunnerChild
from gplace.real.load import LoadFigures, LoadProbe
from gplace.real.procs import JOB, LocalProcs, RemoteTasks
from gplace.real.protocol import ProtocolConfig
from gplace.real.safety import check_safe
from gplace.summary import plural


@dataclass(frozen=True)
class RealConfig:
    protocol: ProtocolConfig = field(default_factory=ProtocolConfig)  # steps, estimator, caps
    timeout_s: float = 120.0    # per command (opening a placement, or one visit's steps);
                                # past it the placement is a hang
    start_timeout_s: float = 90.0  # importing TF in the runner takes ~10 s on a busy machine
    fetch: str | None = None    # the op one step runs (its first output: the loss); None:
                                # step_loss, or else the one op nothing consumes (step_op)
    check_memory: bool = True   # refuse placements whose simulated peak exceeds memory_bytes
    allow_unsafe: bool = False  # run graphs with file-system / Python / RPC ops (safety.py)
    local_threads: int = 0      # thread pools of an in-process (`local`) run; 0 = TF's choice
    max_open: int = 64          # sessions open at once (ProtocolConfig.sessions per
                                # placement); a larger batch is measured in chunks
    max_open_bytes: int = 4 << 30  # and at most this much of variables (weights and slots)
                                # held on the servers by the open sessions together
    verbose: bool = True        # log each placement's step time with its interval
    retries: int = 1            # reopens of a session per batch after a RETRYABLE error (in
                                # the 2-hour calibration one session raised AbortedError once
                                # and its placement dropped out: calibration/RESULTS.md)

    def __post_init__(self):
        if self.retries < 0:
            raise ConfigError(f"retries = {self.retries} must be >= 0")


def worker_tasks(problem: PlacementProblem) -> int:
    """Number of ``/job:worker`` tasks the cluster's devices name (0: an in-process cluster)."""
    tasks = set()
    for d in problem.cluster.devices:
        spec = d.tf_device.lower()
        if f"/job:{JOB}" in spec:
            part = spec.split("/task:")
            tasks.add(int(part[1].split("/")[0]) if len(part) > 1 else 0)
        elif "/job:localhost" not in spec and spec.startswith("/job:"):
            raise ConfigError(f"device {d.name!r}: TF device {d.tf_device!r} is neither "
                              f"/job:localhost nor /job:{JOB}")
    return max(tasks) + 1 if tasks else 0


def check_local_devices(problem: PlacementProblem, here: list[tuple[str, int]]) -> None:
    """ConfigError unless TensorFlow lists, in ``here`` ((type, index) pairs:
    gplace.cluster.tf_devices), every in-process device (not /job:worker) the cluster names:
    a preset's GPUs on a machine without them would fail every placement that uses them."""
    missing, seen = [], set(here)
    for d in problem.cluster.devices:
        spec = d.tf_device.lower()
        m = re.search(r"(cpu|gpu):(\d+)$", spec)
        if f"/job:{JOB}" not in spec and m and (m[1].upper(), int(m[2])) not in seen:
            missing.append(f"{d.name} ({d.tf_device})")
    if missing:
        listed = ", ".join(f"{t}:{i}" for t, i in here)
        ours = ("--cluster local: the devices TensorFlow sees" if len(here) > 1 else
                "--cluster local-procs: TF processes on its cores")
        raise ConfigError(
            f"--measure real: cluster {problem.cluster.name} names devices TensorFlow does not "
            f"see here: {', '.join(missing)}; it sees {listed}. Measure on this machine's "
            f"devices ({ours}) or on your TF servers (a cluster YAML)")


class RealMeasurer:
    """Implements the Measurer protocol by running placements in TensorFlow."""

    drifts = True  # the machine's speed moves between batches (gplace.placers.base.Tracker)

    def __init__(self, problem: PlacementProblem, graph_def, config: RealConfig | None = None,
                 tasks: LocalProcs | RemoteTasks | None = None,
                 log: Callable[[str], None] | None = None):
        self.problem, self.config = problem, config or RealConfig()
        self.graph_def, self.fetch = runnable_step(
            graph_def, problem.graph.names.tolist(), self.config.allow_unsafe, self.config.fetch,
            unknown_dim=problem.graph.meta.get("import", {}).get("unknown_dim", 1))
        n = worker_tasks(problem)
        if any(f"/job:{JOB}" not in d.tf_device.lower() for d in problem.cluster.devices):
            from gplace.cluster import tf_devices
            check_local_devices(problem, tf_devices())
        self.owns_tasks = tasks is None and n > 0
        self.tasks = LocalProcs(n) if self.owns_tasks else tasks
        self.log = log or (lambda s: print(f"gplace real: {s}", file=sys.stderr, flush=True))
        self.last_results: list[RealResult] = []
        self.last_load: LoadFigures | None = None
        self.last_wall_s = 0.0
        self.results: dict[bytes, RealResult] = {}  # every placement measured, by its bytes
        self._sim = None
        self._pinning_said = False
        self.child: RunnerChild | None = None  # kept between batches: TF imports once
        self.next_id = 0  # session ids in the child, unique over this measurer's life

    @property
    def last_reasons(self) -> list[str]:
        return [r.reason for r in self.last_results]

    def __enter__(self) -> RealMeasurer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.drop_child()
        if self.owns_tasks and self.tasks is not None:
            self.tasks.stop()

    def result_of(self, placement: np.ndarray) -> RealResult | None:
        """The latest measurement of a (units,) placement, with its interval; None if never."""
        return self.results.get(np.asarray(placement, np.int64).tobytes())

    def measure(self, placements: np.ndarray) -> Measurement:
        """Step times of (B, units) placements with their intervals; ``last_results`` has the
        timed steps and the reasons, ``last_load`` how loaded the machine was meanwhile."""
        placements = np.atleast_2d(np.asarray(placements, np.int64))
        op_device = self.problem.expand(placements)  # (B, ops); checks shape and range
        peak = self._simulated_peak(placements)
        results: list[RealResult | None] = [None] * len(placements)
        if self.config.check_memory:
            for b in range(len(placements)):
                reason = self._memory_reason(peak[b])
                if reason:
                    results[b] = failed_result(reason)
        todo = [b for b in range(len(placements)) if results[b] is None]
        start, probe = time.monotonic(), LoadProbe()
        step = self.open_at_once()
        for k in range(0, len(todo), step):
            chunk = todo[k: k + step]
            for b, r in zip(chunk, Batch(self, op_device[chunk], probe, chunk).run()):
                results[b] = r
        self.last_results, self.last_wall_s = results, time.monotonic() - start
        self.last_load = probe.stop() if todo else None
        for p, r in zip(placements, results):
            self.results[p.tobytes()] = r
        if todo:
            self._say(todo, results)
        ok = np.array([r.feasible for r in results], bool)
        col = lambda f: np.array([getattr(r, f) for r in results], np.float64)  # noqa: E731
        return Measurement(col("step_time_s"), ok, peak, col("low_s"), col("high_s"))

    def open_at_once(self) -> int:
        """Placements measured interleaved in one chunk: as many as max_open sessions hold,
        fewer for a graph whose variables would hold more than max_open_bytes on the servers."""
        params = int(self.problem.graph.param_bytes.sum())
        sessions = min(self.config.max_open, self.config.max_open_bytes // max(params, 1))
        return max(1, sessions // self.config.protocol.sessions)

    def _say(self, todo: list[int], results: list[RealResult]) -> None:
        if not self._pinning_said and self.tasks is not None:
            self._pinning_said = True
            self.log(getattr(self.tasks, "pinning", lambda: "remote tasks")())
        if self.config.verbose:
            for b in todo:
                self.log(f"placement {b + 1}/{len(results)}: {results[b].describe()}")
        n_tight = sum(results[b].tight for b in todo)
        cut = ", cut short by Ctrl-C" if stopping.requested() else ""
        self.log(f"{plural(len(todo), 'placement', 'placements')} in {self.last_wall_s:.1f} s "
                 f"({self.last_wall_s / len(todo):.1f} s each, {n_tight} tight{cut}); "
                 f"{self.last_load.describe()}")
        if self.last_load.loaded:
            self.log(self.last_load.warning())

    # ---- memory ----------------------------------------------------------------------------
    def _simulated_peak(self, placements: np.ndarray) -> np.ndarray:
        """(B, devices) peak bytes by the simulator: TF reports no per-process peak to compare."""
        if self._sim is None:
            from gplace.sim import FastSimulator
            self._sim = FastSimulator(self.problem)
        return np.asarray(self._sim.run_batch(placements).peak_bytes, np.int64)

    def _memory_reason(self, peak: np.ndarray) -> str:
        for d, dev in enumerate(self.problem.cluster.devices):
            if peak[d] > dev.memory_bytes:
                return (f"out of memory (predicted): {dev.name} needs {peak[d] / 2**20:.1f} MiB "
                        f"at peak, capacity {dev.memory_bytes / 2**20:.1f} MiB")
        return ""

    # ---- the runner child and the servers ---------------------------------------------------
    def runner(self, probe: LoadProbe) -> RunnerChild:
        """The runner child, started (with the servers, if they are down) when there is none;
        its CPU and the servers' count as ours in ``probe``."""
        if self.child is not None and self.any_dead():  # a server died between batches
            self.drop_child(probe)
        if self.child is None:
            if self.tasks is not None:
                before = set(getattr(self.tasks, "pids", []))
                self.tasks.ensure_running()
                for pid in getattr(self.tasks, "pids", []):
                    probe.add_ours(pid, new=pid not in before)
            ops = self.problem.graph.num_ops
            self.child = RunnerChild(self.job(), self.graph_def.SerializeToString(),
                                     np.zeros((0, ops), np.int64), self.config.start_timeout_s,
                                     self.any_dead)
            probe.add_ours(self.child.pid, new=True)
        probe.add_ours(self.child.pid)
        for pid in getattr(self.tasks, "pids", []):
            probe.add_ours(pid)
        return self.child

    def drop_child(self, probe: LoadProbe | None = None) -> None:
        if self.child is not None:
            if probe is not None:
                probe.drop_ours(self.child.pid)
            self.child.close()
        self.child = None

    def job(self) -> dict:
        cfg = self.config
        spare = getattr(self.tasks, "spare_cores", [])
        return {"target": self.tasks.target if self.tasks is not None else "",
                "fetch": self.fetch, "timeout_s": cfg.timeout_s,
                "threads": 1 if self.tasks is not None else cfg.local_threads,
                "cores": list(spare) or None,
                "op_names": self.problem.graph.names.tolist(),
                "tf_devices": [d.tf_device for d in self.problem.cluster.devices]}

    def any_dead(self) -> bool:
        return bool(self.tasks is not None and self.tasks.dead_tasks())

    def dead_reason(self) -> str:
        dead = self.tasks.dead_tasks() if self.tasks is not None else []
        return f"server process died: {'; '.join(dead)}" if dead else ""

    def dead_suffix(self) -> str:
        dead = self.dead_reason()
        return f" ({dead})" if dead else ""

    def restart_tasks(self) -> None:
        if isinstance(self.tasks, LocalProcs):
            self.tasks.start()


STEP_OP = "step_loss"  # what the corpus graphs name the op that ends a training step
RESOURCE = 20  # DT_RESOURCE in tensorflow/core/framework/types.proto


def runnable_step(graph_def, op_names: list[str], allow_unsafe: bool = False,
                  fetch: str | None = None, runner: str = "--measure real",
                  unknown_dim: int = 1) -> tuple[Any, str]:
    """(GraphDef, step op): the step as it runs for real, ``graph_def`` (or a graph file's;
    functions inlined as gplace.report.source_graph_def does) cut to the imported step's ops
    ``op_names`` (no initializers, checkpoint ops or other signatures: gplace.importer.step),
    and the op a step runs (step_op). UnsafeOpError or ConfigError, before anything runs,
    for a step with ops off the allowlist (check_safe), one that cannot run
    (check_runnable), or one without a clear end. Placeholders' unknown dimensions (a None
    batch) become ``unknown_dim``, the size the import gave them, so the step runs with the
    inputs it was placed for."""
    step = step_graph_def(_read_graph_def(graph_def), op_names)
    _size_placeholders(step, unknown_dim)
    check_safe(step, allow_unsafe)
    check_runnable(step, op_names, runner)
    return step, step_op(step, fetch, runner)


def _size_placeholders(graph_def, unknown_dim: int) -> None:
    """Sets each placeholder's unknown dimensions (-1 in its shape attr) to ``unknown_dim``."""
    from gplace.profiler import PLACEHOLDERS
    for node in graph_def.node:
        if node.op in PLACEHOLDERS and "shape" in node.attr:
            for dim in node.attr["shape"].shape.dim:
                if dim.size < 0:
                    dim.size = unknown_dim


def check_runnable(graph_def, op_names: list[str], runner: str = "--measure real") -> None:
    """ConfigError unless TensorFlow can run ``graph_def`` with each placed op's device set on
    its node: every op placed must be a node of it (ops inside a function are not: their
    devices could not be set), no variable may be a placeholder (a tf.function's graph
    captures its variables as resource inputs, which nothing here can feed), and every other
    input must be one gplace.profiler.placeholder_feeds can make up."""
    from gplace.profiler import unfeedable
    nodes = {n.name for n in graph_def.node}
    inner = [n for n in op_names if n not in nodes]
    captured = [n.name for n in graph_def.node if n.op == "Placeholder"
                and n.attr["dtype"].type == RESOURCE]
    fed = unfeedable(graph_def)
    if not inner and not captured and not fed:
        return
    why = (f"{len(inner):,} of its {len(op_names):,} ops run inside TF2 functions "
           f"(e.g. {inner[0]!r}), whose devices a placement cannot set on the graph" if inner
           else f"its variables are captured as resource placeholders (e.g. {captured[0]!r}), "
                "which nothing feeds: save the step as a SavedModel instead" if captured
           else f"it has inputs no made-up value can fill: {', '.join(fed[:3])}")
    raise ConfigError(f"{runner} runs the graph as TensorFlow 1 does, and {why}; or use the "
                      "simulator")


def step_op(graph_def, name: str | None = None, runner: str = "--measure real") -> str:
    """The op a measured step runs: ``name``, which must be in the graph; without one
    STEP_OP, or else the one op that no other op consumes (a graph's train op). A ConfigError
    asking for ``--loss NAME`` when there is no such op or several: running the wrong op
    would time nothing, or only a part of the step."""
    names = [n.name for n in graph_def.node]
    if name is not None:
        if name not in set(names):
            raise ConfigError(f"--loss {name!r}: the graph has no op of that name")
        return name
    if STEP_OP in set(names):
        return STEP_OP
    consumed = {i.lstrip("^").split(":")[0] for n in graph_def.node for i in n.input}
    sinks = [n for n in names if n not in consumed]
    if len(sinks) == 1:
        return sinks[0]
    shown = ", ".join(sinks[:8]) + (f", ... ({len(sinks)} in all)" if len(sinks) > 8 else "")
    raise ConfigError(f"{runner} runs one training step up to its last op, {STEP_OP!r} "
                      f"by default, and this graph has no op of that name; pass --loss NAME, "
                      f"the op that ends a step (ops nothing consumes here: {shown})")


def _read_graph_def(source):
    """A GraphDef as given, or a graph file's (a SavedModel too) with its function calls
    inlined as the importer inlines them, so that its nodes are the OpGraph's ops."""
    from gplace.importer import functions
    from gplace.importer.reader import read_graph_def
    if source is None:
        raise ConfigError("--measure real needs the TensorFlow graph (a file, GraphDef or "
                          "tf.Graph), not an OpGraph")
    if hasattr(source, "node"):
        return source  # gplace.report.source_graph_def's: inlined already
    return functions.inline_functions(read_graph_def(Path(source))[0])[0]
