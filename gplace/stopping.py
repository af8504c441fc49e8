"""Ctrl-C during a search: the search ends early and its best placement so far is the result.

    with stop_on_interrupt():
        result = placer.place(problem, measurer, 300)   # Ctrl-C: fewer samples, same kind of result

Inside the block the first SIGINT only sets a flag (and says so): a Tracker then hands out no
more samples (``Tracker.left`` is 0), zero-shot's sampled rollouts and its polish stop between
batches, and the caller returns what was found. A second SIGINT goes to the handler that was
there before (KeyboardInterrupt: nothing is kept). A solver that takes the SIGINT itself
(CP-SAT) sets the flag with :func:`request`. Outside the block, and on any thread but the
main one (where Python delivers no signals), :func:`requested` is False and nothing changes.
"""

from __future__ import annotations

import signal
import sys
import threading
from contextlib import contextmanager

_COMPILER = ("numba", "llvmlite")
_requested: list[bool] = []  # one entry per active block: whether a stop was asked for in it
_announce: list = []  # one per active block: prints its "stopping" line (given the wait)


def requested() -> bool:
    """Whether a Ctrl-C asked the running search to stop (within :func:`stop_on_interrupt`, on
    the main thread)."""
    return bool(_requested) and _requested[-1] and on_main_thread()


def request() -> None:
    """Asks the running search to stop, as a first Ctrl-C does, saying so as it does (nothing
    outside a block, nothing more once asked)."""
    if _requested and on_main_thread() and not _requested[-1]:
        _requested[-1] = True
        _announce[-1]("")


def in_compiler(frame) -> bool:
    """Whether any frame of the stack belongs to numba or llvmlite (a first run compiling)."""
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).startswith(_COMPILER):
            return True
        frame = frame.f_back
    return False


def on_main_thread() -> bool:
    """Whether this is Python's main thread, the one signal handlers run on."""
    return threading.current_thread() is threading.main_thread()


@contextmanager
def stop_on_interrupt(log="stderr", when: str = "",
                      kept: str = "the best placement so far is the result"):
    """See the module docstring; ``log``: where the one line saying so goes (a file; the
    default: sys.stderr at the time; None: nowhere); ``when``: what the stop waits for, if it
    can take long, and ``kept``: what the caller keeps (both said in that line)."""
    if not on_main_thread():
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
        # the search starts, and then stops, once numba has compiled it
        announce("once the compiler finishes (first run only)" if in_compiler(frame) else when)

    def announce(wait: str) -> None:
        if log is not None:
            print(f"\ngplace: stopping{' ' + wait if wait else ''}: {kept} "
                  "(Ctrl-C again to stop at once, keeping nothing)",
                  file=sys.stderr if log == "stderr" else log, flush=True)

    _requested.append(False)
    _announce.append(announce)
    signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        _requested.pop()
        _announce.pop()
