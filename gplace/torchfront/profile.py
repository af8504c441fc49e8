"""Measured CPU costs of a step graph: every node run one at a time, timed (the cost
model, gplace.cost, uses measured times where it has them).

An FX Interpreter runs the step; each op's time is the wall time of its node (and of the
``getitem`` nodes that pick its outputs), the median over ``steps`` runs after ``warmup``,
with one intra-op thread, as datasets/ profiles TensorFlow graphs (gplace/profiler.py:
inter- and intra-op threads 1). The result is a :class:`gplace.profile.CostProfile` of device
kind ``cpu``, which the cost model reads for the CPU devices of that kind when it lies beside
the model as ``<name>.profile.json.gz`` (gplace.cost.cost_model_for).
"""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

import numpy as np
import torch
from torch import fx

from gplace.graph import OpGraph
from gplace.profile import CostProfile
from gplace.torchfront.opgraph import op_names, op_nodes, source_of
from gplace.torchfront.step import StepGraph


class TimingInterpreter(fx.Interpreter):
    """Runs the graph and adds each node's wall time (seconds) into ``times[node name]``."""

    def __init__(self, module: fx.GraphModule):
        super().__init__(module)
        self.times: dict[str, float] = {}

    def run_node(self, n: fx.Node):
        start = time.perf_counter()
        result = super().run_node(n)
        elapsed = time.perf_counter() - start
        self.times[n.name] = self.times.get(n.name, 0.0) + elapsed
        return result


def machine_description() -> str:
    """What the profile ran on: processor, logical cores, OS."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f
                        if line.startswith("model name")), cpu)
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} logical cores, {platform.system()} {platform.machine()}"


def node_times(step: StepGraph, warmup: int = 2, steps: int = 5) -> tuple[dict[str, float],
                                                                          float]:
    """(op node name -> median seconds, median wall seconds of one interpreted step)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        runs, walls = [], []
        with torch.no_grad():
            for k in range(warmup + steps):
                interp = TimingInterpreter(step.module)
                start = time.perf_counter()
                interp.run(*step.inputs)
                if k >= warmup:
                    walls.append(time.perf_counter() - start)
                    runs.append(interp.times)
    finally:
        torch.set_num_threads(threads)
    per_op: dict[str, list[float]] = {}
    for times in runs:
        summed: dict[str, float] = {}
        for node in step.module.graph.nodes:
            if node.name in times:
                owner = source_of(node)[0].name
                summed[owner] = summed.get(owner, 0.0) + times[node.name]
        for name, t in summed.items():
            per_op.setdefault(name, []).append(t)
    return {n: float(np.median(v)) for n, v in per_op.items()}, float(np.median(walls))


def profile_step(step: StepGraph, graph: OpGraph, warmup: int = 2, steps: int = 5) -> CostProfile:
    """The CostProfile of ``graph`` (imported from ``step``) measured on this CPU."""
    times, wall = node_times(step, warmup, steps)
    nodes = op_nodes(step)
    names = op_names(step, nodes)
    op_time = np.asarray([times.get(n.name, 0.0) for n in nodes], np.float64)
    return CostProfile(
        graph=graph.meta.get("name", ""), device_kind="cpu", machine=machine_description(),
        op_names=np.asarray(names, dtype=str), op_time_s=op_time,
        op_output_bytes=graph.output_bytes.astype(np.int64),
        op_temp_bytes=np.zeros(len(nodes), np.int64), step_time_s=wall,
        meta={"torch_version": torch.__version__, "warmup_steps": warmup,
              "timed_steps": steps, "intra_op_threads": 1,
              "step_time_source": "median wall time of one step run node by node by an FX "
                                  "Interpreter (its per-node overhead included)",
              "time_coverage": float(op_time.sum() / wall) if wall > 0 else 0.0,
              "optimizer": step.optimizer.spec})


def profile_file(path: str | Path, optimizer=None, trust: bool = False, steps: int = 5,
                 name: str | None = None) -> tuple[CostProfile, OpGraph]:
    """(the profile of the step of the program saved at ``path``, with ``optimizer``'s updates,
    measured on this CPU; the OpGraph it covers, as gplace.load_graph imports it)."""
    from gplace.torchfront import load_step
    from gplace.torchfront.opgraph import to_op_graph
    step = load_step(path, optimizer, trust)
    graph = to_op_graph(step, name or Path(path).name.split(".")[0], str(path))
    return profile_step(step, graph, steps=steps), graph


def profile_path(model: str | Path) -> Path:
    """Where gplace.cost.cost_model_for looks for the profile of ``model``."""
    model = Path(model)
    return model.parent / f"{model.name.split('.')[0]}.profile.json.gz"
