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

PLACEHOLDERS = ("Placeholder", "PlaceholderWithDefault", "PlaceholderV2")


@dataclass
class ShapeInfo:
    dtypes: list[list[str]]                   # per op, per output: dtype name
    shapes: list[list[tuple[int, ...] | None]]  # per op, per output: dims (-1 unknown) or None
    tf_graph: object | None                   # the tf.Graph when inference ran, else None
    inference_error: str = ""                 # why TF's shape inference was unavailable
    notes: list[str] = field(default_factory=list)


def _registered(op_type: str) -> bool:
    from tensorflow.python.framework import op_def_registry
    return op_def_registry.get(op_type) is not None


def _prepare_for_inference(graph_def, unknown_dim: int):
    """A copy with unknown placeholder dims fixed and unregistered ops made placeholders."""
    from tensorflow.core.framework import graph_pb2
    library = {f.signature.name for f in graph_def.library.function}
    out = graph_pb2.GraphDef()
    out.CopyFrom(graph_def)
    replaced = []
    for node in out.node:
        if node.op in PLACEHOLDERS and "shape" in node.attr:
            shape = node.attr["shape"].shape
            if not shape.unknown_rank:
                for dim in shape.dim:
                    if dim.size < 0:
                        dim.size = unknown_dim
        elif node.op not in library and not _registered(node.op):
            replaced.append(node.name)
            dtype = _recorded_dtype(node)
            node.op = "Placeholder"
            del node.input[:]
            node.ClearField("attr")
            node.attr["dtype"].type = dtype
    return out, replaced


def _recorded_dtype(node) -> int:
    from tensorflow.core.framework import types_pb2
    for key in ("T", "dtype", "out_type"):
        if key in node.attr and node.attr[key].type:
            return node.attr[key].type
    return types_pb2.DT_FLOAT


def infer_shapes(graph_def, unknown_dim: int = 1) -> ShapeInfo:
    import tensorflow as tf
    tf.get_logger().setLevel("ERROR")
    prepared, replaced = _prepare_for_inference(graph_def, unknown_dim)
    graph = tf.Graph()
    try:
        with graph.as_default():
            tf.graph_util.import_graph_def(prepared, name="")
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
    return ShapeInfo(dtypes, shapes, graph, notes=notes)


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
            info.dtypes[k] = [tf_dtypes.as_dtype(d).name for d, _ in pairs]
            info.shapes[k] = [_more_known(r, s) for r, (_, s) in zip(recorded, pairs)]
    return info


def _more_known(a, b):
    """The shape with fewer unknowns; ``a`` (recorded) wins a tie."""
    def unknowns(s):
        return 10**9 if s is None else sum(d < 0 for d in s)
    return a if unknowns(a) <= unknowns(b) else b


def _from_output_shapes_attr(graph_def) -> ShapeInfo:
    """Shapes from each node's ``_output_shapes`` attr; dtypes from its type attrs."""
    from tensorflow.python.framework import dtypes as tf_dtypes
    dtypes, shapes = [], []
    for node in graph_def.node:
        recorded = node.attr["_output_shapes"].list.shape if "_output_shapes" in node.attr else []
        shapes.append([None if s.unknown_rank else tuple(int(d.size) for d in s.dim)
                       for s in recorded])
        dtype = tf_dtypes.as_dtype(_recorded_dtype(node)).name
        dtypes.append([dtype] * len(recorded))
    return ShapeInfo(dtypes, shapes, None)
