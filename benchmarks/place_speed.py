"""Wall time of `gplace place` on a ~10,000-op graph with --finetune 300 (goal: under a minute).

    .venv/bin/python benchmarks/place_speed.py [MODEL] [--finetune 300] [--profile 25]

Default model: the corpus's Keras InceptionV3 training step at batch 32 (11,725 ops). Prints
the phases: import (TensorFlow already loaded, no OpGraph cache), heuristics + problem set-up
+ fine-tuning, export; ``--profile N`` adds the N gplace functions with the most cumulative
time in the placement (cProfile), to say what the remaining time is spent on.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default=str(ROOT / "datasets/corpus/inception_v3_b32.pb"))
    parser.add_argument("--finetune", type=int, default=300)
    parser.add_argument("--cluster", default="post-4gpu")
    parser.add_argument("--profile", type=int, default=0, metavar="N")
    args = parser.parse_args()
    from gplace.tfimport import tensorflow
    tensorflow()
    from gplace.importer import load_graph
    from gplace.place import place
    t0 = time.perf_counter()
    graph = load_graph(args.model)  # the import itself: gplace.load_graph reads the cache
    t_import = time.perf_counter() - t0
    profiler = cProfile.Profile() if args.profile else None
    if profiler:
        profiler.enable()
    t0 = time.perf_counter()
    result = place(graph, cluster=args.cluster, finetune=args.finetune, progress=False)
    t_place = time.perf_counter() - t0
    if profiler:
        profiler.disable()
    t0 = time.perf_counter()
    result.export(tempfile.mkdtemp())
    t_export = time.perf_counter() - t0
    s = result.summary
    print(f"{s.graph}: {s.ops:,} ops, {s.units} units, cluster {s.cluster}")
    print(f"import {t_import:.1f} s; place (heuristics + zero-shot + {s.samples} fine-tuning "
          f"samples) {t_place:.1f} s; export {t_export:.1f} s; total {t_import + t_place + t_export:.1f} s")
    print(f"step time {s.step_time_s * 1e3:.2f} ms (simulated), zero-shot "
          f"{s.zero_shot_step_time_s * 1e3:.2f} ms, best heuristic {s.best_heuristic.name} "
          f"{s.best_heuristic.step_time_s * 1e3:.2f} ms, single device "
          f"{s.single_device_s * 1e3:.2f} ms; chosen: {s.chosen}")
    if profiler:
        print(f"the placement's {args.profile} gplace functions with the most cumulative time:")
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(r"gplace/", args.profile)

if __name__ == "__main__":
    main()
