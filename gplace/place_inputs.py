"""What ``gplace.place.place`` takes, checked: the cluster (a preset, a YAML, a Cluster or a
dict), the learned placer (a policy file, a ``gplace.load`` placer or a GNNPolicy), whole
numbers, the file whose profile prices the graph; and the torch state a placement leaves as
the caller had it (random state, thread count).
"""

from __future__ import annotations

import copy
import functools
import sys
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from gplace.cluster import Cluster, cluster_from_dict, load_cluster, tf_sees_one_device
from gplace.cost import profile_path_for
from gplace.errors import ConfigError
from gplace.graph import OpGraph

DEFAULT_PRESET = "post-4gpu"
REAL_PRESET = "local-procs"  # --measure real with one device here: processes on its cores


def choose_cluster(cluster: str | Path | Cluster | dict | None,
                   measure: str = "sim") -> tuple[Cluster, str]:
    """The cluster and a sentence saying why it was chosen. A Cluster or a dict (a cluster
    YAML's fields) gets the checks a YAML file gets (gplace.cluster_yaml). With none given:
    the devices TensorFlow sees here if there are two or more, else post-4gpu, or for
    ``measure="real"`` (which runs on this machine) local-procs."""
    if isinstance(cluster, Cluster):  # a YAML's checks of its figures (any device kind)
        record = cluster.summary()
        record["devices"] = [{**d, "kind": "gpu"} for d in record["devices"]]
        cluster_from_dict(record, f"cluster {cluster.name!r}")
        return cluster, f"cluster {cluster.name} (given)"
    if isinstance(cluster, dict):
        checked = cluster_from_dict(cluster, "the cluster given as a dict")
        return checked, f"cluster {checked.name} (given)"
    if cluster:
        return load_cluster(cluster), f"cluster {cluster} (given)"
    local = None if tf_sees_one_device() else load_cluster("local")
    if local is not None and local.num_devices >= 2:
        return local, f"cluster local: the {local.num_devices} devices TensorFlow sees here"
    if measure == "real":
        return load_cluster(REAL_PRESET), (
            f"cluster {REAL_PRESET} (--measure real runs here, and TensorFlow sees only "
            f"{local.num_devices if local else 1} device here: two TF processes on this "
            "machine's cores; pass --cluster (cluster=) to choose)")
    return load_cluster(DEFAULT_PRESET), (
        f"cluster {DEFAULT_PRESET} (a preset: TensorFlow sees only "
        f"{local.num_devices if local else 1} device here; pass --cluster (cluster=) to "
        "choose)")


def keeps_torch_random_state(function):
    """``function`` leaves torch's random state as its caller had it (loading a policy
    initializes a network before its weights are read; fine-tuning seeds torch)."""
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        torch = sys.modules.get("torch")  # not imported yet: the caller has no state to keep
        if torch is None:
            return function(*args, **kwargs)
        with torch.random.fork_rng(devices=[]):
            return function(*args, **kwargs)
    return wrapper


# place()'s keywords for gplace.load_graph
IMPORT_OPTIONS = ("signature", "optimizer", "trust", "unknown_dim")


def label(model) -> str:
    """``model`` as an error names it: a path as given, an object by its kind."""
    from gplace.importer import is_torch_program
    if isinstance(model, OpGraph):
        return f"OpGraph {model.meta.get('name')!r}"
    return "the ExportedProgram" if is_torch_program(model) else str(model)


def model_file(model, graph: OpGraph):
    """The file whose profile prices the graph (cost_model_for): ``model`` itself, but for an
    OpGraph (or one saved as .npz) the first of the .npz and the file it was imported from
    (``meta["source"]``) with a profile beside it; None for an object without one."""
    if not isinstance(model, OpGraph) and not str(model).lower().endswith(".npz"):
        return model
    candidates = ([] if isinstance(model, OpGraph) else [model]) + [graph.meta.get("source")]
    return next((c for c in candidates if isinstance(c, (str, Path))
                 and profile_path_for(c).is_file()), None)


@contextmanager
def one_torch_thread():
    """torch on one thread while the placement runs (the policy's per-unit net is tiny:
    threads only add overhead), the caller's thread count after it; nothing without torch."""
    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None else None
    try:
        if torch is not None:
            torch.set_num_threads(1)
        yield
    finally:
        if threads is not None:
            torch.set_num_threads(threads)


def make_placer(checkpoint, seed: int, finetune: int, measure: str, polish: int | None = None,
            screen: int | None = None):
    """The learned placer: without fine-tuning on the simulator, the policy's numpy forward
    (gplace.gnn.infer, no torch); else the torch policy (GNNPlacer). A GNNPlacer
    ``checkpoint`` (gplace.load) lends its policy and settings, under ``seed``. ``polish`` and
    ``screen``: FinetuneConfig.zero_shot_polish and local_screen (None: the placer's)."""
    from gplace.gnn.config import FinetuneConfig
    given = getattr(checkpoint, "config", None)
    config = given if isinstance(given, FinetuneConfig) else FinetuneConfig()
    if polish is not None:
        config = replace(config, zero_shot_polish=polish)
    if screen is not None:
        config = replace(config, local_screen=screen)
    if checkpoint is None or isinstance(checkpoint, (str, Path)):
        if finetune == 0 and measure == "sim":
            from gplace.gnn.infer import ZeroShotPlacer
            return ZeroShotPlacer(seed, checkpoint, config)
    from gplace.gnn.placer import GNNPlacer
    from gplace.gnn.policy import GNNPolicy
    if isinstance(checkpoint, GNNPlacer):  # a copy under this call's seed and settings
        placer = copy.copy(checkpoint)
        placer.seed, placer.config = seed, config
        return placer
    if isinstance(checkpoint, GNNPolicy):
        return GNNPlacer(seed, policy=checkpoint, config=config)
    if checkpoint is not None and not isinstance(checkpoint, (str, Path)):
        raise ConfigError(f"checkpoint: a policy file, a gplace.load placer or a GNNPolicy, "
                          f"not a {type(checkpoint).__name__}")
    return GNNPlacer(seed, checkpoint, config=config)
