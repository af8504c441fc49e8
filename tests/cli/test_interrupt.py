"""Ctrl-C is held while numba compiles and raised as soon as the compiler returns."""

from __future__ import annotations

import time

import pytest

from gplace.cli.interrupt import interruptible

SOURCE = """
def work():
    import os, signal, time
    os.kill(os.getpid(), signal.SIGINT)
    end = time.monotonic() + 0.5
    while time.monotonic() < end:
        pass
    return "returned"
"""


def module_function(name: str):
    g = {"__name__": name}
    exec(compile(SOURCE, name, "exec"), g)
    return g["work"]


@pytest.mark.parametrize("module, finishes", [("numba.core.fake", True),
                                              ("llvmlite.binding.fake", True),
                                              ("user_code", False)])
def test_sigint_waits_for_the_compiler_only(module, finishes, capsys):
    work, reached = module_function(module), []
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        with interruptible():
            reached.append(work())
            time.sleep(5)  # the held interrupt must arrive long before this ends
    assert (reached == ["returned"]) is finishes
    assert time.monotonic() - start < 2
    notice = "stopping once the compiler finishes" in capsys.readouterr().err
    assert notice is finishes


def test_no_signal_no_interrupt():
    """Without a signal the body runs to its end, and the handlers are put back after it."""
    import signal
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGALRM)
    done = []
    with interruptible():
        assert signal.getsignal(signal.SIGINT) is not before[0]  # held while inside
        time.sleep(0.3)
        done.append(True)
    assert done == [True]
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGALRM)) == before
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_sigterm_stops_the_command_as_terminated():
    """A SIGTERM raises Terminated (exit 143 in gplace.cli.main), held in the compiler alike;
    the handler is put back after."""
    import os
    import signal
    from gplace.cli.interrupt import Terminated
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Terminated):
        with interruptible():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
    assert signal.getsignal(signal.SIGTERM) == before
