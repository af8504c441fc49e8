"""The C allocator's settings for the ``gplace`` command's own process.

glibc's malloc serves a large block (over 128 KB at first, a threshold that then follows the
largest block freed) with its own ``mmap`` and unmaps it on ``free``, and returns the top of
its heap to the system once more than twice that threshold lies free there. Fine-tuning's
forward and backward passes allocate and free the same tensors of 12-48 MB (a 9,400-group
graph's (groups, devices, channels) activations) sixty times: every pass then faults their
pages in again, 650,000 minor page faults for 20 passes on InceptionV3 b32, a fifth of the
passes' time. Serving every block from the heap and keeping its freed memory mapped cuts that
to 70,000 (benchmarks/RESULTS.md) and leaves the peak resident memory where it was: a pass
reuses what the last one freed.

The arithmetic is untouched, so the placements are the same. The command sets this for itself;
a Python program that uses gplace as a library keeps its own allocator settings.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

M_TRIM_THRESHOLD = -1  # mallopt's parameter numbers (malloc.h)
M_MMAP_THRESHOLD = -3
KEEP_BYTES = 1 << 30   # blocks below this come from the heap; free memory above it is returned


def keep_freed_memory() -> bool:
    """Sets glibc's mmap and trim thresholds to ``KEEP_BYTES``; False where the C library is
    not glibc (or refuses), which changes nothing but speed."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl and others: no mallopt
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, KEEP_BYTES)) and bool(mallopt(M_TRIM_THRESHOLD,
                                                                        KEEP_BYTES))
