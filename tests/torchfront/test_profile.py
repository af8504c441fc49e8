"""Measured CPU costs of a step graph, read by the cost model; the place command end to end."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gplace.cluster import load_cluster
from gplace.cost import CostModel
from gplace.torchfront.profile import profile_step


def test_every_call_is_timed_and_the_cost_model_reads_it(step_of):
    step, graph = step_of("gnn")
    profile = profile_step(step, graph, warmup=1, steps=1)
    assert profile.op_names.tolist() == graph.names.tolist()
    roles = np.asarray(graph.meta["torch"]["roles"])
    calls = np.isin(roles, ["forward", "backward", "optimizer"])
    assert (profile.op_time_s[calls] > 0).all()
    assert 0 < profile.op_time_s.sum() <= profile.step_time_s
    costs = CostModel(profiles=[profile]).costs(graph, load_cluster("local-procs"))
    assert costs.measured.all()
    assert np.allclose(costs.time_s[:, 0], profile.op_time_s)


@pytest.mark.slow
def test_gplace_place_a_pt2_with_finetuning(pt2, tmp_path, capsys):
    from gplace.cli import main
    out = tmp_path / "out"
    assert main(["place", str(pt2("gnn")), "--cluster", "post-4gpu", "--finetune", "100",
                 "--optimizer", "adam", "--out", str(out), "--json"]) == 0
    record = json.loads((out / "placement.json").read_text())
    assert record["torch"]["optimizer"] == {"name": "adam", "lr": 0.01, "beta1": 0.9,
                                            "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.0}
    assert set(record["torch"]["parameters"]) == {"conv1.lin.weight", "conv1.bias",
                                                  "conv2.lin.weight", "conv2.bias"}
    assert not (out / "placed.pb").exists()
    from gplace.torchfront import load_placed
    placed = load_placed(pt2("gnn"), out / "placement.json")
    assert placed.step.optimizer.name == "adam"
    placed.run()
