"""RealMeasurer: step times of placements run for real in TensorFlow (DESIGN.md, "RealMeasurer").

    with RealMeasurer(problem, "model.pb") as real:      # local-procs: starts the servers
        m = real.measure(placements)                     # (B, units) -> Measurement
        real.last_results[0].reason                      # why a placement is infeasible

Post (Gao et al., NeurIPS 2018) and HDP (Mirhoseini et al., ICLR 2018) measured every placement
by running it; this is that measurement. For each placement: NodeDef.device of every op is set
to its device's ``tf_device`` (``problem.expand``), the step runs warm-up steps and then the
median of ``timed_steps`` steps (``RealResult.times_s`` keeps them all for the spread).

Never a crash: a placement whose simulated peak memory exceeds a device's ``memory_bytes`` is
refused before it runs (TF's CPU allocator has no hard limit to hit); a TF error
(ResourceExhausted, device or runtime errors), a hang past ``timeout_s`` and a server process
that dies each make that placement infeasible with the reason in ``last_results``. The graph
runs in a child process (:mod:`gplace.real.runner`) so a hang costs only that child, which is
killed with its process group; dead or hung servers are restarted for the next placement.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, NamedTuple

import numpy as np

from gplace.errors import ConfigError
from gplace.measure import Measurement
from gplace.problem import PlacementProblem
from gplace.real.procs import JOB, LocalProcs, RemoteTasks, _child_env, _repo_root
from gplace.real.job import write_job
from gplace.real.safety import check_safe


@dataclass(frozen=True)
class RealConfig:
    warmup_steps: int = 2       # untimed, after the loss step: allocator growth, first-run setup
    timed_steps: int = 5        # per round; the median over all rounds is the step time
    rounds: int = 1             # passes over the whole batch: on a shared machine a burst of
                                # other work then hits a round of every placement, not all the
                                # steps of one placement
    timeout_s: float = 120.0    # per placement, all its steps; past it the placement is a hang
    start_timeout_s: float = 90.0  # importing TF in the runner on a busy 2-core machine: ~10 s
    fetch: str = "step_loss"    # the op that ends a corpus training step
    check_memory: bool = True   # refuse placements whose simulated peak exceeds memory_bytes
    allow_unsafe: bool = False  # run graphs with file-system / Python / RPC ops (safety.py)
    local_threads: int = 0      # thread pools of an in-process (`local`) run; 0 = TF's choice


class RealResult(NamedTuple):
    step_time_s: float          # median of times_s; inf when infeasible
    feasible: bool
    times_s: tuple[float, ...]  # every timed step
    loss: float | None          # fetch value of the first step after initialization
    reason: str                 # "" when feasible

    @property
    def spread_s(self) -> float:
        """Interquartile range of the timed steps."""
        if not self.times_s:
            return float("nan")
        q1, q3 = np.percentile(self.times_s, [25, 75])
        return float(q3 - q1)


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

    def __init__(self, problem: PlacementProblem, graph_def, config: RealConfig | None = None,
                 tasks: LocalProcs | RemoteTasks | None = None):
        self.problem, self.config = problem, config or RealConfig()
        self.graph_def = _read_graph_def(graph_def)
        check_safe(self.graph_def, self.config.allow_unsafe)
        n = worker_tasks(problem)
        self.owns_tasks = tasks is None and n > 0
        self.tasks = LocalProcs(n) if self.owns_tasks else tasks
        self.last_results: list[RealResult] = []
        self.round_times: list[list[tuple[float, ...]]] = []
        self._sim = None

    @property
    def last_reasons(self) -> list[str]:
        return [r.reason for r in self.last_results]

    def __enter__(self) -> RealMeasurer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self.owns_tasks and self.tasks is not None:
            self.tasks.stop()

    def measure(self, placements: np.ndarray) -> Measurement:
        """Step times of (B, units) placements; ``last_results`` has times and reasons and
        ``round_times[r][i]`` the timed steps of round r for the i-th placement that ran."""
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
        self.round_times = []
        for _ in range(self.config.rounds if todo else 0):
            passed = self._run(op_device[todo])
            self.round_times.append([r.times_s for r in passed])
            for b, r in zip(todo, passed):
                results[b] = r if results[b] is None else _merge(results[b], r)
        self.last_results = results
        ok = np.array([r.feasible for r in results], bool)
        return Measurement(np.array([r.step_time_s for r in results], np.float64), ok, peak)

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

    # ---- running ---------------------------------------------------------------------------
    def _run(self, op_device: np.ndarray) -> list[RealResult]:
        """Runs (k, ops) op placements in runner children; restarts after a failure."""
        graph_bytes = self.graph_def.SerializeToString()
        out: list[RealResult] = []
        while len(out) < len(op_device):
            if self.tasks is not None:
                self.tasks.ensure_running()
            out += self._run_child(graph_bytes, op_device, len(out))
        return out

    def _job(self, start: int) -> dict:
        cfg = self.config
        return {"target": self.tasks.target if self.tasks is not None else "",
                "fetch": cfg.fetch, "warmup": cfg.warmup_steps, "steps": cfg.timed_steps,
                "timeout_s": cfg.timeout_s, "start": start,
                "threads": 1 if self.tasks is not None else cfg.local_threads,
                "op_names": self.problem.graph.names.tolist(),
                "tf_devices": [d.tf_device for d in self.problem.cluster.devices]}

    def _run_child(self, graph_bytes: bytes, op_device: np.ndarray,
                   start: int) -> list[RealResult]:
        """Results from ``start`` on until the child ends, fails a placement or hangs. The job
        goes through the child's stdin and its stderr to an unnamed file: no folder to leave."""
        total = len(op_device)
        with tempfile.TemporaryFile() as err:
            child = subprocess.Popen(
                [sys.executable, "-m", "gplace.real.runner", str(os.getpid())],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                start_new_session=True, cwd=_repo_root(), env=_child_env())
            out: list[RealResult] = []
            try:
                try:
                    write_job(child.stdin, self._job(start), graph_bytes, op_device)
                    child.stdin.close()
                except BrokenPipeError:
                    pass  # the runner died at once: its exit code and stderr say why below
                lines = _LineReader(child.stdout.fileno())
                deadline = time.monotonic() + self.config.start_timeout_s + self.config.timeout_s
                while start + len(out) < total:
                    line = lines.read(deadline, abort=self._any_dead)
                    if line is None:  # a hang or a dead server (TF would wait for it until
                        dead = self._dead_reason()  # the deadline): kill, restart servers
                        out.append(_failed(dead or f"timed out after {self.config.timeout_s:g} s"))
                        self._restart_tasks()
                        break
                    if line == "":  # the runner died
                        tail = _last_line(err)
                        out.append(_failed(f"runner exited with code {child.wait()}"
                                           + (f" ({tail})" if tail else "") + self._dead_suffix()))
                        break
                    record = json.loads(line)
                    if record["ok"]:
                        times = tuple(record["times"])
                        out.append(RealResult(float(np.median(times)), True, times,
                                              record["loss"], ""))
                    else:
                        dead = self._dead_suffix()
                        out.append(_failed(record["error"] + dead))
                        if dead:  # the cluster is gone: this runner's session is useless
                            break
                    deadline = time.monotonic() + self.config.timeout_s
            finally:
                _kill_group(child)
        return out

    def _any_dead(self) -> bool:
        return bool(self.tasks is not None and self.tasks.dead_tasks())

    def _dead_reason(self) -> str:
        dead = self.tasks.dead_tasks() if self.tasks is not None else []
        return f"server process died: {'; '.join(dead)}" if dead else ""

    def _dead_suffix(self) -> str:
        dead = self._dead_reason()
        return f" ({dead})" if dead else ""

    def _restart_tasks(self) -> None:
        if isinstance(self.tasks, LocalProcs):
            self.tasks.start()


def _last_line(stream: IO[bytes]) -> str:
    """The last non-empty line written to ``stream`` (an unnamed temporary file)."""
    try:
        stream.seek(0)
        text = stream.read().decode(errors="replace")
    except OSError:
        return ""
    lines = [l for l in text.splitlines() if l.strip()]
    return lines[-1][:300] if lines else ""


def _merge(a: RealResult, b: RealResult) -> RealResult:
    """Two rounds of one placement: all timed steps pooled; the first failure wins."""
    if not a.feasible:
        return a
    if not b.feasible:
        return b
    times = a.times_s + b.times_s
    return RealResult(float(np.median(times)), True, times, a.loss, "")


def _failed(reason: str) -> RealResult:
    return RealResult(float("inf"), False, (), None, reason)


class _LineReader:
    """Lines from a pipe with a deadline (unbuffered reads, so select() tells the truth)."""

    def __init__(self, fd: int):
        self.fd, self.buffer = fd, b""

    def read(self, deadline: float, abort=lambda: False) -> str | None:
        """The next line, "" at EOF, None past the deadline or once ``abort()`` is true
        (checked every second)."""
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or abort():
                return None
            ready, _, _ = select.select([self.fd], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(self.fd, 65536)
                if not chunk:
                    return ""
                self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode()


def _kill_group(child: subprocess.Popen) -> None:
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    child.wait()
    for pipe in (child.stdin, child.stdout):
        if pipe:
            pipe.close()


def _read_graph_def(source):
    """A GraphDef from a GraphDef or a path to a binary / text GraphDef."""
    if hasattr(source, "node"):
        return source
    from gplace.importer.reader import read_graph_def
    graph_def, _ = read_graph_def(Path(source))
    return graph_def
