"""collect.scheduling.sizing: the closed-loop window-size warning of `collect check`, and the
effective-concurrency figure it rests on, checked against a small closed-loop simulation."""

from __future__ import annotations

import heapq
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specsweep.collect.__main__ import app
from specsweep.collect.plan.file import parse_plan
from specsweep.collect.scheduling.sizing import (
    MIN_REQUESTS_PER_SLOT,
    effective_concurrency,
    varied_concurrency,
    window_warnings,
)

HEAD = """\
name: t
engine:
  kind: llamacpp
  model: m.gguf
methods:
  - name: autoregressive
workloads:
"""
CHAT = """\
  - name: chat
    prompts: {kind: inline, texts: [a, b, c]}
    max_tokens: [64]
    repetitions: 3
    concurrency: [1, 2, 4]
"""


def simulated_in_flight(lengths: list[float], c: int) -> float:
    """A closed loop played out: c slots, each sends the next request when its last ends;
    mean in flight = total busy time / (last end - first send)."""
    slots = [0.0] * c
    heapq.heapify(slots)
    end = 0.0
    for length in lengths:
        start = heapq.heappop(slots)
        end = max(end, start + length)
        heapq.heappush(slots, start + length)
    return sum(lengths) / end


def test_the_formula_is_the_closed_loop_of_equal_requests() -> None:
    """9 requests at c = 4: waves of 4, 4, 1: 9 / 3 = 3.0; 33 at c = 8: 33 / 5 = 6.6."""
    assert effective_concurrency(9, 4) == pytest.approx(3.0)
    assert effective_concurrency(33, 8) == pytest.approx(6.6)
    for c in (1, 2, 3, 4, 8, 16):
        for n in range(1, 6 * c):
            assert effective_concurrency(n, c) == pytest.approx(simulated_in_flight([1.0] * n, c))


def test_varied_lengths_stay_above_the_graham_figure() -> None:
    """16 requests at c = 4 alternating 0.5 and 1.5 s (mean 1, max 1.5): the loop keeps
    16 / 4.5 = 3.56 in flight (its last slot ends at 4.5 s), above 4 * 16 / 19 = 3.37; one
    wave of 8 at c = 8: 64 / 15 = 4.27; at c = 1 the figure is 1."""
    assert varied_concurrency(16, 4) == pytest.approx(64 / 19)
    assert simulated_in_flight([0.5, 1.5] * 8, 4) == pytest.approx(16 / 4.5)
    assert varied_concurrency(8, 8) == pytest.approx(64 / 15)
    assert varied_concurrency(3, 1) == pytest.approx(1.0)
    for c in (1, 2, 4, 8):
        for n in range(1, 5 * c):
            assert varied_concurrency(n, c) <= effective_concurrency(n, c) + 1e-12


def test_four_requests_per_slot_keep_four_fifths_of_the_concurrency() -> None:
    """From n = 4c on the simulated loop never falls to 4/5 of c; with 3 per slot it can: at
    3c + 1, (3c + 1) / 4 <= 4/5 c once c >= 5 (8: 25 / 4 = 6.25 of 8)."""
    assert MIN_REQUESTS_PER_SLOT == 4
    for c in (2, 4, 8, 16, 32):
        assert min(simulated_in_flight([1.0] * n, c) for n in range(4 * c, 12 * c)) > 0.8 * c
    assert simulated_in_flight([1.0] * 25, 8) == pytest.approx(6.25)
    for c in (5, 8, 16, 32):
        assert simulated_in_flight([1.0] * (3 * c + 1), c) <= 0.8 * c


def test_a_small_window_is_warned_naming_workload_and_fields() -> None:
    """chat: 3 prompts x 3 repetitions = 9 requests: enough at c = 1 (4) and c = 2 (8), not
    at c = 4 (16): about 3.0 in flight."""
    lines = window_warnings(parse_plan(HEAD + CHAT))
    # 4 * 9 / 12 = 9 / 3 = 3.0: the two figures agree
    assert lines == [
        "workload 'chat' (workloads[0]): concurrency 4 with 9 requests (3 prompts x 3 "
        "repetitions) per window keeps about 3.0 of 4 in flight on average; give it at least "
        "16 (4 x concurrency: raise `repetitions` or the prompts) or lower `concurrency`"
    ]


def test_per_max_tokens_prompt_limits_agentic_sessions_and_open_loop() -> None:
    """max_prompts {256: 1}: 1 x 3 = 3 requests at max_tokens 256 (c = 2 needs 8): 2 * 3 / 4
    = 3 / 2 = 1.5; 9 at 64 are enough. agentic: 4 sessions at c = 4 (needs 16): 16 / 7 =
    2.3 (varied) to 4 / 1 = 4.0 (equal); at c = 1 never (one slot is always full). An
    open-loop workload has no concurrency levels and no warning."""
    text = (
        HEAD
        + """\
  - name: long
    prompts: {kind: inline, texts: [a, b, c]}
    max_tokens: [64, 256]
    max_prompts: {256: 1}
    repetitions: 3
    concurrency: [1, 2]
  - name: ag
    kind: agentic
    turns: [{role: user, content: x}, {role: tool, content: y}]
    max_tokens: [8]
    repetitions: 4
    concurrency: [1, 4]
  - name: open
    prompts: {kind: inline, texts: [a]}
    max_tokens: [8]
    load: {rate: [1.0], requests: 2}
"""
    )
    lines = window_warnings(parse_plan(text))
    assert len(lines) == 2
    assert lines[0].startswith(
        "workload 'long' (workloads[0], max_tokens 256): concurrency 2 "
        "with 3 requests (1 prompts x 3 repetitions) per window keeps "
        "about 1.5 of 2 in flight"
    )
    assert lines[1].startswith(
        "workload 'ag' (workloads[1]): concurrency 4 with 4 sessions "
        "(repetitions) per window keeps about 2.3 (lengths varying) to "
        "4.0 (equal lengths) of 4 in flight"
    )


def test_check_prints_the_warning(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(HEAD + CHAT)
    result = CliRunner().invoke(app, ["check", str(plan)])
    assert result.exit_code == 0, result.output
    assert "warning: workload 'chat' (workloads[0]): concurrency 4 with 9 requests" in (
        result.output
    )
