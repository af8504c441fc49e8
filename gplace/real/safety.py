"""Refuse to run graphs whose ops are not known to be harmless.

A real measurement executes the user's graph, so an untrusted graph could read or write files,
run code carried in a tensor, or reach the network. :func:`check_safe` runs a graph only when
every op type is on the allowlist (:mod:`gplace.real.allowlist`) or is a call of a function of
the graph's own library; function bodies are checked too, since TF runs them. Anything else is
refused, naming the op and its type, unless the caller passes ``allow_unsafe=True``
(``--allow-unsafe`` on ``gplace place`` and ``gplace calibrate``).

A NodeDef whose op names a library function is a call of that function: TF's
FunctionLibraryDefinition looks the name up among the functions before its op registry. TF
also refuses a library function named like a registered op, but that is one check in one
import path; here a call counts as safe only when the name is not also a registered op off
the allowlist, so that whichever TF resolves, the function or the op, is known to be harmless.
"""

from __future__ import annotations

import re

from gplace.errors import GplaceError
from gplace.real.allowlist import ALLOWED_OPS

# op types whose names say what they touch: the refusal names one of them first
_TELLING = re.compile(r"File|Save|Restore|Write|Read|Py|Rpc|Http|Print|Summary|Record|Snapshot")


class UnsafeOpError(GplaceError):
    """The graph holds an op that is not on the allowlist."""


def _registered(op_type: str) -> bool:
    """Whether TensorFlow has an op of this type (True when TF cannot be imported: assume the
    worst)."""
    try:
        from tensorflow.python.framework import op_def_registry
    except ImportError:
        return True
    return op_def_registry.get(op_type) is not None


def unsafe_ops(graph_def) -> list[tuple[str, str]]:
    """(node name, op type) of every op not on the allowlist, in the graph and its library; a
    call of a library function named like a registered op off the allowlist counts as that op."""
    functions = {fn.signature.name for fn in graph_def.library.function}
    callable_ = {f for f in functions if f in ALLOWED_OPS or not _registered(f)}
    known = lambda op: op in ALLOWED_OPS or op in callable_  # noqa: E731
    found = [(n.name, n.op) for n in graph_def.node if not known(n.op)]
    for fn in graph_def.library.function:
        found += [(f"{fn.signature.name}/{n.name}", n.op) for n in fn.node_def if not known(n.op)]
    return found


def check_safe(graph_def, allow_unsafe: bool = False) -> None:
    """Raises UnsafeOpError naming an op off the allowlist (one whose type says what it touches,
    if any) unless ``allow_unsafe``."""
    found = unsafe_ops(graph_def)
    if found and not allow_unsafe:
        name, op = min(found, key=lambda f: not _TELLING.search(f[1]))  # a writer before AsString
        types = ", ".join(sorted({t for _, t in found}))
        more = f"; {len(found)} such ops in all, of types {types}" if len(found) > 1 else ""
        shadow = (f" (the library function {op} does not count: it shares its name with "
                  f"TensorFlow's op {op}, which may run instead)"
                  if any(f.signature.name == op for f in graph_def.library.function) else "")
        raise UnsafeOpError(f"refusing to run the graph for real: op {name!r} of type {op} is "
                            f"not on gplace's list of ops without side effects "
                            f"(gplace/real/allowlist.py){shadow}{more}; such ops may touch "
                            f"files, run code or reach the network. Pass --allow-unsafe "
                            f"(allow_unsafe=True) if you trust this graph")
