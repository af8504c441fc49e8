"""local-procs servers: pinned, reachable, and gone after any exit."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.real.conftest import child_pids

ROOT = Path(__file__).resolve().parents[2]


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_servers_are_pinned_and_running(procs):
    cores = sorted(os.sched_getaffinity(0))
    assert len(procs.pids) == 2 and all(alive(p) for p in procs.pids)
    sets = [os.sched_getaffinity(p) for p in procs.pids]
    if len(cores) >= 2:
        assert sets[0].isdisjoint(sets[1])
    assert procs.dead_tasks() == []


@pytest.mark.slow
def test_a_dead_server_is_reported_and_restarted(procs):
    os.kill(procs.pids[1], signal.SIGKILL)
    procs.procs[1].wait()
    assert procs.dead_tasks()[0].startswith("task 1 (pid") and "SIGKILL" in procs.dead_tasks()[0]
    procs.ensure_running()  # restarts both
    assert procs.dead_tasks() == [] and len(procs.pids) == 2


def test_context_exit_leaves_no_process():
    from gplace.real.procs import LocalProcs
    before = child_pids()
    with pytest.raises(RuntimeError):
        with LocalProcs(2) as p:
            pids = p.pids
            raise RuntimeError("boom")
    assert not any(alive(x) for x in pids)
    assert child_pids() == before


SCRIPT = """
import os, sys, time
from gplace.real.procs import LocalProcs
p = LocalProcs(2); p.start()
print(" ".join(map(str, p.pids)), flush=True)
if sys.argv[1] == "exit":
    sys.exit(0)        # atexit stops the servers
time.sleep(600)        # killed by the test: the servers die with their parent (PDEATHSIG)
"""


@pytest.mark.slow
@pytest.mark.parametrize("how", ["exit", "kill"])
def test_parent_exit_or_kill_leaves_no_server(how):
    child = subprocess.Popen([sys.executable, "-c", SCRIPT, how], cwd=ROOT,
                             stdout=subprocess.PIPE, text=True)
    pids = [int(x) for x in child.stdout.readline().split()]
    assert len(pids) == 2
    if how == "kill":
        child.kill()
    child.wait(timeout=60)
    deadline = time.time() + 10
    while any(alive(x) for x in pids) and time.time() < deadline:
        time.sleep(0.2)
    assert not any(alive(x) for x in pids)
