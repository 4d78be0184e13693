"""Command line of the analysis stage: `python -m analyze [--db PATH] [--baseline METHOD]`."""

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


def main(argv: list[str] | None = None) -> int:
    """Build the analysis layer, then print one line saying what was built (and, when the
    file holds imported result files, how their printed figures compare with ours)."""
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
