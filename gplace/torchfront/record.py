"""placement.json's PyTorch part: the placement by FX node, by parameter and by module.

Module paths are attributed by data flow (:func:`module_paths`): AOT autograd's joint graph
does not keep the ``nn_module_stack`` of the exported forward.
"""

from __future__ import annotations

from collections import Counter

from gplace.graph import OpGraph
from gplace.torchfront.step import StepGraph


def module_paths(step: StepGraph) -> dict[str, str]:
    """FX node name -> the module it belongs to, attributed by data flow: a parameter's
    module for the parameter, its state and update; for any other node, the module of the
    parameter it reads, else the most common module among its inputs, else the root ("").
    An attribution, not the Python call stack (AOT autograd's joint graph drops it)."""
    parent = lambda fqn: fqn.rsplit(".", 1)[0] if "." in fqn else ""  # noqa: E731
    buffers = [n.name for n in step.module.graph.nodes if step.role.get(n.name) == "buffer"]
    result: dict[str, str] = {n: parent(b) for n, b in zip(buffers, step.buffer_names)}
    for node in step.module.graph.nodes:
        if node.op == "output" or node.name in result:
            continue
        owner = step.owner.get(node.name)
        if owner is not None:
            result[node.name] = parent(owner)
            continue
        ins = node.all_input_nodes
        direct = [result[a.name] for a in ins if step.role.get(a.name) == "param"]
        seen = [result[a.name] for a in ins if result.get(a.name)]
        result[node.name] = direct[0] if direct else (Counter(seen).most_common(1)[0][0]
                                                      if seen else "")
    return result


def torch_record(graph: OpGraph, op_devices: dict[str, str]) -> dict:
    """{"optimizer": name and hyperparameters (OptimizerConfig.as_dict), "by_node": FX node
    -> device, "parameters": fqn -> device, "by_module": module path -> {device: ops}} for an
    OpGraph from gplace.torchfront. load_placed also reads a record whose optimizer is a name."""
    meta = graph.meta["torch"]
    names = graph.names.tolist()
    devices = [op_devices[n] for n in names]
    by_module: dict[str, Counter] = {}
    for module, device in zip(meta.get("module", [""] * len(names)), devices):
        by_module.setdefault(module, Counter())[device] += 1
    return {"optimizer": meta.get("optimizer"),
            "by_node": dict(zip(meta["fx_nodes"], devices)),
            "parameters": {n.removeprefix("params/"): d for n, d in zip(names, devices)
                           if n.startswith("params/")},
            "by_module": {m: dict(sorted(c.items())) for m, c in sorted(by_module.items())}}
