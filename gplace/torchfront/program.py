"""Reading a ``torch.export.save``-d program (``.pt2``) and refusing what it cannot hold.

``torch.export.load`` runs code in three ways: it unpickles (weights or constants saved with
``use_pickle``, opaque objects, and a torch artifact that fails the ``weights_only=True`` load
is read again with ``weights_only=False``: torch/_export/serde/serialize.py,
``deserialize_torch_artifact``); it opens an AOTInductor shared library stored in the archive;
and it evaluates every symbolic size's ``expr_str`` of the program JSON with
``sympy.sympify``, which runs Python. So before calling it, :func:`check_archive` opens the zip
and refuses (unless ``trust=True``):

- a member a program of tensors does not hold (:data:`MEMBERS`), a name twice (zip readers
  disagree on which copy wins), or more than one top folder;
- a config entry that is not raw weight or tensor bytes;
- a ``.pt`` member that ``torch.load(weights_only=True)`` rejects;
- an ``expr_str`` that is not arithmetic over size symbols (``s0``, ``u1``) and the size
  functions torch writes (:func:`_check_exprs`).

What is left for ``torch.export.load`` to read is JSON whose expressions are arithmetic, raw
tensor bytes and weights-only loads, none of which runs code.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import re
import zipfile
from pathlib import Path

from gplace.errors import GraphError

PT2_SUFFIX = ".pt2"
TRUST_HINT = ("pass trust=True (CLI: --trust-pt2) only for a file you made or trust: "
              "torch.export.load unpickles it, and unpickling can run any code")


# What torch.export.save writes for a program of tensors, below the archive's top folder.
MEMBERS = re.compile(r"models/[^/]+\.json|data/weights/(weight_[0-9]+|[^/]+_config\.json)"
                     r"|data/constants/(tensor_[0-9]+|[^/]+_config\.json)"
                     r"|data/sample_inputs/[^/]+\.pt|archive_format|archive_version"
                     r"|byteorder|\.data/version|\.data/serialization_id|extra/.+|.*/")
RAW_ENTRY = re.compile(r"(weight|tensor)_[0-9]+")


def check_archive(path: Path) -> None:
    """GraphError if ``path`` is not a .pt2 archive, or holds something that unpickles."""
    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as e:
        raise GraphError(f"{path}: not a torch.export archive ({e})") from None
    with archive:
        names = archive.namelist()
        if not any(n.endswith("models/model.json") for n in names):
            old = any(n.endswith("serialized_exported_program.json") for n in names)
            raise GraphError(f"{path}: " + (
                "an archive of an older torch.export format; save it again with this torch"
                if old else "a zip file, but not one torch.export.save wrote (no "
                "models/model.json inside)"))
        if len({n.lower() for n in names}) < len(names):
            raise GraphError(f"{path}: names a member twice (zip readers disagree on which "
                             f"copy counts); {TRUST_HINT}")
        if len({n.split("/", 1)[0] for n in names if "/" in n}) > 1 or \
                any("/" not in n for n in names):
            raise GraphError(f"{path}: members outside one top folder, which torch.export.save "
                             f"does not write; {TRUST_HINT}")
        for name in names:
            inner = name.split("/", 1)[1] if "/" in name else name
            if inner and not MEMBERS.fullmatch(inner):  # "" is the top folder's own entry
                raise GraphError(f"{path}: holds {name[:120]!r}, which a program of tensors "
                                 f"does not (compiled code or pickled objects); {TRUST_HINT}")
            if name.endswith("_config.json"):
                _check_config(path, name, archive.read(name))
            elif "/models/" in name and name.endswith(".json"):
                _check_exprs(path, name, archive.read(name))
            elif name.endswith(".pt"):
                _check_weights_only(path, name, archive.read(name))


def _check_config(path: Path, name: str, data: bytes) -> None:
    try:
        config = json.loads(data).get("config", {})
    except (ValueError, AttributeError):
        raise GraphError(f"{path}: {name} is not JSON") from None
    for fqn, entry in config.items():
        if not isinstance(entry, dict):
            continue
        if entry.get("use_pickle") or not RAW_ENTRY.fullmatch(str(entry.get("path_name", ""))):
            raise GraphError(f"{path}: {fqn!r} is stored pickled or as an object, not as raw "
                             f"tensor bytes; {TRUST_HINT}")


_EXPR = re.compile(r"[A-Za-z0-9_+\-*/%()<>=!,.'\s]*")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SYMBOL = re.compile(r"[a-z]{1,3}[0-9]+")
# sympy's names torch writes into size expressions, besides torch.utils._sympy.functions
_SYMPY_NAMES = {"Max", "Min", "Eq", "Ne", "Lt", "Le", "Gt", "Ge", "And", "Or", "Not", "Xor",
                "floor", "ceiling", "Abs", "sqrt", "Integer", "Float", "Rational", "Piecewise",
                "ITE", "true", "false", "True", "False", "oo", "zoo", "nan", "pi", "E",
                "Symbol", "positive", "negative", "nonnegative", "nonpositive", "integer",
                "real", "finite", "zero", "even", "odd",  # Symbol('s0', positive=True, ...)
                "LessThan", "StrictLessThan", "GreaterThan", "StrictGreaterThan", "Equality",
                "Unequality", "Add", "Mul", "Pow", "Mod", "ExprCondPair", "BooleanTrue",
                "BooleanFalse", "NegativeOne", "One", "Zero", "Half", "Infinity",
                "NegativeInfinity"}  # srepr forms


def _check_exprs(path: Path, name: str, data: bytes) -> None:
    """Every ``expr_str`` of the program JSON is arithmetic over size symbols and known
    function names: torch.export.load hands it to ``sympy.sympify``, which evaluates Python."""
    try:
        program = json.loads(data)
    except ValueError:
        raise GraphError(f"{path}: {name} is not JSON") from None
    from torch.utils._sympy import functions as size_functions
    known = _SYMPY_NAMES | set(getattr(size_functions, "__all__", ()))
    stack = [program]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                if key == "expr_str" and not _arithmetic(value, known):
                    raise GraphError(f"{path}: a size expression in {name} is not arithmetic "
                                     f"({str(value)[:60]!r}); {TRUST_HINT}")
                stack.append(value)
        elif isinstance(item, list):
            stack.extend(item)


def _arithmetic(expr, known: set) -> bool:
    if not isinstance(expr, str) or not _EXPR.fullmatch(expr) or "__" in expr:
        return False
    return all(_SYMBOL.fullmatch(w) or w in known for w in _WORD.findall(expr))


def _check_weights_only(path: Path, name: str, data: bytes) -> None:
    import torch
    if not data:
        return
    try:
        torch.load(io.BytesIO(data), weights_only=True)
    except Exception as e:  # noqa: BLE001 - any refusal of the safe loader is a refusal here
        raise GraphError(f"{path}: {name} holds objects beyond tensors ({type(e).__name__}); "
                         f"{TRUST_HINT}") from None


def load_program(path: str | Path, trust: bool = False):
    """The ExportedProgram saved at ``path``, checked first unless ``trust``."""
    import torch
    path = Path(path)
    if not path.is_file():
        raise GraphError(f"{path}: no such file" if not path.exists() else
                         f"{path}: not a regular file")
    if not trust:
        check_archive(path)
    hidden: list[logging.LogRecord] = []
    try:
        with _quiet_torch_export(hidden):
            return torch.export.load(path)
    except Exception as e:  # noqa: BLE001 - torch raises many types for a bad archive
        raise GraphError(f"{path}: torch.export.load failed: {_why(e, hidden)}") from None


@contextlib.contextmanager
def _quiet_torch_export(records: list):
    """torch.export.load logs a traceback before raising; the user gets gplace's one line,
    and ``records`` the log records, where the cause may be (_why)."""
    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)
    loggers = [logging.getLogger(n) for n in ("torch.export", "torch._export")]
    saved = [(lg.level, lg.propagate, lg.handlers) for lg in loggers]
    keep = Keep(logging.WARNING)
    for lg in loggers:  # torch sets its own handlers on these loggers: only ours for now
        lg.setLevel(logging.WARNING)
        lg.propagate = False
        lg.handlers = [keep]
    try:
        yield
    finally:
        for lg, (level, propagate, handlers) in zip(loggers, saved):
            lg.handlers = handlers
            lg.setLevel(level)
            lg.propagate = propagate


_UNRESOLVED = re.compile(r"failed to resolve (torch\.ops\.[\w.]+?)(\.default)? to an operator")


def _why(error: BaseException, records: list) -> str:
    """The cause of a failed load: torch.export.load logs the deserializer's error and raises
    "check the warnings above"; the innermost logged exception says what went wrong (a custom
    op not registered in this process, by name)."""
    for record in records:
        cause = record.exc_info[1] if record.exc_info else None
        while cause is not None and (cause.__cause__ or cause.__context__) is not None:
            cause = cause.__cause__ or cause.__context__
        if cause is None:
            continue
        unresolved = _UNRESOLVED.search(str(cause))
        if unresolved:
            return (f"it calls {unresolved.group(1)}, a custom op this process has not "
                    "registered; import the library that defines it and place the program "
                    "from Python (gplace.load_graph)")
        return one_line(cause)
    return one_line(error)


def one_line(error: BaseException, limit: int = 200) -> str:
    """The first line of an exception's message, with its type, cut to ``limit`` characters."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    text = f"{type(error).__name__}: {text}" if text else type(error).__name__
    return text if len(text) <= limit else text[:limit - 3] + "..."
