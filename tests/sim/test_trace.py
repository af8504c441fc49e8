"""The Perfetto trace of a simulated step: one event per op at its simulated times, one per
transfer on its link channel, lanes of a multi-lane device that never overlap."""

import json

import numpy as np
import pytest

from gplace.graph import OpGraph
from gplace.sim import FastSimulator
from gplace.sim.trace import _lanes_of, chrome_trace, write_trace

from tests.sim.helpers import cluster, device, problem


@pytest.fixture
def traced():
    # a -> b, a -> c on two devices, 1 MB per tensor at 1 GB/s: one transfer (a -> c).
    g = OpGraph.from_lists([0] * 3, [10**6] * 3, [(0, 1), (0, 2)], names=["a", "b", "c"],
                           op_types=["MatMul", "Relu", "Relu"])
    prob = problem(g, cluster(device("d0"), device("d1")), [1e-3, 2e-3, 3e-3])
    sim = FastSimulator(prob).run(np.array([0, 0, 1]))
    return prob, sim, chrome_trace(prob, sim)


def test_one_event_per_op_at_its_simulated_times(traced):
    prob, sim, trace = traced
    ops = {e["name"]: e for e in trace["traceEvents"] if e["ph"] == "X" and e["pid"] == 1}
    assert sorted(ops) == ["a", "b", "c"]
    assert ops["a"]["cat"] == "MatMul" and ops["a"]["tid"] == ops["b"]["tid"] != ops["c"]["tid"]
    for i, name in enumerate(["a", "b", "c"]):
        assert ops[name]["ts"] == pytest.approx(sim.op_start_s[i] * 1e6)
        assert ops[name]["dur"] == pytest.approx((sim.op_end_s[i] - sim.op_start_s[i]) * 1e6)
    assert ops["c"]["ts"] == pytest.approx(1e3 + 1e3)  # after a (1 ms) and its 1 ms transfer
    assert trace["otherData"] == {"graph": "graph", "cluster": "test",
                                  "step_time_s": sim.step_time_s}


def test_one_event_per_transfer_on_its_channel(traced):
    prob, sim, trace = traced
    sent = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["pid"] == 2]
    assert len(sent) == 1
    (x,) = sent
    assert x["name"] == "a:0 -> d1" and x["args"]["bytes"] == 10**6
    assert x["tid"] == int(prob.cluster.link_table().channel[0, 1])
    assert x["dur"] == pytest.approx(1e3)
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M"}
    assert {"devices", "links", "d0", "d1"} <= names


def test_lanes_never_overlap():
    start = np.array([0.0, 0.0, 1.0, 2.0, 2.5])  # never more than two ops at once
    end = np.array([2.0, 1.0, 3.0, 2.5, 3.0])
    lane = _lanes_of(start, end, 2)
    assert lane.tolist() == [1, 0, 0, 1, 1]  # by start, then end: the 1-unit op first
    for k in (0, 1):
        spans = sorted(zip(start[lane == k], end[lane == k]))
        assert all(e <= s for (_, e), (s, _) in zip(spans, spans[1:])), (k, spans)


def test_write_trace_writes_the_same_json(traced, tmp_path):
    prob, sim, trace = traced
    write_trace(tmp_path / "t.json", prob, sim)
    assert json.loads((tmp_path / "t.json").read_text()) == json.loads(json.dumps(trace))
