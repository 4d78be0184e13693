"""Command line: ``python -m report [--db PATH] [--out PDF] [--campaign ID]``; with
``--compare A B`` the compare report of two campaigns (default ``reports/compare.pdf``),
from the tables ``python -m analyze compare A B`` stores."""

from __future__ import annotations

import argparse
import logging
import sys


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, build the report, print the PDF path."""
    parser = argparse.ArgumentParser(prog="python -m report", description=__doc__)
    parser.add_argument("--db", default="results/specsweep.duckdb", help="DuckDB results file")
    parser.add_argument("--out", default=None,
                        help="output PDF path (default reports/report.pdf, with --compare "
                             "reports/compare.pdf)")
    parser.add_argument("--campaign", default=None, help="campaign id (default: latest)")
    parser.add_argument("--workers", type=int, default=None,
                        help="processes drawing the figures (default: the CPUs available, "
                             "at most 4; 1 draws them in this process)")
    parser.add_argument("--compare", nargs=2, metavar=("A", "B"), default=None,
                        help="compare campaign B with A (ids or plan names) instead")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("report").setLevel(logging.INFO)
    from report.build import run
    from report.data import ReportError

    try:
        if args.compare:
            from report.compare.build import run as run_compare

            pdf, sentence = run_compare(args.db, *args.compare, args.out or "reports/compare.pdf")
            print(sentence)
        else:
            pdf = run(args.db, args.out or "reports/report.pdf", args.campaign,
                      workers=args.workers)
    except ReportError as exc:
        print(f"report: {exc}", file=sys.stderr)
        return 1
    print(pdf)
    return 0


if __name__ == "__main__":
    sys.exit(main())
