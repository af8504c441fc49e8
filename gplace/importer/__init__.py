"""Import a TensorFlow graph into an OpGraph (gplace.graph); it never runs the graph.

    graph = gplace.load_graph("model.pb")

Reads a binary or text GraphDef, a MetaGraphDef, a SavedModel directory, a GraphDef object,
a ``tf.Graph`` or a ``tf.function``'s ConcreteFunction. Only the training step is kept
(step.py: a file's initializers and checkpoint ops are left out); function calls are inlined
and ``tf.cond``'s If ops lowered to Switch and Merge (functions.py), shapes inferred
(shapes.py), FLOPs counted (flops.py) and colocation groups formed (colocation.py);
``graph.meta["import"]`` says what was done: ops left out, functions inlined or kept,
conditionals lowered, loops found, unknown dimensions, timings.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

from gplace.errors import GraphError
from gplace.graph import OpGraph
from gplace.importer import colocation, flops as flops_mod, functions, inputs, step, trips
from gplace.importer import shapes as shapes_mod
from gplace.importer.reader import read_graph
from gplace.tfimport import tensorflow

TORCH_OPTIONS = ("optimizer", "trust")  # load_graph's options of a .pt2 program
IMPORTER_VERSION = 6  # bump when imported graphs change (caches key on it)
NEXT_ITERATION = ("NextIteration", "RefNextIteration")
VARIABLE_OPS = ("VarHandleOp", "VariableV2", "Variable", "_VarHandlesOp")
BODY_ATTRS = {"While": ("cond", "body"), "StatelessWhile": ("cond", "body"),
              "If": ("then_branch", "else_branch"), "StatelessIf": ("then_branch", "else_branch")}
MAX_BODY_DEPTH = 4
MAX_GRAPH_BYTES = 2**60  # byte counts are int64 (the simulator sums them per device)


def load_any(path, unknown_dim: int = 1) -> OpGraph:
    """An OpGraph from a saved ``.npz`` (OpGraph.save) or from anything load_graph reads."""
    if str(path).endswith(".npz"):
        return OpGraph.load(path)
    return load_graph(path, unknown_dim=unknown_dim)


def load_graph(source, unknown_dim: int = 1, inline: bool = True, name: str | None = None,
               whole_graph: bool = False, signature: str | None = None,
               **torch_options) -> OpGraph:
    """Imports ``source`` (a path, a GraphDef, a tf.Graph, a tf.function's ConcreteFunction
    or a torch.export ExportedProgram); raises GraphError on bad input.

    ``unknown_dim``: the size given to unknown dimensions (see shapes.py); ``inline``: inline
    function calls; ``name``: the graph's name (default: the file name without suffix);
    ``whole_graph``: keep the ops a training step does not run (variable initializers,
    checkpoint save and restore; step.py), which are left out by default; ``signature``: the
    SavedModel signature to place (default: the one that trains, step.choose_signature). A
    ``.pt2`` path or an ExportedProgram goes to gplace.torchfront, without TensorFlow;
    ``torch_options`` (``optimizer``, ``trust``) are its own.
    """
    unknown = sorted(set(torch_options) - set(TORCH_OPTIONS))
    if unknown:  # a misspelt option, as Python says it
        raise TypeError(f"load_graph() got an unexpected keyword argument {unknown[0]!r}")
    if _is_torch(source):
        from gplace import torchfront
        if signature is not None:
            raise no_signatures(source, signature)
        return torchfront.load_graph(source, name=name, **torch_options)
    if torch_options:
        raise GraphError(f"{', '.join(torch_options)}: options of PyTorch (.pt2) programs only")
    if isinstance(source, (str, os.PathLike)) and str(source).lower().endswith(".npz"):
        graph = OpGraph.load(source)  # imported already (OpGraph.save, inspect --save)
        if name:
            graph.meta["name"] = name
        return graph
    tensorflow()
    start = time.perf_counter()
    graph_def, kind, label, default_name, meta = _to_graph_def(source)
    try:
        graph = build_op_graph(graph_def, unknown_dim=unknown_dim, inline=inline,
                               name=name or default_name, whole_graph=whole_graph,
                               signatures=meta.get("signatures"), signature=signature)
    except GraphError as e:
        raise GraphError(f"{label}: {e}") from None
    graph.meta["source"] = label
    graph.meta["import"]["format"] = kind
    chosen = graph.meta["import"]["signature"]
    if chosen is not None or meta.get("saver"):  # what runs placed.pb (report.html's recipe)
        graph.meta["import"]["runs_with"] = {
            "signature": meta["signatures"][chosen] if chosen else None,
            "saver": meta.get("saver")}
    outer = getattr(source, "function_def", None)  # a ConcreteFunction's own jit_compile
    if outer is not None and hasattr(outer, "attr") and functions.must_compile(outer):
        graph.meta["import"]["xla_functions"].insert(0, outer.signature.name)
    graph.meta["import"]["seconds"] = round(time.perf_counter() - start, 4)
    return graph


def no_signatures(source, signature: str) -> GraphError:
    """The error for a signature asked of a PyTorch program."""
    where = source if isinstance(source, (str, os.PathLike)) else "the ExportedProgram"
    return GraphError(f"{where}: signature {signature!r} asked for, but a PyTorch program has "
                      "no signatures (a SavedModel has)")


def _to_graph_def(source):
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        graph_def, kind, meta = read_graph(path)
        stem = path.name if path.is_dir() else path.name.split(".")[0]
        return graph_def, kind, str(path), stem, meta
    graph_def = graph_def_of(source)
    if graph_def is not None:
        return graph_def, "tf.Graph", "<tf.Graph>", "graph", {}
    if hasattr(source, "node") and hasattr(source, "library"):
        return source, "graphdef", "<GraphDef>", "graph", {}
    if any(c.__module__.startswith("torch") for c in type(source).__mro__[:-1]):
        # an nn.Module (a user's subclass too): its batch is not known
        raise GraphError(f"cannot import a PyTorch {type(source).__name__} object; pass "
                         "torch.export.export(module, batch) of the module whose forward "
                         "returns the loss, or save that with torch.export.save(..., "
                         "'step.pt2') and pass the path")
    raise GraphError(f"cannot import an object of type {type(source).__name__}; pass a file "
                     "path, a tf.compat.v1.GraphDef, a tf.Graph or a ConcreteFunction")


def _is_torch(source) -> bool:
    """A .pt2 path or an ExportedProgram."""
    if isinstance(source, (str, os.PathLike)):
        return str(source).lower().endswith(".pt2")
    return is_torch_program(source)


def is_torch_program(source) -> bool:
    """Whether ``source`` is an in-memory torch.export program (an ExportedProgram), without
    importing torch where the caller has not (it then holds none)."""
    exported = sys.modules.get("torch.export")
    return exported is not None and isinstance(source, exported.ExportedProgram)


def graph_def_of(source):
    """The GraphDef of a tf.Graph or of a tf.function's ConcreteFunction (its FuncGraph), with
    every output's shape recorded (a FuncGraph's captured variables have none of their own);
    None for anything else."""
    if hasattr(source, "graph") and hasattr(source.graph, "as_graph_def"):
        source = source.graph
    if not hasattr(source, "as_graph_def"):
        return None
    graph_def = source.as_graph_def(add_shapes=True)
    _mark_captured_variables(source, graph_def)
    return graph_def


CAPTURED_SHAPE = "_gplace_variable_shape"  # attrs on a FuncGraph's captured variable's
CAPTURED_DTYPE = "_gplace_variable_dtype"  # placeholder: what it holds (TF ignores "_" attrs)


def _mark_captured_variables(func_graph, graph_def) -> None:
    """A FuncGraph's variables reach its GraphDef as shapeless resource placeholders; the
    captures say which variable each one is, so its shape and dtype go on the placeholder
    (gplace's parameter bytes read them)."""
    from tensorflow.python.ops import handle_data_util
    held = {}
    for external, internal in getattr(func_graph, "captures", ()):
        try:  # the placeholder's handle data: what TF's own shape inference reads there
            data = handle_data_util.get_handle_data(internal)
        except Exception:  # noqa: BLE001 - TF internals: a capture without it is left as is
            continue
        if data is not None and data.is_set and data.shape_and_type:
            held[internal.op.name] = data.shape_and_type[0]
    for node in graph_def.node:
        held_value = held.get(node.name)
        if held_value is not None and node.op == "Placeholder":
            node.attr[CAPTURED_SHAPE].shape.CopyFrom(held_value.shape)
            node.attr[CAPTURED_DTYPE].type = held_value.dtype


def build_op_graph(graph_def, unknown_dim: int = 1, inline: bool = True, name: str = "graph",
                   depth: int = 0, whole_graph: bool = False,
                   signatures: dict[str, dict] | None = None,
                   signature: str | None = None) -> OpGraph:
    """The OpGraph of ``graph_def``; ``signatures`` (a SavedModel's: {name: {"inputs": ...,
    "outputs": {key: tensor}}}) and ``signature`` (the one asked for) choose the step where
    the file holds several."""
    if unknown_dim < 1:
        raise GraphError(f"unknown_dim must be at least 1, got {unknown_dim}")
    library = {f.signature.name: f for f in graph_def.library.function}
    if depth == 0:  # before TF sees the graph: these crash TF instead of raising
        inputs.check_size(len(graph_def.node))
        functions.check_not_recursive(library)
        shapes_mod.check_attrs(graph_def)
    report = functions.InlineReport()
    if inline:
        graph_def, report = functions.inline_functions(graph_def)
    nodes = list(graph_def.node)
    if not nodes:
        raise GraphError("the graph has no ops")
    index = inputs.index_names(nodes)
    data, ctrl = inputs.parse_inputs(nodes, index, library)
    left_out: dict[str, int] = {}
    left_out_sinks: dict[str, list[str]] = {}
    output_ops = {name: sorted({t.split(":")[0].lstrip("^") for t in sig["outputs"].values()})
                  for name, sig in (signatures or {}).items()}
    updating = step.updating_functions(library) if depth == 0 else set()  # scanned once
    chosen = step.choose_signature(nodes, data, ctrl, index, library, output_ops, signature,
                                   updating) \
        if depth == 0 and (signature is not None or not whole_graph) else None
    if depth == 0 and (chosen is not None or not whole_graph):
        keep, left_out, left_out_sinks = step.step_ops(
            nodes, data, ctrl, index, outputs=output_ops[chosen] if chosen else None)
        if left_out:
            graph_def = _subgraph(graph_def, keep)
            nodes = list(graph_def.node)
            index = inputs.index_names(nodes)
            data, ctrl = inputs.parse_inputs(nodes, index, library)
    info = shapes_mod.infer_shapes(graph_def, unknown_dim)
    outs = _outputs(nodes, info, data, unknown_dim)
    e_src, e_out, e_dst = (np.asarray(c, np.int64).reshape(-1) for c in zip(*data)) if data \
        else (np.zeros(0, np.int64),) * 3
    c_src, c_dst = (np.asarray(c, np.int64) for c in zip(*ctrl)) if ctrl \
        else (np.zeros(0, np.int64),) * 2
    edge_out = outs["ptr"][e_src] + e_out
    op_types = np.asarray([n.op for n in nodes], dtype=str)
    is_next = np.isin(op_types, NEXT_ITERATION)
    groups = colocation.colocation_groups(nodes, index, e_src, e_dst, outs["dtype"][edge_out])
    in_shapes = _input_shapes(len(nodes), e_src, e_out, e_dst, outs["shapes_per_op"])
    op_flops, from_tf = flops_mod.op_flops(nodes, outs["shapes_per_op"], in_shapes,
                                           info.tf_graph, unknown_dim)
    body_notes, counted_once = _add_body_flops(op_flops, nodes, graph_def, report, unknown_dim,
                                               depth)
    one_kind = _one_kind_ops(op_types) if depth == 0 else ({}, {})
    frames = sorted({n.attr["frame_name"].s.decode() for n in nodes
                     if n.op in ("Enter", "RefEnter") and "frame_name" in n.attr})
    graph = OpGraph(
        names=np.asarray([n.name for n in nodes], dtype=str), op_types=op_types,
        devices=np.asarray([n.device for n in nodes], dtype=str),
        flops=op_flops, param_bytes=_param_bytes(nodes, data, outs), group=groups,
        out_ptr=outs["ptr"], out_dtype=outs["dtype"], out_bytes=outs["bytes"],
        out_rank=outs["rank"], dim_ptr=outs["dim_ptr"], out_dims=outs["dims"],
        edge_src=e_src, edge_dst=e_dst, edge_src_out=e_out, edge_bytes=outs["bytes"][edge_out],
        edge_back=is_next[e_src], ctrl_src=c_src, ctrl_dst=c_dst, ctrl_back=is_next[c_src],
        meta={"name": name, "import": {
            "inlined_functions": report.inlined, "kept_function_ops": report.kept,
            "xla_functions": report.xla, "lowered_conds": report.lowered,
            "loops": len(frames), "loop_frames": frames[:20],
            "library_functions": len(graph_def.library.function),
            "left_out": left_out, "left_out_sinks": left_out_sinks, "signature": chosen,
            "trains": step.trains(np.ones(len(nodes), bool), nodes, library, updating)
            if depth == 0
            else None,
            "cpu_only_ops": one_kind[0], "gpu_only_ops": one_kind[1],
            "shapeless_variables": _shapeless_variables(nodes, data, outs),
            "unknown_dim": unknown_dim, "outputs_with_unknown_dims": outs["unknown"],
            "sized_inputs": info.sized, "while_counted_once": counted_once,
            "shape_inference": "tensorflow" if info.tf_graph is not None
            else f"grappler only; tf.Graph import failed: {info.inference_error}",
            "flops_from_tf_registry": from_tf, "notes": info.notes + body_notes}})
    return graph.validate()


def _subgraph(graph_def, keep):
    out = type(graph_def)()
    out.versions.CopyFrom(graph_def.versions)
    out.library.CopyFrom(graph_def.library)
    out.node.extend(node for node, k in zip(graph_def.node, keep.tolist()) if k)
    return out


def _outputs(nodes, info, data, unknown_dim):
    """Ragged output arrays; an output referenced but not known to TF gets float32, unknown."""
    count = [len(d) for d in info.dtypes]
    for src, out, _ in data:
        count[src] = max(count[src], out + 1)
    dtype, rank, dims, nbytes, shapes_per_op, unknown = [], [], [], [], [], 0
    for k, c in enumerate(count):
        known = list(zip(info.dtypes[k], info.shapes[k]))
        per_op = []
        for j in range(c):
            dt, shape = known[j] if j < len(known) else ("float32", None)
            dtype.append(dt)
            rank.append(-1 if shape is None else len(shape))
            dims.append(shape or ())
            unknown += shape is None or any(d < 0 for d in shape)
            nbytes.append(shapes_mod.tensor_bytes(nodes[k].name, f"output {j}", dt, shape,
                                                  unknown_dim))
            per_op.append(shape)
        shapes_per_op.append(per_op)
    _check_total(sum(nbytes), "outputs")
    ptr = np.concatenate([[0], np.cumsum(count)]).astype(np.int64)
    dim_ptr = np.concatenate([[0], np.cumsum([len(d) for d in dims])]).astype(np.int64)
    flat = np.fromiter((d for s in dims for d in s), np.int64)
    return {"ptr": ptr, "dtype": np.asarray(dtype, dtype=str), "rank": np.asarray(rank, np.int64),
            "dim_ptr": dim_ptr, "dims": flat, "bytes": np.asarray(nbytes, np.int64),
            "shapes_per_op": shapes_per_op, "unknown": int(unknown)}


def _check_total(n: int, what: str) -> None:
    if n > MAX_GRAPH_BYTES:
        raise GraphError(f"the graph's {what} add up to {n:.3g} bytes, more than the 1 EiB "
                         f"gplace can count")


def _input_shapes(n, e_src, e_out, e_dst, shapes_per_op):
    result = [[] for _ in range(n)]
    for s, o, d in zip(e_src.tolist(), e_out.tolist(), e_dst.tolist()):
        result[d].append(shapes_per_op[s][o])
    return result


def _param_bytes(nodes, data, outs) -> np.ndarray:
    """Bytes of the variables each op owns: a variable op's declared shape; a TF2 function's
    captured variable (a resource Placeholder, no shape of its own) the shape graph_def_of
    marked on it, else the largest value read from it by a ReadVariableOp of known shape."""
    from tensorflow.python.framework import dtypes
    result = np.zeros(len(nodes), np.int64)
    for k, node in enumerate(nodes):
        if node.op in VARIABLE_OPS and "shape" in node.attr and "dtype" in node.attr:
            shape = node.attr["shape"].shape
            if shape.unknown_rank:
                continue
            try:
                dtype = dtypes.as_dtype(node.attr["dtype"].type).name
            except TypeError:
                dtype = "float32"
            dims = tuple(max(d.size, 1) for d in shape.dim)
            result[k] = shapes_mod.tensor_bytes(node.name, "variable", dtype, dims, 1)
    for k, node in enumerate(nodes):  # a captured variable marked by graph_def_of
        if node.op == "Placeholder" and CAPTURED_SHAPE in node.attr:
            shape = node.attr[CAPTURED_SHAPE].shape
            if not shape.unknown_rank and all(d.size >= 0 for d in shape.dim):
                dtype = dtypes.as_dtype(node.attr[CAPTURED_DTYPE].type).name
                result[k] = shapes_mod.tensor_bytes(node.name, "variable", dtype,
                                                    tuple(d.size for d in shape.dim), 1)
    readers = _variable_readers(nodes, data, outs)
    for src, found in readers.items():
        if not result[src]:
            result[src] = max((outs["bytes"][outs["ptr"][r]] for r in found
                               if _known_shape(outs, r)), default=0)
    _check_total(int(result.sum(dtype=object)), "variables")
    return result


# Ops that hand a resource handle on unchanged: input k to output k (Switch: its data input to
# both outputs). A lowered tf.cond's branches read a variable behind a Switch and an Identity.
FORWARDING_OPS = ("Identity", "IdentityN", "Switch", "Merge", "Enter")


def _variable_readers(nodes, data, outs) -> dict[int, list[int]]:
    """Captured variables (resource Placeholders) -> the ReadVariableOps that read them,
    directly or through FORWARDING_OPS (a read inside a lowered tf.cond)."""
    consumers: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for (src, out, dst), k in zip(data, _input_positions(data)):
        consumers.setdefault((src, out), []).append((dst, k))
    found: dict[int, list[int]] = {}
    for v, node in enumerate(nodes):
        if node.op != "Placeholder" or outs["dtype"][outs["ptr"][v]] != "resource":
            continue
        todo, seen = [(v, 0)], set()
        while todo:
            here = todo.pop()
            if here in seen:
                continue
            seen.add(here)
            for dst, k in consumers.get(here, ()):
                op = nodes[dst].op
                if op == "ReadVariableOp":
                    found.setdefault(v, []).append(dst)
                elif op in ("Identity", "Enter", "Merge"):
                    todo.append((dst, 0))
                elif op == "IdentityN":
                    todo.append((dst, k))
                elif op == "Switch" and k == 0:
                    todo += [(dst, 0), (dst, 1)]
    return found


def _input_positions(data) -> list[int]:
    """Each data edge's position among its consumer's data inputs, in edge order."""
    count: dict[int, int] = {}
    positions = []
    for _, _, dst in data:
        positions.append(count.get(dst, 0))
        count[dst] = positions[-1] + 1
    return positions


def _known_shape(outs, op: int) -> bool:
    shape = outs["shapes_per_op"][op][0] if outs["shapes_per_op"][op] else None
    return shape is not None and all(d >= 0 for d in shape)


def _one_kind_ops(op_types) -> tuple[dict[str, int], dict[str, int]]:
    """({op type: count} of the ops TensorFlow registers CPU kernels for and no GPU (nor
    device-independent) kernel: ResourceSparseApplyMomentum, string and checkpoint ops; the
    same for GPU-only ops: CudnnRNN and its gradients). Empty where this TensorFlow has no GPU
    kernels at all (tensorflow-cpu, macOS): it cannot tell."""
    from tensorflow.python.framework import kernels
    if not any(k.device_type == "GPU" for k in kernels.get_registered_kernels_for_op(
            "MatMul").kernel):
        return {}, {}
    found: dict[str, dict[str, int]] = {"CPU": {}, "GPU": {}}
    for op_type, count in zip(*np.unique(op_types, return_counts=True)):
        registered = kernels.get_registered_kernels_for_op(str(op_type)).kernel
        devices = {k.device_type for k in registered}
        for kind, other in (("CPU", "GPU"), ("GPU", "CPU")):
            if kind in devices and not devices & {other, "DEFAULT"}:
                found[kind][str(op_type)] = int(count)
    return found["CPU"], found["GPU"]


def _shapeless_variables(nodes, data, outs) -> int:
    """Captured variables of a TF2 function (resource Placeholders) read with an unknown shape:
    a FuncGraph's GraphDef written without ``add_shapes=True`` keeps no variable shapes."""
    shapeless = set()
    for src, _, dst in data:
        if nodes[dst].op == "ReadVariableOp" and nodes[src].op == "Placeholder" and \
                CAPTURED_SHAPE not in nodes[src].attr and \
                outs["dtype"][outs["ptr"][src]] == "resource":
            shape = outs["shapes_per_op"][dst][0] if outs["shapes_per_op"][dst] else None
            if shape is None or any(d < 0 for d in shape):
                shapeless.add(src)
    return len(shapeless)


def _add_body_flops(op_flops, nodes, graph_def, report, unknown_dim,
                    depth) -> tuple[list[str], list[str]]:
    """Kept functional ops (While, If) get the FLOPs of their bodies: If the larger branch;
    While one trip of cond + body times its trip count where the graph fixes it
    (gplace.importer.trips), one trip otherwise (a cap on a loop that exits on its data is not
    its trip count). (notes, the While ops counted as one trip: a profile's measured trips
    scale their estimates, gplace.cost)."""
    notes, once = [], []
    library = {f.signature.name: f for f in graph_def.library.function}
    by_name = {n.name: n for n in nodes}
    fixed = trips.fixed_trips([n for n in nodes if "While" in n.op], by_name, library)
    for k, node in enumerate(nodes):
        if node.name not in report.kept:
            continue
        attrs = BODY_ATTRS.get(node.op)
        fnames = [node.attr[a].func.name for a in attrs] if attrs else \
            [functions.called_function(node, library)]
        costs = [_function_flops(library, f, unknown_dim, depth) for f in fnames if f]
        runs, why = fixed.get(node.name, (1, ""))
        if costs:
            op_flops[k] += runs * sum(costs) if "While" in node.op or not attrs else max(costs)
        if depth == 0 and "While" in node.op:
            cap = trips.while_trips(node, by_name)
            if not why:
                once.append(node.name)
            notes.append(f"{node.name}: functional While, " + (
                f"{runs} iterations ({why})" if why
                else f"cost of one iteration (it runs at most {cap:,}: the "
                "condition reads its data)" if cap > 1
                else "cost of one iteration (its trip count is not fixed in the graph)"))
    return notes, once


def _function_flops(library, fname, unknown_dim, depth) -> float:
    if fname not in library or depth >= MAX_BODY_DEPTH:
        return 0.0
    try:
        body, _ = functions.body_graph_def(library[fname], library)
        return float(build_op_graph(body, unknown_dim, True, fname, depth + 1).flops.sum())
    except (GraphError, ValueError, KeyError):
        return 0.0
