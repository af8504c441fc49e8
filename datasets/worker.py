"""Build and profile one corpus graph; run by ``datasets.build`` in a fresh process per graph.

    python -m datasets.worker NAME OUT_DIR

Writes ``OUT_DIR/NAME.pb`` (if missing) and ``OUT_DIR/NAME.profile.json.gz`` (if missing), each
atomically, then prints one JSON line with the result. oneDNN fusions are switched off before
TensorFlow is imported so that step_stats names are GraphDef names (see gplace.profiler).
"""

from __future__ import annotations

import os

os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from datasets.registry import GRAPHS, GraphSpec  # noqa: E402
from gplace.io import atomic_write_bytes  # noqa: E402

SEED = 0


def graph_path(out: Path, name: str) -> Path:
    return out / f"{name}.pb"


def profile_path(out: Path, name: str) -> Path:
    return out / f"{name}.profile.json.gz"


def build_graph(spec: GraphSpec, path: Path):
    """The spec's GraphDef, built with fixed seeds (same bytes on every run) and saved."""
    import keras
    import tensorflow as tf
    keras.utils.set_random_seed(SEED)
    if spec.op_set == "classic":
        import tf_keras
        tf_keras.utils.set_random_seed(SEED)
    gd = spec.build()
    atomic_write_bytes(path, gd.SerializeToString(deterministic=True))
    os.chmod(path, 0o644)
    return gd if isinstance(gd, tf.compat.v1.GraphDef) else None


def load_graph_def(path: Path):
    import tensorflow as tf
    gd = tf.compat.v1.GraphDef()
    gd.ParseFromString(path.read_bytes())
    return gd


def run(spec: GraphSpec, out: Path, force: bool = False) -> dict:
    from gplace.profiler import ProfileConfig, profile_graph
    t0 = time.time()
    gpath, ppath = graph_path(out, spec.name), profile_path(out, spec.name)
    if force or not gpath.exists():
        build_graph(spec, gpath)
    gd = load_graph_def(gpath)
    built = time.time() - t0
    if force or not ppath.exists():
        cfg = ProfileConfig(warmup_steps=spec.warmup_steps, traced_steps=spec.traced_steps,
                            timed_steps=spec.timed_steps)
        prof = profile_graph(gd, spec.name, cfg=cfg)
        prof.meta.update(family=spec.family, op_set=spec.op_set, builder=spec.builder,
                         kwargs=spec.kwargs, seed=SEED)
        prof.save(ppath)
        os.chmod(ppath, 0o644)
    from gplace.profile import CostProfile
    prof = CostProfile.load(ppath)
    return {"name": spec.name, "ops": len(gd.node), "step_time_s": prof.step_time_s,
            "coverage": prof.coverage, "step_coverage": prof.meta.get("step_coverage"),
            "op_coverage": prof.meta.get("op_coverage"),
            "build_s": round(built, 1), "total_s": round(time.time() - t0, 1)}


def main(argv: list[str]) -> int:
    name, out = argv[0], Path(argv[1])
    force = "--force" in argv[2:]
    print(json.dumps(run(GRAPHS[name], out, force)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
