"""RealMeasurer's protocol loop against a fake runner child (no TensorFlow, no processes): the
order of visits, warm-up per visit, early stopping, the time cap, a lost child, and sessions
reopened after a retryable TF error."""

import numpy as np
import pytest

from gplace.cluster import load_cluster
from gplace.graph import OpGraph
from gplace.problem import PlacementProblem
from gplace.real.measurer import RealConfig, RealMeasurer
from gplace.real.procs import RemoteTasks
from gplace.real.protocol import ProtocolConfig


class FakeNode:
    name, op, input, device = "step_loss", "Identity", (), ""


class FakeGraphDef:
    node = (FakeNode(),)  # the op a step runs (gplace.real.measurer.step_op)

    class library:
        function = ()

    def SerializeToString(self):
        return b""


class FakeChild:
    """Answers like gplace.real.runner; step times per placement from ``speeds``; placement
    ``dies_on`` kills the child on its first run; ``errors[(verb, i)]`` lists the TF errors
    that session i's next "open" / "run" commands raise, one each ("always": every time)."""
    log: list = []
    speeds = {0: 1.0, 1: 2.0, 2: 3.0}
    noisy: set = set()
    dies_on = None
    started = 0
    device_cost: tuple | None = None  # per device: step time of an op there, overrides speeds
    errors: dict = {}

    def __init__(self, job, graph_bytes, op_device, start_timeout_s, abort):
        FakeChild.started += 1
        self.pid, self.alive = 10**7 + FakeChild.started, True
        self.rng = np.random.default_rng(FakeChild.started)
        self.devices = {}

    def call(self, cmd, timeout_s):
        FakeChild.log.append(cmd)
        i = cmd.get("open", cmd.get("run", cmd.get("close")))
        if "close" in cmd:
            self.devices.pop(i, None)
            return {"i": i, "ok": True}
        error = FakeChild.raised(cmd, i)
        if error:
            return {"i": i, "ok": False, "error_type": error,
                    "error": f"{error}: From /job:worker/replica:0/task:1: RecvTensor expects "
                             f"a different device incarnation"}
        if "run" in cmd and i == FakeChild.dies_on:
            FakeChild.dies_on = None
            return ""
        if "open" in cmd:
            self.devices[i] = cmd["devices"]
            return {"i": i, "ok": True, "loss": 0.5}
        base = FakeChild.speeds[i % 3]
        if FakeChild.device_cost is not None:
            base = sum(FakeChild.device_cost[d] for d in self.devices[i])
        spread = 1.0 if i in FakeChild.noisy else 0.001
        return {"i": i, "ok": True,
                "times": list(base * (1 + spread * self.rng.random(cmd["steps"])))}

    @staticmethod
    def raised(cmd, i):
        """The error type session i's command raises now, or None."""
        queue = FakeChild.errors.get(("open" if "open" in cmd else "run", i), [])
        if queue == "always":
            return "AbortedError"
        return queue.pop(0) if queue else None

    def exit_reason(self):
        return "runner exited with code -9"

    def close(self):
        pass


@pytest.fixture
def measurer(monkeypatch):
    monkeypatch.setattr("gplace.real.measurer.RunnerChild", FakeChild)
    monkeypatch.setattr("gplace.real.measurer.runnable_step",  # no graph to cut or check
                        lambda graph_def, *args, **kwargs: (graph_def, "step_loss"))
    FakeChild.log, FakeChild.noisy, FakeChild.dies_on, FakeChild.started = [], set(), None, 0
    FakeChild.device_cost, FakeChild.errors = None, {}
    graph = OpGraph.from_lists([1e6, 1e6, 1e6], [4, 4, 4], edges=[(0, 1), (1, 2)])
    problem = PlacementProblem.build(graph, load_cluster("local-procs"))
    lines = []

    def make(retries=1, **protocol):
        protocol.setdefault("sessions", 1)  # the loop's order with one session per placement
        cfg = RealConfig(protocol=ProtocolConfig(**protocol), retries=retries)
        m = RealMeasurer(problem, FakeGraphDef(), cfg, tasks=RemoteTasks(("127.0.0.1:1",)),
                         log=lines.append)
        m.lines = lines
        return m
    return make


def placements(n_units):
    return np.array([[0] * n_units, [1] * n_units, [0] * (n_units - 1) + [1]])


def runs(log):
    return [c["run"] for c in log if "run" in c]


def test_visits_are_interleaved_with_a_warmup_each(measurer):
    m = measurer(min_steps=6, max_steps=6, steps_per_visit=3)
    result = m.measure(placements(m.problem.num_units))
    assert runs(FakeChild.log) == [0, 1, 2, 2, 1, 0]  # A B C, then C B A
    assert all(c["warmup"] == 1 and c["steps"] == 3 for c in FakeChild.log if "run" in c)
    assert [c["open"] for c in FakeChild.log if "open" in c] == [0, 1, 2]  # before any timing
    assert result.feasible.all() and np.allclose(result.step_time_s, [1, 2, 3], rtol=0.01)
    assert (result.low_s <= result.step_time_s).all()
    assert (result.step_time_s <= result.high_s).all()
    assert any("3 placements in" in line for line in m.lines)


def test_a_tight_placement_stops_early_and_a_noisy_one_goes_on(measurer):
    FakeChild.noisy = {1}
    m = measurer(min_steps=15, max_steps=30, steps_per_visit=3, rel_width=0.03)
    m.measure(placements(m.problem.num_units))
    counts = {i: runs(FakeChild.log).count(i) for i in range(3)}
    assert counts[0] == counts[2] == 5   # tight at the first check (15 steps)
    assert counts[1] == 10               # noisy: on to max_steps
    r = m.last_results
    assert r[0].tight and not r[1].tight and len(r[1].times_s) == 30
    assert r[1].spread_s > r[0].spread_s


def test_the_time_cap_ends_the_batch_after_one_visit_each(measurer):
    m = measurer(min_steps=3, max_steps=300, steps_per_visit=3, rel_width=0.0,
                 max_s_per_placement=0.0)
    m.measure(placements(m.problem.num_units))
    assert runs(FakeChild.log) == [0, 1, 2]


def test_a_ctrl_c_ends_the_batch_once_each_placement_was_timed(measurer, monkeypatch):
    """A stop asked for during the first round (gplace.stopping) lets that round finish, so
    every placement has a step time, and starts no other: the batch is cut short."""
    from gplace import stopping
    m = measurer(min_steps=3, max_steps=300, steps_per_visit=3, rel_width=0.0)
    call = FakeChild.call

    def stop_after_first_run(self, cmd, timeout_s):
        reply = call(self, cmd, timeout_s)
        if "run" in cmd:
            stopping.request()  # as the first Ctrl-C's handler does
        return reply
    monkeypatch.setattr(FakeChild, "call", stop_after_first_run)
    with stopping.stop_on_interrupt(log=None):
        result = m.measure(placements(m.problem.num_units))
    assert runs(FakeChild.log) == [0, 1, 2]  # without the stop: 100 visits each
    assert result.feasible.all() and np.allclose(result.step_time_s, [1, 2, 3], rtol=0.01)
    assert not any(r.tight for r in m.last_results)
    assert "(one visit: no interval, 3 steps, not tight)" in m.last_results[0].describe()
    assert any("cut short by Ctrl-C" in line for line in m.lines)


def test_a_lost_child_fails_its_placement_and_the_rest_reopen(measurer):
    FakeChild.dies_on = 1
    m = measurer(min_steps=6, max_steps=6, steps_per_visit=3)
    result = m.measure(placements(m.problem.num_units))
    assert list(result.feasible) == [True, False, True]
    assert m.last_results[1].reason == "runner exited with code -9"
    assert FakeChild.started == 2
    assert [c["open"] for c in FakeChild.log if "open" in c] == [0, 1, 2, 2, 0]  # reopened
    assert np.isinf(result.step_time_s[1])


def test_every_measured_placement_keeps_its_interval_and_the_child_is_reused(measurer):
    m = measurer(min_steps=6, max_steps=6, steps_per_visit=3)
    p = placements(m.problem.num_units)
    m.measure(p)
    m.measure(p[:1])
    assert FakeChild.started == 1  # one runner child over both batches
    assert [c["open"] for c in FakeChild.log if "open" in c] == [0, 1, 2, 3]
    r = m.result_of(p[2])
    assert r is not None and r.feasible and r.low_s <= r.step_time_s <= r.high_s
    assert "ms (interval" in r.describe()


def test_a_graph_with_large_variables_is_measured_in_smaller_chunks(measurer):
    import dataclasses
    m = measurer(min_steps=3, max_steps=3, steps_per_visit=3)
    params = max(int(m.problem.graph.param_bytes.sum()), 1)
    m.config = dataclasses.replace(m.config, max_open_bytes=2 * params)
    assert m.open_at_once() == 2
    m.measure(placements(m.problem.num_units))
    opens = [c["open"] for c in FakeChild.log if "open" in c]
    assert opens == [0, 1, 2] and FakeChild.started == 1  # chunks [0, 1] and [2], one child
    assert [c["close"] for c in FakeChild.log if "close" in c] == [0, 1, 2]


def test_two_sessions_run_a_placement_and_its_mirror_in_turn(measurer):
    m = measurer(min_steps=12, max_steps=12, steps_per_visit=3, sessions=2)
    p = placements(m.problem.num_units)
    m.measure(p)
    opens = [c for c in FakeChild.log if "open" in c]
    assert [c["open"] for c in opens] == [0, 1, 2, 3, 4, 5]  # two sessions per placement
    expand = m.problem.expand(p)
    for b in range(3):  # session 2b runs the placement, 2b + 1 its mirror (w0 <-> w1)
        assert opens[2 * b]["devices"] == expand[b].tolist()
        assert opens[2 * b + 1]["devices"] == (1 - expand[b]).tolist()
    assert runs(FakeChild.log)[:6] == [0, 2, 4, 5, 3, 1]  # visits take the sessions in turn
    assert sorted(runs(FakeChild.log)) == [i for i in range(6) for _ in range(2)]
    assert [c["close"] for c in FakeChild.log if "close" in c] == [0, 1, 2, 3, 4, 5]


@pytest.mark.parametrize("sessions, ratio", [(1, 1.25), (2, 1.0)])
def test_mirrored_sessions_cancel_a_device_slower_than_its_twin(measurer, sessions, ratio):
    FakeChild.device_cost = (1.25e-3, 1e-3)  # task 0's core runs 25% slower than task 1's
    m = measurer(min_steps=12, max_steps=12, steps_per_visit=3, sessions=sessions)
    n = m.problem.num_units
    t = m.measure(np.array([[0] * n, [1] * n])).step_time_s
    assert t[0] / t[1] == pytest.approx(ratio, rel=0.01)  # all on w0 against all on w1


def session_commands(log, sid):
    """The verbs sent to session ``sid``, in order: 'open', 'run', 'close'."""
    return [next(v for v in ("open", "run", "close") if v in c) for c in log
            if c.get("open", c.get("run", c.get("close"))) == sid]


@pytest.mark.parametrize("verb", ["open", "run"])
def test_an_aborted_session_is_reopened_and_its_placement_still_counts(measurer, verb):
    FakeChild.errors = {(verb, 3): ["AbortedError"]}  # placement 2's mirror session, once
    m = measurer(min_steps=12, max_steps=12, steps_per_visit=3, sessions=2)
    result = m.measure(placements(m.problem.num_units))
    assert result.feasible.all(), m.last_reasons
    assert [len(r.times_s) for r in m.last_results] == [12, 12, 12]  # the visit ran again
    retry = [line for line in m.lines if "reopened" in line]
    assert retry == ["placement 2 session 2: Aborted (From /job:worker/replica:0/task:1: "
                     "RecvTensor expects a different device incarnation), reopened "
                     "(retry 1 of 1)"]
    verbs = session_commands(FakeChild.log, 3)
    failed_at = 0 if verb == "open" else 1
    assert verbs[failed_at: failed_at + 4] == (["open", "close", "open", "run"] if verb == "open"
                                               else ["run", "close", "open", "run"])
    opens = [c["devices"] for c in FakeChild.log if c.get("open") == 3]
    assert len(opens) == 2 and opens[0] == opens[1]  # reopened on the same mirror


def test_a_non_retryable_error_fails_the_placement_at_once(measurer):
    FakeChild.errors = {("run", 3): ["InvalidArgumentError"]}
    m = measurer(min_steps=12, max_steps=12, steps_per_visit=3, sessions=2)
    result = m.measure(placements(m.problem.num_units))
    assert list(result.feasible) == [True, False, True]
    assert m.last_reasons[1] == ("InvalidArgumentError: From /job:worker/replica:0/task:1: "
                                 "RecvTensor expects a different device incarnation")
    assert session_commands(FakeChild.log, 3) == ["open", "run", "close"]  # no reopen
    assert not any("reopened" in line for line in m.lines)


@pytest.mark.parametrize("retries", [0, 2])
def test_retries_are_bounded(measurer, retries):
    FakeChild.errors = {("run", 3): "always"}
    m = measurer(retries, min_steps=12, max_steps=12, steps_per_visit=3, sessions=2)
    result = m.measure(placements(m.problem.num_units))
    assert list(result.feasible) == [True, False, True]
    assert session_commands(FakeChild.log, 3).count("open") == 1 + retries
    assert sum("reopened" in line for line in m.lines) == retries
    reason = m.last_reasons[1]
    assert reason.startswith("AbortedError: From /job:worker/replica:0/task:1:")
    assert reason.endswith("(session 2 failed again after 2 retries)" if retries else
                           "incarnation")


def test_negative_retries_are_refused():
    from gplace.errors import ConfigError
    with pytest.raises(ConfigError, match="retries = -1"):
        RealConfig(retries=-1)
