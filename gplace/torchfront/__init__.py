"""PyTorch training steps in, placed programs out.

    import gplace
    graph = gplace.load_graph("model.pt2", optimizer="adam")   # an OpGraph
    graph = gplace.load_graph("model.pt2", optimizer="adamw:lr=3e-4,weight_decay=0.1")
    from gplace.torchfront import load_step, placed_step
    step = load_step("model.pt2", optimizer="adam")            # the functional step graph
    placed = placed_step(step, {op name: device, ...})         # runs it, part by part

A ``.pt2`` file is a ``torch.export.save``-d program whose forward takes the example batch and
returns the scalar loss. gplace derives the backward (AOT autograd's joint graph, step.py),
appends the optimizer's updates (optim.py), and imports the whole step as one OpGraph
(opgraph.py): ATen op types mapped onto the TensorFlow types the policy knows (optypes.py),
FLOPs from ``torch.utils.flop_counter`` where it has a formula (flops.py), parameter and
optimizer-state bytes, colocation of a parameter with its state and update. ``profile.py``
measures each node's CPU time; ``placed.py`` splits the step at device changes and runs it.

Loading a ``.pt2`` never unpickles unless ``trust=True`` (program.py says why).
"""

from __future__ import annotations

import time
from pathlib import Path

from gplace.graph import OpGraph
from gplace.torchfront.optim import OptimizerConfig, optimizer_config
from gplace.torchfront.program import PT2_SUFFIX, load_program

__all__ = ["load_graph", "load_step", "load_placed", "is_torch_source", "OptimizerConfig",
           "placed_step"]


def is_torch_source(source) -> bool:
    """Whether ``source`` is a path to a torch.export program (``.pt2``)."""
    return isinstance(source, (str, Path)) and str(source).lower().endswith(PT2_SUFFIX)


def load_step(path: str | Path, optimizer: str | dict | OptimizerConfig | None = None,
              trust: bool = False):
    """The StepGraph (gplace.torchfront.step) of the program saved at ``path``."""
    from gplace.torchfront.step import build_step
    program = load_program(path, trust=trust)
    return build_step(program, optimizer_config(optimizer), label=str(path))


def load_graph(path: str | Path, optimizer: str | dict | OptimizerConfig | None = None,
               trust: bool = False, name: str | None = None) -> OpGraph:
    """The OpGraph of one training step of the program saved at ``path`` (forward, backward,
    the optimizer's updates); raises GraphError naming what it cannot import."""
    from gplace.torchfront.opgraph import to_op_graph
    start = time.perf_counter()
    step = load_step(path, optimizer, trust)
    graph = to_op_graph(step, name or Path(path).name.split(".")[0], str(path))
    graph.meta["import"] = _import_summary(graph, step, time.perf_counter() - start)
    return graph


def _import_summary(graph: OpGraph, step, seconds: float) -> dict:
    """What ``gplace inspect`` prints about an import, in the TF importer's keys."""
    counted = sum(graph.meta["torch"]["counted_flops"])
    return {"format": "torch.export", "optimizer": step.optimizer.spec,
            "parameters": len(step.param_names), "buffers": len(step.buffer_names),
            "optimizer_states": len(step.state_names),
            "flops_from_torch_counter": float(counted),
            "flops_estimated": float(graph.flops.sum() - counted),
            "unknown_dim": 1, "outputs_with_unknown_dims": 0, "loops": 0,
            "inlined_functions": {}, "kept_function_ops": {},
            "shape_inference": "torch.export example inputs",
            "notes": [f"optimizer {step.optimizer.describe()}",
                      "FLOPs: torch.utils.flop_counter's formulas for matrix products, "
                      "convolutions and attention, gplace's estimates for the rest "
                      "(gplace.torchfront.flops)"],
            "seconds": round(seconds, 4)}


def placed_step(step, op_devices: dict[str, str], device_map=None):
    """A runnable placed step; see :func:`gplace.torchfront.placed.placed_step`."""
    from gplace.torchfront.placed import placed_step as _placed
    return _placed(step, op_devices, device_map)


def load_placed(path: str | Path, placement,
                optimizer: str | dict | OptimizerConfig | None = None, device_map=None,
                trust: bool = False):
    """The placed step of the program at ``path``: ``placement`` is what ``place`` returned
    (a PlacementResult), op name -> device (as ``PlacementResult.op_devices``), or the path of
    a placement.json that ``gplace place`` wrote; the optimizer the placement was made with
    (name and hyperparameters) is used unless ``optimizer`` is given."""
    import json
    if hasattr(placement, "op_devices") and hasattr(placement, "graph"):  # a PlacementResult
        optimizer = optimizer or placement.graph.meta.get("torch", {}).get("optimizer")
        placement = placement.op_devices
    elif isinstance(placement, (str, Path)):
        record = json.loads(Path(placement).read_text())
        optimizer = optimizer or record.get("torch", {}).get("optimizer")
        placement = record["placement"]
    return placed_step(load_step(path, optimizer, trust), placement, device_map)
