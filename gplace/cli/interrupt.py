"""Ctrl-C inside Lightning: exit 130 with "interrupted", as every other command does.

Lightning catches KeyboardInterrupt in ``Trainer.fit``, logs its own notice and calls
``sys.exit(1)`` (lightning/pytorch/trainer/call.py). :func:`interruptible` notes the SIGINT,
silences that notice and turns the exit back into KeyboardInterrupt for ``gplace.cli.main``.
"""

from __future__ import annotations

import logging
import signal
from contextlib import contextmanager


@contextmanager
def interruptible():
    hit: list[int] = []

    def on_sigint(signum, frame):
        hit.append(signum)
        logging.disable(logging.INFO)  # Lightning's "Detected KeyboardInterrupt ..." notice
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    except SystemExit:
        if hit:
            raise KeyboardInterrupt from None
        raise
    finally:
        signal.signal(signal.SIGINT, previous)
