"""Trip counts of functional While loops (while_v2) that the graph fixes.

A loop's ``maximum_iterations`` is its trip count where its condition only counts to it
(tf.scan's, Keras' fixed-length recurrent layers); the cap may come through a few integer ops
over constants (Keras 3 takes the max over its sequence lengths). A gradient loop counts one
trip per trip of the loop it differentiates. Any other loop counts once.
"""

from __future__ import annotations

import numpy as np


def fixed_trips(loops, by_name, library) -> dict[str, tuple[int, str]]:
    """Trip counts the graph fixes, with why, by While name: a constant ``maximum_iterations``
    that the condition only counts to (tf.scan's, Keras' fixed-length loops), and a gradient
    loop (while_v2's) whose condition counts to the final counter of a loop with a fixed count:
    it runs once per trip of the loop it differentiates."""
    fixed = {}
    for node in loops:
        cap = while_trips(node, by_name)
        if cap > 1 and counts_to_cap(library.get(node.attr["cond"].func.name), {1}):
            fixed[node.name] = (cap, "its maximum_iterations, which its condition counts to")
    for node in loops:
        if node.name in fixed:
            continue
        data = [i for i in node.input if not i.startswith("^")]
        counters = {k: fixed[ref.split(":")[0]][0] for k, ref in enumerate(data)
                    if ref.split(":")[0] in fixed and ref.split(":")[1:] in ([], ["0"])}
        cond = library.get(node.attr["cond"].func.name)
        if counters and counts_to_cap(cond, {1} | set(counters)):
            source = data[min(counters)].split(":")[0]
            fixed[node.name] = (min(counters.values()),
                                f"one per trip of {source}, which it differentiates")
    return fixed


MAX_TRIPS = 10**6
_COUNTING = {"Less", "LessEqual", "Greater", "GreaterEqual", "LogicalAnd", "Identity", "Const",
             "NoOp"}
_COMPARE = {"Less", "LessEqual", "Greater", "GreaterEqual"}


def counts_to_cap(cond, bounds: set[int]) -> bool:
    """Whether a while_v2 condition only counts: comparisons (joined by LogicalAnd) each against
    a constant or one of the arguments numbered in ``bounds`` (1: the maximum iterations), as
    tf.scan's and Keras' fixed-length loops are; then the bound is the trip count. A condition
    that reads its data (a norm, a done flag, a length held in a loop variable) only runs up
    to it."""
    if cond is None:
        return False
    nodes = {n.name: n for n in cond.node_def}
    args = [a.name for a in cond.signature.input_arg]
    if any(n.op not in _COUNTING for n in nodes.values()) or len(args) < 2:
        return False
    limits = {args[k] for k in bounds if k < len(args)}

    def source(ref: str):
        name = ref.split(":")[0]
        while name in nodes and nodes[name].op == "Identity" and nodes[name].input:
            name = nodes[name].input[0].split(":")[0]
        return name
    for n in nodes.values():
        if n.op in _COMPARE:
            sides = [source(i) for i in n.input if not i.startswith("^")]
            if not any(s in limits or (s in nodes and nodes[s].op == "Const") for s in sides):
                return False
    return True


def while_trips(node, by_name) -> int:
    """A while_v2 loop's ``maximum_iterations`` (its second input: loop counter, maximum
    iterations, loop variables), when the graph computes it from constants alone (Keras 3
    takes the max over its sequence lengths); else 1."""
    data = [i for i in node.input if not i.startswith("^")]
    if len(data) < 2:
        return 1
    value = _constant(data[1], by_name)
    if value is None or value.size != 1 or value.dtype.kind not in "iu":
        return 1
    return int(min(max(int(value.reshape(())), 1), MAX_TRIPS))


_PASS_THROUGH = {"Identity", "Cast", "StopGradient", "Snapshot"}
_REDUCE = {"Max": np.max, "Min": np.min, "Sum": np.sum, "Prod": np.prod}
_ELEMENTWISE = {"Maximum": np.maximum, "Minimum": np.minimum}
MAX_FOLDED = 1 << 16  # elements: a trip count is folded from a few constants, not a tensor


def _constant(ref: str, by_name: dict, depth: int = 0):
    """The value of tensor ``ref`` where the graph computes it from constants through a few
    integer ops (Identity, Cast, Range, reductions and Maximum / Minimum); None otherwise
    (an op of another type ends the walk before its inputs are read)."""
    node = by_name.get(ref.split(":")[0].lstrip("^"))
    if node is None or depth > 16 or ref.split(":")[1:] not in ([], ["0"]):
        return None
    data = [i for i in node.input if not i.startswith("^")]
    if node.op == "Const" and "value" in node.attr:
        from tensorflow.python.framework import tensor_util
        try:
            value = tensor_util.MakeNdarray(node.attr["value"].tensor)
        except (TypeError, ValueError):
            return None
        return value if value.size <= MAX_FOLDED else None
    arity = {**dict.fromkeys(_PASS_THROUGH, 1), **dict.fromkeys(_REDUCE, 2),
             **dict.fromkeys(_ELEMENTWISE, 2), "Range": 3}
    if arity.get(node.op) != len(data):
        return None
    inputs = []
    for ref_in in data:
        value = _constant(ref_in, by_name, depth + 1)
        if value is None or value.dtype.kind not in "iu":
            return None
        inputs.append(value)
    try:
        if node.op in _PASS_THROUGH:
            return inputs[0]
        if node.op in _REDUCE:
            keep = bool(node.attr["keep_dims"].b) if "keep_dims" in node.attr else False
            return np.asarray(_REDUCE[node.op](inputs[0], axis=tuple(inputs[1].reshape(-1)),
                                               keepdims=keep))
        if node.op in _ELEMENTWISE:
            return np.asarray(_ELEMENTWISE[node.op](*inputs))
        if all(v.size == 1 for v in inputs):  # Range
            start, limit, delta = (int(v.reshape(())) for v in inputs)
            if delta != 0 and abs(limit - start) // abs(delta) <= MAX_FOLDED:
                return np.arange(start, limit, delta)
    except (ValueError, IndexError, np.exceptions.AxisError):
        return None
    return None
