"""Compiles the simulator and rollout kernels once, so that the first `gplace place` does not.

    python -m gplace.warmup

numba caches the machine code on disk (:mod:`gplace.sim.jit_cache`); placing the bundled
example runs every kernel `gplace place` uses. It also caches the shipped policy's weights as
numpy arrays (gplace.gnn.infer). ``scripts/setup.sh`` calls this.
"""

from __future__ import annotations

import io
import sys
import time
from pathlib import Path


def main() -> int:
    from gplace.gnn.infer import load_weights
    from gplace.place import place

    example = Path(__file__).resolve().parent / "examples" / "small_resnet.pb"
    start = time.perf_counter()
    # A few fine-tuning samples as well, so that its kernels compile too.
    place(str(example), finetune=8, progress=False, log=io.StringIO())
    load_weights()  # the shipped policy's arrays in the user cache: zero-shot runs need no torch
    print(f"warmup: kernels compiled and cached in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
