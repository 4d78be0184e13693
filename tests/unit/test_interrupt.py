"""specsweep.interrupt: signals that unwind, pools that a signal cannot catch half-built.
Real signals sent to this process, real worker processes, real DuckDB."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time

import duckdb
import pytest

from specsweep.interrupt import Interrupted, unwind_on_signals, worker_pool

LONG_QUERY = "SELECT count(*) FROM range(10000000000) t(i) WHERE i % 7 = 3"  # minutes


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_raises_interrupted_and_the_handlers_come_back(signum: int, code: int) -> None:
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    with pytest.raises(Interrupted) as stopped, unwind_on_signals():
        os.kill(os.getpid(), signum)
        signal.sigtimedwait([], 0)  # let Python run the handler now
        raise AssertionError("not interrupted")
    assert stopped.value.signum == signum and stopped.value.exit_code == code
    assert isinstance(stopped.value, KeyboardInterrupt)  # kept-on-Ctrl-C paths keep on SIGTERM
    assert {s: signal.getsignal(s) for s in before} == before


def test_a_signal_during_a_duckdb_query_is_interrupted_not_a_runtimeerror() -> None:
    """DuckDB stops the query and raises RuntimeError "Query interrupted" in place of the
    handler's exception: the block raises Interrupted all the same."""
    con = duckdb.connect()
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGTERM))
    started = time.monotonic()
    with pytest.raises(Interrupted) as stopped, unwind_on_signals():
        timer.start()
        con.execute(LONG_QUERY).fetchall()
    assert stopped.value.signum == signal.SIGTERM and time.monotonic() - started < 30
    assert "interrupted" in str(stopped.value.__cause__).lower()  # DuckDB's, kept as the cause


class _SignalledWhileBuilding:
    """A multiprocessing context whose Pool() is signalled after its workers have started
    and before it returns: where Ctrl-C lands while a pool is being built."""

    def __init__(self) -> None:
        self.context = multiprocessing.get_context("spawn")
        self.workers: list[multiprocessing.process.BaseProcess] = []

    def Pool(self, workers: int, initializer: object) -> object:  # noqa: N802 - the context's
        pool = self.context.Pool(workers, initializer)
        self.workers = list(pool._pool)  # noqa: SLF001 - the processes it started
        os.kill(os.getpid(), signal.SIGINT)
        signal.sigtimedwait([], 0)  # the handler runs here, inside Pool()
        return pool


def test_a_signal_while_a_pool_is_built_ends_the_pool_and_its_workers() -> None:
    context = _SignalledWhileBuilding()
    with (
        pytest.raises(Interrupted) as stopped,
        unwind_on_signals(),
        worker_pool(context, 2),  # type: ignore[arg-type]
    ):
        raise AssertionError("the held signal was not raised")
    assert stopped.value.signum == signal.SIGINT and len(context.workers) == 2
    for worker in context.workers:  # terminate() and join(): none left to print a traceback
        assert worker.exitcode is not None
    with unwind_on_signals(), worker_pool(multiprocessing.get_context("spawn"), 1) as pool:
        assert pool.apply(int, ("7",)) == 7  # nothing held over to interrupt the next pool


def test_pool_workers_ignore_sigint() -> None:
    """A terminal's Ctrl-C reaches the whole process group; the parent ends the pool."""
    with worker_pool(multiprocessing.get_context("spawn"), 1) as pool:
        assert pool.apply(signal.getsignal, (signal.SIGINT,)) == signal.SIG_IGN
