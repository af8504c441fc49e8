"""Ctrl-C during a search: the search ends early and its best placement so far is the result.

    with stop_on_interrupt():
        result = placer.place(problem, measurer, 300)   # Ctrl-C: fewer samples, same kind of result

Inside the block the first SIGINT only sets a flag (and says so): a Tracker then hands out no
more samples (``Tracker.left`` is 0), zero-shot's sampled rollouts and its polish stop between
batches, and the caller returns what was found, as Lightning's ``Trainer.fit`` ends gracefully on
a first Ctrl-C. A second SIGINT goes to the handler that was there before (KeyboardInterrupt:
nothing is kept). Outside the block, or off the main thread (where Python delivers no signals),
:func:`requested` is False and nothing changes.
"""

from __future__ import annotations

import signal
import sys
import threading
from contextlib import contextmanager

_requested: list[bool] = []  # one entry per active block: whether a stop was asked for in it


def requested() -> bool:
    """Whether a Ctrl-C asked the running search to stop (within :func:`stop_on_interrupt`)."""
    return bool(_requested) and _requested[-1]


@contextmanager
def stop_on_interrupt(log="stderr", when: str = ""):
    """See the module docstring; ``log``: where the one line saying so goes (a file; the
    default: sys.stderr at the time; None: nowhere); ``when``: what the stop waits for, if it
    can take long (said in that line)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)

    def on_sigint(signum, frame):
        if _requested[-1]:  # the second Ctrl-C: whatever the handler before does
            signal.signal(signal.SIGINT, previous)
            if callable(previous):
                previous(signum, frame)
            elif previous != signal.SIG_IGN:
                raise KeyboardInterrupt
            return
        _requested[-1] = True
        if log is not None:
            print(f"\ngplace: stopping{' ' + when if when else ''}: the best placement so "
                  "far is the result "
                  "(Ctrl-C again to stop at once, keeping nothing)",
                  file=sys.stderr if log == "stderr" else log, flush=True)

    _requested.append(False)
    signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        _requested.pop()
