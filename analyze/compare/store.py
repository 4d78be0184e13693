"""Store a comparison in the compare_* tables that `specsweep report --compare A B` reads:
every row of the pair (a, b) is deleted and written anew in one transaction; other pairs'
rows stay. A table whose columns are not these (an older specsweep's) is dropped and made
anew: the tables are derived, `analyze compare` makes them again."""

from __future__ import annotations

import duckdb

from specsweep.analyze.compare.change import Change, Comparison
from specsweep.analyze.environment_diff import arguments

WINDOW_DDL = (
    "engine VARCHAR, tp INTEGER, method VARCHAR, workload VARCHAR, "
    "max_tokens INTEGER, concurrency INTEGER, load VARCHAR"
)
STORE_DDL = {
    "compare_runs": "campaign_id VARCHAR NOT NULL, plan_name VARCHAR, started_at TIMESTAMP, "
    "n_measured BIGINT",
    "compare_changes": f"{WINDOW_DDL}, metric VARCHAR NOT NULL, kind VARCHAR NOT NULL, "
    "value_a DOUBLE, value_b DOUBLE, ratio DOUBLE, difference DOUBLE, "
    "ci_low DOUBLE, ci_high DOUBLE, ci_reason VARCHAR, n_prompts INTEGER, "
    "n_runs INTEGER, start_source VARCHAR, start_sd DOUBLE, start_df DOUBLE, p_value DOUBLE, "
    "p_holm DOUBLE, n_family INTEGER, significant BOOLEAN, "
    "significant_raw BOOLEAN, verdict VARCHAR, worse BOOLEAN, "
    "effect DOUBLE, rank INTEGER, n_windows INTEGER",
    "compare_speedups": f"{WINDOW_DDL}, speedup_a DOUBLE, speedup_b DOUBLE",
    "compare_only": f"side VARCHAR NOT NULL, {WINDOW_DDL}",
    "compare_prompts": "workload VARCHAR NOT NULL, method VARCHAR, tp INTEGER, "
    "prompt_id VARCHAR, status VARCHAR NOT NULL, detail VARCHAR",
    "compare_environment": "host VARCHAR, key VARCHAR NOT NULL, value_a VARCHAR, "
    "value_b VARCHAR, change VARCHAR",
}
OBJECTS = tuple(STORE_DDL)  # tables `specsweep compare` writes, `report --compare` reads


def _row(c: Change, rank: int) -> tuple:
    return (
        *c.window,
        c.metric,
        c.kind,
        c.a,
        c.b,
        c.ratio,
        c.difference,
        c.ci_low,
        c.ci_high,
        c.reason,
        c.n_prompts,
        c.n_runs,
        c.start_source,
        c.start_sd,
        c.start_df,
        c.p_value,
        c.p_holm,
        c.n_family,
        c.significant,
        c.significant_raw,
        c.verdict,
        c.worse,
        c.effect,
        rank,
        c.n_windows,
    )


def store(con: duckdb.DuckDBPyConnection, comp: Comparison) -> dict[str, int]:
    """Write comp into the compare_* tables (created if missing), replacing the pair's rows
    in one transaction; returns the rows written per table."""
    runs = con.execute(
        "SELECT campaign_id, plan_name, started_at, n_measured "
        "FROM campaign_summary WHERE campaign_id IN (?, ?) "
        "ORDER BY campaign_id = ? DESC",
        [comp.a, comp.b, comp.a],
    ).fetchall()
    rows: dict[str, list[tuple]] = {
        "compare_runs": runs,
        "compare_changes": [_row(c, rank) for rank, c in enumerate(comp.changes, 1)],
        "compare_speedups": [
            (*k, sa, sb) for k, (sa, sb) in sorted(comp.speedup_ratio.items(), key=str)
        ],
        "compare_only": [("A", *k) for k in comp.only_a] + [("B", *k) for k in comp.only_b],
        "compare_prompts": list(comp.prompts),
        "compare_environment": [
            (h, k, va, vb, arguments(va, vb)) for h, k, va, vb in comp.environment
        ],
    }
    con.begin()
    try:
        for name, columns in STORE_DDL.items():  # names and columns: this module's constants
            _renew(con, name, f"a VARCHAR NOT NULL, b VARCHAR NOT NULL, {columns}")
            con.execute(f"DELETE FROM {name} WHERE a = ? AND b = ?", [comp.a, comp.b])
            if rows[name]:
                marks = ", ".join("?" * (2 + len(rows[name][0])))
                con.executemany(
                    f"INSERT INTO {name} VALUES ({marks})",
                    [(comp.a, comp.b, *r) for r in rows[name]],
                )
    except BaseException:
        con.rollback()
        raise
    con.commit()
    return {name: len(r) for name, r in rows.items()}


def pairs(con: duckdb.DuckDBPyConnection, campaigns: list[str] | None = None) -> list[tuple]:
    """The stored comparisons (a, b), those with a side in `campaigns` when given."""
    have = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'compare_runs'"
    ).fetchone()[0]
    if not have:
        return []
    rows = con.execute("SELECT DISTINCT a, b FROM compare_runs ORDER BY a, b").fetchall()
    return [(a, b) for a, b in rows if campaigns is None or a in campaigns or b in campaigns]


def refresh(con: duckdb.DuckDBPyConnection, campaigns: list[str] | None) -> list[str]:
    """Bring the stored comparisons up to date after a build of the analysis layer: every
    stored pair (a, b) with a side in `campaigns` (None: every pair, after a full rebuild)
    is compared again from the new analysis rows, or dropped when a side is no longer in the
    file. Returns one line per pair, saying which."""
    from specsweep.analyze.compare.match import compare  # match reads what store writes

    present = {r[0] for r in con.execute("SELECT campaign_id FROM campaigns").fetchall()}
    lines = []
    for a, b in pairs(con, campaigns):
        if a in present and b in present:
            store(con, compare(con, a, b))
            lines.append(f"compared {a} and {b} again")
            continue
        con.begin()
        for name in STORE_DDL:  # this module's constants
            con.execute(f"DELETE FROM {name} WHERE a = ? AND b = ?", [a, b])
        con.commit()
        lines.append(f"dropped the comparison of {a} and {b}: a side is no longer in the file")
    return lines


def _renew(con: duckdb.DuckDBPyConnection, name: str, columns: str) -> None:
    """Create table name with these columns; one of other columns (an older specsweep's) is
    dropped first: the compare tables are derived, `analyze compare` makes them again."""
    wanted = [c.strip().split()[0] for c in columns.split(",")]
    have = [
        r[0]
        for r in con.execute(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_name = ? ORDER BY ordinal_position",
            [name],
        ).fetchall()
    ]
    if have and have != wanted:
        con.execute(f"DROP TABLE {name}")
    con.execute(f"CREATE TABLE IF NOT EXISTS {name} ({columns})")
