"""collect.http.loop_lag: a loop held by blocking work reads late by at least the hold, and
a window that late is one the client could not keep up with."""

from __future__ import annotations

import asyncio
import time

import pytest

from specsweep.collect.http.loop_lag import LATE_S, LoopLag, behind, median_gap


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
    assert p99 is not None and p99 <= worst and behind(worst, gap_s=0.01)
    assert not behind(worst, gap_s=0.1)  # streams 100 ms apart: every read held one chunk


def test_no_wake_up_reads_none_and_only_past_the_bound_is_behind() -> None:
    async def instant() -> tuple[float | None, float | None]:
        lag = LoopLag(period_s=10.0).start()
        await asyncio.sleep(0)
        return lag.stop()

    assert asyncio.run(instant()) == (None, None)
    assert not behind(None, None) and not behind(LATE_S, None) and behind(LATE_S * 1.01, None)
    # 3 ms late against chunks 10 ms apart (a busy 2-core host): no read merged two chunks
    assert not behind(0.003, 0.010) and behind(0.003, 0.0025)


def test_the_median_gap_of_a_window_s_streams() -> None:
    # gaps 0.1, 0.2 | 0.3 | none (one chunk) | none (no chunks): median of 0.1, 0.2, 0.3
    assert median_gap([[0.0, 0.1, 0.3], [1.0, 1.3], [2.0], None]) == pytest.approx(0.2)
    assert median_gap([[0.5], None]) is None
