"""Reading a ``torch.export.save``-d program (``.pt2``) and refusing what it cannot hold.

``torch.export.load`` unpickles: weights or constants saved with ``use_pickle`` are read with
``torch.load(weights_only=False)`` or ``pickle.loads``, and a torch artifact that fails the
``weights_only=True`` load is read again with ``weights_only=False`` (torch/_export/serde/
serialize.py, ``deserialize_torch_artifact``). Unpickling runs whatever code the file names. So
before calling it, :func:`check_archive` opens the zip and refuses (unless ``trust=True``) a
file with any member a plain program's archive does not hold (:data:`MEMBERS`: an AOTInductor
shared library, which ``torch.export.load`` would open, is one), a config entry that is not a
raw weight or tensor (pickled payloads, torchbind and opaque objects), or a ``.pt`` member that
``torch.load(weights_only=True)`` rejects: what is left for ``torch.export.load`` to read is
JSON, raw tensor bytes and weights-only loads, none of which runs code.
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
                     r"|data/sample_inputs/[^/]+\.pt|extra/[^/]+|archive_format|archive_version"
                     r"|byteorder|\.data/version|\.data/serialization_id|[^/]*/")
RAW_ENTRY = re.compile(r"(weight|tensor)_[0-9]+")


def check_archive(path: Path) -> None:
    """GraphError if ``path`` is not a .pt2 archive, or holds something that unpickles."""
    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as e:
        raise GraphError(f"{path}: not a torch.export archive ({e})") from None
    with archive:
        names = archive.namelist()
        if not any(n.endswith("models/model.json") or n.endswith(
                "serialized_exported_program.json") for n in names):
            raise GraphError(f"{path}: a zip file, but not one torch.export.save wrote (no "
                             f"models/model.json inside)")
        for name in names:
            inner = name.split("/", 1)[1] if "/" in name else name
            if not MEMBERS.fullmatch(inner):
                raise GraphError(f"{path}: holds {name[:120]!r}, which a program of tensors "
                                 f"does not (compiled code or pickled objects); {TRUST_HINT}")
            if name.endswith("_config.json"):
                _check_config(path, name, archive.read(name))
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
    try:
        with _quiet_torch_export():
            return torch.export.load(path)
    except Exception as e:  # noqa: BLE001 - torch raises many types for a bad archive
        raise GraphError(f"{path}: torch.export.load failed: {one_line(e)}") from None


@contextlib.contextmanager
def _quiet_torch_export():
    """torch.export.load logs a traceback before raising; the user gets gplace's one line."""
    loggers = [logging.getLogger(n) for n in ("torch.export", "torch._export")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def one_line(error: BaseException, limit: int = 200) -> str:
    """The first line of an exception's message, with its type, cut to ``limit`` characters."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    text = f"{type(error).__name__}: {text}" if text else type(error).__name__
    return text if len(text) <= limit else text[:limit - 3] + "..."
