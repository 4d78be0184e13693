"""speedup_sweep (analyze/sql/speedup_sweep.sql) on hand-built rows: the speedup rows the
speedup-versus-concurrency figure draws, with each setting's crossover level marked and the
mean effective concurrency of each load point.

Most tests write the `speedup` table directly (its real DDL, analyze.stats.SPEEDUP_DDL), build
`crossover` from it with its own SQL, write the one column of `config_summary` the model reads
and run the model's SQL; the last one goes through `analyze.build.run` from raw requests to
show the model is part of the build.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from specsweep.analyze import build, stats
from specsweep.schema import metrics
from tests.support.analyze_rows import crossing_rows, fetch, in_rounds

SPEEDUP_COLUMNS = (
    "campaign_id, engine, tp, workload, max_tokens, concurrency, method, baseline, is_control,"
    " speedup, ci_low, ci_high, significant"
)
# the part of config_summary the model reads, in config_summary's column order
WINDOWS_DDL = """
CREATE OR REPLACE TABLE config_summary (
    campaign_id VARCHAR, engine VARCHAR, tp INTEGER, method VARCHAR, workload VARCHAR,
    max_tokens INTEGER, concurrency INTEGER, effective_concurrency DOUBLE
)
"""
# (tp, workload, concurrency, method, ci_low, ci_high): a level is significant (Holm) when its
# interval excludes 1, and its point estimate is the interval's midpoint
Level = tuple[int, str, int, str, float, float]
# (tp, workload, concurrency, method, effective_concurrency)
Window = tuple[int, str, int, str, float | None]


def _speedup_row(level: Level, is_control: bool = False) -> list[Any]:
    tp, workload, conc, method, lo, hi = level
    return ["c1", "e", tp, workload, 64, conc, method, "autoregressive", is_control,
            (lo + hi) / 2, lo, hi, None if is_control else (lo > 1 or hi < 1)]  # fmt: skip


def _sweep(
    path: Path, levels: list[Level], windows: list[Window] = (), controls: list[Level] = ()
) -> list[dict[str, Any]]:
    """Write the speedup rows and the windows, build crossover and speedup_sweep, return the
    sweep's rows ordered by tp, workload, method and concurrency."""
    with duckdb.connect(str(path)) as con:
        con.execute(stats.SPEEDUP_DDL)
        metrics.install(con)  # comparison_key(), which both models call
        marks = ", ".join("?" for _ in SPEEDUP_COLUMNS.split(","))
        rows = [_speedup_row(lv) for lv in levels] + [_speedup_row(lv, True) for lv in controls]
        if rows:
            con.executemany(f"INSERT INTO speedup ({SPEEDUP_COLUMNS}) VALUES ({marks})", rows)
        con.execute(WINDOWS_DDL)
        if windows:
            con.executemany(
                "INSERT INTO config_summary VALUES ('c1', 'e', ?, ?, ?, 64, ?, ?)",
                [[tp, m, w, c, eff] for tp, w, c, m, eff in windows],
            )
        con.execute(build.read_sql("crossover.sql"))
        con.execute(build.read_sql("speedup_sweep.sql"))
    return fetch(path, "SELECT * FROM speedup_sweep ORDER BY tp, workload, method, concurrency")


@pytest.fixture
def sweep(tmp_path: Path):  # noqa: ANN201
    return lambda *args, **kwargs: _sweep(tmp_path / "sweep.duckdb", *args, **kwargs)


def _facetted() -> list[Level]:
    """chat swept at TP1 and TP4: dflash pays at 1 and is significantly slower at 4 (it
    stops paying there), ddtree_b8 pays at both (always pays: no crossover level); code
    measured at one level only."""
    levels = []
    for tp in (1, 4):
        for method, at_4 in (("dflash", (0.7, 0.9)), ("ddtree_b8", (1.1, 1.3))):
            levels += [(tp, "chat", 1, method, 1.2, 1.4), (tp, "chat", 4, method, *at_4)]
            levels.append((tp, "code", 1, method, 1.4, 1.6))
    return levels


def test_swept_settings_are_kept_and_their_crossovers_marked(sweep) -> None:  # noqa: ANN001
    rows = sweep(_facetted())
    assert {r["workload"] for r in rows} == {"chat"} and len(rows) == 8
    marked = [r for r in rows if r["is_crossover"]]
    assert {(r["method"], r["concurrency"]) for r in marked} == {("dflash", 4)}
    assert sorted(r["tp"] for r in marked) == [1, 4]  # once per tp
    assert {r["crossover_concurrency"] for r in rows if r["method"] == "dflash"} == {4}


def test_no_crossover_level_is_false_not_null(sweep) -> None:  # noqa: ANN001
    """ddtree_b8 always pays: crossover_concurrency is NULL, and is_crossover false at every
    level (the chart rings only true rows)."""
    rows = [r for r in sweep(_facetted()) if r["method"] == "ddtree_b8"]
    assert len(rows) == 4 and {r["crossover_concurrency"] for r in rows} == {None}
    assert [r["is_crossover"] for r in rows] == [False] * 4


def test_a_single_level_setting_or_the_control_is_not_swept(sweep) -> None:  # noqa: ANN001
    """Only code, at one level: nothing is swept. The A/A control is no claim (crossover has
    no row for it), so it is not swept either; with no speedup rows the table is empty."""
    assert sweep([(1, "code", 1, "dflash", 1.4, 1.6)]) == []
    control = [(1, "chat", 1, "ar-aa", 0.95, 1.05), (1, "chat", 4, "ar-aa", 0.9, 1.1)]
    assert sweep([], controls=control) == []
    assert sweep([]) == []


def test_effective_concurrency_is_the_mean_over_the_load_points_windows(sweep) -> None:  # noqa: ANN001
    """dd's speedup at c=4 compares its window (3.5 in flight) with the baseline's (2.5): 3.0.
    At c=1 the two windows held 1.0 and 0.8: 0.9. A load point without a window with a value
    (c=16: no config_summary row) has none."""
    levels = [(1, "chat", 1, "dd", 1.2, 1.4), (1, "chat", 4, "dd", 1.1, 1.3)]
    levels.append((1, "chat", 16, "dd", 1.05, 1.2))
    windows = [
        (1, "chat", 4, "autoregressive", 2.5),
        (1, "chat", 4, "dd", 3.5),
        (1, "chat", 1, "autoregressive", 1.0),
        (1, "chat", 1, "dd", 0.8),
        (4, "chat", 4, "dd", 7.0),  # another tp's window: not these load points
    ]
    rows = sweep(levels, windows)
    effective = {r["concurrency"]: r["effective_concurrency"] for r in rows}
    assert effective[1] == pytest.approx(0.9) and effective[4] == pytest.approx(3.0)
    assert effective[16] is None


def test_built_from_requests_by_analyze(analyzed) -> None:  # noqa: ANN001
    """Method m is about 2x the baseline at concurrency 1 and 0.6x at 4 (test_analyze_crossover's
    campaign, analyze_rows.crossing_rows): both levels are swept, 4 is the crossover, and each
    level carries its windows' effective concurrency (one request in flight at a time: each
    window's busy time over its span)."""
    rows = crossing_rows(spaced=True)
    path = analyzed(in_rounds(rows, 3, lambda m, r, p: 1 + 0.02 * ((r + len(m)) % 3 - 1)))
    sweep = fetch(path, "SELECT * FROM speedup_sweep ORDER BY concurrency")
    assert [(r["method"], r["concurrency"], r["is_crossover"]) for r in sweep] == [
        ("m", 1, False),
        ("m", 4, True),
    ]
    windows = fetch(
        path,
        "SELECT concurrency, avg(effective_concurrency) AS e FROM config_summary GROUP BY ALL"
        " ORDER BY concurrency",
    )
    assert [r["effective_concurrency"] for r in sweep] == pytest.approx([w["e"] for w in windows])
    assert all(0 < r["effective_concurrency"] < 1 for r in sweep)
