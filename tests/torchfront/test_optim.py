"""Optimizer names and hyperparameters: the parser's accepted and refused specs, the record
placement.json keeps, and the update ops' TensorFlow types, FLOPs and state bytes."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gplace.errors import ConfigError
from gplace.torchfront.optim import OptimizerConfig, optimizer_config, parse_optimizer


@pytest.mark.parametrize("spec,expected", [
    ("sgd", OptimizerConfig("sgd", lr=0.01, momentum=0.0, weight_decay=0.0)),
    ("adam", OptimizerConfig("adam", lr=0.01, beta1=0.9, beta2=0.999, eps=1e-8,
                             weight_decay=0.0)),
    ("momentum", OptimizerConfig("sgd", momentum=0.9)),
    ("adamw", OptimizerConfig("adamw", lr=0.01, weight_decay=0.01)),
    ("sgd:momentum=0.9,nesterov=true,weight_decay=1e-4",
     OptimizerConfig("sgd", momentum=0.9, nesterov=True, weight_decay=1e-4)),
    ("ADAMW: lr=3e-4 , weight_decay=0.1", OptimizerConfig("adamw", lr=3e-4, weight_decay=0.1)),
    ("momentum:nesterov=1,lr=0.1", OptimizerConfig("sgd", lr=0.1, momentum=0.9, nesterov=True)),
    ("momentum:momentum=0.5", OptimizerConfig("sgd", momentum=0.5)),
    ("adam:", OptimizerConfig("adam")),
    ("adam:beta1=0,beta2=0.99,eps=1e-6", OptimizerConfig("adam", beta1=0.0, beta2=0.99,
                                                         eps=1e-6)),
])
def test_accepted_specs(spec, expected):
    config = parse_optimizer(spec)
    assert config == expected
    assert parse_optimizer(config.spec) == config
    assert optimizer_config(config.as_dict()) == config


def test_the_old_names_keep_their_meaning():
    assert optimizer_config(None) == optimizer_config("sgd") == OptimizerConfig()
    assert OptimizerConfig().lr == OptimizerConfig("adam").lr == 0.01
    assert OptimizerConfig("adam").weight_decay == 0.0
    assert OptimizerConfig().spec == "sgd" and OptimizerConfig("adam").spec == "adam"
    assert OptimizerConfig().state_names == ()


@pytest.mark.parametrize("spec,message", [
    ("rmsprop", "unknown optimizer 'rmsprop'.*choose one of sgd, momentum, adam, adamw"),
    ("adam:momentum=0.9", "unknown hyperparameter 'momentum'; adam takes lr, beta1"),
    ("sgd:betas=0.9", "unknown hyperparameter 'betas'; sgd takes lr, momentum"),
    ("sgd:lr=fast", "lr='fast' is not a number"),
    ("sgd:lr", "'lr' is not key=value"),
    ("sgd:lr=0.1,", "'' is not key=value"),
    ("sgd:lr=0.1,lr=0.2", "lr is given twice"),
    ("sgd:momentum=0.9,nesterov=maybe", "nesterov='maybe' must be true or false"),
    ("sgd:nesterov=true", "nesterov needs momentum > 0 and dampening 0"),
    ("momentum:nesterov=true,dampening=0.1", "nesterov needs momentum > 0 and dampening 0"),
    ("sgd:lr=0", "learning rate 0.0 must be > 0"),
    ("adamw:lr=nan", "lr = nan must be a finite number"),
    ("adamw:weight_decay=-0.1", "weight_decay = -0.1 must be >= 0"),
    ("adam:beta2=1", "beta2 = 1.0 must be in \\[0, 1\\)"),
    ("sgd:momentum=-1", "momentum = -1.0 must be >= 0"),
])
def test_refused_specs_are_one_line(spec, message):
    with pytest.raises(ConfigError, match=message) as e:
        parse_optimizer(spec)
    assert "\n" not in str(e.value)


def test_hyperparameters_of_the_other_algorithm_are_refused():
    with pytest.raises(ConfigError, match="beta1 do not apply; it takes lr, momentum"):
        OptimizerConfig("sgd", beta1=0.8)
    with pytest.raises(ConfigError, match="unknown hyperparameter.*nesterov"):
        optimizer_config({"name": "adamw", "lr": 0.1, "nesterov": True})
    with pytest.raises(ConfigError, match="unknown optimizer 'lion'"):
        optimizer_config({"name": "lion"})


@pytest.mark.parametrize("spec,tf_type,flops,states", [
    ("sgd", "ResourceApplyGradientDescent", 2, ()),
    ("sgd:weight_decay=1e-4", "ResourceApplyGradientDescent", 4, ()),
    ("momentum", "ResourceApplyMomentum", 4, ("momentum_buffer", "step")),
    ("sgd:momentum=0.9,nesterov=true,weight_decay=1e-4", "ResourceApplyMomentum", 8,
     ("momentum_buffer", "step")),
    ("adam", "ResourceApplyAdam", 10, ("exp_avg", "exp_avg_sq", "step")),
    ("adam:weight_decay=1e-4", "ResourceApplyAdam", 12, ("exp_avg", "exp_avg_sq", "step")),
    ("adamw", "ResourceApplyAdam", 11, ("exp_avg", "exp_avg_sq", "step")),
    ("adamw:weight_decay=0", "ResourceApplyAdam", 10, ("exp_avg", "exp_avg_sq", "step")),
])
def test_types_flops_and_state_of_each_update(spec, tf_type, flops, states):
    from gplace.gnn.features import OP_VOCAB
    config = parse_optimizer(spec)
    assert (config.tf_type, config.flops_per_element, config.state_names) == \
        (tf_type, flops, states)
    assert tf_type in OP_VOCAB


def test_the_momentum_step_graph_carries_its_type_flops_and_state_bytes(step_of):
    step, graph = step_of("gnn", "sgd:momentum=0.9,nesterov=true,weight_decay=1e-4")
    names = graph.names.tolist()
    updates = [i for i, n in enumerate(names) if n.endswith("/momentum")]
    assert len(updates) == len(step.param_names) == 4
    assert set(graph.op_types[updates].tolist()) == {"ResourceApplyMomentum"}
    for i in updates:
        fqn = names[i].removeprefix("optimizer/").removesuffix("/momentum")
        param = names.index(f"params/{fqn}")
        assert graph.flops[i] == 8 * graph.param_bytes[param] / 4  # float32 elements
        assert graph.param_bytes[names.index(f"optimizer/{fqn}/momentum_buffer")] == \
            graph.param_bytes[param]
        assert graph.param_bytes[names.index(f"optimizer/{fqn}/step")] == 4
        assert graph.group[i] == graph.group[param]


def test_placement_json_keeps_the_hyperparameters(pt2, tmp_path):
    """place -> placement.json -> load_placed rebuilds the same step, hyperparameters and all."""
    import torch
    from gplace.place import place
    from gplace.torchfront import load_placed, load_step
    spec = "adamw:lr=3e-4,weight_decay=0.1"
    result = place(str(pt2("gnn")), cluster="post-4gpu", finetune=0, progress=False,
                   optimizer=spec)
    result.export(tmp_path)
    record = json.loads((tmp_path / "placement.json").read_text())
    assert record["torch"]["optimizer"] == {"name": "adamw", "lr": 3e-4, "beta1": 0.9,
                                            "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.1}
    placed = load_placed(pt2("gnn"), tmp_path / "placement.json")
    assert placed.step.optimizer == parse_optimizer(spec)
    for a, b in zip(load_step(pt2("gnn"), spec).run(), placed.run()):
        assert torch.equal(a, b)
    from_result = load_placed(pt2("gnn"), result)  # the result itself, in the same process
    assert from_result.step.optimizer == parse_optimizer(spec)


def test_a_record_that_holds_only_a_name_still_loads(pt2, step_of, tmp_path):
    _, graph = step_of("gnn", "adam")
    path = tmp_path / "placement.json"
    path.write_text(json.dumps({"placement": {n: "cpu" for n in graph.names.tolist()},
                                "torch": {"optimizer": "adam"}}))
    from gplace.torchfront import load_placed
    assert load_placed(pt2("gnn"), path).step.optimizer == OptimizerConfig("adam")


def test_the_cli_takes_a_spec(pt2, capsys):
    from gplace.cli import main
    assert main(["inspect", str(pt2("gnn")), "--optimizer",
                 "sgd:momentum=0.9,nesterov=true", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["import"]["optimizer"] == "sgd:momentum=0.9,nesterov=true"
    assert summary["top_op_types"]["ResourceApplyMomentum"] == 4
    assert summary["import"]["optimizer_states"] == 8


@pytest.mark.parametrize("command", ["inspect", "place"])
@pytest.mark.parametrize("spec,message", [("adamw:momentum=0.9", "unknown hyperparameter"),
                                          ("lion", "unknown optimizer 'lion'"),
                                          ("sgd:lr=-1", "must be > 0")])
def test_the_cli_refuses_a_bad_spec_in_one_line(pt2, capsys, command, spec, message):
    from gplace.cli import main
    assert main([command, str(pt2("gnn")), "--optimizer", spec]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and err[0].startswith(f"gplace {command}: error")


def test_the_update_flops_reach_the_graph(step_of):
    _, sgd = step_of("gnn")
    _, adamw = step_of("gnn", "adamw")
    sgd_updates = np.char.endswith(sgd.names.astype(str), "/sgd")
    adamw_updates = np.char.endswith(adamw.names.astype(str), "/adamw")
    assert np.allclose(adamw.flops[adamw_updates], sgd.flops[sgd_updates] / 2 * 11)
