"""gplace: device placement for TensorFlow training-step graphs.

    import gplace
    graph = gplace.load_graph("model.pb")      # an OpGraph
"""

from __future__ import annotations

from gplace.errors import ConfigError, GplaceError, GraphError
from gplace.graph import OpGraph

__version__ = "0.1.0"


def load_graph(source, **options) -> OpGraph:
    """Imports a GraphDef (.pb, .pbtxt), MetaGraphDef (.meta), SavedModel directory, a
    ``tf.compat.v1.GraphDef`` or a ``tf.Graph`` into an OpGraph; see :mod:`gplace.importer`."""
    from gplace.importer import load_graph as _load
    return _load(source, **options)


__all__ = ["OpGraph", "load_graph", "GplaceError", "GraphError", "ConfigError", "__version__"]
