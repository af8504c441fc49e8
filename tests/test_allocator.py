"""The command's allocator settings (gplace.allocator): freed blocks stay mapped, so a loop that
allocates and frees the same large arrays stops faulting their pages in."""

from __future__ import annotations

import subprocess
import sys

import pytest

LOOP = """
import resource, sys
import numpy as np
from gplace.allocator import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    a = np.ones(6_000_000)  # 48 MB, as fine-tuning's largest blocks: above glibc's
    del a                   # largest automatic mmap threshold (32 MB), so mapped each time
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", LOOP, mode], capture_output=True, text=True,
                         check=True)
    return int(out.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_freed_blocks_are_reused_without_page_faults():
    default, kept = _faults("default"), _faults("keep")
    # default: each block is mapped afresh and faulted in (9,500 faults here, more without
    # transparent huge pages); kept: the first block's pages serve the others (~400)
    assert kept * 4 < default
