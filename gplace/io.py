"""Small file helpers: atomic writes, so that an interrupted run never leaves half a file, a
checkpoint reader that says in one line what is wrong with a file, and standard JSON."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Callable, IO


def atomic_write(path: str | os.PathLike, write: Callable[[IO], None], binary: bool = False) -> None:
    """Calls ``write(f)`` on a temporary file beside ``path``, then renames it over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a written file gets the usual mode
    try:
        with os.fdopen(fd, "wb" if binary else "w") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def plain_json(obj, **kwargs) -> str:
    """``json.dumps(obj)`` with every infinite or NaN float written as null: JSON (RFC 8259)
    has no Infinity or NaN, and parsers other than Python's (JSON.parse, serde) refuse them.
    A placement that does not fit in memory has an infinite step time; it reads as null."""
    return json.dumps(_finite(obj), allow_nan=False, **kwargs)


def _finite(obj):
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write(path, lambda f: f.write(text))


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    atomic_write(path, lambda f: f.write(data), binary=True)


def read_checkpoint(path: str | os.PathLike, what: str = "checkpoint"):
    """``torch.load(path, weights_only=True)``, with one line that says what is wrong instead
    of PyTorch's exception: missing, empty, not a PyTorch file (truncated or another format),
    or holding Python objects beyond tensors and plain data (never unpickled)."""
    import pickle
    import zipfile

    from gplace.errors import ConfigError
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{path}: a folder, not a {what} file")
    if not path.is_file():
        shipped = Path(__file__).parent / "checkpoints" / "policy.pt"
        hint = f" (the shipped policy is {shipped})" if "policy" in what else ""
        raise ConfigError(f"{path}: no such {what}{hint}")
    if path.stat().st_size == 0:
        raise ConfigError(f"{path}: the {what} is empty (a run killed while writing it?)")
    if not zipfile.is_zipfile(path):
        raise ConfigError(f"{path}: not a PyTorch {what} (truncated, corrupt or another kind "
                          f"of file)")
    with zipfile.ZipFile(path) as archive:
        if any(n.endswith("/models/model.json") or n == "models/model.json"
               for n in archive.namelist()):
            raise ConfigError(f"{path}: a torch.export program (.pt2), not a {what}")
    import torch
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        raise ConfigError(f"{path}: the {what} holds Python objects besides tensors and plain "
                          f"data; gplace does not load those (weights_only)") from None
    except Exception as e:  # noqa: BLE001 - any failure to parse untrusted bytes is "corrupt"
        detail = " ".join(str(e).split()).split(". ")[0][:160] or type(e).__name__
        raise ConfigError(f"{path}: the {what} is corrupt ({detail})") from None


def write_gzip_json(path: str | os.PathLike, record: dict) -> None:
    """``record`` as gzip-compressed JSON, atomically, byte-reproducible (no gzip timestamp)."""
    import gzip
    import json
    atomic_write_bytes(path, gzip.compress(json.dumps(record).encode(), mtime=0))


MAX_RECORD_BYTES = 1 << 30  # a profile of a million ops is ~100 MiB of JSON


def read_gzip_json(path: str | os.PathLike, what: str, version: int) -> dict:
    """The record written by :func:`write_gzip_json`, checked for ``format_version``
    ``version`` (removed from the record); one-line ConfigError naming ``what`` otherwise."""
    import gzip
    import json
    import zlib

    from gplace.errors import ConfigError
    try:
        with gzip.open(path, "rb") as f:  # a bounded read: a small file may inflate to GBs
            data = f.read(MAX_RECORD_BYTES + 1)
        if len(data) > MAX_RECORD_BYTES:
            raise ConfigError(f"{path}: a {what} larger than {MAX_RECORD_BYTES >> 20} MiB "
                              "uncompressed; not one gplace wrote")
        record = json.loads(data)
    except (OSError, ValueError, EOFError, RecursionError, zlib.error) as e:
        raise ConfigError(f"{path}: not a gplace {what} ({type(e).__name__})") from None
    if not isinstance(record, dict) or record.pop("format_version", None) != version:
        raise ConfigError(f"{path}: {what} format is not version {version}")
    return record


def cached_array(path: str | os.PathLike, compute: Callable[[], "object"],
                 valid: Callable[["object"], bool] | None = None):
    """The numpy array at ``path`` (``.npy``), or ``compute()``'s, then written there
    atomically; an unwritable folder (a read-only corpus) still works, only slower. A file
    that does not load, or whose array ``valid`` refuses (damaged, or another problem's), is
    computed again and replaced."""
    import numpy as np
    try:
        array = np.load(path)
        if valid is None or valid(array):
            return array
    except (OSError, ValueError, EOFError):
        pass
    array = np.asarray(compute())
    try:
        atomic_write(path, lambda f: np.save(f, array), binary=True)
    except OSError:
        pass
    return array
