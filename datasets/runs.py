"""Record how many times each op runs per step in the corpus profiles of graphs with TF1 loops.

    python -m datasets.runs                  # every looped graph whose profile lacks the counts
    python -m datasets.runs --only nmt_2l    # one graph

A profile without ``CostProfile.op_runs`` holds each op's time summed over a loop's iterations
but not the iteration count, which the simulator needs to charge a loop per iteration
(``gplace.cost``). This runs one traced step per graph (``gplace.profiler.count_runs``; counts
do not vary between steps) and writes the counts into the profile, atomically; the measured
times stay as they are. Graphs without TF1 loops run every op once, which is what a profile
without counts says.
"""

from __future__ import annotations

import os

os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from dataclasses import replace  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from datasets.worker import graph_path, load_graph_def, profile_path  # noqa: E402
from gplace.importer import NEXT_ITERATION  # noqa: E402
from gplace.profile import CostProfile  # noqa: E402

CORPUS = Path(__file__).resolve().parent / "corpus"


def has_tf1_loops(graph_def) -> bool:
    return any(n.op in NEXT_ITERATION for n in graph_def.node)


def add_runs(name: str, corpus: Path = CORPUS) -> str:
    """Counts the runs of graph ``name`` and writes them into its profile; returns what it did."""
    from gplace.profiler import count_runs
    path = profile_path(corpus, name)
    if not path.is_file():
        return "no profile (estimated costs): skipped"
    profile = CostProfile.load(path)
    if profile.op_runs is not None:
        return "has run counts"
    graph_def = load_graph_def(graph_path(corpus, name))
    if not has_tf1_loops(graph_def):
        return "no TF1 loops: every op runs once"
    import tensorflow as tf
    runs = count_runs(graph_def)
    counts = np.array([runs.get(n, 0) for n in profile.op_names.tolist()], np.int64)
    meta = {**profile.meta, "op_runs_source": f"one traced step, TensorFlow {tf.__version__}"}
    replace(profile, op_runs=counts, meta=meta).save(path)
    return f"{int((counts > 1).sum())} of {counts.size} ops run more than once, at most {counts.max()}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m datasets.runs", description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="+", metavar="NAME", help="only these graphs")
    ap.add_argument("--corpus", type=Path, default=CORPUS, help="corpus directory")
    args = ap.parse_args(argv)
    names = args.only or sorted(p.name[:-len(".profile.json.gz")]
                                for p in args.corpus.glob("*.profile.json.gz"))
    start = time.time()
    for i, name in enumerate(names, 1):
        if not graph_path(args.corpus, name).is_file():
            print(f"error: {name}: no graph in {args.corpus}", file=sys.stderr)
            return 2
        print(f"[{i}/{len(names)} {time.time() - start:.0f} s] {name}: {add_runs(name, args.corpus)}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
