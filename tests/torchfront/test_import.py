"""The import of PyTorch training steps: FLOPs against torch.utils.flop_counter, bytes,
colocation, op types the policy knows, and the dispatch from gplace.load_graph."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
import torch

import gplace
from gplace.examples.torch.models import build
from gplace.torchfront.flops import reference_flops
FAST = ("cnn", "gpt", "recsys", "gnn")  # the LSTM joint graph takes ~5 s more: slow

SLOW_LSTM = pytest.param("lstm", marks=pytest.mark.slow)


def forward_backward_counted(graph) -> float:
    roles = np.asarray(graph.meta["torch"]["roles"])
    counted = np.asarray(graph.meta["torch"]["counted_flops"])
    return float(counted[np.isin(roles, ["forward", "backward"])].sum())


@pytest.mark.parametrize("name", [*FAST, SLOW_LSTM])
def test_flops_match_the_flop_counter_on_forward_and_backward(step_of, name):
    _, graph = step_of(name)
    module, batch = build(name)
    reference = reference_flops(module, batch)
    assert reference > 0
    assert forward_backward_counted(graph) == pytest.approx(reference, rel=0.05)
    # the optimizer and the estimated elementwise work come on top, never instead
    assert graph.flops.sum() >= forward_backward_counted(graph)


def test_counted_flops_of_one_linear_layer_by_hand(tmp_path):
    """y = x W^T + b, loss = sum(y): forward 2*B*I*O, backward 2*B*I*O for dW (dx is not
    needed: x is an input), so 4*B*I*O counted."""
    class Lin(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(16, 8)

        def forward(self, x):
            return self.fc(x).sum()
    path = tmp_path / "lin.pt2"
    torch.export.save(torch.export.export(Lin(), (torch.randn(4, 16),)), path)
    graph = gplace.load_graph(path)
    assert forward_backward_counted(graph) == 4 * 4 * 16 * 8


def test_a_depthwise_convolution_counts_its_weight_gradient_once_per_group(tmp_path):
    """A depthwise 3x3 conv (C groups of one channel), loss = sum(y): forward 2*B*C*H*W*9; the
    weight gradient as many (each output channel reads one input channel, not all C: the
    counter's formula takes C times that); no input gradient (x is an input)."""
    class Depthwise(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=False)

        def forward(self, x):
            return self.conv(x).sum()
    path = tmp_path / "dw.pt2"
    torch.export.save(torch.export.export(Depthwise(), (torch.randn(2, 16, 8, 8),)), path)
    graph = gplace.load_graph(path)
    assert forward_backward_counted(graph) == 2 * (2 * 2 * 16 * 8 * 8 * 9)


def test_bytes_and_parameters(step_of):
    step, graph = step_of("cnn", "adam")
    params = sum(p.numel() * 4 for p in step.params)
    buffers = sum(b.numel() * b.element_size() for b in step.buffers)
    # parameters, buffers, and Adam's two moments per parameter plus a 4-byte step count
    states = 2 * params + 4 * len(step.grad_of)
    assert graph.param_bytes.sum() == params + buffers + states
    conv = graph.index("convolution")
    n, c, h, w = 8, 16, 32, 32
    assert graph.output_bytes[conv] == n * c * h * w * 4
    assert graph.output_shape(int(graph.out_ptr[conv])) == (n, c, h, w)


def test_a_parameter_its_state_and_update_are_one_group(step_of):
    _, graph = step_of("cnn", "adam")
    g = lambda name: graph.group[graph.index(name)]  # noqa: E731
    weight = g("params/conv1.weight")
    assert g("optimizer/conv1.weight/exp_avg") == weight
    assert g("optimizer/conv1.weight/exp_avg_sq") == weight
    assert g("optimizer/conv1.weight/step") == weight
    assert g("optimizer/conv1.weight/adam") == weight
    assert g("params/conv2.weight") != weight


def test_batch_norm_sits_with_its_running_statistics(step_of):
    _, graph = step_of("cnn")
    bn = graph.index("_native_batch_norm_legit_functional")
    assert graph.group[bn] == graph.group[graph.index("buffers/bn1.running_mean")]
    assert graph.group[bn] == graph.group[graph.index("buffers/bn1.running_var")]


def test_the_gradient_of_a_tied_weight_is_accumulated_with_it(tmp_path):
    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(20, 8)

        def forward(self, idx):
            return (self.emb(idx) @ self.emb.weight.t()).logsumexp(-1).mean()
    path = tmp_path / "tied.pt2"
    torch.export.save(torch.export.export(Tied(), (torch.randint(0, 20, (4,)),)), path)
    graph = gplace.load_graph(path)
    names = graph.names.tolist()
    group = graph.group[graph.index("params/emb.weight")]
    adds = [n for n, t in zip(names, graph.meta["torch"]["aten"]) if t == "add"
            and graph.group[names.index(n)] == group]
    assert adds, "the addition of the two gradient contributions is not with the weight"


def test_op_types_are_the_policys_vocabulary(step_of):
    from gplace.gnn.features import OP_VOCAB
    from gplace.torchfront.optypes import ROLE_TYPE, TF_TYPE
    unknown = set(TF_TYPE.values()) - set(OP_VOCAB) - {"Placeholder", "Max"}
    assert not unknown
    assert set(ROLE_TYPE.values()) <= set(OP_VOCAB) | {"Placeholder"}
    for name in FAST:
        _, graph = step_of(name)
        known = np.isin(graph.op_types, OP_VOCAB).mean()
        assert known > 0.8, (name, known)


def test_an_embedding_bag_reads_as_the_gather_and_segment_sum_the_policy_knows(tmp_path):
    class Bags(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bag = torch.nn.EmbeddingBag(100, 8, mode="sum")

        def forward(self, ids, offsets):
            return self.bag(ids, offsets).square().sum()
    path = tmp_path / "bags.pt2"
    batch = (torch.randint(0, 100, (12,)), torch.tensor([0, 4, 8]))
    torch.export.save(torch.export.export(Bags(), batch), path)
    types = set(gplace.load_graph(path).op_types.tolist())
    assert {"ResourceGather", "UnsortedSegmentSum"} <= types
    assert not any(t.startswith("_embedding_bag") for t in types)


def test_backward_ops_are_named_as_gradients(step_of):
    _, graph = step_of("gpt")
    roles = np.asarray(graph.meta["torch"]["roles"])
    grads = np.char.startswith(graph.names.astype(str), "gradients/")
    assert np.array_equal(grads, roles == "backward")
    assert (roles == "backward").sum() > (roles == "forward").sum() * 0.5


def test_load_graph_dispatches_pt2_without_tensorflow(pt2):
    import subprocess
    code = ("import sys, gplace; g = gplace.load_graph(sys.argv[1], optimizer='adam'); "
            "assert 'tensorflow' not in sys.modules; print(g.num_ops)")
    out = subprocess.run([sys.executable, "-c", code, str(pt2("gnn"))], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert int(out.stdout.split()[-1]) > 50


def test_opgraph_round_trips_through_npz(step_of, tmp_path):
    _, graph = step_of("recsys")
    graph.save(tmp_path / "g.npz")
    again = gplace.OpGraph.load(tmp_path / "g.npz")
    assert again.names.tolist() == graph.names.tolist()
    assert again.meta["torch"]["fx_nodes"] == graph.meta["torch"]["fx_nodes"]


def step_on_one_cpu(path, graph, tmp_path) -> list:
    """The placed step of the program at ``path`` with every op on this machine's CPU, run
    once: (loss, *new state)."""
    from gplace.torchfront import load_placed
    device = "/job:localhost/replica:0/task:0/device:CPU:0"
    (tmp_path / "placement.json").write_text(json.dumps(
        {"placement": {n: device for n in graph.names.tolist()}}))
    return list(load_placed(path, tmp_path / "placement.json").run())


class TiedHead(torch.nn.Module):
    """The usual language-model tie: the output layer is the embedding's weight."""

    def __init__(self):
        super().__init__()
        self.tok = torch.nn.Embedding(20, 8)
        self.head = torch.nn.Linear(8, 20, bias=False)
        self.head.weight = self.tok.weight
        self.spare = torch.nn.Linear(8, 8)  # declared, never used

    def forward(self, idx, target):
        return torch.nn.functional.cross_entropy(self.head(self.tok(idx)), target)


def test_a_tied_head_and_an_unused_parameter_train_as_eager_pytorch_does(tmp_path):
    """torch.export's saved program keeps a tied pair as two parameters, one read by both
    uses; the other, like a parameter no op reads, gets no gradient, as in eager PyTorch."""
    torch.manual_seed(0)
    model, batch = TiedHead(), (torch.randint(0, 20, (6,)), torch.randint(0, 20, (6,)))
    path = tmp_path / "tied.pt2"
    torch.export.save(torch.export.export(model, batch), path)
    graph = gplace.load_graph(path)
    assert graph.num_ops > 0
    loss, *state = step_on_one_cpu(path, graph, tmp_path)
    eager_loss = model(*batch)
    eager_loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            if p.grad is not None:
                p -= 0.01 * p.grad
    assert torch.equal(loss, eager_loss.detach())
    assert any(torch.equal(t, model.tok.weight) for t in state)
    assert any(torch.equal(t, model.spare.weight) for t in state)  # unchanged
    # the step's variables are the model's memory: the tied pair once, the unused layer not
    assert graph.param_bytes.sum() == 20 * 8 * 4


def test_an_exported_program_in_memory_imports_and_places_as_its_file_does(tmp_path):
    """torch.export.export's ExportedProgram, without saving it: the same step as the .pt2
    (the caller's program left as it was: its unused layer still asks for gradients), placed
    by gplace.place, and the placed step runs from it."""
    from gplace.errors import ConfigError, GraphError
    from gplace.torchfront import load_placed
    torch.manual_seed(0)
    model, batch = TiedHead(), (torch.randint(0, 20, (6,)), torch.randint(0, 20, (6,)))
    program = torch.export.export(model, batch)
    torch.export.save(program, tmp_path / "tied.pt2")
    from_file = gplace.load_graph(tmp_path / "tied.pt2", optimizer="adam")
    graph = gplace.load_graph(program, optimizer="adam")
    assert graph.meta["name"] == "program" and graph.meta["source"] == "<ExportedProgram>"
    for field in ("names", "op_types", "flops", "param_bytes", "edge_src", "edge_dst", "group"):
        assert np.array_equal(getattr(graph, field), getattr(from_file, field)), field
    assert program.state_dict["spare.weight"].requires_grad
    result = gplace.place(program, cluster="post-4gpu", optimizer="adam", progress=False)
    assert result.graph.names.tolist() == graph.names.tolist()
    (tmp_path / "placement.json").write_text(json.dumps({"placement": {
        n: "/job:localhost/replica:0/task:0/device:CPU:0" for n in graph.names.tolist()}}))
    loss, *_ = load_placed(program, tmp_path / "placement.json", optimizer="adam").run()
    assert torch.equal(loss, model(*batch).detach())
    with pytest.raises(GraphError, match="missing.json: not a placement.json that gplace place "
                                         "wrote"):
        load_placed(program, tmp_path / "missing.json")
    with pytest.raises(ConfigError, match="measure='real'\\) runs TensorFlow graphs"):
        gplace.place(program, cluster="local-procs", measure="real", progress=False)


def test_a_program_torch_cannot_save_is_one_line(monkeypatch):
    from gplace.errors import GraphError
    program = torch.export.export(TiedHead(), (torch.randint(0, 20, (6,)),
                                               torch.randint(0, 20, (6,))))

    def refuse(*args, **kwargs):
        raise RuntimeError("cannot pickle 'CustomObject'\n  a second line")

    monkeypatch.setattr(torch.export, "save", refuse)
    with pytest.raises(GraphError, match=r"^the ExportedProgram: torch.export.save, "
                                         r"which a .pt2 of it would go through, failed: "
                                         r"RuntimeError: cannot pickle 'CustomObject'$"):
        gplace.load_graph(program)


class DirectLSTM(torch.nn.Module):
    """The batch feeds the LSTM directly: with oneDNN on, the decomposition takes its fused
    kernel, which returns one gradient for both biases."""

    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.LSTM(8, 16, num_layers=2, bidirectional=True)
        self.out = torch.nn.Linear(32, 4)

    def forward(self, x, y):
        return torch.nn.functional.cross_entropy(self.out(self.rnn(x)[0][-1]), y)


@pytest.mark.filterwarnings("ignore:The tensor attributes:UserWarning")  # export, on nn.LSTM
def test_an_lstm_fed_by_the_batch_imports_and_steps_as_eager(tmp_path):
    torch.manual_seed(0)
    model, batch = DirectLSTM(), (torch.randn(5, 3, 8), torch.tensor([0, 3, 1]))
    path = tmp_path / "lstm.pt2"
    torch.export.save(torch.export.export(model, batch), path)
    for _ in range(2):  # the same graph a second time in one process, too
        graph = gplace.load_graph(path)
        assert not any("mkldnn" in t for t in graph.op_types.tolist())
    assert graph.param_bytes.sum() == sum(p.numel() * 4 for p in model.parameters())
    loss, *state = step_on_one_cpu(path, graph, tmp_path)
    eager_loss = model(*batch)
    eager_loss.backward()
    torch.testing.assert_close(loss, eager_loss.detach())


def test_fused_attention_is_priced_forward_and_backward(tmp_path):
    """torch.export on CPU emits the flash kernel (_scaled_dot_product_flash_attention_for_cpu),
    which torch's counter has no formula for; its products still count."""
    class Attention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = torch.nn.Parameter(torch.ones(8))

        def forward(self, x):
            q = (x * self.scale).view(1, 2, 256, 8)
            out = torch.nn.functional.scaled_dot_product_attention(q, q, q)
            return out.square().mean()
    path = tmp_path / "attention.pt2"
    torch.export.save(torch.export.export(Attention(), (torch.randn(512, 8),)), path)
    graph = gplace.load_graph(path)
    forward = 2 * 2 * 256 * 256 * (8 + 8)
    assert graph.flops.sum() >= 3 * forward


def test_a_plain_tensor_attribute_is_an_input_of_the_step(tmp_path):
    """Class weights kept as a tensor attribute: a lifted constant of the program, real, not
    fake, when AOT traces; the step reads it as a buffer and the placed run uses its value."""
    from gplace.torchfront import load_placed

    class Weighted(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(6, 3)
            self.class_weight = torch.tensor([1.0, 2.0, 0.5])

        def forward(self, x, y):
            return torch.nn.functional.cross_entropy(self.fc(x), y, weight=self.class_weight)
    torch.manual_seed(0)
    model, batch = Weighted(), (torch.randn(5, 6), torch.randint(0, 3, (5,)))
    path = tmp_path / "weighted.pt2"
    torch.export.save(torch.export.export(model, batch), path)
    graph = gplace.load_graph(path)
    device = "/job:localhost/replica:0/task:0/device:CPU:0"
    (tmp_path / "placement.json").write_text(json.dumps(
        {"placement": {n: device for n in graph.names.tolist()}}))
    loss, *_ = load_placed(path, tmp_path / "placement.json").run()
    assert torch.equal(loss, model(*batch).detach())


def test_exports_dtype_checks_are_not_placed_as_ops(tmp_path):
    """x.to(dtype) leaves an _assert_tensor_metadata node in the exported program: a check
    that computes nothing, left out of the step."""
    class Cast(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.fc(x.to(torch.float32)).square().mean()
    path = tmp_path / "cast.pt2"
    program = torch.export.export(Cast(), (torch.randn(3, 4, dtype=torch.float64),))
    assert any("assert_tensor_metadata" in str(n.target) for n in program.graph.nodes)
    torch.export.save(program, path)
    graph = gplace.load_graph(path)
    assert not [t for t in graph.meta["torch"]["aten"] if "assert" in t]
