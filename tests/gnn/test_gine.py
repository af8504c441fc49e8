"""The plain-torch GINE layer equals PyG's GINEConv bit for bit (outputs and gradients), so a
policy loaded for placing (lean) scores and fine-tunes exactly as the one it was trained as."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch_geometric.nn import GINEConv

from gplace.cluster import load_cluster
from gplace.gnn.features import EDGE_FEATURES
from gplace.gnn.gine import GINE
from gplace.gnn.learn import ProblemState
from gplace.gnn.placer import load_policy
from gplace.gnn.policy import GNNPolicy, mlp
from gplace.importer import load_graph
from gplace.problem import PlacementProblem

EXAMPLE = Path(__file__).resolve().parents[2] / "gplace" / "examples" / "small_resnet.pb"



def _pair(hidden=16, seed=0):
    torch.manual_seed(seed)
    pyg = GINEConv(mlp([hidden, hidden, hidden]), edge_dim=EDGE_FEATURES)
    lean = GINE(mlp([hidden, hidden, hidden]), edge_dim=EDGE_FEATURES)
    lean.load_state_dict(pyg.state_dict())
    return pyg, lean


def _graph(nodes=50, edges=200, hidden=16, seed=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(nodes, hidden, generator=g)
    edge_index = torch.randint(0, nodes, (2, edges), generator=g)  # repeats and self loops too
    edge_attr = torch.randn(edges, EDGE_FEATURES, generator=g)
    return x, edge_index, edge_attr


def test_the_layers_have_the_same_parameter_names():
    pyg, lean = _pair()
    assert list(pyg.state_dict()) == list(lean.state_dict())


@pytest.mark.parametrize("nodes,edges", [(50, 200), (7, 0), (300, 4000)])
def test_the_outputs_and_gradients_are_equal_bit_for_bit(nodes, edges):
    pyg, lean = _pair()
    x, edge_index, edge_attr = _graph(nodes, edges)
    outs, grads = [], []
    for layer in (pyg, lean):
        xi = x.clone().requires_grad_()
        out = layer(xi, edge_index, edge_attr)
        (out.square().sum() + out.sum()).backward()
        outs.append(out.detach())
        grads.append([xi.grad] + [p.grad for p in layer.parameters()])
    assert torch.equal(outs[0], outs[1])
    for a, b in zip(*grads):
        assert torch.equal(a, b)


@pytest.fixture(scope="module")
def example_state():
    problem = PlacementProblem.build(load_graph(EXAMPLE), load_cluster("post-4gpu"))
    return ProblemState(problem)


def test_the_shipped_policy_loads_lean_and_scores_as_pyg_does(example_state):
    lean, _ = load_policy()
    assert all(isinstance(c, GINE) for c in lean.convs)
    pyg = GNNPolicy(**lean.kwargs)
    pyg.load_state_dict(lean.state_dict())
    pyg.eval()
    with torch.no_grad():
        a, b = lean(example_state.features), pyg(example_state.features)
    assert torch.equal(a.s, b.s) and torch.equal(a.w, b.w)


def test_a_fine_tuning_step_moves_both_alike(example_state):
    lean, _ = load_policy()
    pyg = GNNPolicy(**lean.kwargs)
    pyg.load_state_dict(lean.state_dict())
    for policy in (lean, pyg):
        policy.train()
        scores = policy(example_state.features)
        (scores.s.logsumexp(-1).sum() + scores.w.square().sum()).backward()
    for (name, p), q in zip(lean.named_parameters(), pyg.parameters()):
        assert torch.equal(p.grad, q.grad), name


def test_placing_imports_neither_torch_geometric_nor_dynamo():
    code = ("import sys; from gplace.gnn.placer import load_policy; load_policy(); "
            "print(sorted(m for m in ('torch_geometric', 'torch._dynamo') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_an_untrained_policy_still_builds_on_pyg():
    assert type(GNNPolicy(hidden_channels=8).convs[0]).__name__ == "GINEConv"
    assert np.isfinite(GNNPolicy(hidden_channels=8, lean=True).w0.detach().numpy()).all()
