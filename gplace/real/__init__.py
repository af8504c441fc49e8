"""Real measurement: placements run in TensorFlow on real devices.

* :class:`RealMeasurer` (measurer.py): the Measurer protocol, by running the step; its loop
  over one chunk of a batch is batch.py (sessions reopened after TF's retryable errors);
* :class:`ProtocolConfig` (protocol.py): how a step time is taken (interleaved rounds, a low
  quantile and its interval, early stop, time cap), :mod:`load` (load.py): how loaded the
  machine was meanwhile;
* :class:`LocalProcs` / :class:`RemoteTasks` (procs.py): TF server processes (``local-procs``)
  or tasks already running on other hosts;
* :func:`benchmark` (links.py): the transfer benchmark and link fit;
* :func:`check_safe` (safety.py): refusing file-system and arbitrary-code ops.
"""

from __future__ import annotations


def __getattr__(name):  # lazy: importing gplace.real must not import TensorFlow
    if name in ("RealMeasurer", "RealConfig", "RealResult"):
        from gplace.real import measurer
        return getattr(measurer, name)
    if name in ("ProtocolConfig",):
        from gplace.real import protocol
        return getattr(protocol, name)
    if name in ("LocalProcs", "RemoteTasks", "load_task_spec"):
        from gplace.real import procs
        return getattr(procs, name)
    if name in ("check_safe", "UnsafeOpError"):
        from gplace.real import safety
        return getattr(safety, name)
    raise AttributeError(name)
