"""One definition each: the Python twins in schema.metrics equal their DuckDB macros
(schema/metrics.sql) on hand-built rows, both against values worked by hand; the code that
needs the number while a campaign runs (the engines' accept_length, `Slo.met`'s TPOT and SLO
rule) calls the twin, not a copy. The counter acceptance has a macro only (analysis reads
counters once per window)."""

from __future__ import annotations

import math

import duckdb
import numpy as np
import pytest

from specsweep.collect.engines import acceptance
from specsweep.collect.plan.load import Slo
from specsweep.schema import metrics

# (output_tokens, e2e_s, ttft_s, TPOT by hand)
TPOT_ROWS = [
    (11, 1.2, 0.2, 0.1),  # 10 tokens after the first in 1.0 s
    (5, 2.0, 0.4, 0.4),  # 4 tokens in 1.6 s
    (3, 0.5, 0.5, 0.0),  # the whole reply with the first token
    (2, 0.9, 0.3, 0.6),  # one token after the first: its gap
    (1, 1.0, 0.5, None),  # one token: no TPOT
    (0, 1.0, 0.5, None),
    (None, 1.0, 0.5, None),  # a failed request's NULLs
    (7, None, 0.5, None),
    (7, 1.0, None, None),
]
# (output_tokens, spec_verify_ct, acceptance length by hand)
ACCEPT_ROWS = [
    (91, 30, 3.0),  # 90 decode tokens in 30 verify steps
    (11, 10, 1.0),  # plain decoding: one token per step
    (8, 2, 3.5),
    (2, 1, 1.0),
    (1, 0, None),  # one token: no decode step
    (1, 3, None),
    (5, 0, None),  # no verify step counted
    (5, None, None),
    (None, 4, None),
]


@pytest.fixture(scope="module")
def con() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    metrics.install(con)
    return con


def _macro(con: duckdb.DuckDBPyConnection, sql: str, rows: list[tuple]) -> list:
    """The macro over a VALUES table of rows (typed as a requests table's columns)."""
    con.execute("CREATE OR REPLACE TEMP TABLE t (i INTEGER, a BIGINT, b DOUBLE, c DOUBLE)")
    con.executemany(
        "INSERT INTO t VALUES (?, ?, ?, ?)",
        [(i, *row, *(None,) * (3 - len(row))) for i, row in enumerate(rows)],
    )
    return [r[0] for r in con.execute(f"SELECT {sql} FROM t ORDER BY i").fetchall()]


def _same(got: float | None, want: float | None) -> bool:
    return (
        got is None if want is None else got is not None and math.isclose(got, want, abs_tol=1e-12)
    )


def test_tpot_macro_and_twin_equal_the_hand_values(con: duckdb.DuckDBPyConnection) -> None:
    sql = _macro(con, "tpot_s(a, b, c)", [row[:3] for row in TPOT_ROWS])
    for (n, e2e, ttft, want), from_sql in zip(TPOT_ROWS, sql):
        py = metrics.tpot_s(n, e2e, ttft)
        assert _same(from_sql, want), (n, e2e, ttft, from_sql)
        assert _same(py, want), (n, e2e, ttft, py)


def test_accept_length_macro_and_twin_equal_the_hand_values(con: duckdb.DuckDBPyConnection) -> None:
    sql = _macro(con, "accept_length_of(a, b::BIGINT)", [row[:2] for row in ACCEPT_ROWS])
    for (n, steps, want), from_sql in zip(ACCEPT_ROWS, sql):
        assert _same(from_sql, want), (n, steps, from_sql)
        assert _same(metrics.accept_length(n, steps), want), (n, steps)


def test_the_twins_take_numpy_counts_and_refuse_what_is_not_a_count() -> None:
    """Rows read back through pandas carry numpy integers; an engine's reply may carry a
    float or a bool where a count belongs, which is no count (NULL), as before."""
    assert metrics.tpot_s(np.int64(11), 1.2, 0.2) == pytest.approx(0.1)
    assert metrics.tpot_s(11, float("nan"), 0.2) is None  # pandas' NULL
    assert metrics.accept_length(np.int64(91), np.int32(30)) == pytest.approx(3.0)
    assert metrics.accept_length(91.0, 30) is None
    assert metrics.accept_length(True, 1) is None


def test_collect_uses_the_twins_not_copies() -> None:
    """The engines' accept_length is schema.metrics' function itself; Slo.met's TPOT rule
    follows the twin: 11 tokens, TTFT 0.2 s, E2E 1.2 s -> TPOT 100 ms, which meets a 100 ms
    objective and misses a 99 ms one; one token has no TPOT, which meets any."""
    assert acceptance.accept_length is metrics.accept_length
    assert Slo(tpot_ms=100).met(True, 0.2, 1.2, 11)
    assert not Slo(tpot_ms=99).met(True, 0.2, 1.2, 11)
    assert Slo(tpot_ms=1).met(True, 0.2, 1.2, 1)
    assert not Slo(tpot_ms=100).met(False, 0.2, 1.2, 11)


# (ok, ttft_s, tpot_s, e2e_s, ttft_ms, tpot_ms, e2e_ms, met by hand)
SLO_ROWS = [
    (True, 0.2, 0.1, 1.2, 200.0, 100.0, 1200.0, True),  # every objective met at its bound
    (True, 0.2, 0.1, 1.2, 199.0, None, None, False),  # TTFT 1 ms over
    (True, 0.2, 0.1, 1.2, None, 99.0, None, False),  # TPOT over
    (True, 0.2, 0.1, 1.2, None, None, 1000.0, False),  # E2E over
    (True, 0.2, None, 1.2, None, 1.0, None, True),  # no TPOT (one token): meets a TPOT objective
    (False, 0.2, 0.1, 1.2, 1000.0, None, None, False),  # a failed request never meets one
    (True, None, None, 1.2, None, None, 5000.0, False),  # no TTFT: not met
    (True, 0.2, 0.1, None, 1000.0, None, None, False),  # no E2E: not met
    (True, 0.2, 0.1, 1.2, None, None, None, True),  # no objective set
]


def test_meets_slo_macro_and_twin_equal_the_hand_values(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        "CREATE OR REPLACE TEMP TABLE s (i INTEGER, ok BOOLEAN, ttft DOUBLE, tpot DOUBLE, "
        "e2e DOUBLE, ttft_ms DOUBLE, tpot_ms DOUBLE, e2e_ms DOUBLE)"
    )
    con.executemany(
        "INSERT INTO s VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [(i, *row[:7]) for i, row in enumerate(SLO_ROWS)],
    )
    sql = con.execute(
        "SELECT meets_slo(ok, ttft, tpot, e2e, ttft_ms, tpot_ms, e2e_ms) FROM s ORDER BY i"
    ).fetchall()
    for row, (from_sql,) in zip(SLO_ROWS, sql):
        assert from_sql is row[7], row
        assert metrics.meets_slo(*row[:7]) is row[7], row


# (d_accepted, d_drafts, acceptance length by hand)
COUNTER_ROWS = [(300, 100, 4.0), (0, 50, 1.0), (10, 0, None), (None, 5, None), (5, None, None)]


def test_counter_acceptance_macro_equals_the_hand_values(con: duckdb.DuckDBPyConnection) -> None:
    sql = _macro(con, "accept_length_counters(a, b)", [row[:2] for row in COUNTER_ROWS])
    for (accepted, drafts, want), from_sql in zip(COUNTER_ROWS, sql):
        assert _same(from_sql, want), (accepted, drafts, from_sql)
