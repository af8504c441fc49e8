"""``gplace pretrain``: pretrain the GNN policy over a corpus with Post's objective."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from gplace.cli import checks
from gplace.gnn.config import PretrainConfig


def add_parser(sub, name: str) -> argparse.ArgumentParser:
    p = sub.add_parser(name, help="pretrain the GNN policy over a corpus of graphs",
                       description="Pretrain the GNN placement policy with Post's objective over "
                                   "the training split of a corpus (datasets/ or any folder of "
                                   ".pb/.pbtxt/SavedModel graphs). Step times are simulated.")
    c = PretrainConfig()  # one default per setting: the config's
    p.add_argument("--corpus", default=c.corpus, help=f"corpus folder (default: {c.corpus})")
    p.add_argument("--clusters", nargs="+", default=list(c.clusters), metavar="C",
                   help=f"cluster presets or YAML files to train on (default: {' '.join(c.clusters)})")
    p.add_argument("--random-clusters", type=int, default=c.random_clusters,
                   help=f"random clusters per training graph besides the presets (default: "
                        f"{c.random_clusters})")
    p.add_argument("--max-steps", type=int, default=c.max_steps,
                   help=f"training steps (default: {c.max_steps})")
    p.add_argument("--problems-per-step", type=int, default=c.problems_per_step,
                   help=f"(graph, cluster) problems per step (default: {c.problems_per_step})")
    p.add_argument("--samples", type=int, default=c.learn.samples,
                   help=f"placements per problem per step; 0: imitation of the elites only (default: "
                        f"{c.learn.samples})")
    p.add_argument("--expert-budget", type=int, default=c.expert_budget,
                   help="samples of the expert search per training problem, whose result joins "
                        "its elite set (expert iteration; cached beside the corpus; default: "
                        f"{c.expert_budget}, none)")
    p.add_argument("--expert-from", default=None, metavar="CKPT",
                   help="start each expert search from this policy checkpoint (the next round "
                        "of expert iteration; default: an untrained network)")
    p.add_argument("--init", default=None, metavar="CKPT",
                   help="start from this policy checkpoint's weights (and network shape) "
                        "instead of a fresh network (default: a fresh network)")
    p.add_argument("--ce-weight", type=float, default=c.learn.ce_weight,
                   help=f"weight of the elite cross-entropy (default: {c.learn.ce_weight})")
    p.add_argument("--dagger", type=float, default=c.learn.dagger, metavar="W",
                   help="weight of the cross-entropy towards each problem's best elite along the "
                        "policy's own greedy schedule (DAgger-style; default: "
                        f"{c.learn.dagger}, off)")
    p.add_argument("--dagger-follow", type=float, default=c.learn.dagger_follow, metavar="P",
                   help="probability that the --dagger schedule follows the elite at a decision "
                        f"(default: {c.learn.dagger_follow})")
    p.add_argument("--dagger-temperature", type=float, default=c.learn.dagger_temperature,
                   metavar="T", help="the --dagger schedule's other decisions are drawn from the "
                        "policy at temperature T, the states fine-tuning's samples reach "
                        "(default: 0, the policy's argmax)")
    p.add_argument("--ce-work", type=float, default=c.learn.ce_work, metavar="SHARE",
                   help="share of the imitation cross-entropies' weight given to decisions in "
                        "proportion to the unit's work, the rest spread evenly (default: "
                        f"{c.learn.ce_work})")
    p.add_argument("--elite-size", type=int, default=c.learn.elite_size,
                   help=f"placements in each problem's elite set (default: {c.learn.elite_size})")
    p.add_argument("--ppo-epochs", type=int, default=c.learn.ppo_epochs,
                   help=f"gradient steps on each step's rollouts (default: {c.learn.ppo_epochs})")
    p.add_argument("--temperature", type=float, default=c.learn.temperature,
                   help="the samples and the loss use softmax(logits / T); 0.25 is what "
                        f"`gplace place` fine-tunes at (default: {c.learn.temperature})")
    p.add_argument("--ema-decay", type=float, default=c.ema_decay,
                   help="validate and write an exponential moving average of the weights with "
                        f"this decay per step, e.g. 0.98 (default: {c.ema_decay}, off)")
    p.add_argument("--lr", type=float, default=c.learn.lr,
                   help=f"Adam learning rate (default: {c.learn.lr})")
    p.add_argument("--w0-lr-scale", type=float, default=c.learn.w0_lr_scale,
                   help=f"learning rate of the global decision weights / --lr (default: "
                        f"{c.learn.w0_lr_scale})")
    p.add_argument("--hidden-channels", type=int, default=c.hidden_channels,
                   help=f"width of the network's layers (default: {c.hidden_channels})")
    p.add_argument("--num-layers", type=int, default=c.num_layers,
                   help=f"message-passing layers of the graph encoder (default: {c.num_layers})")
    p.add_argument("--val-every", type=int, default=c.val_every,
                   help=f"steps between validations (default: {c.val_every})")
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
    from gplace.tfimport import tensorflow
    tensorflow()  # quietly, before TensorBoard imports it with its C++ start-up lines
    from gplace.gnn.pretrain import run_pretrain
    for bad, rule in ((args.max_steps < 1, "--max-steps must be >= 1"),
                      (args.random_clusters < 0, "--random-clusters must be >= 0"),
                      (args.samples == 1 or args.samples < 0, "--samples must be 0 or >= 2"),
                      (args.expert_budget < 0, "--expert-budget must be >= 0"),
                      (args.ce_weight < 0, "--ce-weight must be >= 0"),
                      (args.elite_size < 1, "--elite-size must be >= 1"),
                      (args.dagger < 0, "--dagger must be >= 0"),
                      (not 0 <= args.ce_work <= 1, "--ce-work must be in [0, 1]"),
                      (not 0 <= args.dagger_follow <= 1, "--dagger-follow must be in [0, 1]"),
                      (args.dagger_temperature < 0, "--dagger-temperature must be >= 0"),
                      (args.ppo_epochs < 1, "--ppo-epochs must be >= 1"),
                      (not args.temperature > 0, "--temperature must be > 0"),
                      (args.hidden_channels < 1, "--hidden-channels must be >= 1"),
                      (args.num_layers < 1, "--num-layers must be >= 1"),
                      (not 0 <= args.ema_decay < 1, "--ema-decay must be in [0, 1)"),
                      (args.expert_from is not None and args.expert_budget == 0,
                       "--expert-from needs --expert-budget > 0")):
        if bad:
            raise ConfigError(rule)
    if args.samples == 0 and ((args.ce_weight == 0 and args.dagger == 0)
                              or args.expert_budget == 0):
        raise ConfigError("--samples 0 (imitation only) needs --expert-budget > 0 and "
                          "--ce-weight or --dagger > 0: there would be nothing to learn from")
    hidden, layers = args.hidden_channels, args.num_layers
    if args.expert_from is not None or args.init is not None:
        from gplace.gnn.policy import GNNPolicy
        if args.expert_from is not None:
            GNNPolicy.load(args.expert_from)  # before any work (ConfigError if bad)
        if args.init is not None:  # the network's shape is the checkpoint's
            kw = GNNPolicy.load(args.init)[0].kwargs
            c = PretrainConfig()
            if ((hidden, layers) != (c.hidden_channels, c.num_layers)
                    and (hidden, layers) != (kw["hidden_channels"], kw["num_layers"])):
                raise ConfigError(f"--init {args.init} is a network of {kw['hidden_channels']} "
                                  f"channels and {kw['num_layers']} layers; leave out "
                                  "--hidden-channels and --num-layers")
            hidden, layers = kw["hidden_channels"], kw["num_layers"]
    base = PretrainConfig()
    cfg = PretrainConfig(corpus=args.corpus, clusters=tuple(args.clusters),
                         random_clusters=args.random_clusters,
                         problems_per_step=args.problems_per_step, max_steps=args.max_steps,
                         val_every=args.val_every, seed=args.seed,
                         hidden_channels=hidden, num_layers=layers, init_from=args.init,
                         expert_budget=args.expert_budget, ema_decay=args.ema_decay,
                         expert_from=args.expert_from,
                         learn=replace(base.learn, samples=args.samples, lr=args.lr,
                                       w0_lr_scale=args.w0_lr_scale, ce_weight=args.ce_weight,
                                       ppo_epochs=args.ppo_epochs, dagger=args.dagger,
                                       dagger_follow=args.dagger_follow, ce_work=args.ce_work,
                                       dagger_temperature=args.dagger_temperature,
                                       elite_size=args.elite_size,
                                       temperature=args.temperature))
    out = Path(args.out)
    log_dir = Path(args.log_dir) if args.log_dir else out.parent / "runs" / out.stem
    run_pretrain(cfg, out, log_dir, resume=args.resume, devices=args.devices,
                 num_nodes=args.num_nodes, progress=not args.no_progress)
    print(f"wrote {out}; logs in {log_dir}")
    return 0
