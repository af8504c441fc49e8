"""gplace: device placement for TensorFlow and PyTorch training-step graphs.

    import gplace
    graph = gplace.load_graph("model.pb")      # an OpGraph (or "model.pt2", optimizer="adam")
    placer = gplace.load()                     # the pretrained GNN placer
    result = gplace.place(graph, checkpoint=placer, cluster="post-4gpu", finetune=300)
"""

from __future__ import annotations

from gplace.errors import ConfigError, GplaceError, GraphError
from gplace.graph import OpGraph

__version__ = "0.1.0"


def load_graph(source, **options) -> OpGraph:
    """Imports a GraphDef (.pb, .pbtxt), MetaGraphDef (.meta), SavedModel directory, a
    ``tf.compat.v1.GraphDef``, a ``tf.Graph`` or a tf.function's ConcreteFunction into an
    OpGraph, or reads one saved as .npz (OpGraph.save, inspect --save); see
    :mod:`gplace.importer`. Options: ``signature`` (of a SavedModel), ``name``,
    ``unknown_dim``; a misspelt one is a TypeError. A file is imported once: later calls read
    the import cache, as ``gplace place`` does (``GPLACE_CACHE_DIR``; ``off`` turns it off).
    A PyTorch ``torch.export`` program (``.pt2``, forward: batch -> scalar loss) imports as one
    training step, its backward and optimizer included, with the options ``optimizer``
    ("sgd", "momentum", "adam" or "adamw", with hyperparameters as "adamw:lr=3e-4,
    weight_decay=0.1"; gplace.torchfront.optim) and ``trust`` (allow pickled payloads); see
    :mod:`gplace.torchfront`."""
    from gplace.opgraph_cache import load_graph as _load
    return _load(source, **options)


def load(path=None, seed: int = 0):
    """A placer from a policy checkpoint (default: the one shipped with gplace); see
    :mod:`gplace.gnn.placer`. Pass it to :func:`gplace.place.place` as ``checkpoint``: its
    ``seed`` is place()'s default seed, and an explicit ``seed``, ``polish`` or ``screen``
    there wins."""
    from gplace.gnn.placer import load as _load
    return _load(path, seed=seed)


def __getattr__(name: str):
    """``gplace.place``, imported on first use (numba and the placers take a second): the
    module gplace.place, which is callable as its function ``place``."""
    if name == "place":
        import importlib
        return importlib.import_module("gplace.place")
    raise AttributeError(f"module 'gplace' has no attribute {name!r}")


__all__ = ["OpGraph", "load", "load_graph", "place", "GplaceError", "GraphError", "ConfigError",
           "__version__"]
