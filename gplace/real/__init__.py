"""Real measurement: placements run in TensorFlow on real devices (issue 5).

* :class:`RealMeasurer` (measurer.py): the Measurer protocol, by running the step;
* :class:`LocalProcs` / :class:`RemoteTasks` (procs.py): TF server processes (``local-procs``)
  or tasks already running on other hosts;
* :func:`benchmark` (links.py): the transfer benchmark and link fit;
* :func:`check_safe` (safety.py): refusing file-system and arbitrary-code ops.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from gplace.errors import GplaceError


def datasets_profiler():
    """``datasets.profiler`` (the corpus profiler, reused for sessions and initializers); it
    lives beside the package in the repository, so the repository root joins sys.path."""
    root = str(Path(__file__).resolve().parents[2])
    if root not in sys.path:
        sys.path.append(root)
    try:
        return importlib.import_module("datasets.profiler")
    except ImportError as e:
        raise GplaceError(f"real measurement needs the repository's datasets/ package ({e}); "
                          f"run gplace from a checkout of the repository") from None


def __getattr__(name):  # lazy: importing gplace.real must not import TensorFlow
    if name in ("RealMeasurer", "RealConfig", "RealResult"):
        from gplace.real import measurer
        return getattr(measurer, name)
    if name in ("LocalProcs", "RemoteTasks", "load_task_spec"):
        from gplace.real import procs
        return getattr(procs, name)
    if name in ("check_safe", "UnsafeOpError"):
        from gplace.real import safety
        return getattr(safety, name)
    raise AttributeError(name)
