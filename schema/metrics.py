"""Install the metric macros of schema/metrics.sql on a DuckDB connection.

The macros are created as persistent (not TEMP) macros: they live in the results file's
catalog, so the views that call them work from any later connection, read-only ones
included (report and `make sql` open the file read-only and never install anything).
`schema.store.connect` installs them on every writable open, after migrating, so whoever
writes a file (collect's Store, analyze's build) finds them; CREATE OR REPLACE makes
installing again harmless, and a changed definition replaces the old one on the next open.
"""

from __future__ import annotations

from importlib import resources

import duckdb


def macros_sql() -> str:
    """Text of schema/metrics.sql, read as package data (works from a wheel too)."""
    return resources.files("schema").joinpath("metrics.sql").read_text(encoding="utf-8")


def install(con: duckdb.DuckDBPyConnection) -> None:
    """Create or replace every metric macro on con (needs a writable connection)."""
    con.execute(macros_sql())
