"""Argument checks that run before the heavy imports (TensorFlow, PyTorch take 5-15 s).

A missing model file, an unknown cluster, a seed out of range or an output path that cannot be
written fails in well under a second with one line that names the argument, instead of after
the import or, worse, after all the placement work.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from pathlib import Path

from gplace.errors import ConfigError, GraphError

# Seeds go to numpy and torch. numpy's legacy seeding (np.random.seed, RandomState) takes
# [0, 2**32) and torch.manual_seed less than 2**64: the common range is numpy's.
SEED_LIMIT = 2**32
MIN_FREE_BYTES = 16 << 20  # what `place` writes: a few MB of figures, traces and the graph
MAX_SAMPLES = 10**6  # placements one run measures (--finetune, bench --budget); Post used 2,400
MAX_SCREEN = 1000  # fine-tuning's moves drawn per move measured (--screen)
MAX_BATCH = 10**5    # placements `simulate --random` holds in memory and simulates at once
MAX_SEEDS = 1000     # bench --seeds
MAX_BATCH_BYTES = 1 << 30  # placements and results of one simulated batch


def seed(text: str) -> int:
    """argparse type of ``--seed``: an integer in [0, 2**32)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not 0 <= value < SEED_LIMIT:
        raise argparse.ArgumentTypeError(f"{value} is out of range: a seed is an integer in "
                                         f"[0, 2**32) (numpy's seed range)")
    return value


def count(low: int, high: int, what: str):
    """argparse type of an integer option in [low, high]; ``what`` says what it counts."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not an integer") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is out of range: {what}, from {low:,} "
                                             f"to {high:,}")
        return value
    return parse


def batch_fits(n: int, row_bytes: int, flag: str = "--random") -> None:
    """A batch of ``n`` placements of ``row_bytes`` each (placement and results) fits in
    MAX_BATCH_BYTES; a ConfigError naming the largest that does otherwise."""
    if n * row_bytes > MAX_BATCH_BYTES:
        raise ConfigError(f"{flag} {n:,}: {n * row_bytes / 2**30:.1f} GiB of placements and "
                          f"results for this graph, more than the 1 GiB simulated at once; "
                          f"give at most {MAX_BATCH_BYTES // row_bytes:,}")


def memory_limit(text: str) -> str:
    """argparse type of ``--memory-limit``: 8GB, or gpu0=8GB,gpu1=4GB (the device names are
    checked against the cluster later)."""
    from gplace.cluster import memory_caps
    try:
        memory_caps(text)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def model_path(path: str | os.PathLike) -> Path:
    """A graph file or SavedModel directory that exists, can be read and is not empty (the
    importer's checks that need no TensorFlow); a gplace ``.npz`` need only be a readable file."""
    from gplace.importer.reader import check_exists, read_graph_file
    path = Path(path)
    if str(path).lower().endswith((".npz", ".pt2")):
        check_exists(path)
        if not path.is_file():
            raise GraphError(f"{path}: not a regular file")
        return path
    read_graph_file(path)
    return path


def cluster_name(name: str | None) -> str | None:
    """A preset name or a cluster YAML that loads (``local`` is built later, from TF)."""
    if name and name != "local":
        from gplace.cluster import load_cluster
        load_cluster(name)
    return name


def output_dir(path: str | os.PathLike, flag: str = "--out") -> Path:
    """A folder that is, or can be created, writable, with room for the outputs; checked
    before the work so that a bad path does not cost the result. Creates nothing."""
    if not str(path).strip():
        raise ConfigError(f"{flag} is empty; give a folder")
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{flag} {path}: exists and is not a folder")
    _check_writable(_nearest_existing(path, flag), path, flag)
    return path


def claim_output(path: Path, flag: str = "--out"):
    """Claims the output folder for this run, so that a second run into the same folder is
    refused instead of silently replacing the first one's results. The claim is an abstract
    Unix socket named after the folder's absolute path: the kernel drops it when the process
    ends, however it ends, and it leaves nothing on disk (Linux; elsewhere no claim). Keep the
    returned object for as long as the run writes there."""
    import sys
    if not sys.platform.startswith("linux"):
        return None
    import hashlib
    import socket
    name = "\0gplace-out-" + hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:32]
    claim = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        claim.bind(name)
    except OSError:
        claim.close()
        raise ConfigError(f"{flag} {path}: another gplace run is writing its results there; "
                          f"wait for it to finish or choose another folder") from None
    return claim


def output_file(path: str | os.PathLike, flag: str = "--out") -> Path:
    """A file that can be written (replaced if it exists): not a folder, in a writable one."""
    if not str(path).strip():
        raise ConfigError(f"{flag} is empty; give a file name")
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{flag} {path}: is a folder; give a file name")
    if path.exists() and not path.is_file():
        raise ConfigError(f"{flag} {path}: exists and is not a regular file")
    _check_writable(_nearest_existing(path.parent, flag), path, flag)
    return path


def _nearest_existing(path: Path, flag: str) -> Path:
    """``path`` or its nearest existing ancestor, which must be a folder."""
    probe = path.absolute()
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise ConfigError(f"{flag} {path}: {probe} is a file, not a folder")
    return probe


def _check_writable(folder: Path, path: Path, flag: str) -> None:
    """Creates and removes a file in ``folder`` (os.access says yes to root on a read-only
    mount), then checks the free space."""
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".gplace-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise ConfigError(f"{flag} {path}: cannot write in {folder} "
                          f"({e.strerror or e})") from None
    free = shutil.disk_usage(folder).free
    if free < MIN_FREE_BYTES:
        raise ConfigError(f"{flag} {path}: only {free / 2**20:.1f} MiB free on its disk")


def resume_checkpoint(path: Path) -> Path:
    """The Lightning checkpoint ``--resume`` continues from: present, readable, and holding a
    training state (not a policy file or another kind of checkpoint)."""
    from gplace.io import read_checkpoint
    if not path.is_file():
        raise ConfigError(f"--resume: no checkpoint at {path}; drop --resume to start from "
                          f"scratch, or give the --out / --log-dir of the run to resume")
    state = read_checkpoint(path, "checkpoint to resume")
    lightning = (isinstance(state, dict) and isinstance(state.get("state_dict"), dict)
                 and "pytorch-lightning_version" in state and "global_step" in state)
    if not lightning:
        raise ConfigError(f"--resume: {path} is not a checkpoint of gplace pretrain (no "
                          f"Lightning training state in it)")
    hyper = state.get("hyper_parameters")  # PretrainModule saves {"config": PretrainConfig}
    if not (isinstance(hyper, dict) and isinstance(hyper.get("config"), dict)):
        raise ConfigError(f"--resume: {path} is a Lightning checkpoint of another model, not "
                          f"of gplace pretrain (no pretraining config in it)")
    return path


def policy_checkpoint(path: str | None) -> str | None:
    """``--checkpoint`` of ``place``: a PyTorch file that loads (its fields are checked by
    gplace.load)."""
    if path is not None:
        from gplace.gnn.infer import is_cached
        if Path(path).is_file() and is_cached(path):
            return path  # these bytes loaded before: their weights are in the cache
        from gplace.io import read_checkpoint
        read_checkpoint(path, "policy checkpoint")
    return path


def pretrain_args(args) -> None:
    """``gplace pretrain``: the corpus and clusters exist, --out and --log-dir can be written,
    and with --resume the checkpoint is there and loads."""
    if Path(args.corpus).is_file():
        raise ConfigError(f"--corpus {args.corpus}: a file; give the folder that holds the "
                          "graphs")
    if not Path(args.corpus).is_dir():
        raise ConfigError(f"--corpus {args.corpus}: no such folder")
    for name in args.clusters:
        cluster_name(name)
    out = output_file(args.out)
    # the default log folder as gplace.cli.pretrain_cmd derives it
    log_dir = Path(args.log_dir) if args.log_dir else out.parent / "runs" / out.stem
    output_dir(log_dir, "--log-dir")
    if args.resume:
        resume_checkpoint(log_dir / "checkpoints" / "last.ckpt")
    policy_checkpoint(args.expert_from)
    policy_checkpoint(args.init)
