"""Command line: ``python -m report [--db PATH] [--out PDF] [--campaign ID]``."""

from __future__ import annotations

import argparse
import logging
import sys


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, build the report, print the PDF path."""
    parser = argparse.ArgumentParser(prog="python -m report", description=__doc__)
    parser.add_argument("--db", default="results/specsweep.duckdb", help="DuckDB results file")
    parser.add_argument("--out", default="reports/report.pdf", help="output PDF path")
    parser.add_argument("--campaign", default=None, help="campaign id (default: latest)")
    parser.add_argument("--workers", type=int, default=None,
                        help="processes drawing the figures (default: the CPUs available, "
                             "at most 4; 1 draws them in this process)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("report").setLevel(logging.INFO)
    from report.build import run
    from report.data import ReportError

    try:
        pdf = run(args.db, args.out, args.campaign, workers=args.workers)
    except ReportError as exc:
        print(f"report: {exc}", file=sys.stderr)
        return 1
    print(pdf)
    return 0


if __name__ == "__main__":
    sys.exit(main())
