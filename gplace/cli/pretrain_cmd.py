"""``gplace pretrain``: pretrain the GNN policy over a corpus with Post's objective."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from gplace.cli import checks


def add_parser(sub, name: str) -> argparse.ArgumentParser:
    p = sub.add_parser(name, help="pretrain the GNN policy over a corpus of graphs",
                       description="Pretrain the GNN placement policy with Post's objective over "
                                   "the training split of a corpus (datasets/ or any folder of "
                                   ".pb/.pbtxt/SavedModel graphs). Step times are simulated.")
    p.add_argument("--corpus", default="datasets", help="corpus folder (default: datasets)")
    p.add_argument("--clusters", nargs="+", default=["post-2gpu", "post-4gpu", "hetero"],
                   metavar="C", help="cluster presets or YAML files to train on")
    p.add_argument("--max-steps", type=int, default=300, help="training steps (default: 300)")
    p.add_argument("--random-clusters", type=int, default=2,
                   help="random clusters per training graph besides the presets (default: 2)")
    p.add_argument("--problems-per-step", type=int, default=4)
    p.add_argument("--samples", type=int, default=16, help="placements per problem per step")
    p.add_argument("--val-every", type=int, default=50, help="steps between validations")
    p.add_argument("--seed", type=checks.seed, default=0, help="0 <= seed < 2**32 (default 0)")
    p.add_argument("--out", default="policy.pt", help="the policy checkpoint to write")
    p.add_argument("--log-dir", default=None,
                   help="Lightning checkpoints and CSV/TensorBoard logs (default: OUT's folder/runs)")
    p.add_argument("--resume", action="store_true", help="continue from the last checkpoint")
    p.add_argument("--devices", type=int, default=1, help="training processes on this node (DDP)")
    p.add_argument("--num-nodes", type=int, default=1, help="nodes (DDP)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def run(args) -> int:
    checks.pretrain_args(args)  # paths and the --resume checkpoint, before TF and torch load
    from gplace.errors import ConfigError
    from gplace.gnn.learn import LearnConfig
    from gplace.tfimport import tensorflow
    tensorflow()  # quietly, before TensorBoard imports it with its C++ start-up lines
    from gplace.gnn.pretrain import PretrainConfig, run_pretrain
    if args.max_steps < 1 or args.random_clusters < 0 or args.samples < 2:
        raise ConfigError("--max-steps must be >= 1, --random-clusters >= 0, --samples >= 2")
    base = PretrainConfig()
    cfg = PretrainConfig(corpus=args.corpus, clusters=tuple(args.clusters),
                         random_clusters=args.random_clusters,
                         problems_per_step=args.problems_per_step, max_steps=args.max_steps,
                         val_every=args.val_every, seed=args.seed,
                         learn=replace(base.learn, samples=args.samples))
    out = Path(args.out)
    log_dir = Path(args.log_dir) if args.log_dir else out.parent / "runs" / out.stem
    run_pretrain(cfg, out, log_dir, resume=args.resume, devices=args.devices,
                 num_nodes=args.num_nodes, progress=not args.no_progress)
    print(f"wrote {out}; logs in {log_dir}")
    return 0
