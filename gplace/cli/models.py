"""The model argument the commands share: the import options (a SavedModel's signature, a
PyTorch (.pt2) model's optimizer) and the import of any model file (TensorFlow through the
user cache, .pt2, a gplace .npz)."""

from __future__ import annotations

import argparse


def add_import_arguments(p: argparse.ArgumentParser) -> None:
    """--signature (a SavedModel's), --unknown-dim (a TensorFlow graph's) and --optimizer and
    --trust-pt2 (a PyTorch model's)."""
    p.add_argument("--signature", default=None, metavar="NAME",
                   help="SavedModel only: the signature to import (default: the one that "
                        "trains, or the only one; the others are left out)")
    from gplace.cli.checks import count
    p.add_argument("--unknown-dim", type=count(1, 2**31 - 1, "a size"), default=None, metavar="N",
                   help="TensorFlow graphs: the size given to unknown dimensions, such as a "
                        "SavedModel signature's None batch (default: 1, or for simulate "
                        "--placement the size placement.json records; place's output says "
                        "where the graph has them)")
    p.add_argument("--optimizer", default=None, metavar="NAME[:KEY=VALUE,...]",
                   help=".pt2 only: the optimizer whose updates the step adds: sgd (default; "
                        "simulate --placement: the one the placement was made with), "
                        "momentum (sgd with momentum 0.9), adam or adamw, with hyperparameters "
                        "as e.g. sgd:momentum=0.9,nesterov=true,weight_decay=1e-4 or "
                        "adamw:lr=3e-4,weight_decay=0.1 (keys: lr, momentum, dampening, "
                        "nesterov, weight_decay for sgd; lr, beta1, beta2, eps, weight_decay "
                        "for adam and adamw; lr 0.01 unless given)")
    p.add_argument("--trust-pt2", action="store_true",
                   help=".pt2 only: load a file that could run code when torch.export.load "
                        "reads it (pickled objects, compiled code, size expressions that are "
                        "not arithmetic); refused without this flag")


def import_options(args) -> dict:
    """The import options given; a ConfigError when one is given for another kind of model."""
    from gplace.errors import ConfigError
    if args.optimizer is not None and not args.optimizer.strip():
        raise ConfigError("--optimizer is empty; name sgd, momentum, adam or adamw")
    given = {"optimizer": args.optimizer, "trust": args.trust_pt2}
    given = {k: v for k, v in given.items() if v}
    pt2 = str(args.model).lower().endswith(".pt2")
    if given and not pt2:
        raise ConfigError("--optimizer and --trust-pt2 apply to PyTorch (.pt2) models only")
    if "optimizer" in given:  # a bad name or value fails here, before the import
        from gplace.torchfront.optim import parse_optimizer
        given["optimizer"] = parse_optimizer(given["optimizer"])
    if args.signature is not None:
        if pt2 or str(args.model).endswith(".npz"):
            raise ConfigError("--signature chooses a signature of a SavedModel (or .meta); "
                              f"{args.model} has none")
        given["signature"] = args.signature
    if args.unknown_dim is not None:
        if pt2 or str(args.model).endswith(".npz"):
            raise ConfigError(f"--unknown-dim sizes the unknown dimensions of a TensorFlow "
                              f"graph as it is imported; {args.model} has none to size")
        given["unknown_dim"] = args.unknown_dim
    return given


def load_model(path: str, unknown_dim: int = 1, **options):
    """An OpGraph from a saved ``.npz`` or from anything the importer reads; ``options``:
    import_options."""
    from gplace.graph import OpGraph
    if str(path).endswith(".npz"):
        return OpGraph.load(path)
    from gplace.opgraph_cache import load_graph  # a file imported before: from the cache
    if str(path).lower().endswith(".pt2"):
        return load_graph(path, **options)
    return load_graph(path, unknown_dim=unknown_dim, **options)
