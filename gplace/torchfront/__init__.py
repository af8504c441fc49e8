"""PyTorch training steps in, placed programs out.

    import gplace
    graph = gplace.load_graph("model.pt2", optimizer="adam")   # an OpGraph
    graph = gplace.load_graph(torch.export.export(module, batch), optimizer="adam")
    graph = gplace.load_graph("model.pt2", optimizer="adamw:lr=3e-4,weight_decay=0.1")
    from gplace.torchfront import load_step, placed_step
    step = load_step("model.pt2", optimizer="adam")            # the functional step graph
    placed = placed_step(step, {op name: device, ...})         # runs it, part by part

A ``.pt2`` file is a ``torch.export.save``-d program whose forward takes the example batch and
returns the scalar loss; the ExportedProgram itself (``torch.export.export``'s) serves as well.
gplace derives the backward (AOT autograd's joint graph, step.py), appends the optimizer's
updates (optim.py), and imports the whole step as one OpGraph
(opgraph.py): ATen op types mapped onto the TensorFlow types the policy knows (optypes.py),
FLOPs from ``torch.utils.flop_counter`` where it has a formula (flops.py), parameter and
optimizer-state bytes, colocation of a parameter with its state and update. ``profile.py``
measures each node's CPU time; ``placed.py`` splits the step at device changes and runs it.

Loading a ``.pt2`` never unpickles unless ``trust=True`` (program.py says why).
"""

from __future__ import annotations

import time
from pathlib import Path

from gplace.errors import GraphError
from gplace.graph import OpGraph
from gplace.torchfront.optim import OptimizerConfig, optimizer_config
from gplace.torchfront.program import PT2_SUFFIX, load_program, one_line

__all__ = ["load_graph", "load_step", "load_placed", "is_torch_source", "OptimizerConfig",
           "placed_step"]


PROGRAM_LABEL = "the ExportedProgram"  # an in-memory program, where a file has its path


def is_torch_source(source) -> bool:
    """Whether ``source`` is a torch.export program: a ``.pt2`` path or an ExportedProgram."""
    return is_program(source) or (isinstance(source, (str, Path))
                                  and str(source).lower().endswith(PT2_SUFFIX))


def is_program(source) -> bool:
    """Whether ``source`` is an ExportedProgram (gplace.importer asks the same without
    importing torch, and imports this package: it cannot be asked from here)."""
    from torch.export import ExportedProgram
    return isinstance(source, ExportedProgram)


def load_step(source, optimizer: str | dict | OptimizerConfig | None = None,
              trust: bool = False):
    """The StepGraph (gplace.torchfront.step) of the program saved at a path (``trust``: loaded
    without the checks of gplace.torchfront.program), of an ExportedProgram or of the bytes
    ``torch.export.save`` wrote for one (:func:`saved_bytes`). An ExportedProgram is taken as
    its ``.pt2`` loads: the step of a program is the step of its file (a tied pair of
    parameters, one tensor in memory, is two entries in a file, one of them read), and the
    caller's program is left as it was (the step's tracing freezes the parameters no op
    reads)."""
    import io

    import torch

    from gplace.torchfront.step import build_step
    if is_program(source):
        source = saved_bytes(source)
    if not isinstance(source, bytes):
        return build_step(load_program(source, trust=trust), optimizer_config(optimizer),
                          label=str(source))
    try:
        program = torch.export.load(io.BytesIO(source))
    except Exception as e:  # noqa: BLE001 - torch raises many types; the user gets one line
        raise GraphError(f"{PROGRAM_LABEL}: torch.export.load of what torch.export.save wrote "
                         f"for it failed: {one_line(e)}") from None
    return build_step(program, optimizer_config(optimizer), label=PROGRAM_LABEL)


def saved_bytes(program) -> bytes:
    """What ``torch.export.save`` writes for ``program`` (a GraphError line where it cannot)."""
    import io

    import torch
    buffer = io.BytesIO()
    try:
        torch.export.save(program, buffer)
    except Exception as e:  # noqa: BLE001 - torch raises many types; the user gets one line
        raise GraphError(f"{PROGRAM_LABEL}: torch.export.save, which a .pt2 of it would go "
                         f"through, failed: {one_line(e)}") from None
    return buffer.getvalue()


def load_graph(source, optimizer: str | dict | OptimizerConfig | None = None,
               trust: bool = False, name: str | None = None) -> OpGraph:
    """The OpGraph of one training step (forward, backward, the optimizer's updates) of what
    :func:`load_step` reads; raises GraphError naming what it cannot import. ``name``: the
    graph's (default: the file name, "program" for an ExportedProgram)."""
    from gplace.torchfront.opgraph import to_op_graph
    start = time.perf_counter()
    step = load_step(source, optimizer, trust)
    if is_program(source) or isinstance(source, bytes):
        graph = to_op_graph(step, name or "program", "<ExportedProgram>")
    else:
        graph = to_op_graph(step, name or Path(source).name.split(".")[0], str(source))
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


def load_placed(path, placement,
                optimizer: str | dict | OptimizerConfig | None = None, device_map=None,
                trust: bool = False):
    """The placed step of the program at ``path`` (or of an ExportedProgram): ``placement`` is
    what ``place`` returned
    (a PlacementResult), op name -> device (as ``PlacementResult.op_devices``), or the path of
    a placement.json that ``gplace place`` wrote; the optimizer the placement was made with
    (name and hyperparameters) is used unless ``optimizer`` is given."""
    import json
    if hasattr(placement, "op_devices") and hasattr(placement, "graph"):  # a PlacementResult
        optimizer = optimizer or placement.graph.meta.get("torch", {}).get("optimizer")
        placement = placement.op_devices
    elif isinstance(placement, (str, Path)):
        try:
            record = json.loads(Path(placement).read_text())
            placement, optimizer = record["placement"], optimizer or record.get(
                "torch", {}).get("optimizer")
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError,
                AttributeError) as e:
            raise GraphError(f"{placement}: not a placement.json that gplace place wrote "
                             f"({one_line(e)})") from None
    return placed_step(load_step(path, optimizer, trust), placement, device_map)
