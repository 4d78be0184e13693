"""speedup_prediction's 95% prediction interval (analyze/sql/speedup_prediction.sql): its
t quantiles against scipy, and its coverage under the model it assumes, at the sibling counts
the GPU sweeps have (a family of 3 or 4 windows leaves each window 2 or 3 siblings).

The model: within a family, ln(step cost) of each window is an independent normal draw (the
step cost does not depend on the acceptance; windows differ by start-to-start and sampling
noise). A window's speedup is L / step cost with its own L, so the speedup falls inside
L / exp(m +- t975(n - 1) * sd * sqrt(1 + 1/n)) exactly when its ln(step cost) falls inside
m -+ the same half-width: the classic t prediction interval, 95% by construction. The
simulation checks that the SQL's formula and quantiles are that interval.
"""

from __future__ import annotations

import re
from importlib import resources

import duckdb
import numpy as np
import pytest
from scipy import stats

SQL = resources.files("specsweep.analyze").joinpath("sql/speedup_prediction.sql").read_text()


def _t975_macro() -> duckdb.DuckDBPyConnection:
    """A connection with the file's own t975 macro (the statement as written there)."""
    statement = re.search(r"CREATE OR REPLACE TEMP MACRO t975.*?;", SQL, re.S)
    assert statement, "speedup_prediction.sql defines no t975 macro"
    con = duckdb.connect()
    con.execute(statement.group(0))
    return con


def test_t975_is_students_quantile() -> None:
    con = _t975_macro()
    for df in range(1, 31):
        got = con.execute(f"SELECT t975({df})").fetchone()[0]
        assert got == pytest.approx(stats.t.ppf(0.975, df), abs=6e-5), df
    # beyond 30: df 30's quantile, wider than the true one
    assert con.execute("SELECT t975(200)").fetchone()[0] == pytest.approx(2.0423)
    assert con.execute("SELECT t975(200)").fetchone()[0] > stats.t.ppf(0.975, 200)


@pytest.mark.parametrize("siblings", [2, 3, 5])
@pytest.mark.parametrize("sigma", [0.02, 0.1])
def test_prediction_interval_keeps_its_coverage(siblings: int, sigma: float) -> None:
    con = _t975_macro()
    t = con.execute(f"SELECT t975({siblings - 1})").fetchone()[0]
    rng = np.random.default_rng(siblings * 1000 + int(sigma * 100))
    reps = 20_000
    ln_cost = rng.normal(np.log(4.0), sigma, size=(reps, siblings + 1))
    accept = rng.uniform(1.5, 5.0, size=reps)  # each window's own L
    speedup = accept / np.exp(ln_cost[:, 0])
    m = ln_cost[:, 1:].mean(axis=1)
    sd = ln_cost[:, 1:].std(axis=1, ddof=1)
    half = t * sd * np.sqrt(1 + 1 / siblings)
    low, high = accept / np.exp(m + half), accept / np.exp(m - half)
    coverage = float(np.mean((low <= speedup) & (speedup <= high)))
    # 20,000 draws: a binomial sd of 0.15 points around 95%
    assert 0.944 <= coverage <= 0.956, coverage
