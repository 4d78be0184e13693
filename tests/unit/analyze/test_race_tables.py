"""analyze.race: race_rounds, race_decisions and race_cost on hand-built raced campaigns, their
numbers computed here from docs/race.md's formulas (delta = -ln(1 - within), the arm x round
interaction variance, KN's h2 and W(r)), not by calling stats.race."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from specsweep.analyze import build
from specsweep.schema.store import Store
from tests.support import race_rows
from tests.support.analyze_rows import fetch, one, req

# A, B within a few percent of each other, C 40% behind; C is not started after round 2
CLOSE = {"A": [100, 106, 103, 105], "B": [102, 100, 101, 99], "C": [60, 63]}
DELTA = -math.log(1 - 0.05)


def pooled(table: list[list[float]]) -> tuple[float, float]:
    """(sigma2, df): the arm x round interaction of the ln values, by hand."""
    y = np.log(np.array(table, dtype=float))
    resid = y - y.mean(axis=1, keepdims=True) - y.mean(axis=0, keepdims=True) + y.mean()
    df = (y.shape[0] - 1) * (y.shape[1] - 1)
    return float((resid**2).sum() / df), float(df)


def kn_h2(k: int, alpha: float, df: float) -> float:
    eta = ((2 * alpha / (k - 1)) ** (-2 / df) - 1) / 2
    return 2 * eta * df


def margin(h2: float, sigma2: float, r: int) -> float:
    return max(0.0, DELTA / (2 * r) * (h2 * 2 * sigma2 / DELTA**2 - r))


def analysed(path: Path, values: dict, **kw: object) -> Path:
    race_rows.write(path, values, **kw)
    build.run(path, baseline="A")
    return path


def rounds(path: Path) -> dict[tuple[int, str], dict]:
    rows = fetch(path, "SELECT * FROM race_rounds ORDER BY round, method")
    return {(r["round"], r["method"]): r for r in rows}


@pytest.fixture
def close_race(tmp_path: Path) -> Path:
    return analysed(tmp_path / "r.duckdb", CLOSE, seconds={"A": 10.0, "B": 20.0, "C": 30.0})


def test_an_arm_behind_by_more_than_the_margin_is_dropped_in_round_2(close_race: Path) -> None:
    found = rounds(close_race)
    sigma2, df = pooled([CLOSE[a][:2] for a in "ABC"])
    w2 = margin(kn_h2(3, 0.05, df), sigma2, 2)
    mean = {a: np.log(CLOSE[a][:2]).mean() for a in "ABC"}
    c = found[(2, "C")]
    assert c["status"] == "dropped" and c["leader"] == "A"
    assert c["gap_ln"] == pytest.approx(mean["A"] - mean["C"]) and c["gap_ln"] > w2
    assert c["margin_ln"] == pytest.approx(w2) and w2 == pytest.approx(0.3105, abs=1e-4)
    assert c["gap"] == pytest.approx(1 - math.exp(mean["C"] - mean["A"]))
    assert c["margin"] == pytest.approx(1 - math.exp(-w2))
    assert found[(2, "B")]["status"] == "racing" and found[(2, "B")]["gap_ln"] < w2
    assert (3, "C") not in found  # dropped: no later rows
    assert found[(1, "C")]["margin_ln"] is None  # no region before first_rounds
    assert found[(4, "A")]["margin_ln"] == pytest.approx(margin(kn_h2(3, 0.05, df), sigma2, 4))


def test_running_means_and_requests_add_up_round_by_round(close_race: Path) -> None:
    a3 = rounds(close_race)[(3, "A")]
    assert a3["mean_ln"] == pytest.approx(np.log(CLOSE["A"][:3]).mean())
    assert a3["decode_tps"] == pytest.approx((100 * 106 * 103) ** (1 / 3))
    assert (a3["rounds_measured"], a3["requests"], a3["gap_ln"]) == (3, 3, 0.0)


def test_a_level_undecided_at_max_rounds_is_open_with_no_guarantee(close_race: Path) -> None:
    d = one(close_race, "SELECT * FROM race_decisions")
    assert (d["decision"], d["winner"], d["survivors"], d["rounds"]) == ("open", None, "A,B", 4)
    assert d["guarantee"] == "no guarantee: still open after 4 rounds"
    assert {r["status"] for r in fetch(close_race, "SELECT status FROM race_rounds "
                                       "WHERE round = 4")} == {"open"}  # fmt: skip


def test_a_winner_carries_its_interval_from_the_pooled_variance(tmp_path: Path) -> None:
    values = {"A": [100, 104, 102], "B": [60, 61, 59]}
    path = analysed(tmp_path / "r.duckdb", values)
    d = one(path, "SELECT * FROM race_decisions")
    sigma2, df = pooled([values["A"][:2], values["B"][:2]])
    assert (d["decision"], d["winner"], d["rounds"], d["df"]) == ("winner", "A", 2, df)
    assert d["sigma2"] == pytest.approx(sigma2)
    m, half = np.log([100, 104]).mean(), stats.t.ppf(0.975, df) * math.sqrt(sigma2 / 2)
    assert d["best_decode_tps"] == pytest.approx(math.exp(m))
    assert (d["ci_low"], d["ci_high"]) == pytest.approx((math.exp(m - half), math.exp(m + half)))
    assert d["guarantee"].startswith("A is the best arm, or within 5% of it, with probability")
    status = {
        (r["round"], r["method"]): r["status"] for r in fetch(path, "SELECT * FROM race_rounds")
    }
    assert status == {(1, "A"): "racing", (1, "B"): "racing", (2, "A"): "winner",
                      (2, "B"): "dropped"}  # fmt: skip


def test_the_prior_collect_fixed_pools_into_the_level(tmp_path: Path) -> None:
    """races.priors {level: [sigma2, df]} is replayed as collect replays it: pooled by df."""
    values = {"A": [100, 104, 102], "B": [60, 61, 59]}
    path = analysed(tmp_path / "r.duckdb", values, priors='{"w:64:c1": [0.0004, 10]}')
    d = one(path, "SELECT sigma2, df FROM race_decisions")
    sigma2, df = pooled([values["A"][:2], values["B"][:2]])
    assert d["df"] == df + 10
    assert d["sigma2"] == pytest.approx((sigma2 * df + 0.0004 * 10) / (df + 10))


def test_an_arm_without_a_value_in_a_round_is_missing(tmp_path: Path) -> None:
    values = {"A": [100, 104], "B": [98, None], "C": [60, 61]}
    path = analysed(tmp_path / "r.duckdb", values)
    b = rounds(path)[(2, "B")]
    assert (b["status"], b["leader"], b["gap_ln"]) == ("missing", None, None)
    assert b["rounds_measured"] == 1 and b["mean_ln"] == pytest.approx(math.log(98))
    d = one(path, "SELECT * FROM race_decisions")
    sigma2, df = pooled([values["A"], values["C"]])  # the arms that ran both first rounds
    assert (d["sigma2"], d["df"]) == (pytest.approx(sigma2), df)
    assert (d["decision"], d["arms"], d["dropped"]) == ("winner", 3, 2)
    assert d["guarantee"].endswith("; not covered: B (no value in a round it should have run)")


def test_a_running_campaign_shows_every_round_but_its_last(tmp_path: Path) -> None:
    path = analysed(tmp_path / "r.duckdb", CLOSE, status="running")
    assert max(r["round"] for r in fetch(path, "SELECT round FROM race_rounds")) == 3
    d = one(path, "SELECT decision, rounds FROM race_decisions")
    assert d == {"decision": "open", "rounds": 3}
    assert one(path, "SELECT rounds FROM race_cost")["rounds"] == 3


def test_the_cost_counts_the_arms_starts_against_the_grid(close_race: Path) -> None:
    c = one(close_race, "SELECT * FROM race_cost")
    # starts: A 4, B 4, C 2 of the grid's 3 arms x 4 rounds; seconds 10, 20, 30 a start
    assert (c["arms"], c["starts"], c["grid_starts"]) == (3, 10, 12)
    assert c["starts_share"] == pytest.approx(10 / 12)
    assert c["device_s"] == pytest.approx(4 * 10 + 4 * 20 + 2 * 30)
    assert c["grid_device_s"] == pytest.approx((10 + 20 + 30) * 4)
    assert c["device_share"] == pytest.approx(180 / 240)
    assert (c["levels"], c["decided"], c["rounds"], c["max_rounds"]) == (1, 0, 4, 4)


def test_failed_starts_and_other_methods_cost_nothing_here(tmp_path: Path) -> None:
    path = tmp_path / "r.duckdb"
    race_rows.write(path, {"A": [100, 104, 102], "B": [98, None], "C": [99, 101, 100]})
    with Store(path) as store:  # the A/A control is no arm
        store.append("services", [race_rows.start("A-aa", 1, 1000.0)])
    build.run(path, baseline="A")
    c = one(path, "SELECT starts, device_s FROM race_cost")
    assert c == {"starts": 3 + 1 + 3, "device_s": pytest.approx(70.0)}


def test_rows_of_another_workload_are_not_in_the_race(tmp_path: Path) -> None:
    path = tmp_path / "r.duckdb"
    race_rows.write(path, CLOSE, workloads="w")
    with Store(path) as store:
        store.append("requests", [race_rows.window("C", 3, 500.0, workload="x")])
    build.run(path, baseline="A")
    assert {r["level"] for r in fetch(path, "SELECT level FROM race_rounds")} == {race_rows.LEVEL}


def test_a_file_with_no_race_has_empty_tables(analyzed) -> None:
    path = analyzed([req()])
    for name in ("race_rounds", "race_decisions", "race_cost"):
        assert fetch(path, f"SELECT count(*) AS n FROM {name}") == [{"n": 0}]
