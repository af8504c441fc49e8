"""Build, describe and (optionally) profile several corpus graphs in one process; run by
``datasets.build`` for the generated families, a chunk of graphs per process (TensorFlow's
import costs ~10 s here, more than most generated graphs take to build).

    python -m datasets.genworker OUT_DIR [--profile] NAME ...

Per graph: the ``.pb`` (rebuilt when missing or when its recipe hash changed), the
``.stats.json`` sidecar (datasets.graphstats; the importer validates the graph) and, with
``--profile``, the measured ``.profile.json.gz``. One JSON line per graph, printed when it is
done, so that a chunk cut short by its timeout keeps what it finished.
"""

from __future__ import annotations

import os

os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import gc  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from datasets import graphstats  # noqa: E402
from datasets.registry import GRAPHS, GraphSpec  # noqa: E402
from datasets.worker import SEED, build_graph, graph_path, load_graph_def, profile_path  # noqa: E402

# Generated graphs are profiled with fewer untraced steps than the hand-written ones (the
# traced steps, the measurement, stay at 5): more graphs measured in the same budget.
GEN_STEPS = {"warmup_steps": 1, "traced_steps": 5, "timed_steps": 2}


def is_built(spec: GraphSpec, out: Path) -> bool:
    """The .pb and its stats exist, and were made from this recipe."""
    stats = graphstats.read(graph_path(out, spec.name))
    return (graph_path(out, spec.name).exists() and stats is not None
            and stats.get("recipe_hash") == spec.recipe_hash)


def ensure_built(spec: GraphSpec, out: Path) -> dict:
    pb = graph_path(out, spec.name)
    if not is_built(spec, out):
        if spec.generator or not pb.exists():
            build_graph(spec, pb)
        return graphstats.write(pb, spec.recipe_hash)
    return graphstats.read(pb)


def ensure_profiled(spec: GraphSpec, out: Path) -> float | None:
    from gplace.profiler import ProfileConfig, profile_graph
    ppath = profile_path(out, spec.name)
    if not ppath.exists():
        steps = GEN_STEPS if spec.generator else dict(
            warmup_steps=spec.warmup_steps, traced_steps=spec.traced_steps,
            timed_steps=spec.timed_steps)
        prof = profile_graph(load_graph_def(graph_path(out, spec.name)), spec.name,
                             cfg=ProfileConfig(**steps))
        prof.meta.update(family=spec.family, op_set=spec.op_set, builder=spec.builder,
                         kwargs=spec.kwargs, seed=SEED, recipe_hash=spec.recipe_hash)
        prof.save(ppath)
        os.chmod(ppath, 0o644)
    from gplace.profile import CostProfile
    return CostProfile.load(ppath).step_time_s


def run_one(spec: GraphSpec, out: Path, profile: bool) -> dict:
    t0 = time.time()
    stats = ensure_built(spec, out)
    result = {"name": spec.name, "ops": stats["ops"], "build_s": round(time.time() - t0, 1)}
    if profile:
        result["step_time_s"] = ensure_profiled(spec, out)
    result["total_s"] = round(time.time() - t0, 1)
    return result


def main(argv: list[str]) -> int:
    out, profile = Path(argv[0]), "--profile" in argv
    for name in [a for a in argv[1:] if not a.startswith("--")]:
        try:
            result = run_one(GRAPHS[name], out, profile)
        except Exception as e:  # one bad recipe must not stop the chunk; build reports it
            result = {"name": name, "error": f"{type(e).__name__}: {str(e)[:300]}"}
        print(json.dumps(result), flush=True)
        _release()
    return 0


def _release():
    """Frees the previous graph's Keras state and Python objects before the next one."""
    try:
        import keras
        keras.backend.clear_session()
    except Exception:  # noqa: BLE001 - best effort; a fresh process follows every chunk anyway
        pass
    gc.collect()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
