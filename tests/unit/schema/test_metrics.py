"""The metric macros of schema/metrics.sql: each against numbers worked by hand, installing
twice, and what a read-only reader of a results file sees."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from specsweep.schema import metrics
from specsweep.schema.store import Store, connect
from tests.support.fixtures.schema import request_row


@pytest.fixture
def con() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    metrics.install(con)
    metrics.install(con)  # CREATE OR REPLACE: a second install is harmless
    return con


def one(con: duckdb.DuckDBPyConnection, sql: str) -> object:
    return con.execute(f"SELECT {sql}").fetchone()[0]


def test_tpot_and_decode_speed(con: duckdb.DuckDBPyConnection) -> None:
    """11 tokens, first at 0.2 s, last at 1.2 s: 10 tokens in 1.0 s after the first:
    TPOT 0.1 s, 10 tok/s. One token: no TPOT, no decode speed; the whole reply with the
    first token (e2e = ttft): TPOT 0, decode speed undefined rather than infinite."""
    assert one(con, "tpot_s(11, 1.2, 0.2)") == pytest.approx(0.1)
    assert one(con, "decode_tps(11, 1.2, 0.2)") == pytest.approx(10.0)
    assert one(con, "decode_tps(5, 2.0, 0.4)") == pytest.approx(2.5)  # 4 / 1.6
    assert one(con, "tpot_s(1, 1.0, 0.5)") is None
    assert one(con, "decode_tps(1, 1.0, 0.5)") is None
    assert one(con, "tpot_s(3, 0.5, 0.5)") == 0
    assert one(con, "decode_tps(3, 0.5, 0.5)") is None
    assert one(con, "decode_tps(NULL, NULL, NULL)") is None


def test_e2e_speed(con: duckdb.DuckDBPyConnection) -> None:
    """10 tokens in 4 s end to end (prefill included): 2.5 tok/s; e2e 0: undefined."""
    assert one(con, "e2e_tps(10, 4.0)") == pytest.approx(2.5)
    assert one(con, "e2e_tps(10, 0.0)") is None


def test_acceptance(con: duckdb.DuckDBPyConnection) -> None:
    """The one definition, (output_tokens - 1) / spec_verify_ct: 91 tokens in 30 verify steps
    = 3.0; one token or no verify step: undefined. Pooled (token-weighted): 90 decode tokens
    in 30 steps + 10 in 10 = 100 / 40 = 2.5 (the request-weighted mean would be 2.0); a failed
    row and a row without verify steps (0) are left out. accept_rate: 6 accepted of 8
    drafted = 0.75; none drafted: NULL."""
    assert one(con, "accept_length_of(91, 30)") == pytest.approx(3.0)
    assert one(con, "accept_length_of(1, 0)") is None
    assert one(con, "accept_length_of(5, NULL)") is None
    got = con.execute(
        "SELECT accept_length_tw(ok, n, s) FROM (VALUES (true, 91, 30), (true, 11, 10), "
        "(false, 50, 5), (true, 40, 0)) AS t(ok, n, s)"
    ).fetchone()[0]
    assert got == pytest.approx(2.5)
    assert one(con, "accept_rate(6, 8)") == pytest.approx(0.75)
    assert one(con, "accept_rate(6, 0)") is None


def test_a_read_only_reader_uses_the_macros_a_writer_installed(tmp_path: Path) -> None:
    """connect() installs the macros in the file, persistently: a view that calls them, and
    the macros themselves, work from a later read-only connection that installs nothing."""
    path = tmp_path / "r.duckdb"
    assert (
        Store(path).append("requests", [request_row(0, ttft_s=0.2, e2e_s=1.2, output_tokens=11)])
        == 1
    )
    with connect(path) as con:
        con.execute(
            "CREATE VIEW speeds AS SELECT decode_tps(output_tokens, e2e_s, ttft_s) "
            "AS tps FROM requests"
        )
    with duckdb.connect(str(path), read_only=True) as reader:
        assert reader.execute("SELECT tps FROM speeds").fetchone()[0] == pytest.approx(10.0)
        assert reader.execute("SELECT tpot_s(11, 1.2, 0.2)").fetchone()[0] == pytest.approx(0.1)
