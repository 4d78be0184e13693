"""Command line of the analysis stage: `python -m analyze [--db PATH] [--baseline METHOD]`
builds the analysis layer; `python -m analyze export --format parquet|csv --out DIR [--db
PATH]` writes every raw table and analysis object to files (analyze/export.py)."""

from __future__ import annotations

import argparse
import logging
import sys


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(
        prog="python -m analyze", description="Build the analysis views of a specsweep database."
    )
    parser.add_argument("--db", default="results/specsweep.duckdb", help="DuckDB results file")
    parser.add_argument(
        "--baseline",
        default=None,
        help="method the others are compared with (default: the baseline the plan names)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log each step")
    return parser.parse_args(argv)


def parse_export_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m analyze export",
        description="Write every raw table and analysis object to Parquet or CSV files.")
    parser.add_argument("--db", default="results/specsweep.duckdb", help="DuckDB results file")
    parser.add_argument("--format", default="parquet", choices=["parquet", "csv", "json"],
                        help="json: one summary.json of every campaign (analyze/summary.py)")
    parser.add_argument("--out", required=True, help="folder to write (raw/, analysis/, "
                        "columns.json)")
    return parser.parse_args(argv)


def export(argv: list[str]) -> int:
    args = parse_export_args(argv)
    from analyze import export as exporting

    try:
        files = exporting.run(args.db, args.out, args.format)
    except (FileNotFoundError, ValueError) as exc:
        print(f"analyze export: {exc}", file=sys.stderr)
        return 2
    print(f"analyze export: {len(files)} files ({args.format}) in {args.out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Build the analysis layer, then print one line saying what was built (and, when the
    file holds imported result files, how their printed figures compare with ours)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["export"]:
        return export(argv[1:])
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    from analyze import build  # heavy imports (duckdb, numpy, pandas) only once parsed

    try:
        build.run(args.db, baseline=args.baseline)
    except (FileNotFoundError, ValueError, build.NotAResultsDatabase) as exc:
        print(f"analyze: {exc}", file=sys.stderr)
        return 1
    counts = build.object_counts(args.db)
    built = ", ".join(f"{name} ({rows} rows)" for name, rows in counts.items())
    print(f"analyze: built {built} in {args.db}")
    for line in build.import_check_lines(args.db):  # only when the file holds imports
        print(f"analyze: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
