"""collect.http.loop_lag: a loop held by blocking work reads late by at least the hold, and
a window that late is one the client could not keep up with."""

from __future__ import annotations

import asyncio
import time

import pytest

from specsweep.collect.http.loop_lag import LATE_S, LoopLag, behind, late_share


def test_a_held_loop_reads_late_by_the_hold() -> None:
    async def window() -> tuple[float | None, float | None]:
        lag = LoopLag(period_s=0.002).start()
        await asyncio.sleep(0.02)  # a few wake-ups of an idle loop
        time.sleep(0.05)  # a callback that holds the loop 50 ms (no stamp can be taken)
        await asyncio.sleep(0.01)
        return lag.stop()

    p99, worst = asyncio.run(window())
    # the timer due during the hold wakes after it: at least 50 ms - one period late
    assert worst is not None and worst >= 0.048
    assert p99 is not None and p99 <= worst and behind(worst, late_share(worst, [[0, 0.01, 0.02]]))
    # chunks 100 ms apart: every read held one chunk
    assert not behind(worst, late_share(worst, [[0.0, 0.1, 0.2]]))


def test_no_wake_up_reads_none_and_only_past_the_bound_is_behind() -> None:
    async def instant() -> tuple[float | None, float | None]:
        lag = LoopLag(period_s=10.0).start()
        await asyncio.sleep(0)
        return lag.stop()

    assert asyncio.run(instant()) == (None, None)
    assert not behind(None, None) and not behind(LATE_S, None) and behind(LATE_S * 1.01, None)
    # 3 ms late: chunks 10 ms apart never share a read; 2.5 ms apart may, a stamp then late
    # by 2.5 ms; a burst 0.1 ms apart may, late by no more than 0.1 ms
    assert not behind(0.003, late_share(0.003, [[0.0, 0.01, 0.02]]))
    assert behind(0.003, late_share(0.003, [[0.0, 0.0025, 0.005]]))
    assert not behind(0.003, late_share(0.003, [[0.0, 0.0001, 0.0002, 0.0102]]))


def test_the_share_of_gaps_between_the_bound_and_the_lateness() -> None:
    # gaps 1, 3, 10 ms | 4 ms | none (one chunk) | none: of 1, 3, 4, 10 ms, 3 and 4 lie
    # between 2 ms and a lateness of 5 ms
    chunks = [[0.0, 0.001, 0.004, 0.014], [1.0, 1.004], [2.0], None]
    assert late_share(0.005, chunks) == pytest.approx(2 / 4)
    assert late_share(0.005, [[0.5], None]) is None and late_share(None, chunks) is None
