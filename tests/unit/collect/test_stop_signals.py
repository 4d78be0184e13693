"""Campaign.signals_stop: a signal during the workers' run only sets `stopping`; the runner
raises it where it checks, as the handler in place before would have."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest

from specsweep.collect.run.campaign import Campaign


def _campaign() -> Campaign:
    return Campaign(
        store=None,
        plan=None,
        campaign_id="c",
        host=None,
        engine=None,  # type: ignore[arg-type]
        log_dir=Path("."),
        progress=None,
    )  # type: ignore[arg-type]


def test_sigint_sets_stopping_and_raises_keyboardinterrupt_at_the_check() -> None:
    """Also where SIGINT came ignored (CI runs the suite as a background job)."""
    c = _campaign()
    before = signal.getsignal(signal.SIGINT)
    with c.signals_stop() as stop:
        os.kill(os.getpid(), signal.SIGINT)
        signal.sigtimedwait([], 0)  # let Python run the handler now
        assert c.stopping.is_set()  # nothing raised yet: the handler only recorded it
        with pytest.raises(KeyboardInterrupt):
            stop.check()
    assert signal.getsignal(signal.SIGINT) == before


def test_sigterm_runs_the_handler_the_cli_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    def cli_handler(*_: object) -> None:
        raise SystemExit(143)

    previous = signal.signal(signal.SIGTERM, cli_handler)
    try:
        c = _campaign()
        with c.signals_stop() as stop:
            os.kill(os.getpid(), signal.SIGTERM)
            signal.sigtimedwait([], 0)
            os.kill(os.getpid(), signal.SIGINT)  # a second signal changes nothing
            signal.sigtimedwait([], 0)
            with pytest.raises(SystemExit) as exc:
                stop.check()
        assert exc.value.code == 143 and signal.getsignal(signal.SIGTERM) is cli_handler
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_outside_the_main_thread_nothing_is_installed() -> None:
    c = _campaign()
    seen: list[object] = []

    def worker() -> None:
        with c.signals_stop() as stop:
            stop.check()
            seen.append(stop.previous)

    t = threading.Thread(target=worker)
    t.start()
    t.join(5)
    assert seen == [{}]
