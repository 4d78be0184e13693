"""Compare the analysis layers of two results files, table by table: what the incremental
build's test (tests/unit/analyze/test_incremental.py) and the scale benchmark's check of the
fast path against the slow one (tests/bench/bench_scale.py --check) both need."""

from __future__ import annotations

import math
from pathlib import Path

import duckdb

# when a row was built differs between two builds of the same rows
IGNORED = ("built_at",)


def differences(a: Path, b: Path, tables: list[str], rel: float = 1e-9) -> list[str]:
    """One line per table whose rows differ between the files at a and b (rows sorted, every
    column but IGNORED; floats equal to rel, or both NaN); [] when every table matches."""
    found = []
    with (
        duckdb.connect(str(a), read_only=True) as left,
        duckdb.connect(str(b), read_only=True) as right,
    ):
        for table in tables:
            cols_a, rows_a = _rows(left, table)
            cols_b, rows_b = _rows(right, table)
            if cols_a != cols_b:
                found.append(f"{table}: columns {cols_a} against {cols_b}")
            elif len(rows_a) != len(rows_b):
                found.append(f"{table}: {len(rows_a)} rows against {len(rows_b)}")
            else:
                found += [
                    f"{table}: row {i} column {col}: {x!r} against {y!r}"
                    for i, (ra, rb) in enumerate(zip(rows_a, rows_b))
                    for col, x, y in zip(cols_a, ra, rb)
                    if not _same(x, y, rel)
                ][:3]
    return found


def _rows(con: duckdb.DuckDBPyConnection, table: str) -> tuple[list[str], list[tuple]]:
    cols = [
        c
        for (c,) in con.execute(
            "SELECT column_name FROM duckdb_columns() WHERE schema_name = 'main' "
            "AND table_name = ? ORDER BY column_index",
            [table],
        ).fetchall()
        if c not in IGNORED
    ]
    listed = ", ".join(f'"{c}"' for c in cols)  # names from the file's own catalog
    return cols, con.execute(f"SELECT {listed} FROM {table} ORDER BY ALL").fetchall()


def _same(x: object, y: object, rel: float) -> bool:
    if isinstance(x, float) and isinstance(y, float):
        return (math.isnan(x) and math.isnan(y)) or math.isclose(x, y, rel_tol=rel, abs_tol=1e-12)
    return x == y
