"""Command line of the analysis stage: `python -m analyze [--db PATH] [--baseline METHOD]`
builds the analysis layer; `python -m analyze export --format parquet|csv --out DIR [--db
PATH]` writes every raw table and analysis object to files (analyze/export.py); `compare A
B` and `gate --baseline A --candidate B --max-regression 5%` compare two campaigns
(analyze/compare.py; exit codes 0 pass, 1 regression, 2 bad input); compare writes the
compare_* tables (for `python -m report --compare A B`), gate does not write."""

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


def compare(argv: list[str], gating: bool) -> int:
    """`compare A B` prints the changes; `gate --baseline A --candidate B --max-regression
    5%` exits 1 when a matched metric regressed significantly (Holm-adjusted over the
    comparison's tests, drift between the campaigns accounted for: analyze.compare.stats)
    beyond the threshold."""
    parser = argparse.ArgumentParser(prog=f"python -m analyze {'gate' if gating else 'compare'}")
    parser.add_argument("--db", default="results/specsweep.duckdb", help="DuckDB results file")
    if gating:
        parser.add_argument("--baseline", required=True, help="campaign id or plan name (A)")
        parser.add_argument("--candidate", required=True, help="campaign id or plan name (B)")
        parser.add_argument("--max-regression", default="5%", help="e.g. 5%% or 0.05")
    else:
        parser.add_argument("a", help="campaign id or plan name (the reference)")
        parser.add_argument("b", help="campaign id or plan name (compared with A)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return 2 if exc.code else 0
    import duckdb

    from analyze import compare as comparing
    from schema.store import NotAResultsDatabase, connect

    a, b = (args.baseline, args.candidate) if gating else (args.a, args.b)
    try:
        threshold = _fraction(args.max_regression) if gating else 0.0
        # compare stores its result for `python -m report --compare`; gate writes nothing
        with connect(args.db, read_only=gating) as con:
            result = comparing.compare(con, a, b)
            stored = {} if gating else comparing.store(con, result)
    except (duckdb.Error, ValueError, FileNotFoundError, NotAResultsDatabase) as exc:
        print(f"analyze: {exc}", file=sys.stderr)
        return 2
    print("\n".join(comparing.lines(result)))
    if stored:
        print(f"compare: stored in {args.db}: " + ", ".join(
            f"{name} ({n} rows)" for name, n in stored.items())
            + f"; python -m report --compare {result.a} {result.b} builds its PDF")
    failed = comparing.gate(result, threshold) if gating else []
    if gating:  # significance is Holm's over every tested change, with the drift rule
        tested = sum(c.p_holm is not None for c in result.changes)
        print(f"gate: {len(failed)} regression(s) beyond {threshold:.1%} (significant after "
              f"Holm over {tested} tests; docs/compare.md)" + "".join(
                  f"\n  FAIL {comparing.describe(c)}" for c in failed))
    return 1 if failed else 0


def _fraction(text: str) -> float:
    value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    if not 0 <= value < 1:
        raise ValueError(f"--max-regression must lie in [0, 100%), got {text!r}")
    return value


def main(argv: list[str] | None = None) -> int:
    """Build the analysis layer, then print one line saying what was built (and, when the
    file holds imported result files, how their printed figures compare with ours)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["export"]:
        return export(argv[1:])
    if argv[:1] in (["compare"], ["gate"]):
        return compare(argv[1:], gating=argv[0] == "gate")
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
