"""Import time of a Keras InceptionV3 training step (batch 32, about 12,000 ops).

    .venv/bin/python benchmarks/import_speed.py [--repeats 5] [MODEL.pb]

Builds the graph with datasets.tfstep (unless a file is given), writes it to a .pb, then times
the import (``gplace.importer.load_graph``: gplace.load_graph without the import cache) of the
file: median and min over the repeats, after one warm-up import
(TensorFlow's own import and first-call costs are excluded and printed apart).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def build_inception(path: Path) -> None:
    import keras
    from datasets.tfstep import keras_classifier_step
    gd = keras_classifier_step(lambda: keras.applications.InceptionV3(weights=None),
                               (299, 299, 3), 1000, 32)
    path.write_bytes(gd.SerializeToString())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", help="a graph file (default: build InceptionV3)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    t0 = time.perf_counter()
    from gplace.tfimport import tensorflow
    tensorflow()
    from gplace.importer import load_graph
    print(f"tensorflow import: {time.perf_counter() - t0:.2f} s (not counted)")
    path = Path(args.model) if args.model else Path(tempfile.mkdtemp()) / "inception_v3_b32.pb"
    if not args.model:
        t0 = time.perf_counter()
        build_inception(path)
        print(f"built {path.name} in {time.perf_counter() - t0:.1f} s")
    t0 = time.perf_counter()
    graph = load_graph(path)  # the import itself: gplace.load_graph would read the cache
    print(f"first import (warm-up): {time.perf_counter() - t0:.2f} s")
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        graph = load_graph(path)
        times.append(time.perf_counter() - t0)
    s = graph.summary()
    print(f"graph: {s['ops']:,} ops, {s['edges']:,} edges, {s['groups']:,} groups, "
          f"{s['flops']:.3g} FLOPs")
    print(f"load_graph: median {statistics.median(times):.2f} s, min {min(times):.2f} s "
          f"over {args.repeats} runs (goal: under 3 s)")


if __name__ == "__main__":
    main()
