import math
from dataclasses import replace

import numpy as np
import pytest

from gplace.cluster import load_cluster
from gplace.cost import (CostModel, CostModelConfig, bytes_touched, fit_efficiency,
                         half_precision, roofline_s, transfer_repeats)
from gplace.graph import OpGraph
from gplace.profile import CostProfile


def graph():
    return OpGraph.from_lists([2e9, 0.0, 4e9] * 10, [4_000_000, 8_000_000, 0] * 10,
                              [(i, i + 1) for i in range(29)], name="g")


def profile(g, kind, times, names=None):
    names = g.names if names is None else names
    n = len(names)
    return CostProfile(graph="g", device_kind=kind, machine="test", op_names=np.asarray(names),
                       op_time_s=np.asarray(times, float), op_output_bytes=np.zeros(n, np.int64),
                       op_temp_bytes=np.full(n, 64, np.int64), step_time_s=1.0)


def test_roofline_by_hand():
    g = graph()
    k80 = load_cluster("post-2gpu").devices[1]
    t = roofline_s(g, k80, 0.5)
    # op0: 2e9 FLOP at 4.365e12 * 0.5 vs (0 in + 4e6 out) B at 240e9 * 0.5: compute-bound
    assert t[0] == k80.launch_overhead_s + 2e9 / (4.365e12 * 0.5)
    # op1: no FLOPs, 4e6 in + 8e6 out bytes: memory-bound
    assert bytes_touched(g)[1] == 12e6
    assert t[1] == k80.launch_overhead_s + 12e6 / (240e9 * 0.5)
    cpu = load_cluster("post-2gpu").devices[0]  # 4 lanes share the CPU's peak
    assert roofline_s(g, cpu, 1.0)[0] == cpu.launch_overhead_s + 2e9 / (cpu.peak_flops / 4)


def test_16_bit_ops_run_at_the_tensor_core_peak_where_a_device_has_one():
    g = graph()
    g = g.replace(out_dtype=np.array(["float16", "bfloat16", "float32"] * 10))
    assert half_precision(g).tolist() == [True, True, False] * 10
    cluster = load_cluster("hetero")
    v100, k80 = replace(cluster.devices[1], half_flops=125e12), cluster.devices[3]
    t = roofline_s(g, v100, 0.5)
    assert t[0] == v100.launch_overhead_s + 2e9 / (125e12 * 0.5)  # float16 matrix product
    assert t[2] == v100.launch_overhead_s + 4e9 / (15.7e12 * 0.5)  # float32
    assert t[1] == v100.launch_overhead_s + 12e6 / (900e9 * 0.5)   # memory-bound either way
    assert k80.half_flops is None
    np.testing.assert_array_equal(roofline_s(g, k80, 0.5), roofline_s(graph(), k80, 0.5))


def test_an_op_without_outputs_is_not_16_bit():
    g = OpGraph.from_lists([1.0, 2.0], [4, 4])
    g = g.replace(out_ptr=np.array([0, 0, 1]), out_dtype=np.array(["float16"]))
    assert half_precision(g).tolist() == [False, True]
    empty = OpGraph.from_lists([1.0], [4]).replace(out_ptr=np.array([0, 0]),
                                                    out_dtype=np.zeros(0, str))
    assert half_precision(empty).tolist() == [False]


def test_measured_where_profiled_roofline_elsewhere_and_says_so():
    g, cl = graph(), load_cluster("post-2gpu")
    measured = np.full(20, 1e-3)
    model = CostModel(profiles=[profile(g, "k80", measured, g.names[:20])])
    costs = model.costs(g, cl)
    assert costs.time_s.shape == (30, 3)
    assert (costs.time_s[:20, 1] == 1e-3).all() and (costs.time_s[20:, 1] != 1e-3).all()
    assert costs.measured[:20, 1].all() and not costs.measured[20:, 1].any()
    assert costs.estimated.tolist() == [True, True, True]
    assert "measured 20/30 ops" in costs.notes[1] and "roofline" in costs.notes[0]
    assert costs.temp_bytes[0, 1] == 64 and costs.temp_bytes[0, 0] == 0
    full = CostModel(profiles=[profile(g, "k80", np.full(30, 1e-3))]).costs(g, cl)
    assert full.estimated.tolist() == [True, False, False]


def test_fit_recovers_a_known_efficiency_and_round_trips(tmp_path):
    g, cl = graph(), load_cluster("local")
    cpu = cl.devices[0]
    truth = roofline_s(g, cpu, 0.2)  # a CPU that reaches 20% of its roofline
    model = CostModel(CostModelConfig(min_fit_ops=5))
    fitted = model.fit([(g, profile(g, "cpu", truth))], cl)
    eff, used = fit_efficiency(g, profile(g, "cpu", truth), cpu)
    assert used == 30 and math.isclose(eff, 0.2, rel_tol=1e-9)
    assert math.isclose(fitted["cpu"], 0.2, rel_tol=1e-9)
    assert model.efficiency("k80") == (0.5, "default")
    model.save(tmp_path / "cm.json.gz")
    loaded = CostModel.load(tmp_path / "cm.json.gz")
    np.testing.assert_array_equal(loaded.costs(g, cl).time_s, model.costs(g, cl).time_s)
    assert loaded.fitted == model.fitted


def test_runs_scale_roofline_estimates_not_measured_times():
    g, cl = graph(), load_cluster("post-2gpu")
    runs = np.ones(30, np.int64)
    runs[5:10] = 20
    measured = profile(g, "k80", np.full(30, 1e-3))
    looped = CostProfile(**{**measured.__dict__, "op_runs": runs})
    plain = CostModel(profiles=[measured]).costs(g, cl)
    costs = CostModel(profiles=[looped]).costs(g, cl)
    assert plain.runs is None and costs.runs.tolist() == runs.tolist()
    np.testing.assert_array_equal(costs.time_s[:, 1:], plain.time_s[:, 1:])  # measured: sums
    np.testing.assert_array_equal(costs.time_s[:, 0], plain.time_s[:, 0] * runs)  # the CPU's


def test_transfer_repeats_follow_the_consumers_runs():
    # op0 -> op1 (runs 4), op0 -> op2 (runs 1); op1 -> op3 (runs 1); op2 has no consumer
    g = OpGraph.from_lists([0.0] * 4, [8] * 4, [(0, 1), (0, 2), (1, 3)])
    assert transfer_repeats(g, None).tolist() == [1.0] * 4
    assert transfer_repeats(g, np.array([1, 4, 1, 1])).tolist() == [4.0, 1.0, 1.0, 1.0]


def test_fit_counts_every_run_of_a_looped_op():
    g, cl = graph(), load_cluster("local")
    cpu = cl.devices[0]
    runs = np.where(np.arange(30) % 3 == 0, 8, 1)
    truth = roofline_s(g, cpu, 0.2, runs)  # a loop's measured time sums its runs
    looped = CostProfile(**{**profile(g, "cpu", truth).__dict__, "op_runs": runs})
    eff, used = fit_efficiency(g, looped, cpu)
    assert used == 30 and math.isclose(eff, 0.2, rel_tol=1e-9)


def test_a_saved_cost_model_with_impossible_times_is_one_config_error(tmp_path):
    """Its profiles are checked as a profile file is: NaN times crashed the simulator."""
    import gzip
    import json
    from gplace.cost import CostModel
    from gplace.errors import ConfigError
    from gplace.profile import CostProfile
    model = CostModel(profiles=[CostProfile("g", "cpu", "m", np.array(["a"]), np.array([1e-3]),
                                            np.array([8]), np.array([0]), 1e-3)])
    path = tmp_path / "m.cost.json.gz"
    model.save(path)
    record = json.loads(gzip.decompress(path.read_bytes()))
    record["profiles"][0]["op_time_s"] = [float("nan")]
    path.write_bytes(gzip.compress(json.dumps(record).encode()))
    with pytest.raises(ConfigError, match="finite seconds"):
        CostModel.load(path)


def test_a_graph_and_its_profile_renamed_together_keep_their_costs(tmp_path):
    """The profile beside a file applies to the graph imported from it, whatever name the
    profile recorded: a looped corpus graph copied as my_rnn keeps its measured times and its
    loops' run counts."""
    import shutil
    from pathlib import Path
    import gplace
    from gplace.cost import cost_model_for
    corpus = Path(__file__).resolve().parents[1] / "datasets" / "corpus"
    for suffix in (".pb", ".profile.json.gz"):
        shutil.copy(corpus / f"rnn_loop_02{suffix}", tmp_path / f"my_rnn{suffix}")
    cluster = load_cluster("local-procs")  # CPU processes: the profile's kind
    original = cost_model_for(corpus / "rnn_loop_02.pb").costs(
        gplace.load_graph(corpus / "rnn_loop_02.pb"), cluster)
    renamed = cost_model_for(tmp_path / "my_rnn.pb").costs(
        gplace.load_graph(tmp_path / "my_rnn.pb"), cluster)
    assert renamed.runs is not None and renamed.runs.max() > 1
    assert np.array_equal(renamed.runs, original.runs)
    assert np.array_equal(renamed.time_s, original.time_s)
    assert np.array_equal(renamed.measured, original.measured) and renamed.measured.any()


def test_a_profile_measured_at_another_size_of_the_unknown_dimensions_is_not_used():
    """gplace profile --unknown-dim 64 times the step at batch 64: a graph imported at batch 1
    (or the reverse) keeps its roofline estimates, and the costs say why."""
    g = graph()
    big = replace(g, meta={**g.meta, "import": {"unknown_dim": 64, "sized_inputs": ["x"]}})
    # asked for 64, but nothing to size: the same graph as at 1
    static = replace(g, meta={**g.meta, "import": {"unknown_dim": 64, "sized_inputs": [],
                                                    "outputs_with_unknown_dims": 0}})
    p = profile(g, "cpu", np.full(g.num_ops, 1e-3))
    p64 = CostProfile(**{**p.__dict__, "meta": {"unknown_dim": 64}})
    cluster = load_cluster("local-procs")
    for graph_, prof, used in ((g, p, True), (big, p, False), (g, p64, False), (big, p64, True),
                               (static, p, True), (static, p64, False)):
        costs = CostModel(profiles=[prof]).costs(graph_, cluster)
        assert costs.measured.all() == used
        assert ("not used" in costs.summary) == (not used)


def test_ops_that_run_no_kernel_take_their_host_time_on_every_device():
    from gplace.cost import HOST_OP_DEFAULT_S, HOST_OP_S, host_ops, host_s
    g = graph().replace(op_types=np.array(["ReadVariableOp", "MatMul", "Snapshot"] * 10))
    assert host_ops(g).tolist() == [True, False, True] * 10
    assert host_s(g)[:3].tolist() == [HOST_OP_S["ReadVariableOp"], 0.0, HOST_OP_DEFAULT_S]
    for device in load_cluster("hetero").devices:
        t = roofline_s(g, device, 0.5, runs=np.full(30, 3))
        # a 4 MB read costs its host time, three runs of it, not a launch and its bytes
        assert t[0] == 3 * HOST_OP_S["ReadVariableOp"] < 3 * device.launch_overhead_s
        assert t[1] > device.launch_overhead_s


def test_a_pytorch_programs_views_run_no_kernel_and_its_copies_do():
    from gplace.cost import host_ops
    g = OpGraph.from_lists([0.0] * 4, [4] * 4,
                           op_types=["Transpose", "Transpose", "VarHandleOp", "Identity"])
    g = g.replace(meta={"name": "g", "torch": {"aten": ["permute", "clone", "param", "clone"]}})
    assert host_ops(g).tolist() == [True, False, True, False]
    # the same types in a GraphDef: Transpose runs a kernel, Identity does not
    assert host_ops(g.replace(meta={"name": "g"})).tolist() == [False, False, True, True]


def test_the_efficiency_fit_leaves_out_ops_that_run_no_kernel():
    g = graph().replace(op_types=np.array(["Conv2D", "Const", "Relu"] * 10))
    cpu = load_cluster("post-2gpu").devices[0]
    truth = roofline_s(g, cpu, 0.25)
    times = truth.copy()
    times[1::3] = 1.0  # a slow Const the fit must not read
    eff, used = fit_efficiency(g, profile(g, "cpu", times), cpu)
    assert used == 20 and eff == pytest.approx(0.25)
