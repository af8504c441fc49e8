"""Ctrl-C: exit 130 with "interrupted", in every command, Lightning's included; a SIGTERM the
same way with exit 143.

Lightning catches KeyboardInterrupt in ``Trainer.fit``, logs its own notice and calls
``sys.exit(1)`` (lightning/pytorch/trainer/call.py). :func:`interruptible` notes the SIGINT,
silences that notice and turns the exit back into KeyboardInterrupt for ``gplace.cli.main``.

A KeyboardInterrupt raised while numba compiles (the first run on a fresh install) lands in
llvmlite's ctypes callbacks, which swallow it and leave the compiler in a broken state (seen:
exit 1, or a hang). So a SIGINT that arrives inside numba or llvmlite is held: the handler
re-arms a short timer and raises once the compiler has returned.
"""

from __future__ import annotations

import logging
import signal
import sys
from contextlib import contextmanager

from gplace.stopping import in_compiler

RETRY_S = 0.2


class Terminated(KeyboardInterrupt):
    """A SIGTERM (ours, or Lightning's inside training, which raises SystemExit with no code):
    the command stops as after Ctrl-C, with exit code 143."""


@contextmanager
def interruptible():
    hit: list[int] = []

    def on_signal(signum, frame):
        if signum in (signal.SIGINT, signal.SIGTERM):
            if not hit:
                logging.disable(logging.INFO)  # Lightning's "Detected KeyboardInterrupt ..."
            hit.append(signum)
        elif not hit:
            return
        if in_compiler(frame):
            if signum == signal.SIGINT and hit.count(signal.SIGINT) == 1:
                print("gplace: stopping once the compiler finishes (first run only)",
                      file=sys.stderr)
            signal.setitimer(signal.ITIMER_REAL, RETRY_S)
            return
        raise Terminated if signal.SIGTERM in hit else KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, on_signal)
    previous_term = signal.signal(signal.SIGTERM, on_signal)  # Lightning's own inside fit
    previous_alarm = signal.signal(signal.SIGALRM, on_signal)
    try:
        yield
    except SystemExit as e:
        if type(e).__name__ == "SIGTERMException":  # Lightning's handler of a SIGTERM in fit
            raise Terminated from None
        if hit:
            raise (Terminated if signal.SIGTERM in hit else KeyboardInterrupt) from None
        raise
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGINT, previous)
        signal.signal(signal.SIGTERM, previous_term)
        signal.signal(signal.SIGALRM, previous_alarm)
