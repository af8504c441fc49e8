"""The placed program runs the same step: against the unsplit step graph (bit for bit), and
against eager PyTorch with torch.optim (bit for bit on the examples where the eager kernels are
the graph's, parameters and optimizer state over two steps for every optimizer; the LSTM,
whose eager CPU kernel is fused, within 1e-5)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gplace.examples.torch.models import build
from gplace.torchfront.optim import OptimizerConfig, optimizer_config, torch_optimizer
from gplace.torchfront.placed import Move, default_device_map, placed_step

TWO = ("/job:localhost/replica:0/task:0/device:GPU:0", "/job:localhost/replica:0/task:0/device:GPU:1")


def random_placement(graph, seed: int = 0) -> dict[str, str]:
    """Every colocation group on one of two devices at random: many device changes."""
    unit = np.random.default_rng(seed).integers(0, 2, graph.num_groups)[graph.group]
    return {n: TWO[d] for n, d in zip(graph.names.tolist(), unit.tolist())}


def eager_step(name: str, optimizer: str):
    """Loss and updated parameters of one eager step with torch.optim."""
    module, batch = build(name)
    opt = torch_optimizer(OptimizerConfig(optimizer), module.parameters())
    loss = module(*batch)
    loss.backward()
    opt.step()
    return loss.detach(), dict(module.named_parameters()), dict(module.named_buffers())


def eager_steps(name: str, optimizer: str, steps: int):
    """Losses, parameters, buffers and torch.optim's state by parameter after ``steps`` eager
    steps on the example batch."""
    module, batch = build(name)
    opt = torch_optimizer(optimizer_config(optimizer), module.parameters())
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = module(*batch)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    params = dict(module.named_parameters())
    return losses, params, dict(module.named_buffers()), {n: opt.state[p] for n, p in
                                                          params.items()}


def graph_steps(step, steps: int):
    """The same from the step graph: each step's new parameters, buffers and states are the
    next step's inputs."""
    inputs, losses = step.inputs, []
    for _ in range(steps):
        loss, params, buffers, states = step.split_outputs(step.run(inputs))
        inputs = [*params, *buffers, *states, *step.batch]
        losses.append(loss)
    return losses, params, buffers, states


SLOW = pytest.mark.slow
NEW = ["momentum", "sgd:momentum=0.9,dampening=0.1,weight_decay=1e-4",
       "sgd:momentum=0.9,nesterov=true,weight_decay=1e-4", "sgd:weight_decay=1e-3",
       "adam:weight_decay=1e-4", "adamw", "adamw:lr=3e-4,weight_decay=0.1"]


@pytest.mark.parametrize("name,optimizer", [("cnn", "adam"), ("gnn", "sgd"),
                                            pytest.param("cnn", "sgd", marks=SLOW),
                                            pytest.param("gpt", "adam", marks=SLOW),
                                            pytest.param("recsys", "sgd", marks=SLOW),
                                            pytest.param("gnn", "adam", marks=SLOW)])
def test_the_step_graph_is_one_torch_optim_step_bit_for_bit(step_of, name, optimizer):
    step, _ = step_of(name, optimizer)
    loss, params, buffers, _ = step.split_outputs(step.run())
    ref_loss, ref_params, ref_buffers = eager_step(name, optimizer)
    assert torch.equal(loss, ref_loss)
    for fqn, value in zip(step.param_names, params):
        assert torch.equal(value, ref_params[fqn].detach()), fqn
    for fqn, value in zip(step.buffer_names, buffers):
        assert torch.equal(value, ref_buffers[fqn]), fqn


@pytest.mark.parametrize("name,optimizer", [
    *(("gnn", o) for o in NEW), ("cnn", "sgd:momentum=0.9,nesterov=true,weight_decay=1e-4"),
    ("cnn", "adamw"), pytest.param("gpt", "adamw:lr=3e-4,weight_decay=0.1", marks=SLOW),
    pytest.param("recsys", "momentum", marks=SLOW), pytest.param("cnn", "momentum", marks=SLOW),
    pytest.param("gpt", "sgd:momentum=0.9,nesterov=true", marks=SLOW)])
def test_two_steps_give_torch_optims_parameters_and_state_bit_for_bit(step_of, name,
                                                                      optimizer):
    """Step 2 starts from step 1's outputs: SGD's first-step buffer (a copy of the gradient,
    the step count's role) and Adam's counts must carry over exactly."""
    step, _ = step_of(name, optimizer)
    losses, params, buffers, states = graph_steps(step, 2)
    ref_losses, ref_params, ref_buffers, ref_state = eager_steps(name, optimizer, 2)
    assert all(torch.equal(a, b) for a, b in zip(losses, ref_losses))
    for fqn, value in zip(step.param_names, params):
        assert torch.equal(value, ref_params[fqn].detach()), fqn
    for fqn, value in zip(step.buffer_names, buffers):
        assert torch.equal(value, ref_buffers[fqn]), fqn
    compared = 0
    for key, value in zip(step.state_names, states):
        fqn, state = key.rsplit(".", 1)
        if state in ref_state[fqn]:  # torch.optim.SGD keeps no step count
            assert torch.equal(value, ref_state[fqn][state]), key
            compared += 1
    assert compared == sum(len(s) for s in ref_state.values())  # 0: SGD without momentum


@pytest.mark.slow
def test_the_lstm_step_matches_torch_optim_within_tolerance(step_of):
    step, _ = step_of("lstm", "sgd")
    loss, params, _, _ = step.split_outputs(step.run())
    ref_loss, ref_params, _ = eager_step("lstm", "sgd")
    assert torch.allclose(loss, ref_loss, rtol=1e-6, atol=1e-6)
    for fqn, value in zip(step.param_names, params):
        assert torch.allclose(value, ref_params[fqn].detach(), rtol=1e-5, atol=1e-7), fqn


@pytest.mark.parametrize("name,optimizer", [("cnn", "adam"), ("gnn", "sgd"),
                                            ("gnn", "momentum"),
                                            pytest.param("gpt", "sgd", marks=SLOW),
                                            pytest.param("cnn", "adamw", marks=SLOW)])
def test_two_devices_through_the_moving_path_give_the_same_step(step_of, name, optimizer):
    step, graph = step_of(name, optimizer)
    placed = placed_step(step, random_placement(graph), {TWO[0]: "cpu", TWO[1]: "cpu"})
    assert len({label for _, label in placed.partitions}) == 2
    assert len(placed.partitions) > 4
    moves = [m for m in placed.module.modules() if isinstance(m, Move)]
    assert moves and placed.transfers == 0
    out = placed.run()
    assert placed.transfers == len(moves)  # each boundary tensor moved once per step
    for a, b in zip(step.run(), out):
        assert torch.equal(a, b)


def test_partitions_are_maximal_runs_in_node_order(step_of):
    step, graph = step_of("cnn")
    placed = placed_step(step, random_placement(graph, seed=3), {TWO[0]: "cpu", TWO[1]: "cpu"})
    labels = [label for _, label in placed.partitions]
    assert all(a != b for a, b in zip(labels, labels[1:]))  # a new partition = a new device
    assert [int(n.split("_")[1]) for n, _ in placed.partitions] == list(range(len(labels)))


def test_one_device_is_one_partition_without_moves(step_of):
    step, graph = step_of("gnn")
    placed = placed_step(step, {n: "cpu:0" for n in graph.names.tolist()})
    assert len(placed.partitions) == 1
    placed.run()
    assert placed.transfers == 0


def test_a_placement_missing_an_op_is_refused(step_of):
    from gplace.errors import ConfigError
    step, graph = step_of("gnn")
    partial = {n: "cpu" for n in graph.names.tolist()[1:]}
    with pytest.raises(ConfigError, match="no device for 1 op"):
        placed_step(step, partial)


def test_default_device_map_falls_back_to_cpu_without_cuda():
    m = default_device_map(["/device:GPU:1", "gpu0", "/device:CPU:0"])
    expect = "cuda" if torch.cuda.device_count() > 1 else "cpu"
    assert m["/device:GPU:1"].type == expect
    assert m["/device:CPU:0"].type == "cpu"


def test_a_placement_from_place_runs(pt2, step_of):
    """place() -> op_devices -> the placed program: the same step as the unsplit graph."""
    from gplace.place import place
    from gplace.torchfront import load_placed
    result = place(str(pt2("cnn")), cluster="post-4gpu", finetune=0, progress=False,
                   optimizer="adam")
    placed = load_placed(pt2("cnn"), result.op_devices, optimizer="adam")
    step, _ = step_of("cnn", "adam")
    for a, b in zip(step.run(), placed.run()):
        assert torch.equal(a, b)
