"""The training step inside a graph file: the ops one run of the step needs.

A file often holds more than the step. TF1 graphs carry the variable initializers
(``tf.compat.v1.global_variables_initializer()``, a NoOp named ``init``) and a Saver's ops;
a SavedModel carries its checkpoint save and restore functions; Keras adds
``VarIsInitializedOp`` checks. None of these runs in a training step, but each is a sink of the
graph, and placing them as if it did would charge every step an initialization (an embedding
table's random fill can cost more than the step itself).

:func:`step_ops` keeps the ops the other sinks need (their inputs, control inputs and
``loc:@`` colocation targets, transitively). A sink that depends on a training update (an
``Apply*``, ``Assign{Add,Sub}`` or ``Scatter*`` op, which no initializer runs) is always the
step's. Otherwise a sink is bookkeeping when it is

- a NoOp named ``init`` or ``init_N`` (in any name scope),
- a checkpoint op or downstream of one (SaveV2, RestoreV2, MergeV2Checkpoints, ...),
- an initialization check or downstream of one (VarIsInitializedOp, IsVariableInitialized)
  and of no placeholder (a loss that reads ``initialized_value()`` reads the batch too),
- a variable's own initializer, ``<variable>/Assign`` with nothing after it,
- a TF1 resource variable's value, ``<variable>/Read/ReadVariableOp`` with nothing after it
  (what ``sess.run(variable)`` fetches, not what the step reads).

A graph whose sinks are all bookkeeping is kept whole.

A SavedModel of TF2 holds each signature as a call of its function, and placing them all would
place a ``train_step`` and a ``serving_default`` together, the forward pass twice.
:func:`choose_signature` picks the one that trains (or the one asked for) and ``step_ops``
keeps the ops its outputs need; the other signatures are left out.
"""

from __future__ import annotations

import re

import numpy as np

from gplace.errors import GraphError
from gplace.importer.functions import called_functions

CHECKPOINT_OPS = frozenset({"SaveV2", "RestoreV2", "MergeV2Checkpoints", "Save", "SaveSlices",
                            "Restore", "RestoreSlice", "ShardedFilename", "ShardedFilespec"})
INIT_CHECK_OPS = frozenset({"VarIsInitializedOp", "IsVariableInitialized"})
VARIABLE_OPS = frozenset({"VarHandleOp", "VariableV2", "Variable", "_VarHandlesOp"})
ASSIGN_OPS = frozenset({"Assign", "AssignVariableOp"})
_INIT_NAME = re.compile(r"(.*/)?init(_[0-9]+)?")
FEEDS = frozenset({"Placeholder", "PlaceholderV2", "PlaceholderWithDefault"})
# what an optimizer step does and an initializer does not (initializers only Assign)
TRAINING_UPDATE = re.compile(r"(Resource)?(Sparse)?Apply[A-Za-z0-9]+|(Resource)?Scatter"
                             r"[A-Za-z]+|Assign(Add|Sub)(VariableOp)?")
MAX_NAMED = 20
OTHER_SIGNATURES = "other signatures"
INIT_SIGNATURE = "__saved_model_init_op"  # tf.saved_model.INIT_OP_SIGNATURE_KEY


def step_ops(nodes, data, ctrl, index: dict[str, int], outputs: list[str] | None = None
             ) -> tuple[np.ndarray, dict[str, int], dict[str, list[str]]]:
    """``(keep, left_out, sinks)``: a bool mask over ``nodes`` (the ops of the step), the
    number of ops left out per kind of bookkeeping sink, and the names of those sinks per kind
    (the first :data:`MAX_NAMED`; every initializer). ``data``/``ctrl``: the edges
    (src, out, dst) / (src, dst) of gplace.importer.inputs.parse_inputs. ``outputs``: the
    ops a chosen signature returns (choose_signature); the step is what they need, and every
    other sink that is not bookkeeping is left out as one of the other signatures."""
    n = len(nodes)
    preds, succs = _edges(nodes, data, ctrl, index)
    ops = [node.op for node in nodes]
    after_checkpoint = _reach([k for k in range(n) if ops[k] in CHECKPOINT_OPS], succs)
    after_check = _reach([k for k in range(n) if ops[k] in INIT_CHECK_OPS], succs)
    after_update = _reach([k for k in range(n) if TRAINING_UPDATE.fullmatch(ops[k])], succs)
    after_feed = _reach([k for k in range(n) if ops[k] in FEEDS], succs)
    sinks = [k for k in range(n) if not succs[k]]
    kind = {}
    for k in sinks:
        name = nodes[k].name
        if after_update[k]:
            continue  # it trains: whatever its name or what it also reads
        if after_checkpoint[k]:
            kind[k] = "checkpoint save/restore"
        elif ops[k] == "NoOp" and _INIT_NAME.fullmatch(name):
            kind[k] = "variable initializers"
        elif after_check[k] and not after_feed[k]:  # a loss reads the batch too
            kind[k] = "initialization checks"
        elif ops[k] in ASSIGN_OPS and name.endswith("/Assign") and \
                ops[index.get(name[:-len("/Assign")], k)] in VARIABLE_OPS:
            kind[k] = "variable initializers"
        elif ops[k] == "ReadVariableOp" and name.endswith("/Read/ReadVariableOp") and \
                ops[index.get(name[:-len("/Read/ReadVariableOp")], k)] in VARIABLE_OPS:
            kind[k] = "variable reads"
    step = [k for k in sinks if k not in kind]
    if outputs is not None:
        chosen = {index[name] for name in outputs}
        kind.update({k: OTHER_SIGNATURES for k in step if k not in chosen})
        step = sorted(chosen)
    if not step:
        return np.ones(n, bool), {}, {}
    named: dict[str, list[str]] = {}
    for k in sorted(kind):  # every initializer: report.html's snippet runs them all
        if len(named.setdefault(kind[k], [])) < MAX_NAMED or kind[k] == "variable initializers":
            named[kind[k]].append(nodes[k].name)
    keep = _reach(step, preds)
    left_out: dict[str, int] = {}
    counted = keep.copy()
    for label in sorted(set(kind.values())):  # each op left out is charged to one kind
        reached = _reach([k for k in kind if kind[k] == label], preds) & ~counted
        left_out[label] = int(reached.sum())
        counted |= reached
    if not counted.all():
        left_out["unused ops"] = int((~counted).sum())
    return keep, left_out, named


def choose_signature(nodes, data, ctrl, index: dict[str, int], library: dict,
                     signatures: dict[str, list[str]], requested: str | None,
                     updating: set[str] | None = None) -> str | None:
    """The signature whose ops make the step: ``requested``, else the one that trains (reaches
    a training update, in the graph or in a function it calls), else the only one there is;
    None where the whole graph is the step (no signatures, or a TF1 graph whose training op
    is outside every signature). SavedModel's own ``__saved_model_init_op`` is bookkeeping, not
    a candidate. A GraphError where the choice is the user's: a signature that is not there,
    or several and not exactly one that trains. ``updating``: updating_functions(library),
    where the caller has it."""
    candidates = {k: v for k, v in signatures.items() if k != INIT_SIGNATURE}
    names = ", ".join(sorted(candidates)[:8]) + (", ..." if len(candidates) > 8 else "")
    for name, outputs in candidates.items():
        missing = [o for o in outputs if o not in index]
        if missing:
            raise GraphError(f"signature {name!r} returns the outputs of op {missing[0]!r}, "
                             "which the graph does not hold")
    if requested is not None:
        if requested not in candidates:
            raise GraphError(f"no signature {requested!r}; " + (
                f"it holds {names}" if candidates else
                "the graph has none (only a SavedModel or MetaGraphDef has signatures)"))
        if not candidates[requested]:
            raise GraphError(f"signature {requested!r} returns no tensor the import can "
                             "follow to the ops that make it")
        return requested
    candidates = {k: v for k, v in candidates.items() if v}  # none returned: not the step
    if not candidates:
        return None
    preds, _ = _edges(nodes, data, ctrl, index)
    updating = updating_functions(library) if updating is None else updating
    trains = [name for name in sorted(candidates) if _trains(
        _reach([index[o] for o in candidates[name]], preds), nodes, library, updating)]
    if len(trains) == 1:
        return trains[0]
    if not trains and _trains(np.ones(len(nodes), bool), nodes, library, updating):
        return None  # TF1: the training op is in the graph, the signatures serve
    if not trains and len(candidates) == 1:
        return next(iter(candidates))
    which = (f"{len(trains)} of them train ({', '.join(trains)})" if trains
             else "none of them trains (no optimizer update: an inference graph?)")
    raise GraphError(f"the SavedModel holds {len(candidates)} signatures ({names}) and "
                     f"{which}; gplace places one step: pass --signature NAME "
                     "(signature=NAME in Python)")


def trains(keep: np.ndarray, nodes, library: dict, updating: set[str] | None = None) -> bool:
    """Whether the ops ``keep`` marks update a variable as an optimizer does (an op of
    :data:`TRAINING_UPDATE`, or a call or functional op whose functions hold one);
    ``updating``: updating_functions(library), where the caller has it."""
    return _trains(keep, nodes, library,
                   updating_functions(library) if updating is None else updating)


def updating_functions(library: dict) -> set[str]:
    """The names of the library functions that hold a training update, directly or in a
    function they call (a While's body, an If's branch, a call)."""
    calls = {name: {c for node in f.node_def for c in called_functions(node, library)}
             for name, f in library.items()}
    updating = {name for name, f in library.items()
                if any(TRAINING_UPDATE.fullmatch(node.op) for node in f.node_def)}
    grew = True
    while grew:
        more = {name for name in calls if name not in updating and calls[name] & updating}
        updating |= more
        grew = bool(more)
    return updating


def _trains(keep, nodes, library: dict, updating: set[str]) -> bool:
    return any(TRAINING_UPDATE.fullmatch(nodes[k].op)
               or any(f in updating for f in called_functions(nodes[k], library))
               for k in np.flatnonzero(keep))


def _edges(nodes, data, ctrl, index) -> tuple[list[list[int]], list[list[int]]]:
    """(predecessors, successors) per op: data and control edges, and a kept op's ``loc:@``
    colocation targets, which it needs in the graph."""
    n = len(nodes)
    preds: list[list[int]] = [[] for _ in range(n)]
    succs: list[list[int]] = [[] for _ in range(n)]
    for edge in data:
        preds[edge[2]].append(edge[0])
        succs[edge[0]].append(edge[2])
    for src, dst in ctrl:
        preds[dst].append(src)
        succs[src].append(dst)
    for k, node in enumerate(nodes):
        if "_class" in node.attr:
            for entry in node.attr["_class"].list.s:
                target = entry.decode(errors="replace")
                if target.startswith("loc:@") and target[5:] in index:
                    preds[k].append(index[target[5:]])
    return preds, succs


def _reach(start: list[int], edges: list[list[int]]) -> np.ndarray:
    seen = np.zeros(len(edges), bool)
    stack = list(start)
    seen[start] = True
    while stack:
        for j in edges[stack.pop()]:
            if not seen[j]:
                seen[j] = True
                stack.append(j)
    return seen


def step_graph_def(graph_def, names):
    """A copy of ``graph_def`` (functions inlined as the importer did) with only the nodes an
    imported step holds, ``names`` (its OpGraph's ops: step_ops' closure, so every input is
    there), and the library functions they may run: what running the step needs, without the
    initializers, checkpoint ops and other signatures beside it."""
    keep = set(names)
    out = type(graph_def)()
    out.versions.CopyFrom(graph_def.versions)
    out.node.extend(n for n in graph_def.node if n.name in keep)
    library = {f.signature.name: f for f in graph_def.library.function}
    gradient = {g.function_name: g.gradient_func for g in graph_def.library.gradient}
    needed: set[str] = set()
    stack = [f for n in out.node for f in called_functions(n, library)]
    while stack:  # what the kept nodes call, what that calls, and their gradients (TF's
        name = stack.pop()  # import wants a gradient entry's function in the library)
        if name in needed or name not in library:
            continue
        needed.add(name)
        stack += [f for n in library[name].node_def for f in called_functions(n, library)]
        stack += [gradient[name]] if name in gradient else []
    out.library.function.extend(f for f in graph_def.library.function
                                if f.signature.name in needed)
    out.library.gradient.extend(g for g in graph_def.library.gradient
                                if g.function_name in needed and g.gradient_func in needed)
    return out
