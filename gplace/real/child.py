"""The runner child (:mod:`gplace.real.runner`) seen from the parent: start it, send it one
command at a time with a deadline, kill it with its process group.

    child = RunnerChild(job, graph_bytes, op_device, start_timeout_s=90, abort=servers_dead)
    reply = child.call({"run": 3, "warmup": 1, "steps": 3}, timeout_s=120)
    # a dict; None past the deadline or once abort() is true; "" if the child died
    child.close()

The job goes through the child's stdin and its stderr to an unnamed file: no folder to leave.
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
from typing import IO, Callable

from gplace.real.job import write_job
from gplace.real.procs import _child_env, _repo_root


class RunnerChild:
    def __init__(self, job: dict, graph_bytes: bytes, op_device, start_timeout_s: float,
                 abort: Callable[[], bool] = lambda: False):
        self.abort = abort
        self.err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gplace.real.runner", str(os.getpid())],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err,
            start_new_session=True, cwd=_repo_root(), env=_child_env())
        self.lines = _LineReader(self.proc.stdout.fileno())
        try:
            write_job(self.proc.stdin, job, graph_bytes, op_device)
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass  # the runner died at once: the first reply says so
        self.ready = self._reply(start_timeout_s)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def call(self, command: dict, timeout_s: float):
        """The reply to ``command``: a dict, None (deadline or abort) or "" (the child died)."""
        if not isinstance(self.ready, dict):
            return self.ready
        try:
            self.proc.stdin.write(json.dumps(command).encode() + b"\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            return ""
        return self._reply(timeout_s)

    def _reply(self, timeout_s: float):
        line = self.lines.read(time.monotonic() + timeout_s, abort=self.abort)
        return json.loads(line) if line else line

    def exit_reason(self) -> str:
        """'runner exited with code N (its last stderr line)' once it has died."""
        tail = _last_line(self.err)
        return (f"runner exited with code {self.proc.wait()}"
                + (f" ({tail})" if tail else ""))

    def close(self) -> None:
        """Kills the child's process group and reaps it; safe to call twice."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe:
                try:
                    pipe.close()
                except BrokenPipeError:
                    pass
        self.err.close()


def _last_line(stream: IO[bytes]) -> str:
    """The last non-empty line written to ``stream`` (an unnamed temporary file)."""
    try:
        stream.seek(0)
        text = stream.read().decode(errors="replace")
    except (OSError, ValueError):
        return ""
    lines = [l for l in text.splitlines() if l.strip()]
    return lines[-1][:300] if lines else ""


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
