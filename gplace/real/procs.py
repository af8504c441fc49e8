"""TensorFlow server processes for real runs: ``local-procs`` and clusters on other hosts.

``local-procs`` (gplace.cluster): ``LocalProcs(n)`` starts ``n`` TF servers
(``tf.distribute.Server``, gRPC on 127.0.0.1), one per task of the job ``worker``; each child
pins itself to its own CPU cores (``os.sched_setaffinity``) and sizes its inter- and intra-op
thread pools to them, so ops placed on different tasks really run in parallel and a tensor that
crosses tasks really goes through gRPC. The default: 2 tasks, 1 core and 1 thread each.

Clean-up on any exit: every child is the leader of its own process group and is killed with it
(``stop``: context manager exit, ``atexit``, and a failed start); a child also asks the kernel
to kill it when its parent dies (``prctl(PR_SET_PDEATHSIG, SIGKILL)``), which covers a parent
killed by a signal that skips ``atexit``.

Tasks on other hosts: gplace starts nothing there. On host ``i`` run

    python -m gplace.real.procs serve --tasks h0:2222,h1:2222 --task i [--cores 0-7]

and give the measurer ``RemoteTasks(["h0:2222", "h1:2222"])`` (or a YAML file with
``tasks: [h0:2222, h1:2222]``, see :func:`load_task_spec`); the cluster YAML's devices then name
``/job:worker/replica:0/task:i/device:CPU:0`` (or ``GPU:k``) as usual.
"""

from __future__ import annotations

import argparse
import atexit
import ctypes
import os
import select
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from gplace.errors import ConfigError, GplaceError

JOB = "worker"
READY = "gplace-server-ready"


@dataclass(frozen=True)
class RemoteTasks:
    """Addresses ``host:port`` of already running servers, task 0 first (it is the master)."""

    addresses: tuple[str, ...]

    @property
    def target(self) -> str:
        return f"grpc://{self.addresses[0]}"

    def dead_tasks(self) -> list[str]:
        return []  # gplace does not own remote processes; failures surface as TF errors

    def ensure_running(self) -> None:
        pass


def load_task_spec(path: str | os.PathLike) -> RemoteTasks:
    """``tasks: [host:port, ...]`` from a YAML file (task 0 first)."""
    try:
        record = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read task spec "
                          f"({' '.join(str(e).split())[:160]})") from None
    tasks = record.get("tasks") if isinstance(record, dict) else None
    if not isinstance(tasks, list) or not tasks or not all(
            isinstance(t, str) and ":" in t for t in tasks):
        raise ConfigError(f"{path}: field 'tasks' must list 'host:port' strings, task 0 first")
    return RemoteTasks(tuple(tasks))


def free_ports(count: int) -> list[int]:
    """Ports the kernel hands out now on 127.0.0.1 (all held open until all are chosen)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class LocalProcs:
    """``n`` TF server processes on this machine, each pinned to ``cores_per_task`` cores.

        with LocalProcs(2) as procs:
            session = tf.compat.v1.Session(target=procs.target)
    """

    def __init__(self, num_tasks: int, cores_per_task: int | None = None,
                 start_timeout_s: float = 60.0):
        cores = sorted(os.sched_getaffinity(0))
        if num_tasks < 1:
            raise ConfigError(f"local-procs needs >= 1 task, got {num_tasks}")
        # with a core to spare, the runner (the client that times the steps) gets it, so that
        # its gRPC and Python work never takes a task's core
        spare = 1 if len(cores) > num_tasks else 0
        self.cores_per_task = cores_per_task or max(1, (len(cores) - spare) // num_tasks)
        self.num_tasks = num_tasks
        # task i gets cores [i*c, (i+1)*c) of the allowed ones, wrapping if there are too few
        self.core_sets = [[cores[(i * self.cores_per_task + k) % len(cores)]
                           for k in range(self.cores_per_task)] for i in range(num_tasks)]
        self.spare_cores = cores[num_tasks * self.cores_per_task:]  # the runner's, if any
        self.start_timeout_s = start_timeout_s
        self.procs: list[subprocess.Popen] = []
        self.addresses: tuple[str, ...] = ()

    @property
    def target(self) -> str:
        return f"grpc://{self.addresses[0]}"

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def pinning(self) -> str:
        """Where the tasks and the runner run, e.g. 'task 0 on core 0, task 1 on core 1;
        runner on core 2'."""
        tasks = ", ".join(f"task {i} on core{'s' if len(c) > 1 else ''} {_cores_text(c)}"
                          for i, c in enumerate(self.core_sets))
        if self.spare_cores:
            return f"{tasks}; runner on core(s) {_cores_text(self.spare_cores)}"
        n = len(os.sched_getaffinity(0))
        return (f"{tasks}; runner not pinned: {n} cores, none to spare beside "
                f"{self.num_tasks} tasks (it sleeps while a step runs)")

    def __enter__(self) -> LocalProcs:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        """Starts every task and waits until each prints that its server is up."""
        self.stop()
        self.addresses = tuple(f"127.0.0.1:{p}" for p in free_ports(self.num_tasks))
        atexit.register(self.stop)
        try:
            for i in range(self.num_tasks):
                cmd = [sys.executable, "-m", "gplace.real.procs", "serve",
                       "--tasks", ",".join(self.addresses), "--task", str(i),
                       "--cores", ",".join(map(str, self.core_sets[i])),
                       "--parent", str(os.getpid())]
                self.procs.append(subprocess.Popen(
                    cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                    start_new_session=True, cwd=_repo_root(), env=_child_env()))
            deadline = time.monotonic() + self.start_timeout_s
            for i, p in enumerate(self.procs):
                _wait_ready(p, i, deadline)
        except BaseException:
            self.stop()
            raise

    def dead_tasks(self) -> list[str]:
        """One line per task whose process has exited, e.g. 'task 1 (pid 42) killed by SIGKILL'."""
        out = []
        for i, p in enumerate(self.procs):
            rc = p.poll()
            if rc is not None:
                how = (f"killed by {signal.Signals(-rc).name}" if rc < 0 else f"exited with {rc}")
                out.append(f"task {i} (pid {p.pid}) {how}")
        return out

    def ensure_running(self) -> None:
        """Restarts all tasks if any has died (a TF cluster cannot replace one task alone)."""
        if not self.procs or self.dead_tasks():
            self.start()

    def stop(self) -> None:
        """Kills every task's process group and reaps it; safe to call twice."""
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            if p.stdout:
                p.stdout.close()
        self.procs = []
        atexit.unregister(self.stop)


def _repo_root() -> str:
    return str(Path(__file__).resolve().parents[2])


def _child_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = _repo_root() + os.pathsep + env.get("PYTHONPATH", "")
    env["TF_ENABLE_ONEDNN_OPTS"] = "0"  # the same kernels as the profiles (gplace.profiler)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    return env


def _wait_ready(p: subprocess.Popen, task: int, deadline: float) -> None:
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise GplaceError(f"local-procs: task {task} did not start within the timeout")
        ready, _, _ = select.select([p.stdout], [], [], min(left, 1.0))
        if ready:
            line = p.stdout.readline()
            if line.strip() == READY:
                return
            if not line:
                raise GplaceError(f"local-procs: task {task} exited during start-up "
                                  f"(code {p.wait()})")


# ---- the server child ------------------------------------------------------------------------
def die_with_parent(parent: int) -> None:
    """Asks the kernel to SIGKILL this process when its parent dies (``PR_SET_PDEATHSIG``);
    exits at once if ``parent`` (its pid) is already gone. Used by the servers, the runner, the
    expert search processes and the CP-SAT solve's isolated process; the signal comes when the
    *thread* that started the process ends, so start them from one that outlives them."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass
    if parent and os.getppid() != parent:
        os._exit(1)  # the parent died before the request took effect


def serve(tasks: list[str], task: int, cores: list[int] | None, parent: int = 0) -> None:
    """Runs task ``task`` of the job ``worker`` until killed."""
    die_with_parent(parent)
    if cores:
        os.sched_setaffinity(0, cores)
    threads = len(cores) if cores else 0  # 0: TF picks (all cores it may use)
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    from gplace.tfimport import tensorflow
    tf = tensorflow()
    config = tf.compat.v1.ConfigProto(inter_op_parallelism_threads=threads,
                                      intra_op_parallelism_threads=threads)
    server = tf.distribute.Server(tf.train.ClusterSpec({JOB: tasks}), job_name=JOB,
                                  task_index=task, config=config, start=True)
    print(READY, flush=True)
    server.join()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gplace.real.procs")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="run one TF server task (job 'worker') until killed")
    s.add_argument("--tasks", required=True, help="host:port of every task, comma-separated")
    s.add_argument("--task", type=int, required=True, help="this task's index")
    s.add_argument("--cores", default="", help="CPU cores to pin to: '0,1' or '0-3'")
    s.add_argument("--parent", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    serve(args.tasks.split(","), args.task, _parse_cores(args.cores), args.parent)
    return 0


def _cores_text(cores: list[int]) -> str:
    return ",".join(map(str, cores))


def _parse_cores(text: str) -> list[int] | None:
    out: list[int] = []
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out or None


if __name__ == "__main__":
    sys.exit(main())
