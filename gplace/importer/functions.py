"""Inline function calls of a GraphDef, as TensorFlow's own function inliner does.

A call to a library function (an op named after the function, PartitionedCall or
StatefulPartitionedCall) is replaced by the body's nodes under the prefix ``<call name>/``:
each argument becomes an ``Identity`` of the call's input, and the call's own name becomes an
``IdentityN`` of the body's results, so the consumers of the call are untouched.

An If (or StatelessIf) that TensorFlow lowers when it runs the graph (attr
``_lower_using_switch_merge``, which control flow v2 sets on every ``tf.cond`` outside XLA) is
lowered as TensorFlow's LowerFunctionalOpsPass does (tensorflow/core/common_runtime/
lower_if_op.cc): the predicate and each input go through Switch ops to the branches, inlined
under ``<if name>/then/`` and ``<if name>/else/``, whose results Merge ops join; the If's own
name becomes an ``IdentityN`` of the merges. Like a TF1 ``tf.cond``, both branches are placed
and costed. Polymorphic functions, other functional control flow (While, Case, an If without
that attr) are kept as one op, with their bodies' FLOPs (gplace.importer's
``_add_body_flops``): a While's cond and body times its trip count where the graph fixes it,
an If's larger branch, a call's body; a Case gets none. The report says which was done to
each, and which inlined functions asked XLA to compile them (their ops are then placed one by
one).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gplace.errors import GraphError
from gplace.importer.inputs import check_size, cut, split_input

CALL_OPS = ("PartitionedCall", "StatefulPartitionedCall")
FUNCTIONAL_OPS = ("While", "StatelessWhile", "If", "StatelessIf", "Case", "StatelessCase")
IF_OPS = ("If", "StatelessIf")
LOWER_ATTR = "_lower_using_switch_merge"
COMPILED_ATTRS = ("_xla_compile_id", "_tpu_replicate")  # TF does not lower ops marked so
BOOL = 10  # DT_BOOL in tensorflow/core/framework/types.proto
MAX_DEPTH = 8  # nested calls and lowered Ifs expanded this deep; deeper ones are kept as one op


@dataclass
class InlineReport:
    inlined: dict[str, int] = field(default_factory=dict)   # function name -> calls inlined
    kept: dict[str, str] = field(default_factory=dict)      # call op name -> why it was kept
    xla: list[str] = field(default_factory=list)            # inlined functions marked for XLA
    lowered: dict[str, list[str]] = field(default_factory=dict)  # If op name -> its branches


def called_function(node, library: dict) -> str | None:
    """The library function a node calls, or None."""
    if node.op in library:
        return node.op
    if node.op in CALL_OPS:
        return node.attr["f"].func.name
    return None


def called_functions(node, library: dict) -> list[str]:
    """Every library function ``node`` may run: the one it calls, and those its attrs name
    (a While's cond and body, an If's branches, a Case's list of branches, a call's ``f``)."""
    names = [node.op] if node.op in library else []
    for value in node.attr.values():
        names += [value.func.name] if value.HasField("func") else []
        names += [f.name for f in value.list.func]
    return [n for n in names if n in library]


def lowers(node) -> bool:
    """Whether TensorFlow runs ``node`` as a Switch/Merge conditional: an If or StatelessIf with
    ``_lower_using_switch_merge`` true (absent, TF keeps the op whole), not marked for XLA or
    TPU compilation (lower_functional_ops.cc)."""
    attr = node.attr
    return node.op in IF_OPS and LOWER_ATTR in attr and attr[LOWER_ATTR].b and \
        not any(attr[a].s for a in COMPILED_ATTRS if a in attr)


def branches(node) -> list[str]:
    """The then and else functions of an If."""
    return [node.attr["then_branch"].func.name, node.attr["else_branch"].func.name]


def _expandable(node, library: dict, report: InlineReport) -> bool:
    """Whether the next inlining pass replaces ``node``: a call or an If to lower, not kept."""
    return node.name not in report.kept and bool(called_function(node, library) or lowers(node))


def check_not_recursive(library: dict) -> None:
    """Raises GraphError when a library function calls itself, directly or through others.
    TensorFlow cannot run such a function, and importing a graph that calls one overflows its
    C++ stack (a crash, not an error); the call graph is walked without recursion."""
    calls = {name: sorted({c for n in f.node_def for c in called_functions(n, library)})
             for name, f in library.items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in sorted(calls):
        if root in state:
            continue
        path, stack = [root], [iter(calls[root])]
        state[root] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                cycle = path[path.index(nxt):] + [nxt]
                what = "calls itself" if len(cycle) == 2 else "is recursive"
                names = [cut(c, 40) for c in cycle[:6]] + (["..."] if len(cycle) > 6 else [])
                raise GraphError(f"library function {names[0]} {what} ({' -> '.join(names)}); "
                                 f"TensorFlow cannot run recursive functions")
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(calls[nxt]))


def inline_functions(graph_def):
    """Returns ``(graph_def, report)`` with every inlinable call inlined (recursively)."""
    library = {f.signature.name: f for f in graph_def.library.function}
    report = InlineReport()
    if not library:
        return graph_def, report
    check_size(inlined_size(graph_def, library), "the graph with its function calls inlined")
    bodies: dict = {}  # function name -> body_graph_def: TF imports the library for each
    for _ in range(MAX_DEPTH):
        if not any(_expandable(n, library, report) for n in graph_def.node):
            break
        graph_def = _inline_pass(graph_def, library, report, bodies)
    for node in graph_def.node:
        fname = called_function(node, library)
        if _expandable(node, library, report):
            what = f"calls {fname}" if fname else f"{node.op} to lower"
            report.kept[node.name] = f"{what} nested deeper than {MAX_DEPTH}"
        elif node.op in FUNCTIONAL_OPS and node.name not in report.kept:
            report.kept[node.name] = f"functional {node.op}: kept as one op, costed by its bodies"
    return graph_def, report


def inlined_size(graph_def, library: dict) -> int:
    """Ops of ``graph_def`` once inline_functions is done, counted before any is made: calls
    nested in calls multiply (ten calls of a function of ten calls, eight deep, are 10**8
    ops from a file of a few kilobytes). Needs a library without recursion."""
    memo: dict[tuple[str, int], int] = {}

    def call_ops(fname: str, depth: int) -> int:
        key = (fname, depth)
        if key not in memo:  # arguments become Identity ops, the call an IdentityN
            fdef = library[fname]
            memo[key] = (len(fdef.signature.input_arg) + 1
                         + sum(ops(n, depth + 1) for n in fdef.node_def))
        return memo[key]

    def ops(node, depth: int) -> int:
        if depth < MAX_DEPTH and lowers(node) and not _cannot_lower(node, library):
            return _lowering_ops(node) + sum(call_ops(f, depth) for f in branches(node))
        fname = called_function(node, library)
        if not fname or depth >= MAX_DEPTH or _cannot_inline(library[fname]):
            return 1
        return call_ops(fname, depth)

    return sum(ops(n, 0) for n in graph_def.node)


def _inline_pass(graph_def, library, report, bodies: dict):
    from tensorflow.core.framework import graph_pb2
    out = graph_pb2.GraphDef()
    out.versions.CopyFrom(graph_def.versions)
    out.library.CopyFrom(graph_def.library)
    taken = {n.name for n in graph_def.node}
    devices = {n.name: n.device for n in graph_def.node}
    for node in graph_def.node:
        if not _expandable(node, library, report):
            out.node.add().CopyFrom(node)
            continue
        fname = called_function(node, library)
        why = _cannot_inline(library[fname]) if fname else _cannot_lower(node, library)
        if why:
            report.kept[node.name] = why
            out.node.add().CopyFrom(node)
        elif fname:
            out.node.extend(_inline_call(node, fname, library, report, taken, bodies))
        else:
            out.node.extend(_lower_if(node, library, report, taken, bodies, devices))
    return out


def _inline_call(call, fname: str, library, report, taken: set[str], bodies: dict) -> list:
    """The nodes that replace a call of ``fname``; the report counts it."""
    if fname not in bodies:
        bodies[fname] = body_graph_def(library[fname], library)
    report.inlined[fname] = report.inlined.get(fname, 0) + 1
    if must_compile(library[fname]) and fname not in report.xla:
        report.xla.append(fname)
    return _expand_call(call, library[fname], taken, bodies[fname])


def must_compile(fdef) -> bool:
    """Whether a function asks XLA to compile it (``tf.function(jit_compile=True)``)."""
    return "_XlaMustCompile" in fdef.attr and fdef.attr["_XlaMustCompile"].b


def _cannot_inline(fdef) -> str | None:
    sig = fdef.signature
    if sig.attr:
        return f"polymorphic function {sig.name}: kept as one op"
    for arg in list(sig.input_arg) + list(sig.output_arg):
        if arg.number_attr or arg.type_list_attr or not arg.type:
            return f"function {sig.name} has list or attr-typed arguments: kept as one op"
    return None


def _cannot_lower(node, library: dict) -> str | None:
    """Why an If that TF lowers is kept as one op here, or None."""
    missing = [f for f in branches(node) if f not in library]
    if missing:
        return f"{node.op} {node.name}: branch {missing[0]} is not in the library: kept as one op"
    if node.attr["Tcond"].type != BOOL:
        return f"{node.op} {node.name}: a non-boolean predicate: kept as one op"
    inputs = sum(not i.startswith("^") for i in node.input) - 1
    outputs = {len(library[f].signature.output_arg) for f in branches(node)}
    if inputs != len(node.attr["Tin"].list.type) or outputs != {len(node.attr["Tout"].list.type)}:
        return f"{node.op} {node.name}: its Tin or Tout does not match its inputs or branches"
    whys = [_cannot_inline(library[f]) for f in branches(node)]
    return next((why for why in whys if why), None)


def _lowering_ops(node) -> int:
    """Ops that lowering an If adds around its inlined branches: the predicate's Switch, the
    two pivots, a Switch per input, a Merge per output, the branch_executed Merge and the
    If's own name."""
    inputs = sum(not i.startswith("^") for i in node.input) - 1
    return 5 + inputs + len(node.attr["Tout"].list.type)


def _lower_if(if_op, library, report, taken: set[str], bodies: dict, devices: dict) -> list:
    """The nodes TF's lower_if_op.cc puts in place of ``if_op``, its branches inlined."""
    prefix = _lowering_prefix(if_op, taken)
    nodes = _switches(if_op, prefix, devices)
    taken.update(n.name for n in nodes)
    inputs = len(if_op.attr["Tin"].list.type)
    for side, fname in zip(("then", "else"), branches(if_op)):
        call = _branch_call(prefix, side, fname, inputs, if_op.device)
        nodes += _inline_call(call, fname, library, report, taken, bodies)
    joins = _merges(if_op, prefix)
    taken.update(n.name for n in joins)
    report.lowered[if_op.name] = branches(if_op)
    return nodes + joins


def _lowering_prefix(if_op, taken: set[str]) -> str:
    """``<if name>/``, or ``<if name>_lowered/`` where a name it would make is taken."""
    own = ["switch_pred", "pivot_t", "pivot_f", "branch_executed", "then", "else"]
    own += [f"switch_{k}" for k in range(len(if_op.attr["Tin"].list.type))]
    own += [f"merge_{k}" for k in range(len(if_op.attr["Tout"].list.type))]
    prefix = if_op.name + "/"
    while any(prefix + n in taken for n in own):
        prefix = prefix[:-1] + "_lowered/"
    return prefix


def _switches(if_op, prefix: str, devices: dict) -> list:
    """The predicate's Switch (after the If's control inputs), its two pivots, and a Switch per
    input on the device that input asked for. TF also writes ``_class: [input name]`` on
    those; without the ``loc:@`` prefix TF's placer ignores it, so it is left out."""
    pred, *inputs = [i for i in if_op.input if not i.startswith("^")]
    controls = [i for i in if_op.input if i.startswith("^")]
    device = if_op.device
    nodes = [_node(prefix + "switch_pred", "Switch", [pred, pred] + controls, device, T=BOOL),
             _node(prefix + "pivot_f", "Identity", [prefix + "switch_pred"], device, T=BOOL),
             _node(prefix + "pivot_t", "Identity", [prefix + "switch_pred:1"], device, T=BOOL)]
    for k, (src, dtype) in enumerate(zip(inputs, if_op.attr["Tin"].list.type)):
        nodes.append(_node(prefix + f"switch_{k}", "Switch", [src, pred],
                           devices.get(split_input(src)[0], ""), T=dtype))
    return nodes


def _branch_call(prefix: str, side: str, fname: str, inputs: int, device: str):
    """A call of one branch on its side of the Switches (then: output 1, else: output 0),
    after its pivot, to be inlined under ``<prefix>then/`` or ``<prefix>else/``."""
    port, pivot = (":1", "pivot_t") if side == "then" else ("", "pivot_f")
    args = [prefix + f"switch_{k}" + port for k in range(inputs)]
    return _node(prefix + side, fname, args + ["^" + prefix + pivot], device)


def _merges(if_op, prefix: str) -> list:
    """A Merge per output of the branches, the Merge that says a branch ran (its control
    inputs: both branches), and the If's own name: an IdentityN of the merges (a NoOp
    without outputs) after that Merge."""
    device, out_types = if_op.device, list(if_op.attr["Tout"].list.type)
    merges = [_node(prefix + f"merge_{k}", "Merge", [prefix + f"then:{k}", prefix + f"else:{k}"],
                    device, T=dtype, N=2) for k, dtype in enumerate(out_types)]
    executed = _node(prefix + "branch_executed", "Merge",
                     [prefix + "pivot_t", prefix + "pivot_f", "^" + prefix + "then",
                      "^" + prefix + "else"], device, T=BOOL, N=2)
    result = _node(if_op.name, "IdentityN" if out_types else "NoOp",
                   [m.name for m in merges] + ["^" + executed.name], device)
    if out_types:
        result.attr["T"].list.type.extend(out_types)
    return merges + [executed, result]


def _node(name: str, op: str, inputs: list[str], device: str, **attrs):
    """A NodeDef; ``attrs``: name -> a type (int) or an int (``N``)."""
    from tensorflow.core.framework import node_def_pb2
    node = node_def_pb2.NodeDef(name=name, op=op, device=device, input=inputs)
    for key, value in attrs.items():
        if key == "N":
            node.attr[key].i = value
        else:
            node.attr[key].type = value
    return node


def body_graph_def(fdef, library: dict):
    """``(graph_def, flat_names)`` of a function body; ``flat_names`` maps "node:arg:i" to
    "node:j". TF looks nested functions up in the default graph, so the library goes there."""
    from tensorflow.core.framework import graph_pb2
    from tensorflow.python.framework import importer, ops
    from tensorflow.python.framework.function_def_to_graph import function_def_to_graph_def
    holder = ops.Graph()
    try:
        with holder.as_default():
            lib = graph_pb2.GraphDef()
            lib.library.function.extend(library.values())
            importer.import_graph_def(lib, name="")
            body, flat_names = function_def_to_graph_def(fdef)
    except Exception as e:  # TF raises many kinds here; the message names the function
        raise GraphError(f"cannot read the body of function {fdef.signature.name}: "
                         f"{' '.join(str(e).split())[:200]}") from None
    body.library.function.extend(library.values())
    return body, flat_names


def _expand_call(call, fdef, taken: set[str], body_and_names) -> list:
    """The nodes that replace ``call``; ``body_and_names`` is body_graph_def(fdef, ...)."""
    from tensorflow.core.framework import attr_value_pb2, node_def_pb2
    body, flat_names = body_and_names
    prefix = call.name + "/"
    while any(prefix + n.name in taken for n in body.node):
        prefix = prefix[:-1] + "_inlined/"
    data_inputs = [i for i in call.input if not i.startswith("^")]
    control_inputs = [i for i in call.input if i.startswith("^")]
    args = {a.name: (k, a.type) for k, a in enumerate(fdef.signature.input_arg)}
    if len(data_inputs) != len(args):
        raise GraphError(f"op {call.name} passes {len(data_inputs)} inputs to "
                         f"{fdef.signature.name}, which takes {len(args)}")

    def rename(inp: str) -> str:
        op, port, is_control = split_input(inp)
        return ("^" if is_control else "") + prefix + op + ("" if port is None else ":" + port)

    body_names = {b.name for b in body.node}
    nodes = []
    for b in body.node:
        n = node_def_pb2.NodeDef()
        if b.op == "Placeholder" and b.name in args:
            k, dtype = args[b.name]
            n.name, n.op = prefix + b.name, "Identity"
            n.input.append(data_inputs[k])
            n.input.extend(control_inputs)
            n.attr["T"].type = dtype
        else:
            n.CopyFrom(b)
            n.name = prefix + b.name
            del n.input[:]
            n.input.extend(rename(i) for i in b.input)
            _rename_colocation(n, prefix, body_names)
            if not b.input:
                n.input.extend(control_inputs)
        nodes.append(n)
        taken.add(n.name)
    result = node_def_pb2.NodeDef(name=call.name, device=call.device)
    outputs = list(fdef.signature.output_arg)
    if outputs:
        result.op = "IdentityN"
        result.input.extend(rename(flat_names[fdef.ret[o.name]]) for o in outputs)
        result.attr["T"].CopyFrom(attr_value_pb2.AttrValue(
            list=attr_value_pb2.AttrValue.ListValue(type=[o.type for o in outputs])))
    else:
        result.op = "NoOp"
    result.input.extend("^" + prefix + name for name in fdef.control_ret.values())
    nodes.append(result)
    return nodes


def _rename_colocation(node, prefix: str, body_names: set[str]) -> None:
    """A body's ``_class: loc:@x`` names a node of the same body: it takes the body's prefix."""
    if "_class" not in node.attr:
        return
    entries = node.attr["_class"].list.s
    for k, entry in enumerate(entries):
        target = entry.decode(errors="replace")
        if target.startswith("loc:@") and target[5:] in body_names:
            entries[k] = ("loc:@" + prefix + target[5:]).encode()
