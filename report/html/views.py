"""Every analysis object of the DuckDB file as rows for the HTML report's tables.

The objects are listed from the file itself (``information_schema.tables``), so a view that
analyze adds later shows up without a change here; the raw tables that ``collect`` writes
(:data:`RAW`, the tables of schema/ddl.sql, which tests/unit/report/test_html.py keeps equal) are
left out, as everywhere in the report (analyze/VIEWS.md). Each object is read for the
report's campaign where it has a ``campaign_id`` column (whole otherwise), in a stable order
(``ORDER BY ALL``), at most ``max_rows`` rows: a request-level object is never read whole
(its count comes from DuckDB), and the page says how many rows it shows of how many.
"""

from __future__ import annotations

import datetime as dt
import math
import numbers
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from specsweep.report.latex import fmt_sig, fmt_time

MAX_ROWS = 500  # rows per table; the rest are counted, not read
LONG_CELL = 160  # characters beyond which a cell folds (plans, launch commands, log tails)
RAW = frozenset(
    {
        "schema_version",
        "campaigns",
        "environment",
        "services",
        "units",
        "requests",
        "windows",
        "server_metrics",
        "endpoint_errors",
        "gpu_samples",
        "method_params",
        "races",
        "quarantine",
    }
)
OBJECTS_SQL = (
    "SELECT table_name, table_type FROM information_schema.tables "
    "WHERE table_schema = 'main' ORDER BY table_name"
)


@dataclass
class Cell:
    """One table cell: the text shown and, for a number, the value it sorts by."""

    text: str
    sort: str | None = None  # repr of a finite number; None: sorts by its text
    long: bool = False


@dataclass
class View:
    """One analysis object as the page shows it."""

    name: str
    kind: str  # 'table' or 'view' (DuckDB's table_type)
    columns: list[str]
    rows: list[list[Cell]]
    n_total: int  # rows for the campaign (or in all, without a campaign_id column)
    by_campaign: bool

    @property
    def capped(self) -> bool:
        """Fewer rows shown than there are."""
        return len(self.rows) < self.n_total


def cell(value: Any) -> Cell:
    """How one database value prints: numbers with 4 significant digits (sorting by the full
    value), timestamps to the second, lists comma-separated, NULL as an empty cell."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return Cell("")
    if isinstance(value, bool):
        return Cell("true" if value else "false")
    if isinstance(value, numbers.Integral):
        return Cell(str(value), str(int(value)))
    if isinstance(value, numbers.Real):
        v = float(value)
        return Cell(fmt_sig(v, 4), repr(v) if math.isfinite(v) else None)
    if isinstance(value, dt.datetime):
        return Cell(fmt_time(value))
    if isinstance(value, (list, tuple)):
        return Cell("[" + ", ".join(cell(v).text for v in value) + "]")
    text = str(value)
    return Cell(text, long=len(text) > LONG_CELL)


def quoted(name: str) -> str:
    """``name`` as a DuckDB identifier (object names come from the file, not from code)."""
    return '"' + name.replace('"', '""') + '"'


def read_view(
    con: duckdb.DuckDBPyConnection, name: str, kind: str, campaign: str, max_rows: int
) -> View:
    """Up to ``max_rows`` rows of ``name`` for ``campaign``, and how many there are."""
    columns = [d[0] for d in con.execute(f"SELECT * FROM {quoted(name)} LIMIT 0").description]
    by_campaign = "campaign_id" in columns
    where, params = (" WHERE campaign_id = ?", [campaign]) if by_campaign else ("", [])
    source = f"FROM {quoted(name)}{where}"
    n_total = con.execute(f"SELECT count(*) {source}", params).fetchone()[0]
    rows = con.execute(f"SELECT * {source} ORDER BY ALL LIMIT ?", [*params, max_rows]).fetchall()
    return View(
        name,
        kind.lower().replace("base ", ""),
        columns,
        [[cell(v) for v in row] for row in rows],
        int(n_total),
        by_campaign,
    )


def read_views(db_path: Path | str, campaign: str, max_rows: int = MAX_ROWS) -> list[View]:
    """Every analysis object of the file (not :data:`RAW`), by name, read read-only."""
    with duckdb.connect(str(db_path), read_only=True) as con:
        objects = [(n, k) for n, k in con.execute(OBJECTS_SQL).fetchall() if n not in RAW]
        return [read_view(con, n, k, campaign, max_rows) for n, k in objects]
