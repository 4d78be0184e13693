"""Ctrl-C and SIGTERM, the same in every command: the work unwinds, one line says what is
kept, and the exit code is 128 + the signal's number (130, 143).

`unwind_on_signals()` wraps a command's work. While it runs, SIGINT and SIGTERM raise
`Interrupted` in the main thread, so `with` blocks and `finally` clauses run: a unit's
transaction rolls back, running servers are stopped, worker pools are terminated and
temporary files go, instead of the process dying where it stands (Python's default for
SIGTERM). SIGINT is honoured even where it came ignored: a job that a non-interactive shell
put in the background inherits SIG_IGN, and Python keeps it.

A signal that lands during a DuckDB query does not reach Python as the handler's exception:
DuckDB interrupts the query and raises `RuntimeError: Query interrupted` in its place. So
any exception that leaves the block after a signal came is raised again as `Interrupted`
(the signal is why the work stopped, whatever broke on the way out).

`Interrupted` is a KeyboardInterrupt, so code that keeps what it measured on Ctrl-C (the
collect runner's incomplete units) does the same on SIGTERM.

Worker processes come from `worker_pool`: built whole before a signal is raised, their
workers ignore SIGINT (a terminal's Ctrl-C goes to the whole process group, and a worker
that took it would print its own traceback; the parent, which took it too, terminates its
pool instead).

This module sits below the stages (the `stages` import contract) so that collect, analyze
and report, which may not import one another, share it.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # multiprocessing is not loaded for a command that starts no workers
    from multiprocessing.context import BaseContext
    from multiprocessing.pool import Pool

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """SIGINT (Ctrl-C) or SIGTERM asked the command to stop."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        """The shell's code for a process a signal ended: 130 for SIGINT, 143 for SIGTERM."""
        return 128 + self.signum


@contextlib.contextmanager
def unwind_on_signals() -> Iterator[None]:
    """SIGINT and SIGTERM raise Interrupted while the block runs (the module says why);
    the handlers in place before are restored after it."""
    received: list[int] = []

    def stop(signum: int, frame: object) -> None:
        received.append(signum)
        if _HOLD.building:
            _HOLD.signals.append(signum)  # raised once the pool is built
        else:
            raise Interrupted(signum)

    before = {s: signal.signal(s, stop) for s in SIGNALS}
    try:
        yield
    except BaseException as exc:
        if received and not isinstance(exc, Interrupted):
            raise Interrupted(received[0]) from exc
        raise
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


class _HOLD:  # while worker_pool builds a pool, the signals that came wait here
    building = 0
    signals: list[int] = []  # noqa: RUF012 - the process's one list, as its signals are


@contextlib.contextmanager
def worker_pool(context: BaseContext, workers: int) -> Iterator[Pool]:
    """``context.Pool(workers)``, ended by its ``terminate()`` however the block is left,
    built whole before a signal is raised: one that comes while the workers start waits
    until the pool is built, then raises inside its ``with``. (Raised within Pool(), which
    catches Exception, not KeyboardInterrupt, it would leave the workers it had started to
    die on their own, each printing a traceback.) Its workers ignore SIGINT from
    `quiet_worker` on; a terminal's Ctrl-C that comes before, while a new process still
    imports its modules (the first second or two), prints that process's traceback, and
    the command ends as it would have. (Ignoring SIGINT while the pool starts would keep
    them quiet, by losing a Ctrl-C that comes then; blocking it does not reach them:
    multiprocessing's exec resets the mask.)"""
    _HOLD.building += 1
    try:
        pool = context.Pool(workers, quiet_worker)
    except BaseException:
        _HOLD.building -= 1
        _HOLD.signals.clear()
        raise
    with pool:
        _HOLD.building -= 1
        if _HOLD.signals:
            signum = _HOLD.signals[0]
            _HOLD.signals.clear()
            raise Interrupted(signum)
        yield pool


def quiet_worker() -> None:
    """A pool worker's initializer: SIGINT ignored (the parent terminates the pool)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
