"""The report's agentic table says which turns compare across methods (agentic_turns.pairing)
and, when some do not, why."""

from __future__ import annotations

import pandas as pd

from specsweep.report.context import agentic_table


def _turns(pairings: list[str] | None) -> pd.DataFrame:
    rows = [
        {
            "workload": "ag",
            "method": m,
            "turn": t,
            "n": 2,
            "prompt_tokens_p50": 100.0 * (t + 1),
            "cached_tokens_p50": 0.0,
            "ttft_p50_s": 0.1,
            "decode_tps_p50": 50.0,
        }
        for m in ("autoregressive", "ngram")
        for t in (0, 1)
    ]
    frame = pd.DataFrame(rows)
    if pairings is not None:
        frame["pairing"] = pairings
    return frame


def test_own_history_turns_are_marked_and_explained() -> None:
    tex = str(agentic_table(_turns(["first_turn", "own_history"] * 2)))
    assert tex.count("no (own history)") == 2 + 1  # two rows, and the note names the mark
    assert tex.count("yes (turn 0)") == 2
    assert "are not compared" in tex and "history: replay" in tex


def test_replayed_turns_all_pair_and_need_no_note() -> None:
    tex = str(agentic_table(_turns(["first_turn", "script", "first_turn", "replay"])))
    assert "yes (script)" in tex and "yes (replay)" in tex
    assert "own history" not in tex and "not compared" not in tex


def test_an_analysis_without_pairing_shows_no_paired_column() -> None:
    tex = str(agentic_table(_turns(None)))
    assert "paired" not in tex and "not compared" not in tex
