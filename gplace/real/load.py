"""How loaded the machine was while placements ran: load average, steal time, and the share of
the CPU that processes other than the measurement's own took (Linux /proc).

    probe = LoadProbe()
    ...                                   # run steps; probe.add_ours(pid) for each process
    figures = probe.stop()                # LoadFigures
    if figures.loaded: log(figures.warning())

On a shared machine other work inflates step times (by descheduling our servers) in bursts
that the interleaved protocol spreads over all placements but cannot remove; these figures say
how much of that there was, next to the results.
"""

from __future__ import annotations

import os
import time
from typing import NamedTuple

OTHERS_LIMIT = 0.10   # other processes above 10% of all cores' time: warn
STEAL_LIMIT = 0.02    # hypervisor steal above 2%: warn


class LoadFigures(NamedTuple):
    cores: int          # CPUs this process may use
    load1: float        # 1-minute load average at the end (it includes our own processes)
    others: float       # share of all CPU time used by processes other than ours, 0..1
    steal: float        # share of CPU time stolen by the hypervisor, 0..1
    wall_s: float

    @property
    def loaded(self) -> bool:
        return self.others > OTHERS_LIMIT or self.steal > STEAL_LIMIT

    def describe(self) -> str:
        return (f"other processes {self.others:.0%} of {self.cores} cores, steal "
                f"{self.steal:.1%}, load average {self.load1:.2f} over {self.wall_s:.0f} s")

    def warning(self) -> str:
        return (f"warning: the machine was loaded while measuring ({self.describe()}); step "
                f"times are noisier than on a quiet machine, their intervals say by how much")

    def as_dict(self) -> dict:
        return {**self._asdict(), "loaded": self.loaded}


def cpu_times() -> tuple[float, float, float]:
    """(busy, steal, total) clock ticks of all CPUs since boot, from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [float(x) for x in f.readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq = fields[:7]
    steal = fields[7] if len(fields) > 7 else 0.0
    busy = user + nice + system + irq + softirq  # guest time is already inside user
    return busy, steal, busy + idle + iowait + steal


def process_ticks(pid: int) -> float:
    """utime + stime of a process in clock ticks (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return float(fields[11]) + float(fields[12])


class LoadProbe:
    """CPU accounting between ``__init__`` and ``stop``; ``pids`` are our own processes."""

    def __init__(self, pids: list[int] = ()):
        self.start = time.monotonic()
        self.cpu0 = cpu_times()
        self.pids: dict[int, float] = {}
        self.done_ticks = 0.0
        for pid in (os.getpid(), *pids):
            self.add_ours(pid)

    def add_ours(self, pid: int, new: bool = False) -> None:
        """Counts ``pid``'s CPU from now on as ours (not as other processes'); all of it if
        ``new`` (the process started after this probe)."""
        if pid not in self.pids:
            self.pids[pid] = 0.0 if new else process_ticks(pid)

    def drop_ours(self, pid: int) -> None:
        """Call before ``pid`` exits: keeps the CPU it used."""
        if pid in self.pids:
            self.done_ticks += process_ticks(pid) - self.pids.pop(pid)

    def stop(self) -> LoadFigures:
        busy1, steal1, total1 = cpu_times()
        busy0, steal0, total0 = self.cpu0
        ours = self.done_ticks + sum(max(0.0, process_ticks(p) - t) for p, t in self.pids.items())
        total = max(total1 - total0, 1.0)
        others = max(0.0, busy1 - busy0 - ours) / total
        return LoadFigures(len(os.sched_getaffinity(0)), os.getloadavg()[0], min(others, 1.0),
                           (steal1 - steal0) / total, time.monotonic() - self.start)
