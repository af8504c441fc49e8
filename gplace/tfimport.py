"""Import TensorFlow once, without its C++ start-up log lines.

TF 2.21 logs "oneDNN custom operations are on" and "Could not find cuda drivers" through absl
before TF_CPP_MIN_LOG_LEVEL is read, so the only way to keep a command's stderr to the one line
it means is to point file descriptor 2 elsewhere while the shared libraries load.

A process that only imports graphs (gplace.opgraph_cache's) can ask for the graph framework
alone (:func:`use_framework_only`): the ``tensorflow.python`` modules the importer uses (graph
import, shape inference, grappler, the FLOP statistics) without the package's ``__init__``,
which imports Keras, autograph and every API module (1.6 s instead of 3.8 s, warm). The same
C++ library is loaded, so the same ops, shape functions and statistics are registered.
"""

from __future__ import annotations

import os
import sys

from gplace.errors import GplaceError

# What the importer uses of TensorFlow (gplace.importer); nn_ops and the profiler's registry
# register the FLOP statistics that a full import registers.
FRAMEWORK_MODULES = (
    "tensorflow.python.framework.ops", "tensorflow.python.framework.importer",
    "tensorflow.python.framework.dtypes", "tensorflow.python.framework.op_def_registry",
    "tensorflow.python.framework.function_def_to_graph", "tensorflow.python.grappler.item",
    "tensorflow.python.ops.nn_ops", "tensorflow.python.profiler.internal.flops_registry",
    "tensorflow.python.platform.tf_logging")
_framework_only = False


def use_framework_only() -> None:
    """Makes :func:`tensorflow` import only FRAMEWORK_MODULES in this process, under a bare
    ``tensorflow`` package: for a process that imports graphs and nothing else (the package
    then has none of TensorFlow's API)."""
    global _framework_only
    _framework_only = True


def tensorflow():
    """The ``tensorflow`` module, imported quietly the first time (the bare package after
    :func:`use_framework_only`)."""
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        if _framework_only:
            return _framework()
        import tensorflow as tf
    except ImportError as e:
        raise GplaceError(f"TensorFlow is not installed ({e}); install gplace[cpu] or "
                          "gplace[gpu]") from None
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
    tf.get_logger().setLevel("ERROR")
    return tf


def _framework():
    """The bare ``tensorflow`` package (its __init__ not run) with FRAMEWORK_MODULES imported."""
    import importlib
    import importlib.util
    import types
    spec = importlib.util.find_spec("tensorflow")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("No module named 'tensorflow'")
    package = types.ModuleType("tensorflow")
    package.__path__ = list(spec.submodule_search_locations)
    package.__file__ = spec.origin
    sys.modules["tensorflow"] = package
    try:
        for name in FRAMEWORK_MODULES:
            importlib.import_module(name)
    except BaseException:
        for name in [m for m in sys.modules if m == "tensorflow" or m.startswith("tensorflow.")]:
            del sys.modules[name]
        raise
    from tensorflow.python.platform import tf_logging
    tf_logging.get_logger().setLevel("ERROR")
    return package
