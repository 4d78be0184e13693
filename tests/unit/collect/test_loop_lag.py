"""collect.http.loop_lag: a loop held by blocking work reads late by at least the hold; a
chunk is in doubt when its read carried later bytes and its stamp fell in a late stretch that
began long enough before it; a window with more than SHARE of its chunks in doubt is behind.
collect.http.client notes the reads that carried bytes after a chunk, and lets requests due
at once go out a few per turn of the loop."""

from __future__ import annotations

import asyncio
import json
import time
from array import array
from collections import Counter

import pytest

from specsweep.collect.engines.vllm import VLLMChatStream
from specsweep.collect.http import client
from specsweep.collect.http.loop_lag import LATE_S, SHARE, LoopLag


def test_a_held_loop_reads_late_by_the_hold_and_marks_a_late_stretch() -> None:
    async def window() -> tuple[LoopLag, float, tuple[float | None, float | None]]:
        nonlocal begun
        begun = time.perf_counter()
        lag = LoopLag(period_s=0.002).start()
        await asyncio.sleep(0.02)  # a few wake-ups of an idle loop
        held = time.perf_counter()
        time.sleep(0.05)  # a callback that holds the loop 50 ms (no stamp can be taken)
        await asyncio.sleep(0.01)
        return lag, held, lag.stop()

    begun = 0.0
    lag, held, (p99, worst) = asyncio.run(window())
    # the timer due during the hold wakes after it: at least 50 ms - one period late
    assert worst is not None and worst >= 0.048 and p99 is not None and p99 <= worst
    # a read stamped 40 ms into the hold: its earlier chunks may have waited since the hold
    # began; one stamped before the window: its bytes were read as they came
    reads = [(held + 0.05, held + 0.04, 0, 1, 0), (begun, begun - 0.001, 0, 1, 0)]
    assert lag.late_at(reads).tolist() == [True, False]


def test_no_wake_up_reads_none() -> None:
    async def instant() -> tuple[float | None, float | None]:
        lag = LoopLag(period_s=10.0).start()
        await asyncio.sleep(0)
        return lag.stop()

    assert asyncio.run(instant()) == (None, None)


def _lag(*stretches: tuple[float, float], period_s: float = 0.001) -> LoopLag:
    lag = LoopLag(period_s=period_s)
    lag.due = array("d", [d for d, _ in stretches])
    lag.woke = array("d", [w for _, w in stretches])
    return lag


def test_a_stamp_is_in_doubt_only_in_a_stretch_that_began_early_enough() -> None:
    # late stretches: 10.000-10.100 and 11.000-11.003 (a probe due then woke 100 and 3 ms late)
    lag = _lag((10.0, 10.1), (11.0, 11.003))
    reads = [
        (10.1, 10.05, 0, 1, 0),  # 50 ms into the first: the chunk may have waited since 10.000
        (10.1, 10.0015, 0, 1, 0),  # 1.5 ms in: a chunk came at most 1.5 + 1 (period) ms before
        (10.1, 10.0005, 0, 1, 0),  # 0.5 ms in: at most 1.5 ms before, within LATE_S
        (10.2, 10.15, 0, 1, 0),  # between stretches: read as it came
        (9.9, 9.9, 0, 1, 0),  # before any stretch
        (11.01, 11.0025, 0, 1, 0),  # 2.5 ms into the second
        (12.0, 12.0, 0, 1, 0),  # after every stretch
    ]
    assert lag.late_at(reads).tolist() == [True, True, False, False, False, True, False]
    assert _lag().late_at(reads).tolist() == [False] * len(reads) and not len(lag.late_at([]))


def test_a_window_is_behind_when_more_than_share_of_its_chunks_are_in_doubt() -> None:
    # one read 50 ms into a 100 ms stretch carried 3 chunks before its last bytes; another
    # read came after the stretch. Each stream's reads 10 ms apart: each of the 3 may have
    # been written apart from the later bytes (every gap lies between 2 ms and the 51 ms the
    # read's chunks may have waited)
    reads = [(10.1, 10.05, 2, 5, 0), (10.3, 10.3, 7, 9, 0)]
    lag = _lag((10.0, 10.1))
    lag.take([0.01 * k for k in range(100)], reads)
    assert lag.in_doubt() == pytest.approx(3) and SHARE * 100 < 3 and lag.behind()
    # reads 80 ms apart, each a burst written at once: no write came within 51 ms of another
    bursts = _lag((10.0, 10.1))
    bursts.take([0.08 * (k // 10) for k in range(100)], reads)
    assert bursts.in_doubt() == 0 and not bursts.behind()
    # half the gaps 5 ms, half 80 ms: half of the 3 in expectation; 1.5 of 100 is behind
    mixed = _lag((10.0, 10.1))
    mixed.take([0.0, 0.005, 0.085, 0.09, 0.17, 0.175, 0.255], reads)
    mixed.take([0.0] * 93, [])
    assert mixed.in_doubt() == pytest.approx(1.5) and mixed.chunks == 100 and mixed.behind()
    # no stream read twice: every chunk of a late read counts; 1% exactly is not behind
    single = _lag((10.0, 10.1))
    single.take([0.5], [(10.1, 10.05, 0, 1, 0)])
    single.take([0.0] * 99, [])
    assert single.in_doubt() == 1 and not single.behind()
    # a stream's last chunk read with its final events: their gap is not known, it counts
    # in full even where the chunks' own gaps say a burst
    tail = _lag((10.0, 10.1))
    tail.take([0.08 * (k // 10) for k in range(100)], [(10.1, 10.05, 2, 5, 1)])
    assert tail.in_doubt() == 1
    assert not LoopLag().behind()  # no chunks


def _event(text: str, finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": {"content": text}, "finish_reason": finish}
    return b"data: " + json.dumps({"choices": [choice]}).encode() + b"\n\n"


def test_the_client_notes_reads_that_carried_bytes_after_a_chunk() -> None:
    result = client.Result(sent_at=None, t0=0.0)  # type: ignore[arg-type]
    events = client._Events(VLLMChatStream(), result)
    events(1.0, _event("a"))  # one chunk alone: its stamp is its own
    events(1.1, _event("b") + _event("c"))  # two: b's stamp is c's
    events(1.2, _event("d") + _event("e")[:10])  # d and part of e: d's stamp is e's part's
    events(1.3, _event("e")[10:])  # the rest of e, alone
    events(1.4, _event("f") + _event("", finish="length"))  # f, then an event with no text
    assert events(1.5, _event("g") + b"data: [DONE]\n\n")  # g, then the end
    assert result.chunk_times_s == [1.0, 1.1, 1.1, 1.2, 1.3, 1.4, 1.5]
    # (stamp, first chunk, past the last, whether the last came before bytes of no text chunk)
    assert [x[1:] for x in result.shared] == [
        (1.1, 1, 2, 0),
        (1.2, 3, 4, 1),
        (1.4, 5, 6, 1),
        (1.5, 6, 7, 1),
    ]
    assert all(x[0] >= 0 for x in result.shared)
    assert LATE_S == 0.002  # the bound of docs/benchmarks.md


def test_requests_due_at_once_go_out_a_few_per_turn_of_the_loop_in_order() -> None:
    async def burst() -> list[tuple[int, int]]:
        loop, turn = asyncio.get_running_loop(), [0]

        def tick() -> None:  # counts the loop's turns
            turn[0] += 1
            loop.call_soon(tick)

        loop.call_soon(tick)
        passed: list[tuple[int, int]] = []

        async def one(i: int) -> None:
            await client._turn()
            passed.append((i, turn[0]))

        await asyncio.gather(*(one(i) for i in range(50)))
        return passed

    passed = asyncio.run(burst())
    assert [i for i, _ in passed] == list(range(50))  # in the order they came
    per_turn = Counter(t for _, t in passed)
    assert max(per_turn.values()) == client.SENDS_PER_TURN and len(per_turn) >= 4
