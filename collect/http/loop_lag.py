"""How late the client's event loop runs: the client's own check that it keeps up.

Every stamp is the kernel's receive time (connection.py) only while each stream's socket is
read before its next packet arrives: a loop that comes round later finds the packets merged
into one buffer with the newest stamp, so an earlier chunk's stamp is late by up to the
loop's delay. A task here sleeps PERIOD_S again and again and records how much later than
asked it woke. Its lateness covers everything that holds the loop (callbacks of other
streams, parsing, GC, the process being descheduled), which is what delays a read.

A late loop alone does not make a stamp late. A read merges the packets that arrived since
the last one under the newest packet's stamp, so a chunk is stamped late by the gap to the
chunk that shared its read, and it shares a read only when that gap is shorter than the
loop's lateness. Chunks sent in a burst (a speculative step's tokens as separate events) share
reads at no cost: their gaps are far below 2 ms. So a window is one the client could not keep
up with (`behind`) when its lateness p99 passes LATE_S, the bound the client is held to (chunk
lag p99 under 2 ms, docs/benchmarks.md), and more than SHARE of its chunk gaps lie between
LATE_S and that lateness: chunks that may carry a stamp late by more than the bound. Collect
says so in a warning line naming the window; the `windows` row keeps loop_lag_p99_s and
loop_lag_max_s either way. Asyncio wakes timers to the millisecond (epoll), so an idle loop
reads 0-1 ms late; a process sharing its cores with a busy server (the 2-core default
campaign) reads about 2-3 ms late at p99, against steps 7-30 ms apart.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import numpy as np

PERIOD_S = 0.005
LATE_S = 0.002
SHARE = 0.01  # of a window's chunk gaps


class LoopLag:
    """Start with `start()` inside a running loop; `stop()` gives (p99, max) seconds late,
    None for both when it never woke (a window shorter than PERIOD_S)."""

    def __init__(self, period_s: float = PERIOD_S) -> None:
        self.period_s = period_s
        self.late: list[float] = []
        self._task: asyncio.Task[None] | None = None

    def start(self) -> LoopLag:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    async def _run(self) -> None:
        clock, period, late = time.perf_counter, self.period_s, self.late
        while True:
            asked = clock() + period
            await asyncio.sleep(period)
            late.append(max(0.0, clock() - asked))

    def stop(self) -> tuple[float | None, float | None]:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        if not self.late:
            return None, None
        values = np.asarray(self.late)
        return float(np.quantile(values, 0.99)), float(values.max())


def behind(p99: float | None, share: float | None) -> bool:
    """Whether a window's lateness p99 says the client could not keep up: past LATE_S, with
    more than SHARE of its chunk gaps between LATE_S and the lateness (late_share; None:
    gaps unknown, the bound alone decides)."""
    return p99 is not None and p99 > LATE_S and (share is None or share > SHARE)


def late_share(p99: float | None, chunk_times: list[list[float] | None]) -> float | None:
    """The share of the streams' chunk gaps (chunk_times_s lists) longer than LATE_S and
    shorter than the loop's lateness p99: chunks whose stamp may be late by more than the
    bound. None when the streams have no gap."""
    gaps = [np.diff(t) for t in chunk_times if t is not None and len(t) > 1]
    if not gaps or p99 is None:
        return None
    values = np.concatenate(gaps)
    return float(np.mean((values > LATE_S) & (values < p99)))


def late(windows: list[dict[str, Any]], requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The windows rows (loop_lag_p99_s) the client could not keep up with, each against the
    chunk gaps of its requests rows (chunk_times_s, matched by window_id)."""
    return [
        w for w in windows
        if behind(p99 := w["loop_lag_p99_s"], late_share(
            p99, [r["chunk_times_s"] for r in requests if r["window_id"] == w["window_id"]]))
    ]  # fmt: skip
