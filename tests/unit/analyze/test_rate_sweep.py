"""The open-loop section's rows as analysis tables (issue 37, every join moves into analyze),
on hand-built rows through the SQL: rate_limits' lowest_rate, highest_rate and compared,
rate_sweep (rate_speedup with each method's stops-paying rate marked) and rate_points (the
goodput figure's points: a swept rate's windows pooled over the rounds' starts with
rate_attainment's figures, a ramp's window as it is).

Each test writes the few columns of open_windows, rate_attainment, rate_speedup,
analysis_params and slo_targets the models read, then runs rate_limits.sql, rate_sweep.sql and
rate_points.sql; the numbers are worked out beside the rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from specsweep.analyze import build
from tests.support.analyze_rows import fetch

AR, DF, DD = "autoregressive", "dflash", "ddtree_b8"
TABLES = """
CREATE TABLE analysis_params (baseline VARCHAR, aa_method VARCHAR);
INSERT INTO analysis_params VALUES ('autoregressive', 'autoregressive-aa');
CREATE TABLE slo_targets (campaign_id VARCHAR, target DOUBLE);
INSERT INTO slo_targets VALUES ('c1', 0.9);
CREATE TABLE open_windows (
    campaign_id VARCHAR, window_id VARCHAR, method VARCHAR, tp INTEGER, workload VARCHAR,
    max_tokens INTEGER, rate DOUBLE, ramp VARCHAR, n_scheduled INTEGER, elapsed_s DOUBLE,
    has_slo BOOLEAN, n_good_from_send BIGINT, scheduled_rps DOUBLE, behind_schedule BOOLEAN,
    invalid_reason VARCHAR, saturated BOOLEAN, goodput_rps DOUBLE, goodput_lo DOUBLE,
    goodput_hi DOUBLE, goodput_from_send_rps DOUBLE, attainment DOUBLE, attainment_lo DOUBLE,
    attainment_hi DOUBLE, attainment_from_send DOUBLE
);
CREATE TABLE rate_attainment (
    campaign_id VARCHAR, tp INTEGER, method VARCHAR, workload VARCHAR, max_tokens INTEGER,
    rate DOUBLE, attainment DOUBLE, attainment_lo DOUBLE, attainment_hi DOUBLE,
    ci_reason VARCHAR, goodput_rps DOUBLE, goodput_lo DOUBLE, goodput_hi DOUBLE
);
CREATE TABLE rate_speedup (
    campaign_id VARCHAR, tp INTEGER, workload VARCHAR, max_tokens INTEGER, rate DOUBLE,
    method VARCHAR, is_control BOOLEAN, tpot_speedup DOUBLE, tpot_speedup_lo DOUBLE,
    tpot_speedup_hi DOUBLE, significant BOOLEAN
);
"""
# (method, rate, round, n_good_from_send, saturated, behind_schedule): 60 requests scheduled
# in 30 s a window; a rate's windows are its rounds' starts
Window = tuple[str, float, int, int, bool, bool]
# (method, rate, ci_low, ci_high): significant (Holm) when the interval excludes 1
Level = tuple[str, float, float, float]


def _window(w: Window) -> dict[str, Any]:
    method, rate, rnd, good, sat, behind = w
    return {"window_id": f"{method}-{rate}-r{rnd}", "method": method, "rate": rate, "has_slo": True,
            "n_scheduled": 60, "elapsed_s": 30.0, "n_good_from_send": good,
            "scheduled_rps": rate, "saturated": sat, "behind_schedule": behind,
            "attainment": good / 60, "attainment_from_send": good / 60}  # fmt: skip


def _ramp(method: str) -> dict[str, Any]:
    """A linear ramp at 3 req/s on average: no single rate, its own start's figures."""
    return {"window_id": f"{method}-ramp", "method": method, "rate": None, "has_slo": True,
            "ramp": "linear",
            "n_scheduled": 90, "elapsed_s": 30.0, "n_good_from_send": 81,
            "scheduled_rps": 3.0, "saturated": False, "behind_schedule": False,
            "goodput_rps": 2.7, "goodput_lo": 2.5, "goodput_hi": 2.8,
            "goodput_from_send_rps": 2.7, "attainment": 0.9, "attainment_lo": 0.82,
            "attainment_hi": 0.95, "attainment_from_send": 0.9}  # fmt: skip


def _insert(con: duckdb.DuckDBPyConnection, table: str, rows: list[dict[str, Any]]) -> None:
    setting = {"campaign_id": "c1", "tp": 1, "workload": "chat", "max_tokens": 64}
    for row in rows:
        row = setting | row
        names = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        con.execute(f"INSERT INTO {table} ({names}) VALUES ({marks})", list(row.values()))


def _build(
    path: Path,
    windows: list[dict[str, Any]],
    levels: list[Level] = (),
    attained: list[dict[str, Any]] = (),
    controls: list[Level] = (),
) -> None:
    with duckdb.connect(str(path)) as con:
        con.execute(TABLES)
        _insert(con, "open_windows", windows)
        _insert(con, "rate_attainment", list(attained))
        _insert(con, "rate_speedup", [
            {"method": m, "rate": r, "is_control": c, "tpot_speedup": (lo + hi) / 2,
             "tpot_speedup_lo": lo, "tpot_speedup_hi": hi,
             "significant": None if c else (lo > 1 or hi < 1)}
            for c, group in ((False, levels), (True, controls)) for m, r, lo, hi in group
        ])  # fmt: skip
        for model in ("rate_limits", "rate_sweep", "rate_points"):
            con.execute(build.read_sql(f"{model}.sql"))


@pytest.fixture
def db(tmp_path: Path):  # noqa: ANN201
    path = tmp_path / "open.duckdb"

    def make(*args: Any, **kwargs: Any) -> Path:
        _build(path, *args, **kwargs)
        return path

    return make


def _sweep() -> list[dict[str, Any]]:
    """1, 2 and 4 req/s, one start each, for the baseline, dflash and ddtree_b8, and a ramp of
    the baseline's (no single rate)."""
    rates = (1.0, 2.0, 4.0)
    rows = [_window((m, r, 1, 60, False, False)) for m in (AR, DF, DD) for r in rates]
    return [*rows, _ramp(AR)]


# dflash pays at 1, its interval holds 1 at 2, it is significantly slower at 4 (it stops
# paying there); ddtree_b8 pays at 1 and 2, no level at 4 (the baseline's only)
LEVELS = [
    (DF, 1.0, 1.2, 1.4),
    (DF, 2.0, 0.9, 1.1),
    (DF, 4.0, 0.7, 0.9),
    (DD, 1.0, 1.1, 1.3),
    (DD, 2.0, 1.05, 1.2),
]


def _by(rows: list[dict[str, Any]], col: str) -> dict[Any, dict[str, Any]]:
    return {r[col]: r for r in rows}


def test_limits_carry_the_swept_rates_and_whether_a_method_was_compared(db) -> None:  # noqa: ANN001
    """Every method swept 1 to 4 req/s (the ramp is no swept rate, so it does not lower the
    lowest). dflash and ddtree_b8 have rate_speedup rows: compared, dflash stops paying at 4,
    ddtree_b8 nowhere (NULL: no rate slower, not 'not compared'). The baseline has no row of
    its own there: false, never NULL."""
    rows = _by(fetch(db(_sweep(), LEVELS), "SELECT * FROM rate_limits"), "method")
    assert {m: (r["lowest_rate"], r["highest_rate"]) for m, r in rows.items()} == dict.fromkeys(
        (AR, DF, DD), (1.0, 4.0)
    )
    assert {m: r["compared"] for m, r in rows.items()} == {AR: False, DF: True, DD: True}
    assert (rows[DF]["stops_paying_rate"], rows[DD]["stops_paying_rate"]) == (4.0, None)


def test_a_ramp_alone_has_no_swept_rate_and_a_control_is_compared(db) -> None:  # noqa: ANN001
    """A method that ran only a ramp has no lowest or highest rate (n_rates 0). The A/A control
    has rate_speedup rows: compared, though it never stops paying (it is no claim)."""
    windows = [_ramp(DD), *(_window(("autoregressive-aa", r, 1, 60, False, False))
                            for r in (1.0, 2.0))]  # fmt: skip
    windows += [_window((AR, r, 1, 60, False, False)) for r in (1.0, 2.0)]
    controls = [("autoregressive-aa", 1.0, 0.7, 0.9), ("autoregressive-aa", 2.0, 0.95, 1.05)]
    rows = _by(fetch(db(windows, controls=controls), "SELECT * FROM rate_limits"), "method")
    dd, aa = rows[DD], rows["autoregressive-aa"]
    assert (dd["n_rates"], dd["lowest_rate"], dd["highest_rate"], dd["compared"]) == (
        0, None, None, False,
    )  # fmt: skip
    assert (aa["lowest_rate"], aa["highest_rate"], aa["compared"]) == (1.0, 2.0, True)
    assert aa["stops_paying_rate"] is None


def test_the_sweep_rings_each_methods_stops_paying_rate(db) -> None:  # noqa: ANN001
    """Every rate_speedup row, dflash's 4 req/s marked (its stops_paying_rate); ddtree_b8 never
    stops paying: false at every rate, not NULL."""
    rows = fetch(db(_sweep(), LEVELS), "SELECT * FROM rate_sweep ORDER BY method, rate")
    assert [(r["method"], r["rate"], r["is_crossover"]) for r in rows] == [
        (DD, 1.0, False),
        (DD, 2.0, False),
        (DF, 1.0, False),
        (DF, 2.0, False),
        (DF, 4.0, True),
    ]
    assert [r["stops_paying_rate"] for r in rows] == [None, None, 4.0, 4.0, 4.0]
    assert rows[2]["tpot_speedup_lo"] == 1.2  # rate_speedup's columns come along


def test_the_control_is_drawn_but_never_ringed(db) -> None:  # noqa: ANN001
    """The A/A control is slower at 1 req/s, but it is no claim: rate_limits gives it no
    stops-paying rate, so rate_sweep keeps its rows unmarked."""
    windows = [_window((m, 1.0, 1, 60, False, False)) for m in (AR, "autoregressive-aa")]
    rows = fetch(db(windows, controls=[("autoregressive-aa", 1.0, 0.7, 0.9)]),
                 "SELECT * FROM rate_sweep")  # fmt: skip
    assert [(r["method"], r["is_control"], r["is_crossover"]) for r in rows] == [
        ("autoregressive-aa", True, False)
    ]


def test_points_pool_a_rates_starts_and_keep_a_ramps_window(db) -> None:  # noqa: ANN001
    """dflash at 2 req/s in three rounds, 60 scheduled in 30 s each, 57, 54 and 60 good from
    the send: 171 of 180 = 0.95 attained from the send, 171 / 90 s = 1.9 req/s of goodput;
    round 2 saturated, round 3 fell behind: the point is both. Its from-schedule attainment
    and goodput, with their intervals over the starts, are rate_attainment's. At 4 req/s
    rate_attainment has no row: those are NULL, the from-send ones are still pooled. The ramp
    stays one window, with its own start's figures."""
    windows = [
        _window((DF, 2.0, 1, 57, False, False)),
        _window((DF, 2.0, 2, 54, True, False)),
        _window((DF, 2.0, 3, 60, False, True)),
        _window((DF, 4.0, 1, 48, False, False)),
        _ramp(DF),
    ]
    attained = [{"method": DF, "rate": 2.0, "attainment": 0.93, "attainment_lo": 0.85,
                 "attainment_hi": 0.97, "goodput_rps": None, "goodput_lo": None,
                 "goodput_hi": None}]  # fmt: skip
    rows = fetch(db(windows, attained=attained), "SELECT * FROM rate_points ORDER BY rate")
    two, four, ramp = rows
    assert (two["n_windows"], two["n_scheduled"], two["n_good_from_send"]) == (3, 180, 171)
    assert two["elapsed_s"] == 90.0 and two["scheduled_rps"] == 2.0
    assert two["attainment_from_send"] == pytest.approx(0.95)
    assert two["goodput_from_send_rps"] == pytest.approx(1.9)
    assert (two["saturated"], two["behind_schedule"]) == (True, True)
    assert (two["attainment"], two["attainment_lo"], two["attainment_hi"]) == (0.93, 0.85, 0.97)
    assert two["goodput_rps"] is None and two["window_id"] is None  # behind: withheld
    assert four["attainment_from_send"] == pytest.approx(0.8) and four["attainment"] is None
    assert (four["saturated"], four["behind_schedule"]) == (False, False)
    assert ramp["rate"] is None and ramp["window_id"] == f"{DF}-ramp" and ramp["n_windows"] == 1
    assert (ramp["ramp"], ramp["scheduled_rps"], ramp["attainment_lo"]) == ("linear", 3.0, 0.82)
    assert (ramp["goodput_rps"], ramp["goodput_from_send_rps"]) == (2.7, 2.7)


def test_no_open_loop_windows_no_points(db) -> None:  # noqa: ANN001
    path = db([])
    assert fetch(path, "SELECT * FROM rate_points") == []
    assert fetch(path, "SELECT * FROM rate_sweep") == []
