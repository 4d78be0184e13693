"""Command line: ``python -m report [--db PATH] [--out PDF] [--campaign ID]``; with
``--compare A B`` the compare report of two campaigns (default ``reports/compare.pdf``),
from the tables ``python -m analyze compare A B`` stores.

``--html [PATH]`` also writes the self-contained HTML report (default
``reports/report.html``; report/html, docs/html-report.md). Decision: ``--html`` writes the
HTML *in addition to* the PDF, from the same figures drawn once, because the PDF is the
primary output and a user who asks for the HTML should not silently lose it; ``--no-pdf``
writes the HTML alone (then latexmk is not needed). ``--no-pdf`` without ``--html`` is an
error, and ``--html`` does not apply to ``--compare``. ``specsweep report`` forwards its
arguments to :func:`main`.
"""

from __future__ import annotations

import argparse
import logging
import sys

HTML_DEFAULT = "reports/report.html"
# schema.defaults.DEFAULT_DB's value (report imports nothing of the project; a test checks
# they agree: tests/test_one_definition.py)
DEFAULT_DB = "results/specsweep.duckdb"


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, build the report, print the paths written."""
    parser = argparse.ArgumentParser(prog="python -m report", description=__doc__)
    parser.add_argument("--db", default=DEFAULT_DB, help="DuckDB results file")
    parser.add_argument(
        "--out",
        default=None,
        help="output PDF path (default reports/report.pdf, with --compare reports/compare.pdf)",
    )
    parser.add_argument("--campaign", default=None, help="campaign id (default: latest)")
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="processes drawing the figures (default: the CPUs available, "
        "at most 4; 1 draws them in this process)",
    )
    parser.add_argument(
        "--compare",
        nargs=2,
        metavar=("A", "B"),
        default=None,
        help="compare campaign B with A (ids or plan names) instead",
    )
    parser.add_argument(
        "--html",
        nargs="?",
        const=HTML_DEFAULT,
        default=None,
        metavar="PATH",
        help=f"also write the self-contained HTML report (default PATH {HTML_DEFAULT})",
    )
    parser.add_argument(
        "--no-pdf", action="store_true", help="with --html: write the HTML only (no latexmk needed)"
    )
    args = parser.parse_args(argv)
    if args.no_pdf and not args.html:
        parser.error("--no-pdf needs --html (the PDF is the report's primary output)")
    if args.html and args.compare:
        parser.error("--html does not apply to --compare")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("report").setLevel(logging.INFO)
    from report.data import ReportError

    try:
        lines = _build(args)
    except ReportError as exc:
        print(f"report: {exc}", file=sys.stderr)
        return 1
    print("\n".join(lines))
    return 0


def _build(args: argparse.Namespace) -> list[str]:
    """Build what ``args`` ask for; return the lines to print (the files written)."""
    if args.compare:
        from report.compare.build import run as run_compare

        pdf, sentence = run_compare(args.db, *args.compare, args.out or "reports/compare.pdf")
        return [sentence, str(pdf)]
    pdf = None if args.no_pdf else (args.out or "reports/report.pdf")
    if args.html:
        from report.html.build import run as run_html

        html = run_html(args.db, args.html, args.campaign, workers=args.workers, out_pdf=pdf)
        return [str(p) for p in (pdf, html) if p]
    from report.build import run

    return [str(run(args.db, pdf, args.campaign, workers=args.workers))]


if __name__ == "__main__":
    sys.exit(main())
