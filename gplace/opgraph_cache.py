"""Imported graphs kept in the user's cache folder, so placing a file again skips its import
(TensorFlow's start-up and shape inference, seconds).

An entry is named by a hash of the file's bytes, how it is read (its suffix, or a SavedModel's
file name), the import options, and the importer's version: IMPORTER_VERSION, the OpGraph file
format, a digest of the importer's own source files and of gplace/real/allowlist.py (which ops
shape inference may evaluate), and the TensorFlow release, so a change to the importer misses
instead of returning a stale graph. A PyTorch step (``.pt2``) is keyed the same way by its
bytes, its optimizer and hyperparameters, ``trust``, a digest of gplace/torchfront's sources and
the torch release; an in-memory ExportedProgram by the bytes torch.export.save writes for it.
The path is not in the key (the same bytes anywhere are the same graph); the
entry's ``source`` and ``name`` are set on reading.

The folder: ``$GPLACE_CACHE_DIR`` when set (``off`` turns the cache off), else the platform's
user cache folder (``$XDG_CACHE_HOME`` or ``~/.cache`` on Linux, ``~/Library/Caches`` on macOS,
``%LOCALAPPDATA%`` on Windows) + ``gplace/opgraphs``. Entries are written atomically
(OpGraph.save); one that cannot be read is imported again and rewritten; a folder that cannot
be written only costs the next run its import again. The folder keeps the MAX_ENTRIES entries
used last (a read touches its entry). Other kinds of cached data live in folders beside it
(:func:`user_cache`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import sys
from pathlib import Path

from gplace.errors import GraphError
from gplace.graph import FORMAT_VERSION, OpGraph

ENV = "GPLACE_CACHE_DIR"
KEY_SCHEME = 1  # bump when the key's description below changes
MAX_ENTRIES = 256  # the least recently used go beyond this (a graph's entry: 50 KB-2 MB)


def cache_folder() -> Path | None:
    """Where entries live; None when the cache is off."""
    given = os.environ.get(ENV)
    if given is not None:
        return None if given.strip().lower() in ("", "off", "0", "none") else Path(given)
    return _user_base() / "opgraphs"


def user_cache(kind: str) -> Path | None:
    """The folder of another kind of cached data (e.g. "policies": a checkpoint's weights as
    numpy arrays, gplace.gnn.infer) beside the OpGraph entries: ``$GPLACE_CACHE_DIR/KIND``, or
    the user cache folder's ``gplace/KIND``; None when the cache is off."""
    folder = cache_folder()
    if folder is None:
        return None
    return folder / kind if os.environ.get(ENV) is not None else _user_base() / kind


def _user_base() -> Path:
    if sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    elif os.name == "nt":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "gplace"


@functools.cache
def importer_version() -> str:
    """What the imported graph depends on besides the file: changes when the importer does
    (once per process: it reads the importer's sources and TensorFlow's metadata)."""
    from importlib import metadata

    import gplace.importer as importer
    import gplace.real.allowlist as allowlist  # which ops shape inference may evaluate
    digest = hashlib.sha256()
    for source in [*sorted(Path(importer.__file__).parent.glob("*.py")), Path(allowlist.__file__)]:
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    try:
        tf = metadata.version("tensorflow")
    except metadata.PackageNotFoundError:
        tf = "none"
    return f"{importer.IMPORTER_VERSION}-{FORMAT_VERSION}-{digest.hexdigest()[:16]}-tf{tf}"


def entry_key(file: Path, data: bytes, options: dict) -> str:
    """The entry name of a graph file's bytes read with ``options``."""
    how = file.name if file.name.startswith("saved_model.") else file.suffix.lower()
    description = json.dumps({"scheme": KEY_SCHEME, "importer": importer_version(), "read": how,
                              "options": options}, sort_keys=True)
    return hashlib.sha256(description.encode() + b"\0" + data).hexdigest()


@functools.cache
def torch_front_version() -> str:
    """What a PyTorch step's OpGraph depends on besides the file and its options: the
    front end's sources and torch's version."""
    from importlib import metadata

    import gplace.torchfront as front
    digest = hashlib.sha256()
    for source in sorted(Path(front.__file__).parent.glob("*.py")):
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    return f"{FORMAT_VERSION}-{digest.hexdigest()[:16]}-torch{metadata.version('torch')}"


def torch_entry_key(file: Path | None, data: bytes, options: dict) -> str:
    """The entry of a .pt2's bytes (``file`` None: an ExportedProgram's, as torch.export.save
    writes them) imported with ``options`` (the optimizer, as placement.json records it, and
    ``trust``: a file imported with --trust-pt2 is checked again without)."""
    from gplace.torchfront.optim import optimizer_config
    described = {"optimizer": optimizer_config(options.get("optimizer")).as_dict(),
                 "trust": bool(options.get("trust")) and file is not None}
    description = json.dumps({"scheme": KEY_SCHEME, "front": torch_front_version(),
                              "read": ".pt2" if file is not None else "ExportedProgram",
                              "options": described}, sort_keys=True)
    return hashlib.sha256(description.encode() + b"\0" + data).hexdigest()


def load_graph(source, unknown_dim: int = 1, name: str | None = None, **options) -> OpGraph:
    """gplace.importer.load_graph, through the cache for a graph file, a PyTorch program's
    included (keyed by its bytes and options: a SavedModel's signature, a program's
    optimizer and trust); an object, or a cache that is off: imported as usual."""
    from gplace import importer
    unknown = sorted(set(options) - {"inline", "whole_graph", "signature",
                                     *importer.TORCH_OPTIONS})
    if unknown:  # before a cached entry could hide it
        raise TypeError(f"load_graph() got an unexpected keyword argument {unknown[0]!r}")
    folder = cache_folder()
    pt2 = isinstance(source, (str, os.PathLike)) and str(source).lower().endswith(".pt2")
    if pt2 and options.get("signature") is not None:  # a cached program would hide it
        raise importer.no_signatures(source, options["signature"])
    if folder is not None and importer.is_torch_program(source):
        return _program(folder, source, name, options)
    if folder is None or (set(options) - {"signature"} and not pt2) \
            or not isinstance(source, (str, os.PathLike)) \
            or str(source).lower().endswith(".npz") \
            or (pt2 and not Path(source).is_file()):
        return importer.load_graph(source, unknown_dim=unknown_dim, name=name, **options)
    if pt2:  # the joint trace takes seconds to tens of seconds: worth keeping
        file = Path(source)
        try:
            data = file.read_bytes()
        except OSError as e:
            raise GraphError(f"{source}: cannot read it ({e.strerror or e})") from None
        entry = folder / f"{torch_entry_key(file, data, options)}.npz"
    else:
        from gplace.importer.reader import read_graph_file
        file, data = read_graph_file(source)  # the checks that need no parsing, errors as usual
        key = entry_key(file, data, _read_options(unknown_dim, options.get("signature")))
        entry = folder / f"{key}.npz"
    graph = _read(entry)
    if graph is None:
        graph = importer.load_graph(source, unknown_dim=unknown_dim, **options)
        _write(entry, graph)
    else:
        graph.meta["import"]["cached"] = str(entry)
        _touch(entry)
    path = Path(source)
    graph.meta["source"] = str(path)
    graph.meta["name"] = name or (path.name if path.is_dir() else path.name.split(".")[0])
    return graph


def _program(folder: Path, program, name: str | None, options: dict) -> OpGraph:
    """An ExportedProgram's OpGraph, through the cache by the bytes torch.export.save writes
    for it (the same program exported again writes the same bytes): tracing its step again
    takes seconds to tens of seconds."""
    from gplace import importer, torchfront
    if options.get("signature") is not None:
        raise importer.no_signatures(program, options["signature"])
    data = torchfront.saved_bytes(program)  # the key, and on a miss what is imported
    entry = folder / f"{torch_entry_key(None, data, options)}.npz"
    graph = _read(entry)
    if graph is None:
        graph = torchfront.load_graph(data, options.get("optimizer"))
        _write(entry, graph)
    else:
        graph.meta["import"]["cached"] = str(entry)
        _touch(entry)
    graph.meta["source"], graph.meta["name"] = "<ExportedProgram>", name or "program"
    return graph


def _read_options(unknown_dim: int, signature: str | None) -> dict:
    """The import options a graph file's entry is keyed by (a signature only where one is
    given: the default import has one key whatever signature it chooses)."""
    return {"unknown_dim": unknown_dim, **({} if signature is None else {"signature": signature})}


def prefetch(source, unknown_dim: int = 1, signature: str | None = None):
    """Starts importing a graph file that is not cached yet in another process, which writes
    its entry, so that TensorFlow's start-up there runs beside the caller's own imports (torch,
    numba) on another core; pass it to :func:`finish` before load_graph. None when there is
    nothing to start: the file is cached, the cache is off, or it is no graph file."""
    folder = cache_folder()
    if (folder is None or not isinstance(source, (str, os.PathLike))
            or str(source).lower().endswith(".pt2")):
        return None
    from gplace.importer.reader import read_graph_file
    try:
        file, data = read_graph_file(source)
    except GraphError:
        return None
    if (folder / f"{entry_key(file, data, _read_options(unknown_dim, signature))}.npz").is_file():
        return None
    import subprocess
    return subprocess.Popen([sys.executable, "-m", "gplace.opgraph_cache", str(source),
                             str(unknown_dim), *([] if signature is None else [signature])],
                            stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def finish(pending) -> None:
    """Waits for a :func:`prefetch`; raises the GraphError the import raised there. Any other
    end (a crash) leaves no entry, and load_graph imports here as usual."""
    out, _ = pending.communicate()
    if pending.returncode == 2 and out.strip():
        raise GraphError(out.strip().splitlines()[-1])  # main prints the message last


def main(argv: list[str]) -> int:
    """``python -m gplace.opgraph_cache PATH [UNKNOWN_DIM [SIGNATURE]]``: imports PATH into
    the cache, with TensorFlow's graph framework alone (gplace.tfimport.use_framework_only)."""
    from gplace.tfimport import use_framework_only
    use_framework_only()
    try:
        load_graph(argv[0], unknown_dim=int(argv[1]) if len(argv) > 1 else 1,
                   **({"signature": argv[2]} if len(argv) > 2 else {}))
    except GraphError as e:
        print(e)
        return 2
    return 0


def _read(entry: Path) -> OpGraph | None:
    if not entry.is_file():
        return None
    try:
        return OpGraph.load(entry).validate()
    except Exception:  # noqa: BLE001 - truncated, empty or foreign: imported again, rewritten
        return None


def _write(entry: Path, graph: OpGraph) -> None:
    try:
        graph.save(entry)
        _prune(entry.parent)
    except OSError:
        pass  # a read-only or full cache folder: the next run imports again


def _touch(entry: Path) -> None:
    try:
        os.utime(entry)
    except OSError:
        pass  # a read-only folder: it is pruned by its write time


ENTRY_NAME = re.compile(r"[0-9a-f]{64}\.npz")


def _prune(folder: Path, keep: int = MAX_ENTRIES) -> None:
    """Removes the entries beyond the ``keep`` most recently used (written or read)."""
    def mtime(p: Path) -> float:
        try:
            return p.stat().st_mtime
        except OSError:
            return 0.0
    # only the entries this cache names (a sha256 each): GPLACE_CACHE_DIR may be a folder
    # that holds the user's own .npz files too
    entries = sorted((p for p in folder.glob("*.npz") if ENTRY_NAME.fullmatch(p.name)),
                     key=mtime, reverse=True)
    for old in entries[keep:]:
        try:
            old.unlink()
        except OSError:
            pass  # gone already: another run pruned it


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
