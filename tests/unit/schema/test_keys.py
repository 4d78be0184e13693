"""The comparison key is one definition: schema.keys.COMPARISON_KEY and the comparison_key()
macro of schema/keys.sql name the same columns in the same order, and the macro is in every
results file, for a read-only reader too."""

from __future__ import annotations

from pathlib import Path

import duckdb

from specsweep.schema import keys, metrics
from specsweep.schema.store import connect


def test_the_macro_is_the_constant() -> None:
    con = duckdb.connect()
    metrics.install(con)
    assert tuple(con.execute("SELECT comparison_key()").fetchone()[0]) == keys.COMPARISON_KEY


def test_the_window_and_the_comparison_are_the_key_and_the_method() -> None:
    assert keys.COMPARISON[:-1] == keys.COMPARISON_KEY
    assert keys.COMPARISON[-1] == "method"
    assert sorted(keys.WINDOW_KEY) == sorted(keys.COMPARISON)
    assert keys.WINDOW_KEY.index("method") == keys.COMPARISON_KEY.index("tp") + 1


def test_a_read_only_reader_finds_the_macro_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "r.duckdb"
    connect(path, create=True).close()
    with duckdb.connect(str(path), read_only=True) as con:
        assert tuple(con.execute("SELECT comparison_key()").fetchone()[0]) == keys.COMPARISON_KEY
