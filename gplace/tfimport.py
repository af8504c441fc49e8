"""Import TensorFlow once, without its C++ start-up log lines.

TF 2.21 logs "oneDNN custom operations are on" and "Could not find cuda drivers" through absl
before TF_CPP_MIN_LOG_LEVEL is read, so the only way to keep a command's stderr to the one line
it means is to point file descriptor 2 elsewhere while the shared libraries load.
"""

from __future__ import annotations

import os
import sys

from gplace.errors import GplaceError


def tensorflow():
    """The ``tensorflow`` module, imported quietly the first time."""
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
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
