"""One batch of placements measured by the protocol, session by session, in the runner child.

    results = Batch(real_measurer, op_device, probe).run()    # one RealResult per placement

:class:`Batch` runs the protocol of :mod:`gplace.real.protocol` for
:class:`gplace.real.measurer.RealMeasurer` over one chunk of placements (as many as it may
hold open at once): it opens each placement's sessions in the measurer's runner child
(:mod:`gplace.real.runner`), visits them in interleaved rounds and turns the replies into
:class:`RealResult` records. A TF error, a hang, a dead child or a dead server fails the
placement it hit; a RETRYABLE TF error first reopens the session that raised it.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np

from gplace import stopping
from gplace.cluster import interchangeable, mirror
from gplace.real.load import LoadProbe
from gplace.real.protocol import estimate, interval, step_limit, tight, visit_order

# TF errors that say "try again", not "this placement cannot run": TF's MonitoredSession
# closes and recreates its session on exactly these (its _PREEMPTION_ERRORS). Aborted: the
# runtime gave up a step (e.g. a remote task's rendezvous); Unavailable: a task was briefly
# unreachable. Never retried while a server process is dead: that is a lost cluster.
RETRYABLE = frozenset({"AbortedError", "UnavailableError"})


class RealResult(NamedTuple):
    step_time_s: float          # the protocol's estimate (a trimmed mean); inf if infeasible
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
        spread = (f"interval {self.low_s * 1e3:.2f}-{self.high_s * 1e3:.2f} ms"
                  if np.isfinite(self.high_s) else "one visit: no interval")
        return f"{self.step_time_s * 1e3:.2f} ms ({spread}, {len(self.times_s)} steps{note})"


class Batch:
    """Placements measured by the protocol (gplace.real.protocol), each in ``sessions``
    sessions of the measurer's runner child (session s runs its s-th mirror); a lost child
    (hang, crash, dead server) fails the placement it was running, and the others' sessions
    are reopened in a new child. A session that raises a RETRYABLE error is reopened and its
    command repeated (``_retry``). ``real``: the RealMeasurer whose runner child, servers,
    config and log it uses (not imported here: it imports this module); ``batch_index``
    numbers the placements in the log."""

    def __init__(self, real, op_device: np.ndarray, probe: LoadProbe,
                 batch_index: list[int] | None = None):
        self.real, self.op_device, self.probe = real, op_device, probe
        self.batch_index = batch_index or list(range(len(op_device)))
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
        self.retried = {sid: 0 for ids in self.ids for sid in ids}  # reopens per session

    def run(self) -> list[RealResult]:
        """One visit of each placement at least; then rounds until each is tight or at its
        step limit (protocol.step_limit), the time cap passes, or a Ctrl-C asks the search to
        stop (gplace.stopping): the placements then keep the steps timed so far."""
        cfg, n = self.cfg, len(self.op_device)
        cap = time.monotonic() + cfg.max_s_per_placement * n
        more = lambda: time.monotonic() < cap and not stopping.requested()  # noqa: E731
        try:
            for i in range(n):
                self._open(i)
            active, r = [i for i in range(n) if not self.failed[i]], 0
            while active and (r == 0 or more()):
                for i in visit_order(active, r):
                    k = min(cfg.steps_per_visit, step_limit(self.times[i], cfg)
                            - len(self.times[i]))
                    if not self.failed[i] and (r == 0 or more()):
                        self._visit(i, k)
                active = [i for i in active if not self.failed[i] and not tight(
                    self.times[i], cfg) and len(self.times[i]) < step_limit(self.times[i], cfg)]
                r += 1
        finally:
            self._close_all()
        return [self._result(i) for i in range(n)]

    def _result(self, i: int) -> RealResult:
        if self.failed[i]:
            return failed_result(self.failed[i])
        t = tuple(self.times[i])
        lo, hi = interval(t, self.cfg)
        return RealResult(estimate(t, self.cfg), True, t, self.loss[i], "", lo, hi,
                          tight(t, self.cfg))

    def _open(self, i: int) -> None:
        """Opens placement i's sessions, session s on its s-th mirror; loss of the first."""
        self.opened[i] = []
        for sid in self.ids[i]:
            reply = self._call(i, self._open_command(i, sid), sid)
            if reply is None:
                return
            self.opened.setdefault(i, []).append(sid)  # (_lose may have emptied opened)
            self.loss[i] = reply["loss"] if self.loss[i] is None else self.loss[i]

    def _open_command(self, i: int, sid: int) -> dict:
        """Opens session ``sid`` of placement i on its mirror (the session's index in ids)."""
        perm = self.mirrors[self.ids[i].index(sid)]
        return {"open": sid, "devices": perm[self.op_device[i]].tolist()}

    def _visit(self, i: int, steps: int) -> None:
        if len(self.opened.get(i, ())) < len(self.ids[i]):  # its sessions went with a lost child
            self._open(i)
            if self.failed[i]:
                return
        sid = self.ids[i][self.visits[i] % len(self.ids[i])]
        self.visits[i] += 1
        reply = self._call(i, {"run": sid, "warmup": self.cfg.warmup_per_visit, "steps": steps},
                           sid)
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

    def _call(self, i: int, command: dict, sid: int | None = None) -> dict | None:
        """The reply to ``command`` (on session ``sid``) for placement i, or None after
        recording why it failed."""
        real = self.real
        reply = real.runner(self.probe).call(command, real.config.timeout_s)
        if isinstance(reply, dict) and reply.get("ok"):
            return reply
        if isinstance(reply, dict) and self._may_retry(i, sid, reply):
            return self._retry(i, sid, command)
        self._fail(i, reply, sid)
        return None

    def _may_retry(self, i: int, sid: int | None, reply: dict) -> bool:
        """A RETRYABLE error on a session with reopens left, servers alive; logs the retry."""
        if (sid is None or reply.get("error_type") not in RETRYABLE or self.real.dead_reason()
                or self.retried[sid] >= self.real.config.retries):
            return False
        self.retried[sid] += 1
        kind = reply["error_type"].removesuffix("Error")
        message = reply.get("error", "").split(": ", 1)[-1]
        self.real.log(f"placement {self.batch_index[i] + 1} session "
                      f"{self.ids[i].index(sid) + 1}: {kind} ({message}), reopened "
                      f"(retry {self.retried[sid]} of {self.real.config.retries})")
        return True

    def _retry(self, i: int, sid: int, command: dict) -> dict | None:
        """Closes session ``sid``, opens it again and repeats ``command`` on it.

        The session's earlier timed steps stay: they are whole visits of the same placement on
        the same mirror, and dropping them would tilt the mirrors' half-and-half share of the
        steps that the protocol relies on; the failed visit reported no time and is run
        again. The first loss stays the placement's (the new session's first step is the same
        step from the same initial values)."""
        close = self.real.runner(self.probe).call({"close": sid}, self.real.config.timeout_s)
        if not isinstance(close, dict):  # a TF error on close is moot: the child dropped it
            self._fail(i, close, sid)
            return None
        if "open" not in command and self._call(i, self._open_command(i, sid), sid) is None:
            return None
        return self._call(i, command, sid)

    def _fail(self, i: int, reply, sid: int | None) -> None:
        """Records why placement i failed: a TF error (dict), a hang (None) or a dead child."""
        real = self.real
        if isinstance(reply, dict):  # TF said no: the placement fails, the child lives on
            dead = real.dead_suffix()
            self.failed[i] = (reply.get("error", "runner sent no error")
                              + self._retried(i, sid) + dead)
            if dead:  # the cluster is gone: this child's sessions are useless
                self._lose()
        elif reply is None:  # a hang or a dead server (TF would wait for it until the deadline)
            self.failed[i] = real.dead_reason() or f"timed out after {real.config.timeout_s:g} s"
            self._lose()
            real.restart_tasks()
        else:  # the runner died
            self.failed[i] = real.child.exit_reason() + real.dead_suffix()
            self._lose()

    def _retried(self, i: int, sid: int | None) -> str:
        """' (session 2 failed again after 1 retry)' once that session was reopened, else ''."""
        n = self.retried.get(sid, 0)
        if not n:
            return ""
        return (f" (session {self.ids[i].index(sid) + 1} failed again after {n} "
                f"{'retry' if n == 1 else 'retries'})")

    def _lose(self) -> None:
        self.real.drop_child(self.probe)
        self.opened = {}


def failed_result(reason: str) -> RealResult:
    """An infeasible placement's result: no steps, an infinite step time, the reason."""
    return RealResult(float("inf"), False, (), None, reason)
