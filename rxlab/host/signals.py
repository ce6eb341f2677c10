"""Signals while rxlab changes a real host: the one place that decides what Ctrl-C,
``kill`` and a closed terminal do to ``host apply``, ``kernel-check`` and ``calibrate``.

Two rules, both so that the host is put back whatever arrives:

* ``exit_on_signals``: SIGTERM and SIGHUP raise ``SystemExit(128 + N)`` and SIGINT
  ``KeyboardInterrupt``, so every ``finally`` that restores a sysctl or deletes a namespace
  runs; ``signals_ignored`` around that cleanup so a second Ctrl-C cannot cut it short.
* ``interruptible``: the first signal raises ``Interrupted`` and every later one is
  ignored, so the rollback of ``host apply`` that follows runs to its end.

A signal ignored when rxlab started (a background job's SIGINT) stays ignored.
Main thread only: elsewhere ``signal.signal`` raises ValueError and nothing is changed.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # Ctrl-C, kill, a closed terminal
_PENDING: list[int] = []  # signals received inside exit_on_signals


class Interrupted(BaseException):  # noqa: N818 - like KeyboardInterrupt, not an error
    """SIGINT, SIGTERM or SIGHUP arrived inside ``interruptible``. Raised again once the
    changes made so far are rolled back, with the one line that says how that went; the
    CLI exits with 128 + ``signum``. A BaseException, so ``except Exception`` never
    mistakes it for a failed step."""

    def __init__(self, signum: int, message: str = ""):
        super().__init__(signum, message)
        self.signum, self.message = signum, message


def _raise_for(signum: int) -> None:
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise SystemExit(128 + signum)


def check_signals() -> None:
    """Raise again for a signal already received: an exception raised by a signal
    handler while Python runs a finalizer (``__del__``) is printed and dropped, so the
    experiment loops call this between runs."""
    if _PENDING:
        _raise_for(_PENDING[-1])


@contextlib.contextmanager
def _handled(handler, keep_ignored: bool = True) -> Iterator[None]:
    """``handler`` for every signal of SIGNALS (but those ignored at start, with
    ``keep_ignored``); the old handlers after."""
    old = {}
    for sig in SIGNALS:
        with contextlib.suppress(ValueError):
            if keep_ignored and signal.getsignal(sig) is signal.SIG_IGN:
                continue
            old[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


@contextlib.contextmanager
def exit_on_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP raise SystemExit (so ``finally`` blocks run), SIGINT
    KeyboardInterrupt; each is also recorded for ``check_signals``."""
    def handler(signum, _frame):
        _PENDING.append(signum)
        _raise_for(signum)
    _PENDING.clear()
    with _handled(handler):
        yield


def ignore_signals() -> None:
    """From now on SIGINT, SIGTERM and SIGHUP are ignored (until a context restores)."""
    for sig in SIGNALS:
        with contextlib.suppress(ValueError):
            signal.signal(sig, signal.SIG_IGN)


@contextlib.contextmanager
def signals_ignored() -> Iterator[None]:
    """Cleanup must not be cut short by a second Ctrl-C or SIGTERM."""
    with _handled(signal.SIG_IGN, keep_ignored=False):
        yield


@contextlib.contextmanager
def interruptible() -> Iterator[list[int]]:
    """The first SIGINT, SIGTERM or SIGHUP raises ``Interrupted``; from then on they are
    ignored, so the rollback that follows cannot be cut short. The signal is also kept
    in the list yielded, for the loop to raise again should the exception have been
    swallowed where Python cannot propagate it."""
    caught: list[int] = []

    def handler(signum, _frame):
        ignore_signals()
        caught.append(signum)
        raise Interrupted(signum)

    with _handled(handler):
        yield caught
