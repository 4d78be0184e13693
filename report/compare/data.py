"""Read one stored comparison (the compare_* tables ``specsweep compare A B`` writes)
from the DuckDB file: read-only, every value bound with ``?``.

A and B are the campaign ids the comparison was stored under, or plan names (the latest
stored comparison whose campaigns have those plan names). A pair with no stored rows, or
one stored by an older specsweep (without the Holm, start-variance and prompt columns), is a
:class:`~report.data.ReportError` that says which command stores it. Each change's metric
label comes from ``metric_catalog`` (what analyze writes; the metric's name without a row).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from specsweep.report.data import ReportError, read_labels

RUNS_SQL = "SELECT a, b, campaign_id, plan_name, started_at, n_measured FROM compare_runs"
CHANGES_SQL = "SELECT * FROM compare_changes WHERE a = ? AND b = ? ORDER BY rank"
SPEEDUPS_SQL = "SELECT * FROM compare_speedups WHERE a = ? AND b = ?"
ONLY_SQL = "SELECT * FROM compare_only WHERE a = ? AND b = ? ORDER BY side"
ENVIRONMENT_SQL = "SELECT * FROM compare_environment WHERE a = ? AND b = ? ORDER BY host, key"
PROMPTS_SQL = (
    "SELECT * FROM compare_prompts WHERE a = ? AND b = ? "
    "ORDER BY status, workload, method, prompt_id"
)
TABLES_SQL = "SELECT table_name FROM information_schema.tables"
# columns of compare_changes this report reads that older specsweeps did not store (issue 36
# replaced drift and service_var with start_source, start_sd and start_df)
NEEDED = {"kind", "p_value", "p_holm", "start_source", "start_sd", "verdict", "difference"}


@dataclass
class CompareData:
    """One stored comparison of campaign A (the reference) and B."""

    a: dict[str, Any]  # compare_runs row of A: campaign_id, plan_name, started_at, n_measured
    b: dict[str, Any]
    changes: pd.DataFrame  # compare_changes, in rank order, + label (metric_catalog's or None)
    speedups: pd.DataFrame  # compare_speedups
    only: pd.DataFrame  # compare_only (side 'A' or 'B')
    environment: pd.DataFrame  # compare_environment (values with the port masked, change)
    prompts: pd.DataFrame  # compare_prompts: prompts not paired, workloads not checked


def _missing(db: Path, a_spec: str, b_spec: str) -> ReportError:
    return ReportError(
        f"{db} holds no stored comparison of {a_spec} and {b_spec}; run "
        f"specsweep compare {a_spec} {b_spec} first"
    )


def pick_pair(runs: list[tuple], a_spec: str, b_spec: str) -> tuple[dict, dict] | None:
    """The stored pair that A and B name (ids first, then plan names, latest campaigns
    first): the compare_runs rows of A and of B, or None."""
    by_pair: dict[tuple[str, str], dict[str, dict]] = {}
    for a, b, cid, plan, started, n in runs:
        by_pair.setdefault((a, b), {})[cid] = {
            "campaign_id": cid,
            "plan_name": plan,
            "started_at": started,
            "n_measured": n,
        }
    found = []
    for (a, b), rows in by_pair.items():
        ra, rb = rows.get(a), rows.get(b)
        if ra is None or rb is None:
            continue
        exact = (a == a_spec) + (b == b_spec)
        if (a_spec in (a, ra["plan_name"])) and (b_spec in (b, rb["plan_name"])):
            found.append((exact, str(rb["started_at"]), str(ra["started_at"]), ra, rb))
    if not found:
        return None
    best = max(found, key=lambda f: f[:3])
    return best[3], best[4]


def load(db_path: Path | str, a_spec: str, b_spec: str) -> CompareData:
    path = Path(db_path)
    if not path.exists():
        raise ReportError(f"database not found: {path}")
    with duckdb.connect(str(path), read_only=True) as con:
        tables = {r[0] for r in con.execute(TABLES_SQL).fetchall()}
        if "compare_runs" not in tables:
            raise _missing(path, a_spec, b_spec)
        pair = pick_pair(con.execute(RUNS_SQL).fetchall(), a_spec, b_spec)
        if pair is None:
            raise _missing(path, a_spec, b_spec)
        ids = [pair[0]["campaign_id"], pair[1]["campaign_id"]]
        changes = con.execute(CHANGES_SQL, ids).df()
        if not set(changes.columns) >= NEEDED or "compare_prompts" not in tables:
            raise ReportError(
                f"{path} holds a comparison stored by an older specsweep; run "
                f"specsweep compare {a_spec} {b_spec} again"
            )
        frames = [
            con.execute(sql, ids).df()
            for sql in (SPEEDUPS_SQL, ONLY_SQL, ENVIRONMENT_SQL, PROMPTS_SQL)
        ]
        labels = read_labels(con, tables)
    changes = changes.assign(label=changes["metric"].map(labels))
    return CompareData(pair[0], pair[1], changes, *frames)
