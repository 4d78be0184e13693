"""Every raw table and analysis object of a results file to Parquet or CSV
(`specsweep export --format parquet|csv --out DIR [--db FILE]`).

Layout of DIR: `raw/<table>.<ext>` for each raw table (schema.contracts.CONTRACTS),
`analysis/<object>.<ext>` for each analysis object that exists (analyze.build.OBJECTS and
`analysis_params`; none before `specsweep analyze` ran), and `columns.json`: for every file,
its columns and DuckDB types in order, so that a CSV reader restores what CSV cannot say
(lists such as requests.chunk_times_s are written as '[0.1, 0.2]', timestamps as ISO text;
Parquet keeps types, but has no HUGEINT, the type of some sums); `read_back` casts by it.
CSV files have a header row, write NULL as \\N and the empty string as an empty field.
DuckDB writes the files; nothing is loaded into Python, so a file of a million requests
exports without holding it in memory. The results file is opened read-only.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import duckdb

from specsweep.schema.contracts import CONTRACTS
from specsweep.writing import publish

FORMATS = ("parquet", "csv", "json")
NULL = "\\N"  # how CSV files write NULL: an empty field is the empty string


def run(db_path: str | Path, out_dir: str | Path, fmt: str = "parquet") -> list[Path]:
    """Write every raw table and analysis object (json: the campaign summary,
    analyze/export/summary.py); return the files written."""
    if fmt not in FORMATS:
        raise ValueError(f"--format must be one of {list(FORMATS)}, got {fmt!r}")
    if not Path(db_path).is_file():
        raise FileNotFoundError(f"no results file at {db_path}")
    if fmt == "json":
        from specsweep.analyze.export import summary

        return [summary.write(db_path, out_dir)]
    from specsweep.analyze.build import OBJECTS  # the analysis layer's object list, one place

    out = Path(out_dir)
    written, columns = [], {}
    with duckdb.connect(str(db_path), read_only=True) as con:
        present = {
            r[0]
            for r in con.execute(
                "SELECT table_name FROM duckdb_tables() UNION SELECT view_name FROM duckdb_views() "
                "WHERE NOT internal"
            ).fetchall()
        }
        layers = {"raw": list(CONTRACTS), "analysis": ["analysis_params", *OBJECTS]}
        for layer, names in layers.items():
            for name in (n for n in names if n in present):
                path = out / layer / f"{name}.{fmt}"
                relation = con.table(name)  # a name from the fixed lists above
                if fmt == "parquet":
                    publish(path, relation.write_parquet)
                else:
                    publish(path, partial(relation.write_csv, header=True, na_rep=NULL))
                columns[f"{layer}/{path.name}"] = dict(
                    zip(relation.columns, map(str, relation.types))
                )
                written.append(path)
    publish(out / "columns.json", json.dumps(columns, indent=1) + "\n")
    return written


def read_back(
    con: duckdb.DuckDBPyConnection, out_dir: str | Path, file: str
) -> duckdb.DuckDBPyRelation:
    """One exported file as a relation with its original column types, cast by columns.json
    (CSV keeps none; Parquet has no HUGEINT, which DuckDB writes as DOUBLE), e.g.
    read_back(con, DIR, 'raw/requests.csv')."""
    path = Path(out_dir) / file
    types = json.loads((Path(out_dir) / "columns.json").read_text())[file]
    if path.suffix == ".parquet":
        stored = con.read_parquet(str(path))
    else:
        stored = con.read_csv(str(path), header=True, all_varchar=True, na_values=NULL)
    return stored.project(", ".join(f'CAST("{c}" AS {t}) AS "{c}"' for c, t in types.items()))
