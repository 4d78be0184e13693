"""`specsweep report --compare A B`: the compare PDF built with latexmk from the tables that
`specsweep compare A B` stores, on the hand-made campaigns of
tests/unit/analyze/test_analyze_compare.py (B's ngram 40% slower, engine.version 0.29 -> 0.30);
hostile plan and environment strings are escaped; a pair never stored (or stored by an older
specsweep, with issue 24's drift column) exits 1 saying which command stores it; the Holm and
start-variance columns, the service-start sentence and the prompts section are shown. The
verdict sentence is checked on hand-built rows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from specsweep.report.compare.data import pick_pair
from specsweep.report.compare.text import causes, summary, tex, window
from tests.support.fixtures.report import HOSTILE
from tests.unit.analyze.test_analyze_compare import _compare, _db

PLAN = "nightly_%&#{x}"


def _report(db: Path, out: Path, a: str = "A", b: str = "B") -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "specsweep.report",
            "--db",
            str(db),
            "--compare",
            a,
            b,
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = _db(tmp_path_factory.mktemp("compare"), 0.6, extra=True, plan=PLAN)
    with duckdb.connect(str(db)) as con:
        for i, value in enumerate(HOSTILE):
            con.execute(
                "INSERT INTO environment VALUES ('A', 'gpu1', ?, 'x'), ('B', 'gpu1', ?, ?)",
                [f"note.{i}", f"note.{i}", value],
            )
    done = _compare(db)
    assert done.returncode == 0, done.stderr
    return db


@pytest.mark.parametrize(
    "older",
    [
        ["DROP COLUMN p_holm"],  # as issue 15's specsweep stored it: no Holm column
        # as issue 24's: drift and service_var where start_source, start_sd, start_df are
        ["RENAME COLUMN start_source TO drift", "RENAME COLUMN start_sd TO service_var",
         "DROP COLUMN start_df"],
    ],
)  # fmt: skip
def test_a_comparison_stored_by_an_older_specsweep_asks_for_a_new_one(
    tmp_path: Path, older: list[str]
) -> None:
    db = _db(tmp_path, 1.0)
    assert _compare(db).returncode == 0
    with duckdb.connect(str(db)) as con:
        for change in older:
            con.execute(f"ALTER TABLE compare_changes {change}")
    done = _report(db, tmp_path / "c.pdf")
    assert done.returncode == 1 and "stored by an older specsweep" in done.stderr
    assert "specsweep compare A B again" in done.stderr


def test_a_pair_is_found_by_id_or_by_plan_name() -> None:
    runs = [
        ("a1", "b1", "a1", "nightly", "2026-01-01", 5),
        ("a1", "b1", "b1", "nightly", "2026-01-02", 5),
        ("a1", "b2", "a1", "nightly", "2026-01-01", 5),
        ("a1", "b2", "b2", "nightly", "2026-01-03", 5),
    ]
    assert [r["campaign_id"] for r in pick_pair(runs, "a1", "b1")] == ["a1", "b1"]
    # plan names: the pair whose B started last
    assert [r["campaign_id"] for r in pick_pair(runs, "a1", "nightly")] == ["a1", "b2"]
    assert pick_pair(runs, "b1", "a1") is None


LABELS = {"decode_tps": "decode tok/s"}  # metric_catalog's label, as report.compare.data joins


def _changes(*rows: tuple) -> pd.DataFrame:
    """metric, ratio, significant, worse, effect per row; window fixed."""
    return pd.DataFrame(
        [
            {
                "engine": "e",
                "tp": 1,
                "method": "m",
                "workload": "chat",
                "max_tokens": 64,
                "concurrency": c,
                "metric": metric,
                "label": LABELS.get(metric),
                "value_a": 10.0,
                "value_b": 10.0 * ratio,
                "ratio": ratio,
                "kind": "ratio",
                "difference": None,
                "ci_low": ratio * 0.9,
                "ci_high": ratio * 1.1,
                "significant": sig,
                "worse": worse,
                "effect": effect,
            }
            for c, (metric, ratio, sig, worse, effect) in enumerate(rows, 1)
        ]
    )


def test_the_verdict_counts_and_names_the_largest_change_in_its_direction() -> None:
    slower = _changes(
        ("ttft_s", 4.0, True, True, 1.39),
        ("decode_tps", 0.5, True, True, 0.69),
        ("decode_tps", 0.8, True, True, 0.22),
        ("decode_tps", 1.3, True, False, 0.26),
        ("tpot_s", 1.01, False, True, 0.01),
    )
    assert summary(slower) == (
        "B is slower: 3 of 5 matched metrics are significantly worse, 1 better (Holm-adjusted); "
        "the largest decode-speed change is m chat 64 c=2 decode tok/s 10.0 -> 5.00 (-50%, "
        "95% CI [-55%, -45%])."
    )
    faster = _changes(("decode_tps", 1.25, True, False, 0.22), ("ttft_s", 1.0, False, False, 0))
    assert summary(faster).startswith(
        "B is faster: none of 2 matched metrics are "
        "significantly worse, 1 better (Holm-adjusted); the "
        "largest decode-speed change is m chat 64 c=1 decode "
        "tok/s 10.0 -> 12.5 (+25%"
    )
    same = _changes(("decode_tps", 1.01, False, False, 0.01))
    assert summary(same).startswith("No significant change: none of the 1 matched")
    blind = same.assign(ci_low=None, ci_high=None)  # one start per side: no interval
    assert summary(blind).startswith("No change can be told from a service start's spread")
    half = pd.concat([same, blind], ignore_index=True)
    assert summary(half).endswith("; 1 have no interval and count neither way.")
    assert str(tex("a -> b 5%")) == r"a~$\rightarrow$~b 5\%"


def test_the_campaign_wide_shift_follows_the_verdict_and_is_not_counted_as_a_window() -> None:
    """A shift row (kind 'shift') adds its own sentence, significant or not, and leaves the
    window counts alone: a uniform slowdown no window showed on its own is still named."""
    same = _changes(("decode_tps", 0.95, False, True, 0.05))
    shift = _changes(("decode_tps", 0.8, True, True, 0.22)).assign(
        kind="shift", n_windows=30, p_holm=0.004, ci_low=0.72, ci_high=0.89
    )
    got = summary(pd.concat([same, shift], ignore_index=True))
    assert got.startswith("No significant change: none of the 1 matched")
    assert got.endswith(
        " Campaign-wide, B is significantly slower: decode speed -20% (95% CI [-28%, -11%], "
        "Holm p 0.004) over 30 windows."
    )
    flat = shift.assign(significant=False, ci_low=0.6, ci_high=1.1)
    assert summary(pd.concat([same, flat], ignore_index=True)).endswith(
        " Campaign-wide, decode speed -20% (95% CI [-40%, +10%]) over 30 windows: not significant."
    )
    assert window(shift.iloc[0], shift) == "all 30 windows"


def test_changes_of_the_environment_are_grouped_by_what_changed() -> None:
    env = pd.DataFrame(
        {
            "host": ["h"] * 3,
            "key": [
                "service.ar.tp1.launch_command",
                "service.ngram.tp1.launch_command",
                "engine.version",
            ],
            "value_a": ["/x -t 2", "/y -t 2", "1"],
            "value_b": ["/x -t 1", "/y -t 1", "line\nbreak " + "v" * 200],
            "change": ["-t 2 -> -t 1", "-t 2 -> -t 1", None],
        }
    )
    assert causes(env) == [
        ("h", "service.*.tp1.launch_command (ar, ngram)", "-t 2 -> -t 1"),
        ("h", "engine.version", f"1 -> line break {'v' * 106}..."),
    ]
