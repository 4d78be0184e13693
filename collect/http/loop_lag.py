"""How late the client's event loop runs, and which chunk stamps that may have made late: the
client's own check that it keeps up.

Every stamp is the kernel's receive time (connection.py) only while each stream's socket is
read before its next bytes arrive: a loop that comes round later finds the packets merged
into one buffer with the newest stamp, so an earlier chunk's stamp is late by up to the
loop's delay. A task here sleeps PERIOD_S again and again and records how much later than
asked it woke. Its lateness covers everything that holds the loop (callbacks of other
streams, parsing, GC, the process being descheduled), which is what delays a read; a probe
that woke more than LATE_S late marks a late stretch, from its due time to its wake.

Which chunks may be late (`LoopLag.in_doubt`, an expected count):
- only a chunk whose read also carried bytes that came after it (the client notes those
  reads, `Result.shared`): the read's stamp is the newest byte's, the chunk's own arrival
  is not known;
- only where the read's stamp fell in a late stretch that began long enough before it: a
  chunk that came in a hold came after the hold began, at most a period before the first
  probe due in it, so it waited at most from then to the stamp (`reach`);
- a chunk followed in its read by another text chunk counts by the share of the window's
  gaps between a stream's reads that lie between LATE_S and that reach: one the server
  wrote apart from the next is late by the gap between the writes, while the tokens of a
  speculative step, sent as separate events at once, share a read at no cost. (Counted
  in full, llama.cpp's draft bursts in 17-22 ms holds on 2 busy cores made 1.3-2.5% of a
  window's chunks doubtful, where no write came within 20 ms of another.)
- a stream's last chunk read with its final events (or with part of an event) counts in
  full: the gap between them is not known. This errs on the safe side where replies are
  short: a 40-chunk reply's last chunk is 2.5% of its chunks.

A window is one the client could not keep up with (`behind`) when more than SHARE of its
chunks are in doubt: then a p99 of chunk lag under LATE_S, the bound the client is held to
(docs/benchmarks.md), is no longer assured. Collect says so in a warning line naming the
window; the `windows` row keeps loop_lag_p99_s and loop_lag_max_s either way.

Why not the lateness p99 alone (the rule before 2026-12-06): one long hold is one sample
among hundreds, so at 1,024 streams a 110-130 ms hold per 2 s window left the p99 at 5-33 ms
while TTFT p99 was 150 ms and the verdict said the client kept up
(docs/measurements/2026-12-06-streams-doubt.md). Each chunk is judged by its own read now.

Limits: asyncio wakes a timer to the millisecond (epoll), so an idle loop reads 0-1 ms
late, and a hold is seen from the first probe due in it. The probe costs about 1,000
wake-ups a second; its samples are kept as 8-byte floats (29 MB for an hour's window).
"""

from __future__ import annotations

import asyncio
import time
from array import array
from collections.abc import Iterable

import numpy as np

PERIOD_S = 0.001
LATE_S = 0.002
SHARE = 0.01  # of a window's chunks

# a read that carried bytes after a chunk: (perf_counter at the read, the read's stamp, index
# of its first chunk that may be late, index past its last, in the stream's chunk_times_s;
# 1 when the last of them came before bytes that were no text chunk, else 0)
Shared = tuple[float, float, int, int, int]


class LoopLag:
    """Start with `start()` inside a running loop; `stop()` gives (p99, max) seconds late,
    None for both when it never woke (a window shorter than PERIOD_S). `take` counts the
    chunks of each stream read in the window; `in_doubt` judges them once stopped (the
    gaps between reads are taken then, and only if some read was late: nothing of it runs
    on the event loop per request but the notes)."""

    def __init__(self, period_s: float = PERIOD_S) -> None:
        self.period_s = period_s
        self.late = array("d")
        self.due, self.woke = array("d"), array("d")  # the late stretches, in time order
        self.chunks = 0
        # of each taken read that carried bytes after a chunk: its stamp, its chunks before
        # another text chunk (inner), and 1 when its last chunk came before other bytes only
        self.stamps, self.inner, self.tails = array("d"), array("d"), array("d")
        self.streams: list[list[float]] = []  # each stream's chunk stamps (not copied)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> LoopLag:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    async def _run(self) -> None:
        clock, period, late = time.perf_counter, self.period_s, self.late
        while True:
            due = clock() + period
            await asyncio.sleep(period)
            now = clock()
            late.append(max(0.0, now - due))
            if now - due > LATE_S:
                self.due.append(due)
                self.woke.append(now)

    def stop(self) -> tuple[float | None, float | None]:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        if not self.late:
            return None, None
        values = np.frombuffer(self.late)
        return float(np.quantile(values, 0.99)), float(values.max())

    def take(self, chunk_times: list[float], shared: Iterable[Shared]) -> None:
        """One stream's chunk stamps and its reads that carried bytes after a chunk."""
        self.chunks += len(chunk_times)
        for _, stamp, start, end, tail in shared:
            self.stamps.append(stamp)
            self.inner.append(end - start - tail)
            self.tails.append(tail)
        self.streams.append(chunk_times)  # its gaps are taken only if a read was late

    def reach(self, stamps: np.ndarray) -> np.ndarray:
        """How long the chunks of reads with these stamps may have waited unread: from the
        start of the hold the stamp fell in to the stamp (0 outside late stretches). The hold
        began at most a period before the first probe due in it (which woke after the
        stamp), and a chunk that came in it is late by at most the time to the stamp."""
        if not self.due or not len(stamps):
            return np.zeros(len(stamps))
        due, woke = np.frombuffer(self.due), np.frombuffer(self.woke)
        i = np.searchsorted(woke, stamps)  # the first late stretch not over at the stamp
        reach = stamps - due[np.minimum(i, len(due) - 1)] + self.period_s
        return np.where((i < len(due)) & (reach > 0), reach, 0.0)

    def late_at(self, shared: list[Shared]) -> np.ndarray:
        """Whether each read's earlier chunks may have waited more than LATE_S."""
        return self.reach(np.array([x[1] for x in shared], float)) > LATE_S

    def in_doubt(self) -> float:
        """How many of the taken chunks may carry a stamp late by more than LATE_S, of the
        reads whose chunks may have waited more than LATE_S (an expected count):
        - a chunk that came before another text chunk in its read, weighed by the share of
          the window's gaps between a stream's reads that lie between LATE_S and that wait:
          a chunk the server wrote apart from the next is late by the gap between the two
          writes, and one of a burst written at once (a speculative step's tokens as
          separate events) is not late at all;
        - in full, a chunk that came before other bytes only (the stream's last chunk before
          its final events, or part of an event), whose gap to them is not known.
        Every chunk in full where no stream read twice."""
        reach = self.reach(np.frombuffer(self.stamps) if self.stamps else np.zeros(0))
        late = reach > LATE_S
        if not late.any():
            return 0.0
        inner, tails = np.frombuffer(self.inner), np.frombuffer(self.tails)
        parts = [np.diff(np.unique(t)) for t in self.streams if len(t) > 1]
        gaps = np.sort(np.concatenate(parts)) if parts else np.zeros(0)
        if not len(gaps):
            return float((inner + tails) @ late)
        within = np.searchsorted(gaps, reach) - np.searchsorted(gaps, LATE_S, side="right")
        return float(inner @ (np.maximum(within, 0) / len(gaps)) + tails @ late)

    def behind(self) -> bool:
        """Whether more than SHARE of the window's chunks are in doubt."""
        return self.chunks > 0 and self.in_doubt() > SHARE * self.chunks

    def warning(self) -> str | None:
        """What collect says of a window that is behind (None when it is not), once stopped."""
        doubt = self.in_doubt() if self.chunks else 0.0
        if doubt <= SHARE * self.chunks:  # not behind
            return None
        return (
            f"the client could not keep up: about {doubt / self.chunks:.1%} of its "
            f"{self.chunks:,} chunks may carry a stamp late by more than {LATE_S * 1e3:g} ms "
            f"(read with later bytes while its loop ran late, by up to "
            f"{max(self.late) * 1e3:.0f} ms)"
        )
