"""A copy of a measured campaign whose decode is uniformly slower: what the gate should catch.

    python tests/bench/slowed_copy.py --db results/specsweep.duckdb \
        --campaign local-smollm2-ab12cd34ef56 --as slow25 --factor 0.75

copies the campaign's raw rows (campaigns, services, units, windows, requests, environment,
method_params) into a new campaign `--as`, every id suffixed, with each request's decode
stretched: e2e_s = ttft_s + (e2e_s - ttft_s) / factor, and every chunk after the first token
moved the same way (decode tok/s times `factor`; TTFT, tokens and texts unchanged). Then

    specsweep analyze --db ... && specsweep gate --db ... --baseline A --candidate slow25

asks the gate whether it sees the slowdown. Copy a second real campaign of the same plan (an
A/A pair with its own service starts) rather than the one you compare against: a copy of the
same campaign repeats its starts and noise exactly, so every per-prompt ratio is `factor`
and nothing varies. `--runs 1,2` copies only those rounds' services (with `--factor 1`, a plain
copy of a campaign without a round that ran on a busy host). This is how
docs/measurements/2026-12-05-starts-as-replicates.md measured the gate's power on the 2-core
machine. Writes the file; prints the rows it copied.
"""

from __future__ import annotations

import argparse

import duckdb

# table -> the id columns that get the suffix (campaign_id is replaced everywhere)
IDS = {
    "campaigns": (),
    "environment": (),
    "method_params": (),
    "services": ("service_id",),
    "units": ("service_id",),
    "windows": ("window_id", "service_id"),
    "requests": ("request_id", "service_id", "window_id"),
}
STRETCH = {
    "requests": (
        "ttft_s + (e2e_s - ttft_s) / ? AS e2e_s",
        "list_transform(chunk_times_s, t -> CASE WHEN t <= ttft_s THEN t "
        "ELSE ttft_s + (t - ttft_s) / ? END) AS chunk_times_s",
    ),
}


def copy(
    con: duckdb.DuckDBPyConnection,
    source: str,
    target: str,
    factor: float,
    runs: list[int] | None = None,
) -> dict:
    """Copy the campaign's rows into `target` (module docstring), only the services of
    rounds `runs` when given; table -> rows copied."""
    counts = {}
    kept = ""  # the rounds kept: rows of the other rounds' services stay behind
    if runs:
        kept = (
            " AND service_id IN (SELECT service_id FROM services WHERE campaign_id = ? "
            f"AND run IN ({', '.join('?' * len(runs))}))"
        )
    for table, ids in IDS.items():
        columns = {r[0] for r in con.execute(f"DESCRIBE {table}").fetchall()}
        replaced = ["? AS campaign_id", *(f"{c} || '/' || ? AS {c}" for c in ids if c in columns)]
        params: list = [target, *([target] * len([c for c in ids if c in columns]))]
        if table in STRETCH:
            replaced += STRETCH[table]
            params += [factor, factor]
        where, args = "campaign_id = ?", [source]
        if kept and "service_id" in columns:
            where, args = where + kept, [source, source, *runs]
        sql = (
            f"INSERT INTO {table} SELECT * REPLACE ({', '.join(replaced)}) "
            f"FROM {table} WHERE {where}"
        )  # table and column names: this module's constants
        con.execute(sql, [*params, *args])
        counts[table] = con.execute(
            f"SELECT count(*) FROM {table} WHERE campaign_id = ?", [target]
        ).fetchone()[0]
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--campaign", required=True, help="the campaign to copy")
    parser.add_argument("--as", dest="target", required=True, help="the copy's campaign_id")
    parser.add_argument("--factor", type=float, default=0.75, help="decode speed x factor")
    parser.add_argument(
        "--runs", type=lambda t: [int(x) for x in t.split(",")], default=None,
        help="copy only these rounds' services, e.g. 1,2 (a round that ran on a busy host)",
    )  # fmt: skip
    args = parser.parse_args()
    with duckdb.connect(args.db) as con:
        con.begin()
        counts = copy(con, args.campaign, args.target, args.factor, args.runs)
        con.commit()
    for table, n in counts.items():
        print(f"{table}: {n} rows copied into {args.target}")


if __name__ == "__main__":
    main()
