"""crossover (analyze/sql/09_crossover.sql) on hand-built speedup rows.

Most tests write the `speedup` table directly (its real DDL, analyze.stats.SPEEDUP_DDL) and
run the view's SQL on it, so each CI is exactly the one the case needs; the last one goes
through `analyze.build.run` from raw requests to show the view is part of the build.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest
from analyze_rows import decode_req, fetch, one

from analyze import build, stats

# (concurrency, ci_low, ci_high); the point estimate is the CI's midpoint.
Levels = list[tuple[int, float, float]]


def _crossover(path: Path, groups: dict[str, Levels]) -> dict[str, dict[str, Any]]:
    """Write one speedup row per (method, level), build the view, return its rows by method."""
    rows = [
        ["c1", "sglang", 1, "chat", 256, conc, method, "autoregressive", (lo + hi) / 2, lo, hi]
        for method, levels in groups.items()
        for conc, lo, hi in levels
    ]
    with duckdb.connect(str(path)) as con:
        con.execute(stats.SPEEDUP_DDL)
        con.executemany(
            "INSERT INTO speedup (campaign_id, engine, tp, workload, max_tokens, concurrency,"
            " method, baseline, speedup, ci_low, ci_high) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        con.execute(build.read_sql("09_crossover.sql"))
    return {r["method"]: r for r in fetch(path, "SELECT * FROM crossover")}


@pytest.fixture
def crossover(tmp_path: Path):  # noqa: ANN201
    return lambda groups: _crossover(tmp_path / "crossover.duckdb", groups)


def test_crosses_at_the_first_level_whose_ci_includes_one(crossover) -> None:  # noqa: ANN001
    """Pays at 1 and 2, includes 1 at 8: crossover 8, paid up to 2; 32 is below 1 but the
    crossover is the first level that stops paying."""
    row = crossover({"m": [(1, 1.4, 1.6), (2, 1.2, 1.3), (8, 0.95, 1.1), (32, 0.7, 0.9)]})["m"]
    assert row["status"] == "crosses"
    assert (row["crossover_concurrency"], row["paid_up_to"]) == (8, 2)
    assert (row["crossover_ci_low"], row["crossover_ci_high"]) == (0.95, 1.1)
    assert row["crossover_speedup"] == pytest.approx(1.025)
    assert row["first_slower_concurrency"] == 32
    assert row["pays_again_above"] is False
    assert (row["n_levels"], row["concurrencies"]) == (4, [1, 2, 8, 32])


def test_slows_down_when_the_first_unpaid_level_is_below_one(crossover) -> None:  # noqa: ANN001
    row = crossover({"m": [(1, 1.1, 1.3), (4, 0.6, 0.8)]})["m"]
    assert row["status"] == "slows down"
    assert (row["crossover_concurrency"], row["paid_up_to"]) == (4, 1)
    assert row["first_slower_concurrency"] == 4


def test_always_pays_has_no_crossover(crossover) -> None:  # noqa: ANN001
    row = crossover({"m": [(1, 1.5, 1.9), (4, 1.2, 1.4), (16, 1.01, 1.1)]})["m"]
    assert row["status"] == "always pays"
    assert row["crossover_concurrency"] is None and row["paid_up_to"] is None
    assert row["highest_concurrency"] == 16


def test_never_pays_when_the_lowest_level_does_not(crossover) -> None:  # noqa: ANN001
    """Includes 1 at the lowest level (nothing to stop), or is already slower there."""
    rows = crossover({"flat": [(1, 0.9, 1.2), (4, 0.8, 1.05)],
                      "slow": [(1, 0.5, 0.7), (4, 0.4, 0.6)]})
    assert rows["flat"]["status"] == rows["slow"]["status"] == "never pays"
    assert rows["flat"]["crossover_concurrency"] is None
    assert rows["flat"]["first_slower_concurrency"] is None
    assert rows["slow"]["first_slower_concurrency"] == 1


def test_paying_only_above_the_lowest_level_is_its_own_status(crossover) -> None:  # noqa: ANN001
    row = crossover({"m": [(1, 0.9, 1.1), (4, 1.2, 1.5)]})["m"]
    assert row["status"] == "pays only above lowest"
    assert row["crossover_concurrency"] is None


def test_first_inclusion_counts_even_if_it_pays_again(crossover) -> None:  # noqa: ANN001
    """Pays at 1, includes 1 at 4, pays again at 8: the crossover is 4, flagged."""
    row = crossover({"m": [(1, 1.3, 1.5), (4, 0.97, 1.2), (8, 1.1, 1.3)]})["m"]
    assert (row["status"], row["crossover_concurrency"]) == ("crosses", 4)
    assert row["pays_again_above"] is True


def test_a_bound_equal_to_one_is_included(crossover) -> None:  # noqa: ANN001
    """Ties: ci_low = 1 does not pay (significant needs ci_low > 1) and ci_high = 1 is not
    slower (it needs ci_high < 1); both count as including 1."""
    rows = crossover({"low_tie": [(1, 1.2, 1.4), (4, 1.0, 1.3)],
                      "high_tie": [(1, 1.2, 1.4), (4, 0.8, 1.0)],
                      "low_tie_first": [(1, 1.0, 1.2), (4, 1.1, 1.3)]})
    assert (rows["low_tie"]["status"], rows["low_tie"]["crossover_concurrency"]) == ("crosses", 4)
    assert (rows["high_tie"]["status"], rows["high_tie"]["crossover_concurrency"]) == (
        "crosses", 4)
    assert rows["high_tie"]["first_slower_concurrency"] is None
    assert rows["low_tie_first"]["status"] == "pays only above lowest"


def test_single_level_has_a_row_and_no_crossover(crossover) -> None:  # noqa: ANN001
    row = crossover({"m": [(4, 1.5, 1.7)]})["m"]
    assert row["status"] == "single level"
    assert row["crossover_concurrency"] is None and row["n_levels"] == 1


def test_levels_without_a_ci_are_left_out(crossover) -> None:  # noqa: ANN001
    """A NaN bound would compare greater than 1 in DuckDB; the level is skipped instead."""
    row = crossover({"m": [(1, 1.2, 1.4), (4, float("nan"), float("nan")), (8, 0.9, 1.1)]})["m"]
    assert (row["status"], row["crossover_concurrency"], row["n_levels"]) == ("crosses", 8, 2)


def test_groups_are_separate_per_tp_workload_and_max_tokens(tmp_path: Path) -> None:
    """Same method, two tps: each gets its own row and its own answer."""
    path = tmp_path / "x.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(stats.SPEEDUP_DDL)
        con.executemany(
            "INSERT INTO speedup (campaign_id, engine, tp, workload, max_tokens, concurrency,"
            " method, baseline, ci_low, ci_high) VALUES ('c1', 'e', ?, 'chat', 64, ?, 'm',"
            " 'ar', ?, ?)",
            [[1, 1, 1.2, 1.4], [1, 4, 0.9, 1.1], [4, 1, 1.2, 1.4], [4, 4, 1.1, 1.2]],
        )
        con.execute(build.read_sql("09_crossover.sql"))
    rows = {r["tp"]: r["status"] for r in fetch(path, "SELECT tp, status FROM crossover")}
    assert rows == {1: "crosses", 4: "always pays"}


def test_built_from_requests_by_analyze(analyzed) -> None:  # noqa: ANN001
    """Method m is 2x the baseline at concurrency 1 and as fast at 4 (8 prompts, spread
    speeds): analyze's bootstrap puts the CI above 1 at c=1 and around 1 at c=4."""
    rows = []
    for p in range(8):
        speed = 10.0 + p
        for method, conc, factor in (("autoregressive", 1, 1), ("m", 1, 2),
                                     ("autoregressive", 4, 1), ("m", 4, 1)):
            rows.append(decode_req(speed * factor, method=method, concurrency=conc,
                                   prompt_id=f"p{p}"))
    path = analyzed(rows)
    row = one(path, "SELECT * FROM crossover")
    assert (row["method"], row["status"], row["crossover_concurrency"]) == ("m", "crosses", 4)
    assert row["crossover_ci_low"] <= 1 <= row["crossover_ci_high"]
