"""Output dtypes and shapes of every op, never executing the graph. Three sources, and per
output the one with the fewest unknown dimensions wins (ties in this order): the recorded
``_output_shapes`` attr; grappler's static GraphProperties (it iterates TF1 loops to a fixed
point, so loop variables keep their shapes); TensorFlow's import-time shape inference in a
``tf.Graph`` (also needed for TF's FLOP statistics).

Unknown dimensions fall back to ``unknown_dim`` (default 1, i.e. a batch of one where a
placeholder's batch is ``None``): placeholders with unknown dimensions are given that size
before inference so that it propagates; what is still unknown after inference counts as
``unknown_dim`` per unknown dimension in byte and FLOP figures. The number of outputs left
with unknown dimensions is reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gplace.errors import GraphError
from gplace.importer.flops import elements
from gplace.importer.inputs import cut, short

PLACEHOLDERS = ("Placeholder", "PlaceholderWithDefault", "PlaceholderV2")
# One tensor of more than a pebibyte is a wrong shape, not a model; byte counts stay far
# inside int64 when summed.
MAX_TENSOR_BYTES = 2**50


@dataclass
class ShapeInfo:
    dtypes: list[list[str]]                   # per op, per output: dtype name
    shapes: list[list[tuple[int, ...] | None]]  # per op, per output: dims (-1 unknown) or None
    tf_graph: object | None                   # the tf.Graph when inference ran, else None
    inference_error: str = ""                 # why TF's shape inference was unavailable
    notes: list[str] = field(default_factory=list)
    sized: list[str] = field(default_factory=list)  # placeholders whose unknown dims got
                                                    # unknown_dim (a None batch)


_DTYPE_SIZE: dict[str, int] = {}


def dtype_size(name: str) -> int:
    """Bytes per element; 0 for handles and references (their memory is the variable's)."""
    if name not in _DTYPE_SIZE:
        from tensorflow.python.framework import dtypes
        try:
            size = 0 if name.endswith("_ref") else dtypes.as_dtype(name).size
        except TypeError:
            size = 4
        _DTYPE_SIZE[name] = size
    return _DTYPE_SIZE[name]


def tensor_bytes(op: str, what: str, dtype: str, shape, unknown_dim: int) -> int:
    """Bytes of one tensor; a GraphError past MAX_TENSOR_BYTES, naming the op and shape."""
    n = dtype_size(dtype) * elements(shape, unknown_dim)
    if n > MAX_TENSOR_BYTES:
        hint = (f"; its unknown dimensions count as {unknown_dim}" if any(d < 0 for d in shape)
                else "")
        raise GraphError(f"op {short(op)} {what}: shape {list(shape)} of {dtype} is {n:.3g} bytes, "
                         f"more than the 1 PiB gplace accepts for one tensor{hint}")
    return n


def check_attrs(graph_def) -> None:
    """Raises GraphError for a type attr that names no TensorFlow dtype (grappler aborts the
    process on one: a check failure in C++, not an exception), a constant tensor with a
    negative dimension, or a shape attr with a dimension below -1 (unknown): TensorFlow
    refuses both when it builds the graph."""
    from tensorflow.core.framework import types_pb2
    valid = set(types_pb2.DataType.values())
    nodes = [(n.name, n) for n in graph_def.node] + [
        (f"{f.signature.name}/{n.name}", n) for f in graph_def.library.function
        for n in f.node_def]
    for name, node in nodes:
        for key, value in node.attr.items():
            kind = value.WhichOneof("value")
            types = [value.type] if kind == "type" else list(value.list.type) if kind == "list" \
                else []
            bad = [t for t in types if t not in valid]
            if bad:
                raise GraphError(f"op {short(name)}: attr {short(key)} holds dtype number "
                                 f"{bad[0]}, which is no TensorFlow dtype")
            _check_dims(name, key, value, kind)
    for f in graph_def.library.function:
        for arg in list(f.signature.input_arg) + list(f.signature.output_arg):
            if arg.type not in valid:
                raise GraphError(f"function {cut(f.signature.name)}: argument "
                                 f"{short(arg.name)} has dtype number {arg.type}, which is no "
                                 f"TensorFlow dtype")


def _check_dims(name: str, key: str, value, kind: str) -> None:
    """A tensor attr's dimensions are sizes (>= 0); a shape attr's may also be -1 (unknown)."""
    if kind == "tensor":
        dims, least = [d.size for d in value.tensor.tensor_shape.dim], 0
    elif kind == "shape":
        dims, least = [d.size for d in value.shape.dim], -1
    elif kind == "list":
        dims, least = [d.size for s in value.list.shape for d in s.dim], -1
    else:
        return
    if any(d < least for d in dims):
        what = "tensor" if kind == "tensor" else "shape"
        raise GraphError(f"op {short(name)}: attr {short(key)} holds a {what} with dimensions "
                         f"{dims[:8]}; TensorFlow takes "
                         f"{'sizes >= 0' if least == 0 else 'sizes >= 0, or -1 for unknown'}")


def _registered(op_type: str) -> bool:
    from tensorflow.python.framework import op_def_registry
    return op_def_registry.get(op_type) is not None


CONSTANTS = ("Const", "HostConst")


def _prepare_for_inference(graph_def, unknown_dim: int):
    """A copy with unknown placeholder dims fixed, unregistered ops and constants without a
    value made placeholders, and every op off gplace.real.allowlist that TF could evaluate
    (its inputs all come from constants) made a stand-in fed by placeholders: TF's shape
    inference and grappler evaluate small constant subgraphs to learn shapes, and a ReadFile
    of a constant path feeding a Reshape would read that file here. The stand-ins keep each
    output's dtype and recorded shape (an IdentityN over one placeholder per output).
    Returns (the copy, the ops made placeholders, the placeholders whose dims were fixed)."""
    from tensorflow.core.framework import graph_pb2
    from gplace.real.allowlist import ALLOWED_OPS
    library = {f.signature.name for f in graph_def.library.function}
    out = graph_pb2.GraphDef()
    out.CopyFrom(graph_def)
    replaced, stand_ins, sized = [], [], []
    foldable = _constant_foldable(graph_def)
    for node in out.node:
        if node.op in PLACEHOLDERS and "shape" in node.attr:
            shape = node.attr["shape"].shape
            if not shape.unknown_rank:
                if any(dim.size < 0 for dim in shape.dim):
                    sized.append(node.name)
                for dim in shape.dim:
                    if dim.size < 0:
                        dim.size = unknown_dim
                tensor_bytes(node.name, "placeholder", _dtype_name(node),
                             tuple(d.size for d in shape.dim), unknown_dim)
        elif node.op not in library and not _registered(node.op) or (
                node.op in CONSTANTS and "value" not in node.attr):
            if node.op not in CONSTANTS:  # a constant without its value: grappler aborts the
                replaced.append(node.name)  # process on one (a C++ check), TF's import refuses
            dtype = _recorded_dtype(node)
            node.op = "Placeholder"
            del node.input[:]
            node.ClearField("attr")
            node.attr["dtype"].type = dtype
        elif node.op not in library and node.op not in ALLOWED_OPS and \
                node.name in foldable:
            stand_ins.extend(_stand_in(node))
    out.node.extend(stand_ins)
    return out, replaced, sized


def _constant_foldable(graph_def) -> set[str]:
    """The ops whose every data input comes from constants (recursively; an op with no inputs
    counts): the only ones TF's shape inference can evaluate. Control inputs do not feed
    values, and a loop's back edge never makes an op foldable."""
    inputs = {n.name: [i.split(":")[0] for i in n.input if not i.startswith("^")]
              for n in graph_def.node}
    state: dict[str, bool] = {}
    for root in inputs:
        stack = [(root, False)]
        while stack:
            name, expanded = stack.pop()
            if name in state and not expanded:
                continue
            if not expanded:
                state[name] = False  # on the path: a cycle is not foldable
                stack.append((name, True))
                stack.extend((i, False) for i in inputs.get(name, ()) if i not in state)
            else:
                state[name] = all(state.get(i, False) for i in inputs.get(name, ()))
    return {name for name, ok in state.items() if ok}


def _stand_in(node) -> list:
    """Turns ``node`` into an IdentityN of new placeholders, one per output of its OpDef with
    that output's dtype (and its recorded shape); returns the placeholders. Nothing of the op is
    left to evaluate."""
    from tensorflow.core.framework import node_def_pb2
    dtypes = _output_dtypes(node)
    recorded = list(node.attr["_output_shapes"].list.shape) if "_output_shapes" in node.attr \
        else []
    feeds = []
    for j, dtype in enumerate(dtypes):
        feed = node_def_pb2.NodeDef(name=f"{node.name}/_gplace_stand_in_{j}", op="Placeholder")
        feed.attr["dtype"].type = dtype
        if j < len(recorded):
            feed.attr["shape"].shape.CopyFrom(recorded[j])
        feeds.append(feed)
    node.op = "IdentityN" if dtypes else "NoOp"
    del node.input[:]
    node.input.extend(f.name for f in feeds)
    node.ClearField("attr")
    if dtypes:
        node.attr["T"].list.type.extend(dtypes)
    return feeds


def _output_dtypes(node) -> list[int]:
    """The dtype of each output of a registered op, from its OpDef and the node's attrs
    (float32 where an attr is missing)."""
    from tensorflow.core.framework import types_pb2
    from tensorflow.python.framework import op_def_registry
    op_def = op_def_registry.get(node.op)
    attrs = {a.name: a.default_value for a in op_def.attr if a.HasField("default_value")}
    attrs.update(node.attr)  # a SavedModel strips attrs at their default: the OpDef has them

    def attr(name):
        return attrs.get(name)
    result = []
    for arg in op_def.output_arg:
        count = attr(arg.number_attr).i if arg.number_attr and attr(arg.number_attr) else 1
        if arg.type_list_attr:
            value = attr(arg.type_list_attr)
            result.extend(value.list.type if value is not None else [])
        elif arg.type_attr:
            value = attr(arg.type_attr)
            result.extend([value.type if value is not None and value.type
                           else types_pb2.DT_FLOAT] * count)
        else:
            result.extend([arg.type] * count)
    return result


def _recorded_dtype(node) -> int:
    from tensorflow.core.framework import types_pb2
    for key in ("T", "dtype", "out_type"):
        if key in node.attr and node.attr[key].type:
            return node.attr[key].type
    return types_pb2.DT_FLOAT


def _dtype_name(node) -> str:
    """The name of the node's recorded dtype; float32 for a number TF has no dtype for."""
    from tensorflow.python.framework import dtypes as tf_dtypes
    try:
        return tf_dtypes.as_dtype(_recorded_dtype(node)).name
    except TypeError:
        return "float32"


def infer_shapes(graph_def, unknown_dim: int = 1) -> ShapeInfo:
    from tensorflow.python.framework import importer, ops
    from tensorflow.python.platform import tf_logging
    tf_logging.get_logger().setLevel("ERROR")
    prepared, replaced, sized = _prepare_for_inference(graph_def, unknown_dim)
    graph = ops.Graph()
    try:
        with graph.as_default():
            importer.import_graph_def(prepared, name="")
    except Exception as e:  # TF raises ValueError, InvalidArgumentError, ...; we fall back
        info = _from_static(graph_def, _grappler_shapes(prepared, with_dtypes=True))
        info.inference_error = " ".join(str(e).split())[:300]
        return info
    by_name = {op.name: op for op in graph.get_operations()}
    dtypes, shapes = [], []
    recorded = _from_output_shapes_attr(graph_def)
    static = _grappler_shapes(prepared)
    for k, node in enumerate(graph_def.node):
        op = by_name[node.name]
        dtypes.append([t.dtype.name for t in op.outputs])
        inferred = [None if t.shape.rank is None else tuple(-1 if d is None else int(d)
                    for d in t.shape.as_list()) for t in op.outputs]
        from_static = static.get(node.name, [])
        shapes.append([_more_known(_more_known(r, g), i) for r, g, i in
                       zip(recorded.shapes[k] + [None] * len(inferred),
                           from_static + [None] * len(inferred), inferred)])
    notes = [f"{len(replaced)} ops of unregistered types got generic costs: "
             f"{', '.join(replaced[:5])}"] if replaced else []
    return ShapeInfo(dtypes, shapes, graph, notes=notes, sized=sized)


def _grappler_shapes(graph_def, with_dtypes: bool = False) -> dict[str, list]:
    """Shapes from grappler's GraphProperties; empty when grappler cannot read the graph."""
    from tensorflow.core.protobuf import meta_graph_pb2
    from tensorflow.python.grappler import item as grappler_item
    meta = meta_graph_pb2.MetaGraphDef()
    meta.graph_def.CopyFrom(graph_def)
    meta.collection_def["train_op"].node_list.value.extend(n.name for n in graph_def.node)
    try:
        props = grappler_item.Item(meta, ignore_colocation=True,
                                   ignore_user_placement=True).GetOpProperties()
    except Exception:  # grappler rejects some graphs TF can import; the other sources remain
        return {}
    def shape(p):
        return None if p.shape.unknown_rank else tuple(int(d.size) for d in p.shape.dim)
    return {name: [(p.dtype, shape(p)) if with_dtypes else shape(p) for p in outputs]
            for name, outputs in props.items()}


def _from_static(graph_def, static: dict[str, list]) -> ShapeInfo:
    """Recorded ``_output_shapes`` merged with grappler's (dtype, shape) pairs, no tf.Graph."""
    from tensorflow.python.framework import dtypes as tf_dtypes
    info = _from_output_shapes_attr(graph_def)
    for k, node in enumerate(graph_def.node):
        pairs = static.get(node.name)
        if pairs and len(pairs) >= len(info.shapes[k]):
            recorded = info.shapes[k] + [None] * (len(pairs) - len(info.shapes[k]))
            info.dtypes[k] = [_name_of(tf_dtypes, d) for d, _ in pairs]
            info.shapes[k] = [_more_known(r, s) for r, (_, s) in zip(recorded, pairs)]
    return info


def _name_of(tf_dtypes, number: int) -> str:
    """A dtype number's name; float32 for one TF has no dtype for (grappler reports 0,
    DT_INVALID, for an output whose type attr is missing), as :func:`_dtype_name`."""
    try:
        return tf_dtypes.as_dtype(number).name
    except TypeError:
        return "float32"


def _more_known(a, b):
    """The shape with fewer unknowns; ``a`` (recorded) wins a tie."""
    def unknowns(s):
        return 10**9 if s is None else sum(d < 0 for d in s)
    return a if unknowns(a) <= unknowns(b) else b


def _from_output_shapes_attr(graph_def) -> ShapeInfo:
    """Shapes from each node's ``_output_shapes`` attr; dtypes from its type attrs."""
    dtypes, shapes = [], []
    for node in graph_def.node:
        recorded = node.attr["_output_shapes"].list.shape if "_output_shapes" in node.attr else []
        shapes.append([None if s.unknown_rank else tuple(int(d.size) for d in s.dim)
                       for s in recorded])
        dtypes.append([_dtype_name(node)] * len(recorded))
    return ShapeInfo(dtypes, shapes, None)
