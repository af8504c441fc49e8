"""Compiles the simulator and rollout kernels once, so that the first `gplace place` does not.

    python -m gplace.warmup

numba caches the machine code on disk (:mod:`gplace.sim.jit_cache`); placing the bundled
example runs every kernel `gplace place` uses. It also caches the shipped policy's weights as
numpy arrays (gplace.gnn.infer). ``scripts/setup.sh`` calls this.
"""

from __future__ import annotations

import io
import sys
import tempfile
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


def load_kernels() -> None:
    """Loads the compiled kernels a zero-shot placement runs (numba's disk cache: the
    simulator's, the heuristics', the rollout's, the per-op trace's) and the policy's cached
    weights, by placing a four-op graph on post-4gpu. `gplace place` calls it while its graph
    imports in another process, where it would otherwise wait; the graph goes through
    OpGraph.save and load, so its arrays have the types of a cached graph's, whose kernels
    are the ones loaded."""
    from gplace.errors import GplaceError
    from gplace.graph import OpGraph
    from gplace.place import place
    from gplace.sim import FastSimulator

    tiny = OpGraph.from_lists([1e9, 2e9, 1e9, 5e8], [1 << 20] * 4,
                              edges=[(0, 1), (1, 2), (0, 3), (3, 2)], name="warm-up")
    with tempfile.TemporaryDirectory() as folder:
        tiny.save(Path(folder) / "tiny.npz")
        tiny = OpGraph.load(Path(folder) / "tiny.npz")
    try:
        result = place(tiny, cluster="post-4gpu", progress=False, log=io.StringIO())
        FastSimulator(result.problem).run(result.unit_placement)
    except GplaceError:
        pass  # e.g. no shipped checkpoint: the placement itself will say so


if __name__ == "__main__":
    sys.exit(main())
