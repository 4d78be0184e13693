"""crossover (analyze/sql/crossover.sql) on hand-built speedup rows.

Most tests write the `speedup` table directly (its real DDL, analyze.stats.SPEEDUP_DDL) and
run the view's SQL on it, so each CI is exactly the one the case needs; the last one goes
through `analyze.build.run` from raw requests to show the view is part of the build.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from specsweep.analyze import build, stats
from specsweep.schema import metrics
from tests.support.analyze_rows import crossing_rows, fetch, in_rounds, one, write_db

# (concurrency, ci_low, ci_high); the point estimate is the CI's midpoint unless a fourth
# item gives it; the level is significant (Holm) when the CI excludes 1 unless a fifth says.
Levels = list[tuple]


def _row(method: str, level: tuple) -> list:
    conc, lo, hi = level[:3]
    point = level[3] if len(level) > 3 else (lo + hi) / 2
    significant = level[4] if len(level) > 4 else (lo > 1 or hi < 1)
    return [
        "c1",
        "sglang",
        1,
        "chat",
        256,
        conc,
        method,
        "autoregressive",
        False,
        point,
        lo,
        hi,
        significant,
    ]


def _crossover(path: Path, groups: dict[str, Levels]) -> dict[str, dict[str, Any]]:
    """Write one speedup row per (method, level), build the view, return its rows by method."""
    with duckdb.connect(str(path)) as con:
        con.execute(stats.SPEEDUP_DDL)
        metrics.install(con)  # comparison_key(), which the view calls
        con.executemany(
            "INSERT INTO speedup (campaign_id, engine, tp, workload, max_tokens, concurrency,"
            " method, baseline, is_control, speedup, ci_low, ci_high, significant)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [_row(m, lv) for m, levels in groups.items() for lv in levels],
        )
        con.execute(build.read_sql("crossover.sql"))
    return {r["method"]: r for r in fetch(path, "SELECT * FROM crossover")}


@pytest.fixture
def crossover(tmp_path: Path):  # noqa: ANN201
    return lambda groups: _crossover(tmp_path / "crossover.duckdb", groups)


def test_an_interval_holding_one_is_undetermined_not_a_stop(crossover) -> None:  # noqa: ANN001
    """Pays at 1 and 2, holds 1 at 8 (not enough data to say), significantly slower at 32:
    it stops paying at 32, not at 8; the estimate itself crosses 1 at 32 too."""
    row = crossover({"m": [(1, 1.4, 1.6), (2, 1.2, 1.3), (8, 0.95, 1.1), (32, 0.7, 0.9)]})["m"]
    assert row["status"] == "stops paying"
    assert (row["crossover_concurrency"], row["paid_up_to"]) == (32, 2)
    assert row["first_unpaid_concurrency"] == 8
    assert (row["crossover_ci_low"], row["crossover_ci_high"]) == (0.7, 0.9)
    assert row["crossover_speedup"] == pytest.approx(0.8)
    assert row["point_crossover_concurrency"] == 32
    assert row["first_slower_concurrency"] == 32
    assert row["pays_again_above"] is False
    assert (row["n_levels"], row["concurrencies"]) == (4, [1, 2, 8, 32])


def test_no_significantly_slower_level_leaves_it_undetermined(crossover) -> None:  # noqa: ANN001
    """Pays at 1, then intervals that hold 1 with estimates 0.95 and 0.9: the estimate
    crosses 1 at 4, but nothing says it stops paying."""
    row = crossover({"m": [(1, 1.2, 1.4), (4, 0.8, 1.1, 0.95), (16, 0.7, 1.05, 0.9)]})["m"]
    assert row["status"] == "undetermined"
    assert row["crossover_concurrency"] is None and row["crossover_speedup"] is None
    assert (row["paid_up_to"], row["first_unpaid_concurrency"]) == (1, 4)
    assert row["point_crossover_concurrency"] == 4


def test_stops_paying_where_significantly_slower(crossover) -> None:  # noqa: ANN001
    row = crossover({"m": [(1, 1.1, 1.3), (4, 0.6, 0.8)]})["m"]
    assert row["status"] == "stops paying"
    assert (row["crossover_concurrency"], row["paid_up_to"]) == (4, 1)
    assert row["first_slower_concurrency"] == 4


def test_holm_decides_not_the_raw_interval(crossover) -> None:  # noqa: ANN001
    """A raw interval below 1 that Holm's adjustment does not back is not a stop."""
    row = crossover({"m": [(1, 1.1, 1.3), (4, 0.6, 0.95, 0.8, False)]})["m"]
    assert row["status"] == "undetermined" and row["first_slower_concurrency"] is None


def test_always_pays_has_no_crossover(crossover) -> None:  # noqa: ANN001
    row = crossover({"m": [(1, 1.5, 1.9), (4, 1.2, 1.4), (16, 1.01, 1.1)]})["m"]
    assert row["status"] == "always pays"
    assert row["crossover_concurrency"] is None and row["paid_up_to"] == 16
    assert row["highest_concurrency"] == 16 and row["point_crossover_concurrency"] is None


def test_never_pays_only_where_every_level_is_significantly_slower(crossover) -> None:  # noqa: ANN001
    """Issue 36: 'never pays' meant 'never significantly faster'. A method at 1.15x
    [0.95, 1.39] and 1.12x [0.93, 1.35] may well pay: undetermined. So is one slower at the
    lowest level only; every level significantly slower is 'never pays'."""
    rows = crossover(
        {
            "flat": [(1, 0.9, 1.2), (4, 0.8, 1.05)],
            "issue": [(1, 0.95, 1.39, 1.15), (4, 0.93, 1.35, 1.12)],
            "first": [(1, 0.5, 0.7), (4, 0.9, 1.1)],
            "slow": [(1, 0.5, 0.7), (4, 0.4, 0.6)],
        }
    )
    assert {m: r["status"] for m, r in rows.items()} == {
        "flat": "undetermined",
        "issue": "undetermined",
        "first": "undetermined",
        "slow": "never pays",
    }
    assert rows["issue"]["paid_up_to"] is None  # it paid nowhere: not the paid-then-unknown kind
    assert rows["flat"]["crossover_concurrency"] is None
    assert rows["flat"]["first_slower_concurrency"] is None
    assert rows["slow"]["first_slower_concurrency"] == 1


def test_paying_only_above_the_lowest_level_is_its_own_status(crossover) -> None:  # noqa: ANN001
    row = crossover({"m": [(1, 0.9, 1.1), (4, 1.2, 1.5)]})["m"]
    assert row["status"] == "pays only above lowest"
    assert row["crossover_concurrency"] is None and row["paid_up_to"] is None


def test_paying_again_above_the_stop_is_flagged(crossover) -> None:  # noqa: ANN001
    row = crossover({"m": [(1, 1.3, 1.5), (4, 0.8, 0.97), (8, 1.1, 1.3)]})["m"]
    assert (row["status"], row["crossover_concurrency"]) == ("stops paying", 4)
    assert row["pays_again_above"] is True


def test_levels_without_an_interval_are_undetermined_not_dropped(crossover) -> None:  # noqa: ANN001
    """A level with too few prompts (NULL interval, NULL significance) neither pays nor
    stops: the estimate is still used for where it crosses 1."""
    row = crossover({"m": [(1, 1.2, 1.4), (4, None, None, 0.9, None)]})["m"]
    assert (row["status"], row["n_levels"]) == ("undetermined", 2)
    assert row["point_crossover_concurrency"] == 4


def test_the_control_is_not_a_claim(tmp_path: Path) -> None:
    path = tmp_path / "x.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(stats.SPEEDUP_DDL)
        metrics.install(con)  # comparison_key(), which the view calls
        con.execute(
            "INSERT INTO speedup (campaign_id, engine, tp, workload, max_tokens,"
            " concurrency, method, baseline, is_control, speedup) VALUES"
            " ('c1', 'e', 1, 'chat', 64, 1, 'ar-aa', 'ar', true, 1.0)"
        )
        con.execute(build.read_sql("crossover.sql"))
    assert fetch(path, "SELECT * FROM crossover") == []


def test_groups_are_separate_per_tp_workload_and_max_tokens(tmp_path: Path) -> None:
    """Same method, two tps: each gets its own row and its own answer."""
    path = tmp_path / "x.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(stats.SPEEDUP_DDL)
        metrics.install(con)  # comparison_key(), which the view calls
        con.executemany(
            "INSERT INTO speedup (campaign_id, engine, tp, workload, max_tokens, concurrency,"
            " method, baseline, is_control, speedup, ci_low, ci_high, significant) VALUES"
            " ('c1', 'e', ?, 'chat', 64, ?, 'm', 'ar', false, ?, ?, ?, ?)",
            [
                [1, 1, 1.3, 1.2, 1.4, True],
                [1, 4, 0.8, 0.7, 0.9, True],
                [4, 1, 1.3, 1.2, 1.4, True],
                [4, 4, 1.15, 1.1, 1.2, True],
            ],
        )
        con.execute(build.read_sql("crossover.sql"))
    rows = {r["tp"]: r["status"] for r in fetch(path, "SELECT tp, status FROM crossover")}
    assert rows == {1: "stops paying", 4: "always pays"}


def test_built_from_requests_by_analyze(analyzed, tmp_path: Path) -> None:  # noqa: ANN001
    """Method m is about 2x the baseline at concurrency 1 and 0.6x at 4 (8 prompts, a
    jitter of a few percent), in 3 rounds of service starts (each start a little off): with
    the start variance in the interval and Holm, c=1 lies above 1 and c=4 below. One round
    alone gives no interval at all: nothing pays, nothing is slower, nothing is said."""
    rows = crossing_rows()
    path = analyzed(in_rounds(rows, 3, lambda m, r, p: 1 + 0.02 * ((r + len(m)) % 3 - 1)))
    row = one(path, "SELECT * FROM crossover")
    assert (row["method"], row["status"], row["crossover_concurrency"]) == ("m", "stops paying", 4)
    assert row["crossover_ci_high"] < 1
    write_db(tmp_path / "one.duckdb", rows)
    build.run(tmp_path / "one.duckdb")
    single = one(tmp_path / "one.duckdb", "SELECT * FROM crossover")
    assert (single["status"], single["paid_up_to"]) == ("undetermined", None)
