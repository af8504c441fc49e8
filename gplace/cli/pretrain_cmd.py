"""``gplace pretrain``: pretrain the GNN policy over a corpus by expert iteration.

The options are the fields of PretrainConfig and its LearnConfig (gplace.gnn.config): a
field's name is the option, its default the option's default and its comment the help text;
the dataclasses check the values. The options below them say where the run goes and how it
runs in parallel.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from types import SimpleNamespace

from gplace.cli import checks
from gplace.gnn.config import LearnConfig, PretrainConfig, field_help

FLAGS = {"init_from": "--init"}  # a field whose option is not its name
TYPES = {"seed": checks.seed}    # parsed (and range-checked) before the config is built


def add_parser(sub, name: str) -> argparse.ArgumentParser:
    p = sub.add_parser(name, help="pretrain the GNN policy over a corpus of graphs",
                       description="Pretrain the GNN placement policy by expert iteration over "
                                   "the training split of a corpus (a manifest.yaml corpus or "
                                   "any folder of .pb/.pbtxt/SavedModel graphs and PyTorch .pt2 "
                                   "programs): search experts, "
                                   "imitate them, validate, repeat from the new policy. Resumable: "
                                   "run the same command again. Step times are simulated.")
    defaults = PretrainConfig()
    _add_fields(p, PretrainConfig, defaults, skip=("learn",))
    _add_fields(p.add_argument_group("imitation and PPO (LearnConfig)"), LearnConfig,
                defaults.learn)
    run = p.add_argument_group("the run")
    run.add_argument("--out", default="policy.pt",
                     help="the policy checkpoint to write (its card goes beside it as .md)")
    run.add_argument("--log-dir", default=None, help="the run folder: rounds, Lightning "
                     "checkpoints and logs (default: OUT's folder/runs/OUT's stem)")
    run.add_argument("--resume", action="store_true", help="insist on continuing the run in "
                     "the run folder (a rerun of the same command continues it anyway)")
    run.add_argument("--restore", default=None, metavar="ARCHIVE", help="write this experts "
                     "archive into the corpus' cache first (default: the corpus folder's "
                     "experts.npz, if it has one)")
    run.add_argument("--jobs", type=checks.count(1, 256, "--jobs"), default=None,
                     help="local processes per rank for the expert searches (default: one per "
                          "core, shared by --devices, at most one per 4 GiB of memory; the "
                          "experts are the same for any count)")
    run.add_argument("--devices", type=checks.count(1, 1024, "ranks"), default=1,
                     help="ranks on this node (Lightning "
                     "DDP: expert searches and training)")
    run.add_argument("--num-nodes", type=checks.count(1, 100_000, "nodes"), default=1,
                     help="nodes (Lightning DDP)")
    run.add_argument("--no-progress", action="store_true",
                     help="no progress bar (none either where stdout is not a terminal)")
    return p


def _flag(name: str) -> str:
    return FLAGS.get(name, "--" + name.replace("_", "-"))


def _add_fields(parser, cls, defaults, skip=()) -> None:
    helps = field_help(cls)
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        default = getattr(defaults, f.name)
        kw = dict(default=default, dest=f.name, help=f"{helps.get(f.name, '')} "
                  f"(default: {' '.join(default) if isinstance(default, tuple) else default})")
        if isinstance(default, bool):  # a switch: off by default, on when given
            kw = dict(dest=f.name, action="store_true", help=helps.get(f.name, ""))
        elif isinstance(default, tuple):
            kw.update(nargs="+", default=list(default), metavar="C")
        elif f.name in TYPES:
            kw.update(type=TYPES[f.name])
        elif default is not None:
            kw.update(type=type(default))
        parser.add_argument(_flag(f.name), **kw)


def config_of(args) -> PretrainConfig:
    """The config the options describe (the dataclasses raise ConfigError on a bad value)."""
    learn = LearnConfig(**{f.name: getattr(args, f.name)
                           for f in dataclasses.fields(LearnConfig)})
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(PretrainConfig)
              if f.name != "learn"}
    return PretrainConfig(**{**values, "clusters": tuple(values["clusters"]), "learn": learn})


def run(args) -> int:
    checks.policy_checkpoint(args.init_from)  # what the user typed, before the default corpus
    args.corpus = _default_corpus(args.corpus)
    cfg = config_of(args)
    cfg.check_rounds_validate()
    out = Path(args.out)
    log_dir = Path(args.log_dir) if args.log_dir else out.parent / "runs" / out.stem
    # paths and checkpoints, before TF and torch load
    checks.pretrain_args(SimpleNamespace(corpus=cfg.corpus, clusters=cfg.clusters, out=args.out,
                                         log_dir=args.log_dir, resume=False,
                                         expert_from=cfg.expert_from, init=cfg.init_from))
    if args.resume:
        rounds = sorted(log_dir.glob("round*/checkpoints/last.ckpt"))
        done = sorted(log_dir.glob("round*/result.json"))
        if not done or rounds:
            checks.resume_checkpoint(rounds[-1] if rounds else
                                     log_dir / "checkpoints" / "last.ckpt")
    from gplace.gnn.corpus import list_corpus
    entries = list_corpus(cfg.corpus)  # a broken manifest fails here, before anything is written
    _check_optimizer(cfg, any(e.optimizer is not None for e in entries))
    from gplace.tfimport import tensorflow
    tensorflow()  # quietly, before TensorBoard imports it with its C++ start-up lines
    cfg = _network_shape(cfg)
    from gplace.gnn.iteration import (default_jobs, is_first_process, prepare_corpus,
                                      run_iteration)
    prepare_corpus(cfg, args.restore)
    run_iteration(cfg, out, log_dir, jobs=args.jobs or default_jobs(args.devices),
                  devices=args.devices, num_nodes=args.num_nodes,
                  progress=not args.no_progress and sys.stdout.isatty())  # Rich's bar: stdout
    if is_first_process():
        print(f"wrote {out} and {out.with_suffix('.md')}; run folder {log_dir}")
    return 0


def _check_optimizer(cfg: PretrainConfig, has_programs: bool) -> None:
    """--optimizer (a name and hyperparameters gplace.torchfront knows) and --trust-pt2, for
    a corpus with PyTorch programs (one ConfigError line otherwise)."""
    from gplace.errors import ConfigError
    if not has_programs:
        if cfg.optimizer != PretrainConfig.optimizer:
            raise ConfigError(f"--optimizer applies to PyTorch (.pt2) programs; {cfg.corpus} "
                              "has none (a TensorFlow graph has its own optimizer)")
        if cfg.trust_pt2:
            raise ConfigError(f"--trust-pt2 applies to PyTorch (.pt2) programs; {cfg.corpus} "
                              "has none")
        return
    from gplace.torchfront.optim import parse_optimizer
    parse_optimizer(cfg.optimizer)


def _default_corpus(corpus: str) -> str:
    """``--corpus`` as given; the default (the shipped policy's corpus, a folder of gplace's
    repository) also from elsewhere inside the clone."""
    from gplace.errors import ConfigError
    if corpus != PretrainConfig.corpus or Path(corpus).is_dir():
        return corpus
    from gplace.cli.calibrate_cmd import clone_root
    root = clone_root()
    if root is None or not (root / corpus).is_dir():
        raise ConfigError(f"the default --corpus {corpus} is a folder of gplace's repository, "
                          "and this is not inside a clone of it: pass --corpus DIR")
    return str(root / corpus)


def _network_shape(cfg: PretrainConfig) -> PretrainConfig:
    """With --init the network's shape is the checkpoint's; --expert-from must load."""
    from gplace.errors import ConfigError
    from gplace.gnn.policy import GNNPolicy
    if cfg.expert_from is not None:
        GNNPolicy.load(cfg.expert_from)  # before any work (ConfigError if bad)
    if cfg.init_from is None:
        return cfg
    kw = GNNPolicy.load(cfg.init_from)[0].kwargs
    shape = ("hidden_channels", "num_layers", "type_channels")
    base = PretrainConfig()
    mine = tuple(getattr(cfg, k) for k in shape)
    theirs = tuple(kw.get(k, getattr(base, k)) for k in shape)
    if mine != tuple(getattr(base, k) for k in shape) and mine != theirs:
        raise ConfigError(f"--init {cfg.init_from} is a network of {theirs[0]} channels, "
                          f"{theirs[1]} layers and {theirs[2]} op-type channels; leave out "
                          f"--hidden-channels, --num-layers and --type-channels")
    return dataclasses.replace(cfg, **dict(zip(shape, theirs)))
