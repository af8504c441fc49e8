"""Refuse to run graphs whose ops are not known to be harmless.

A real measurement executes the user's graph, so an untrusted graph could read or write files,
run code carried in a tensor, or reach the network. :func:`check_safe` runs a graph only when
every op type is on the allowlist (:mod:`gplace.real.allowlist`) or is a call of a function of
the graph's own library; function bodies are checked too, since TF runs them. Anything else is
refused, naming the op and its type, unless the caller passes ``allow_unsafe=True``
(``--allow-unsafe`` on ``gplace place`` and ``gplace calibrate``).
"""

from __future__ import annotations

from gplace.errors import GplaceError
from gplace.real.allowlist import ALLOWED_OPS


class UnsafeOpError(GplaceError):
    """The graph holds an op that is not on the allowlist."""


def unsafe_ops(graph_def) -> list[tuple[str, str]]:
    """(node name, op type) of every op not on the allowlist, in the graph and its library."""
    functions = {fn.signature.name for fn in graph_def.library.function}
    known = lambda op: op in ALLOWED_OPS or op in functions  # noqa: E731
    found = [(n.name, n.op) for n in graph_def.node if not known(n.op)]
    for fn in graph_def.library.function:
        found += [(f"{fn.signature.name}/{n.name}", n.op) for n in fn.node_def if not known(n.op)]
    return found


def check_safe(graph_def, allow_unsafe: bool = False) -> None:
    """Raises UnsafeOpError naming the first op off the allowlist unless ``allow_unsafe``."""
    found = unsafe_ops(graph_def)
    if found and not allow_unsafe:
        name, op = found[0]
        types = ", ".join(sorted({t for _, t in found}))
        more = f"; {len(found)} such ops in all, of types {types}" if len(found) > 1 else ""
        raise UnsafeOpError(f"refusing to run the graph for real: op {name!r} of type {op} is "
                            f"not on gplace's list of ops without side effects "
                            f"(gplace/real/allowlist.py){more}; such ops may touch files, run "
                            f"code or reach the network. Pass --allow-unsafe "
                            f"(allow_unsafe=True) if you trust this graph")
