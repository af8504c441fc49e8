"""RealMeasurer: step times of placements run for real in TensorFlow (DESIGN.md, "RealMeasurer").

    with RealMeasurer(problem, "model.pb") as real:      # local-procs: starts the servers
        m = real.measure(placements)                     # (B, units) -> Measurement
        m.low_s, m.high_s                                # each step time's interval
        real.last_results[0].reason                      # why a placement is infeasible

Post (Gao et al., NeurIPS 2018) and HDP (Mirhoseini et al., ICLR 2018) measured every placement
by running it; this is that measurement. For each placement NodeDef.device of every op is set
to its device's ``tf_device`` (``problem.expand``) and the batch is measured by the protocol of
:mod:`gplace.real.protocol` (issue 17): two sessions per placement (it and its mirror over
interchangeable devices), rounds that visit the placements interleaved with a warm-up step
after each switch, until each placement's interval is tight or the time cap is reached; the
step time is a trimmed mean of the timed steps and comes with its confidence interval. How
loaded the machine was (:mod:`gplace.real.load`) is logged with every batch, as a warning when
other work took a noticeable share of the CPU.

Never a crash: a placement whose simulated peak memory exceeds a device's ``memory_bytes`` is
refused before it runs (TF's CPU allocator has no hard limit to hit); a TF error
(ResourceExhausted, device or runtime errors), a hang past ``timeout_s`` and a server process
that dies each make that placement infeasible with the reason in ``last_results``. The graph
runs in a child process (:mod:`gplace.real.runner`) so a hang costs only that child, which is
killed with its process group; dead or hung servers are restarted and the other placements'
sessions reopened.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np

from gplace.cluster import interchangeable, mirror
from gplace.errors import ConfigError
from gplace.measure import Measurement
from gplace.problem import PlacementProblem
from gplace.real.child import RunnerChild
from gplace.real.load import LoadFigures, LoadProbe
from gplace.real.procs import JOB, LocalProcs, RemoteTasks
from gplace.real.protocol import ProtocolConfig, estimate, interval, tight, visit_order
from gplace.real.safety import check_safe


@dataclass(frozen=True)
class RealConfig:
    protocol: ProtocolConfig = field(default_factory=ProtocolConfig)  # steps, estimator, caps
    timeout_s: float = 120.0    # per command (opening a placement, or one visit's steps);
                                # past it the placement is a hang
    start_timeout_s: float = 90.0  # importing TF in the runner on a busy 2-core machine: ~10 s
    fetch: str = "step_loss"    # the op that ends a corpus training step
    check_memory: bool = True   # refuse placements whose simulated peak exceeds memory_bytes
    allow_unsafe: bool = False  # run graphs with file-system / Python / RPC ops (safety.py)
    local_threads: int = 0      # thread pools of an in-process (`local`) run; 0 = TF's choice
    max_open: int = 64          # sessions open at once (ProtocolConfig.sessions per
                                # placement); a larger batch is measured in chunks
    max_open_bytes: int = 4 << 30  # and at most this much of variables (weights and slots)
                                # held on the servers by the open sessions together
    verbose: bool = True        # log each placement's step time with its interval


class RealResult(NamedTuple):
    step_time_s: float          # the protocol's estimate (a low quantile); inf if infeasible
    feasible: bool
    times_s: tuple[float, ...]  # every timed step, in the order they ran
    loss: float | None          # fetch value of the first step after initialization
    reason: str                 # "" when feasible
    low_s: float = float("nan")   # confidence interval of step_time_s (ProtocolConfig)
    high_s: float = float("nan")
    tight: bool = False         # the interval reached the protocol's width

    @property
    def spread_s(self) -> float:
        """Half the width of the confidence interval (the "+-" of the step time)."""
        return (self.high_s - self.low_s) / 2

    def describe(self) -> str:
        """'12.31 ms (90% interval 11.92-12.80 ms, 15 steps)' or the reason it failed."""
        if not self.feasible:
            return f"infeasible: {self.reason}"
        note = "" if self.tight else ", not tight"
        return (f"{self.step_time_s * 1e3:.2f} ms (interval {self.low_s * 1e3:.2f}-"
                f"{self.high_s * 1e3:.2f} ms, {len(self.times_s)} steps{note})")


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


class RealMeasurer:
    """Implements the Measurer protocol by running placements in TensorFlow."""

    drifts = True  # the machine's speed moves between batches (gplace.placers.base.Tracker)

    def __init__(self, problem: PlacementProblem, graph_def, config: RealConfig | None = None,
                 tasks: LocalProcs | RemoteTasks | None = None,
                 log: Callable[[str], None] | None = None):
        self.problem, self.config = problem, config or RealConfig()
        self.graph_def = _read_graph_def(graph_def)
        check_safe(self.graph_def, self.config.allow_unsafe)
        n = worker_tasks(problem)
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
                    results[b] = _failed(reason)
        todo = [b for b in range(len(placements)) if results[b] is None]
        start, probe = time.monotonic(), LoadProbe()
        step = self.open_at_once()
        for k in range(0, len(todo), step):
            chunk = todo[k: k + step]
            for b, r in zip(chunk, _Batch(self, op_device[chunk], probe).run()):
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
        self.log(f"{len(todo)} placements in {self.last_wall_s:.1f} s "
                 f"({self.last_wall_s / len(todo):.1f} s each, {n_tight} tight); "
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
                "fetch": cfg.fetch, "timeout_s": cfg.timeout_s,
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


class _Batch:
    """Placements measured by the protocol (gplace.real.protocol), each in ``sessions``
    sessions of the measurer's runner child (session s runs its s-th mirror); a lost child
    (hang, crash, dead server) fails the placement it was running, and the others' sessions
    are reopened in a new child."""

    def __init__(self, real: RealMeasurer, op_device: np.ndarray, probe: LoadProbe):
        self.real, self.op_device, self.probe = real, op_device, probe
        self.cfg = real.config.protocol
        n, k = len(op_device), self.cfg.sessions
        self.ids = [list(range(real.next_id + i * k, real.next_id + (i + 1) * k))
                    for i in range(n)]  # the child's session ids of each placement
        real.next_id += n * k
        classes = interchangeable(real.problem.cluster)
        self.mirrors = [mirror(classes, s) for s in range(k)]  # device permutation per session
        self.times: list[list[float]] = [[] for _ in range(n)]
        self.visits = [0] * n
        self.loss: list[float | None] = [None] * n
        self.failed = [""] * n
        self.opened: dict[int, list[int]] = {}  # placement -> its open session ids

    def run(self) -> list[RealResult]:
        cfg, n = self.cfg, len(self.op_device)
        cap = time.monotonic() + cfg.max_s_per_placement * n
        try:
            for i in range(n):
                self._open(i)
            active, r = [i for i in range(n) if not self.failed[i]], 0
            while active and (r == 0 or time.monotonic() < cap):  # one visit each at least
                for i in visit_order(active, r):
                    k = min(cfg.steps_per_visit, cfg.max_steps - len(self.times[i]))
                    if not self.failed[i] and (r == 0 or time.monotonic() < cap):
                        self._visit(i, k)
                active = [i for i in active if not self.failed[i] and not tight(
                    self.times[i], cfg) and len(self.times[i]) < cfg.max_steps]
                r += 1
        finally:
            self._close_all()
        return [self._result(i) for i in range(n)]

    def _result(self, i: int) -> RealResult:
        if self.failed[i]:
            return _failed(self.failed[i])
        t = tuple(self.times[i])
        lo, hi = interval(t, self.cfg)
        return RealResult(estimate(t, self.cfg), True, t, self.loss[i], "", lo, hi,
                          tight(t, self.cfg))

    def _open(self, i: int) -> None:
        """Opens placement i's sessions, session s on its s-th mirror; loss of the first."""
        self.opened[i] = []
        for sid, perm in zip(self.ids[i], self.mirrors):
            reply = self._call(i, {"open": sid, "devices": perm[self.op_device[i]].tolist()})
            if reply is None:
                return
            self.opened.setdefault(i, []).append(sid)  # (_lose may have emptied opened)
            self.loss[i] = reply["loss"] if self.loss[i] is None else self.loss[i]

    def _visit(self, i: int, steps: int) -> None:
        if len(self.opened.get(i, ())) < len(self.ids[i]):  # its sessions went with a lost child
            self._open(i)
            if self.failed[i]:
                return
        sid = self.ids[i][self.visits[i] % len(self.ids[i])]
        self.visits[i] += 1
        reply = self._call(i, {"run": sid, "warmup": self.cfg.warmup_per_visit, "steps": steps})
        if reply is not None:
            self.times[i] += reply["times"]

    def _close_all(self) -> None:
        """Frees this batch's sessions on the servers; the child lives on for the next."""
        for sid in sorted(s for ids in self.opened.values() for s in ids):
            if self.real.child is None:
                break
            reply = self.real.child.call({"close": sid}, self.real.config.timeout_s)
            if not isinstance(reply, dict):
                self._lose()
        self.opened = {}

    def _call(self, i: int, command: dict) -> dict | None:
        """The reply to ``command`` for placement i, or None after recording why it failed."""
        real = self.real
        reply = real.runner(self.probe).call(command, real.config.timeout_s)
        if isinstance(reply, dict) and reply.get("ok"):
            return reply
        if isinstance(reply, dict):  # TF said no: the placement fails, the child lives on
            dead = real.dead_suffix()
            self.failed[i] = reply.get("error", "runner sent no error") + dead
            if dead:  # the cluster is gone: this child's sessions are useless
                self._lose()
        elif reply is None:  # a hang or a dead server (TF would wait for it until the deadline)
            self.failed[i] = real.dead_reason() or f"timed out after {real.config.timeout_s:g} s"
            self._lose()
            real.restart_tasks()
        else:  # the runner died
            self.failed[i] = real.child.exit_reason() + real.dead_suffix()
            self._lose()
        return None

    def _lose(self) -> None:
        self.real.drop_child(self.probe)
        self.opened = {}


def _failed(reason: str) -> RealResult:
    return RealResult(float("inf"), False, (), None, reason)


def _read_graph_def(source):
    """A GraphDef from a GraphDef or a path to a binary / text GraphDef."""
    if hasattr(source, "node"):
        return source
    from gplace.importer.reader import read_graph_def
    graph_def, _ = read_graph_def(Path(source))
    return graph_def
