"""Keeps numba's on-disk cache of compiled code from going stale: the simulator's kernels here,
the learned list scheduler's (gplace.gnn.decision, dispatch, schedule) by the same rule.

The kernels are compiled with ``cache=True``: the first call on a fresh install compiles them
(tens of seconds) and writes the machine code beside the sources, in ``__pycache__`` (or, where
the package is not writable, in numba's user-wide cache directory; ``NUMBA_CACHE_DIR`` picks
another); later processes load it in well under a second. But numba keys each cached function
by its own file's timestamp only, not by the files of the functions it calls: after an edit to
``loop.py`` alone, ``fast.py``'s cached batch function would keep running the old event loop
(and, once the scratch layout changed, crash). ``invalidate_stale`` drops this package's cache
files whenever the kernel sources change, in every place numba may keep them (``cache_dirs``).
A set of kernels (:class:`Kernels`) names its package folder, every source file whose code its
compiled functions contain (other folders' too) and its stamp; ``SIM`` is the simulator's.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path
from typing import NamedTuple

_HERE = Path(__file__).resolve().parent
KERNEL_SOURCES = ("arrays.py", "heap.py", "loop.py", "memory.py", "fast.py")


class Kernels(NamedTuple):
    """One package's numba-cached functions: numba caches them per folder."""

    folder: Path                # the package folder (its ``__pycache__``, its cache subpath)
    sources: tuple[Path, ...]   # every file whose code the cached functions contain
    stamp: str                  # the digest's file name in each cache folder


SIM = Kernels(_HERE, tuple(_HERE / name for name in KERNEL_SOURCES), "gplace-sim-kernels.sha256")


def sources_digest(kernels: Kernels = SIM) -> str:
    h = hashlib.sha256()
    for path in kernels.sources:
        h.update(path.read_bytes())
    return h.hexdigest()


class CacheDirs(NamedTuple):
    """Where numba may cache this package's kernels. numba names the last two by the sources'
    folder (``numba.core.caching``'s locators); None where they do not apply."""

    in_tree: Path              # ``__pycache__`` beside the sources
    given: Path | None         # under ``NUMBA_CACHE_DIR``, when that is set
    user_wide: Path | None     # numba's user-wide cache (a read-only package)


def locate(kernels: Kernels = SIM) -> CacheDirs:
    in_tree = kernels.folder / "__pycache__"
    try:
        from numba.core import config
        from numba.core.caching import _CacheLocator
        from numba.misc.appdirs import AppDirs
    except ImportError:  # another numba: the in-tree folder at least
        return CacheDirs(in_tree, None, None)
    sub = _CacheLocator.get_suitable_cache_subpath(str(kernels.sources[0]))  # by its folder
    given = Path(config.CACHE_DIR) / sub if config.CACHE_DIR else None
    return CacheDirs(in_tree, given,
                     Path(AppDirs(appname="numba", appauthor=False).user_cache_dir) / sub)


def cache_dirs(kernels: Kernels = SIM) -> list[Path]:
    """The folders of ``locate`` that apply."""
    return [d for d in locate(kernels) if d is not None]


def invalidate_all(kernels: Kernels = SIM) -> None:
    """``invalidate_stale`` beside the sources and under ``NUMBA_CACHE_DIR`` (stamped before
    numba writes there), and in the user-wide folder if it exists."""
    dirs = locate(kernels)
    for d in (dirs.in_tree, dirs.given):
        if d is not None:
            invalidate_stale(d, kernels)
    if dirs.user_wide is not None and dirs.user_wide.is_dir():
        invalidate_stale(dirs.user_wide, kernels)


def invalidate_stale(cache_dir: Path = _HERE / "__pycache__", kernels: Kernels = SIM) -> bool:
    """Deletes the numba cache files (``*.nbi``, ``*.nbc``) in ``cache_dir`` if the kernel
    sources changed since they were written; returns whether it did. Never raises: a cache
    that cannot be cleaned is recompiled by numba or left to it."""
    stamp = cache_dir / kernels.stamp
    try:
        digest = sources_digest(kernels)
        if stamp.is_file() and stamp.read_text() == digest:
            return False
        for f in list(cache_dir.glob("*.nbi")) + list(cache_dir.glob("*.nbc")):
            f.unlink(missing_ok=True)
        cache_dir.mkdir(parents=True, exist_ok=True)
        stamp.write_text(digest)
        return True
    except OSError:
        return False


def is_cold(dirs: CacheDirs | None = None) -> bool:
    """No compiled batch kernel where numba will look first (``NUMBA_CACHE_DIR``'s folder
    when set, else beside the sources if writable, else the user-wide one): the first
    simulation compiles."""
    dirs = dirs or locate()
    writable = os.access(dirs.in_tree if dirs.in_tree.is_dir() else _HERE, os.W_OK)
    use = dirs.given or (dirs.in_tree if writable or dirs.user_wide is None else dirs.user_wide)
    return not (use.is_dir() and any(use.glob("fast._batch-*.nbi")))


def notice_if_cold(stream=None) -> None:
    """One line on a terminal's stderr before a cold first simulation, so that the wait is
    not a surprise; nothing when stderr is a pipe or file (logs, tests) or the cache is warm."""
    stream = stream or sys.stderr
    if stream.isatty() and is_cold():
        print("gplace: compiling the simulator (first use on this install, about 40 s; "
              "cached afterwards)", file=stream, flush=True)
