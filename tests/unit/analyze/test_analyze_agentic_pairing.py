"""Agentic turns pair across methods only where their prompts are the baseline's: turn 0
always; later turns only where the method replayed the baseline's replies (requests.history
= 'replay'). Hand-built rows; the expected pairing of each turn is worked out below."""

from __future__ import annotations

from pathlib import Path

import duckdb

from specsweep.analyze import build
from tests.support.analyze_rows import AR, decode_req, fetch, write_db

FAST = "fast"


def _session_rows() -> tuple[list[dict], dict[str, str | None]]:
    """Two workloads of 2 sessions x 2 turns for AR and FAST: 'replayed' (FAST replayed AR's
    replies) and 'owned' (each its own; FAST's rows from before v10: history NULL).
    Returns the rows and request_id -> history."""
    rows, history = [], {}
    for workload, fast_history in (("replayed", "replay"), ("owned", None)):
        for method, mode in ((AR, "own"), (FAST, fast_history)):
            for s in (0, 1):
                for turn in (0, 1):
                    tps = 10.0 if method == AR else 20.0
                    r = decode_req(
                        tps,
                        method=method,
                        workload=workload,
                        session_id=f"s{s}",
                        turn=turn,
                        rep=s,
                        prompt_id=f"{workload}/turn{turn}",
                        window_id=f"{workload}-{method}",
                    )
                    rows.append(r)
                    history[r["request_id"]] = mode
    return rows, history


def _analyzed(tmp_path: Path) -> Path:
    path = tmp_path / "specsweep.duckdb"
    rows, history = _session_rows()
    write_db(path, rows)
    with duckdb.connect(str(path)) as con:  # analyze_rows writes no history: set it here
        con.executemany(
            "UPDATE requests SET history = ? WHERE request_id = ?",
            [[h, rid] for rid, h in history.items()],
        )
    build.run(path, baseline=AR)
    return path


def test_agentic_turns_say_which_turns_pair_and_why(tmp_path: Path) -> None:
    rows = fetch(
        _analyzed(tmp_path),
        "SELECT workload, method, turn, history, paired, pairing "
        "FROM agentic_turns ORDER BY workload, method, turn",
    )
    assert [tuple(r.values()) for r in rows] == [
        # owned: only turn 0 pairs; FAST's NULL history (an older file) counts as its own
        ("owned", AR, 0, "own", True, "first_turn"),
        ("owned", AR, 1, "own", False, "own_history"),
        ("owned", FAST, 0, "own", True, "first_turn"),
        ("owned", FAST, 1, "own", False, "own_history"),
        # replayed: AR's turns are the script FAST replayed; every turn pairs
        ("replayed", AR, 0, "own", True, "first_turn"),
        ("replayed", AR, 1, "own", True, "script"),
        ("replayed", FAST, 0, "replay", True, "first_turn"),
        ("replayed", FAST, 1, "replay", True, "replay"),
    ]


def test_the_speedup_pairs_only_turns_with_the_same_prompt(tmp_path: Path) -> None:
    path = _analyzed(tmp_path)
    cells = fetch(
        path,
        "SELECT workload, role, prompt_id, count(*) AS n FROM speedup_pairs "
        "GROUP BY ALL ORDER BY ALL",
    )
    # owned: turn 0 of 2 sessions on each side; replayed: both turns, 2 sessions each side
    assert [tuple(c.values()) for c in cells] == [
        ("owned", "baseline", "owned/turn0", 2),
        ("owned", "method", "owned/turn0", 2),
        ("replayed", "baseline", "replayed/turn0", 2),
        ("replayed", "baseline", "replayed/turn1", 2),
        ("replayed", "method", "replayed/turn0", 2),
        ("replayed", "method", "replayed/turn1", 2),
    ]
    shared = fetch(path, "SELECT workload, n_prompts FROM speedup ORDER BY workload")
    assert [(r["workload"], r["n_prompts"]) for r in shared] == [("owned", 1), ("replayed", 2)]
