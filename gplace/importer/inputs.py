"""Op names and the edges their inputs name, checked the way TensorFlow checks them, and how
many ops a graph may hold.

An input is ``op`` (output 0), ``op:k`` (output k) or ``^op`` (a control edge). ``k`` must be
a decimal number below the number of outputs the op's definition gives it (its OpDef with the
node's attrs, or the signature of the library function it calls); for an op TensorFlow does
not know, below :data:`MAX_OUTPUTS`. Every output array of the OpGraph is sized from these
ports, so an unchecked ``c:100000000`` in a 200-byte file would allocate gigabytes.
"""

from __future__ import annotations

import re

from gplace.errors import GraphError

MAX_OPS = 1_000_000  # large training graphs hold 10**4-10**5 ops; importing takes ~0.1 ms each
MAX_OUTPUTS = 4096  # outputs of an op of unknown type; TF's own ops declare theirs
# TensorFlow's node names (graph_constructor.cc, IsValidNodeName): letters, digits, '.', '_'
# first, then also '-' and '/'; '>' starts a nested scope. '^' and ':' would be read as input
# syntax.
_NAME = re.compile(r"[A-Za-z0-9._][A-Za-z0-9._/\-]*(>[A-Za-z0-9.][A-Za-z0-9._/\-]*)*")
_PORT = re.compile(r"[0-9]{1,10}")


def check_size(ops: int, what: str = "the graph") -> None:
    if ops > MAX_OPS:
        raise GraphError(f"{what} has {ops:,} ops, more than the {MAX_OPS:,} gplace imports")


def index_names(nodes) -> dict[str, int]:
    """Op name -> position; a GraphError for an empty, malformed or repeated name."""
    index: dict[str, int] = {}
    for k, node in enumerate(nodes):
        if not _NAME.fullmatch(node.name):
            raise GraphError(f"op {k} is named {short(node.name)}, which is not a TensorFlow op "
                             f"name (letters, digits and . _ - / only; not empty)")
        if node.name in index:
            raise GraphError(f"two ops are named {short(node.name)}")
        index[node.name] = k
    return index


def parse_inputs(nodes, index: dict[str, int], library: dict):
    """Data edges (src, src_output, dst) and control edges (src, dst)."""
    data, ctrl = [], []
    bounds: dict[int, int] = {}
    for k, node in enumerate(nodes):
        for inp in node.input:
            op, port, is_control = split_input(inp)
            src = index.get(op)
            if src is None:
                raise GraphError(f"op {short(node.name)} has input {short(inp)}, which "
                                 f"names a missing op")
            if is_control:
                ctrl.append((src, k))
                continue
            out = _port(node, inp, port)
            if out > 0:
                if src not in bounds:
                    bounds[src] = declared_outputs(nodes[src], library)
                if out >= bounds[src]:
                    raise GraphError(f"op {short(node.name)} has input {short(inp)}, but op "
                                     f"{short(op)} ({cut(nodes[src].op)}) has "
                                     f"{_outputs(bounds[src])}")
            data.append((src, out, k))
    return data, ctrl


def split_input(name: str) -> tuple[str, str | None, bool]:
    """'^x' -> (x, None, True); 'x:1' -> (x, '1', False); 'x' -> (x, None, False)."""
    if name.startswith("^"):
        return name[1:], None, True
    op, sep, port = name.partition(":")
    return op, (port if sep else None), False


def declared_outputs(node, library: dict) -> int:
    """Outputs the op's definition gives it with the node's attrs; MAX_OUTPUTS if unknown."""
    if node.op in library:
        return len(library[node.op].signature.output_arg)
    from tensorflow.python.framework import op_def_registry
    op_def = op_def_registry.get(node.op)
    if op_def is None:
        return MAX_OUTPUTS
    total = 0
    for arg in op_def.output_arg:
        if arg.number_attr:
            total += _attr(node, op_def, arg.number_attr, lambda v: v.i)
        elif arg.type_list_attr:
            total += _attr(node, op_def, arg.type_list_attr, lambda v: len(v.list.type))
        else:
            total += 1
    return min(total, MAX_OUTPUTS) if total >= 0 else MAX_OUTPUTS


def _attr(node, op_def, key: str, read) -> int:
    """read(the node's attr ``key``), or of the OpDef's default; MAX_OUTPUTS if neither."""
    if key in node.attr:
        return read(node.attr[key])
    for a in op_def.attr:
        if a.name == key and a.HasField("default_value"):
            return read(a.default_value)
    return MAX_OUTPUTS


def _port(node, inp: str, port: str | None) -> int:
    if port is None:
        return 0
    if not _PORT.fullmatch(port):
        raise GraphError(f"op {short(node.name)} has input {short(inp)}: the output after ':' "
                         f"must be a number (0, 1, ...)")
    return int(port)


def _outputs(n: int) -> str:
    if n >= MAX_OUTPUTS:
        return f"at most {MAX_OUTPUTS} outputs here"
    return f"{n} output" + ("" if n == 1 else "s")


def cut(text: str, limit: int = 60) -> str:
    """``text`` cut to ``limit`` characters: a hostile name may be megabytes long."""
    return text if len(text) <= limit else text[:limit] + f"... ({len(text):,} chars)"


def short(text: str, limit: int = 60) -> str:
    """``text`` quoted, cut to ``limit`` characters: a hostile name may be megabytes long."""
    return repr(text) if len(text) <= limit else repr(text[:limit]) + f"... ({len(text):,} chars)"
