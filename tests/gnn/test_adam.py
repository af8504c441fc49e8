"""gplace.gnn.adam.Adam against torch.optim.Adam: the same weights after every step, bit for
bit, on the policy's two parameter groups; and fine-tuning never imports torch._dynamo."""

import copy
import subprocess
import sys

import torch

from gplace.gnn.adam import Adam
from gplace.gnn.policy import GNNPolicy


def test_the_steps_are_torchs_bit_for_bit():
    torch.manual_seed(0)
    ours = GNNPolicy(lean=True)
    theirs = copy.deepcopy(ours)
    opts = (Adam(ours.param_groups(3e-3)), torch.optim.Adam(theirs.param_groups(3e-3)))
    for step in range(5):
        grads = {n: torch.randn_like(p) for n, p in ours.named_parameters()}
        for model, opt in zip((ours, theirs), opts):
            opt.zero_grad()
            for n, p in model.named_parameters():
                if not (step == 2 and n == "w0"):  # a parameter without a gradient is skipped
                    p.grad = grads[n].clone()
            opt.step()
        for (n, a), b in zip(ours.named_parameters(), theirs.parameters()):
            assert torch.equal(a, b), (step, n)


def test_fine_tuning_imports_no_dynamo():
    code = ("import sys; from gplace.gnn.placer import GNNPlacer; from gplace.cluster import "
            "load_cluster; from gplace.placers import SimMeasurer; from gplace.problem import "
            "PlacementProblem; from gplace.sim.random_graphs import RandomDagConfig, random_dag; "
            "p = PlacementProblem.build(random_dag(RandomDagConfig(ops=30), 0), "
            "load_cluster('post-4gpu')); GNNPlacer().place(p, SimMeasurer(p), 20); "
            "print('torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False"
