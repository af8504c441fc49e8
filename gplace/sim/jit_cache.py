"""Keeps numba's on-disk cache of the simulator's compiled code from going stale.

The kernels are compiled with ``cache=True``: the first call on a fresh install compiles them
(tens of seconds) and writes the machine code beside the sources, in ``__pycache__`` (or, where
the package is not writable, in numba's user-wide cache directory; ``NUMBA_CACHE_DIR`` picks
another); later processes load it in well under a second. But numba keys each cached function
by its own file's timestamp only, not by the files of the functions it calls: after an edit to
``loop.py`` alone, ``fast.py``'s cached batch function would keep running the old event loop.
``invalidate_stale`` drops this package's cache files whenever the kernel sources change.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

_HERE = Path(__file__).resolve().parent
KERNEL_SOURCES = ("arrays.py", "heap.py", "loop.py", "memory.py", "fast.py")


def sources_digest() -> str:
    h = hashlib.sha256()
    for name in KERNEL_SOURCES:
        h.update((_HERE / name).read_bytes())
    return h.hexdigest()


def invalidate_stale(cache_dir: Path = _HERE / "__pycache__") -> bool:
    """Deletes the numba cache files (``*.nbi``, ``*.nbc``) in ``cache_dir`` if the kernel
    sources changed since they were written; returns whether it did. Never raises: a cache
    that cannot be cleaned is recompiled by numba or left to it."""
    stamp = cache_dir / "gplace-sim-kernels.sha256"
    try:
        digest = sources_digest()
        if stamp.is_file() and stamp.read_text() == digest:
            return False
        for f in list(cache_dir.glob("*.nbi")) + list(cache_dir.glob("*.nbc")):
            f.unlink(missing_ok=True)
        cache_dir.mkdir(exist_ok=True)
        stamp.write_text(digest)
        return True
    except OSError:
        return False
