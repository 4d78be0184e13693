"""Command line of the report stage: `specsweep report`, `specsweep report`.

`[--db PATH] [--out PDF] [--campaign ID]` builds the PDF report; `--compare A B` the compare
report of two campaigns (default `reports/compare.pdf`) from the tables `specsweep compare A B`
stores. `--html [PATH]` also writes the self-contained HTML report (default
`reports/report.html`; report/html, docs/html-report.md). Decision: `--html` writes the HTML
*in addition to* the PDF, from the same figures drawn once, because the PDF is the primary
output and a user who asks for the HTML should not silently lose it; `--no-pdf` writes the
HTML alone (then latexmk is not needed). `--findings PATH` also writes the findings as JSON
(report.findings.results: the claims and the sentences as text; `specsweep export --findings
PATH` is `--findings PATH --no-pdf`). `--no-pdf` without `--html` or `--findings` is an error,
and neither applies to `--compare`. Exit codes: 0 built; 1 the report cannot be built (no results
file or analysis, latexmk missing or failing, an output folder that cannot be written); 2 bad
command line; 130 interrupted (Ctrl-C), 143 stopped by SIGTERM. Each output file is written
whole or not at all (specsweep.writing.publish): an interrupted build leaves the earlier
files. `specsweep report` forwards its arguments to :func:`main`.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import typer

from specsweep.interrupt import Interrupted, unwind_on_signals
from specsweep.writing import FileFault, file_faults, unwritable

# schema.defaults.DEFAULT_DB's value (report imports nothing of the project; a test checks
# they agree: tests/unit/test_one_definition.py)
DEFAULT_DB = "results/specsweep.duckdb"
PDF_DEFAULT = "reports/report.pdf"
COMPARE_DEFAULT = "reports/compare.pdf"
HTML_DEFAULT = "reports/report.html"
INTERRUPTED = "interrupted: the files it was writing are as the last build left them; rerun"

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


@app.command()
def build(
    db: str = typer.Option(DEFAULT_DB, help="DuckDB results file."),
    out: str = typer.Option(
        None,
        help=f"Output PDF path (default {PDF_DEFAULT}, with --compare {COMPARE_DEFAULT}).",
        show_default=False,
    ),
    campaign: str = typer.Option(None, help="Campaign id (default: the latest)."),
    workers: int = typer.Option(
        None,
        min=1,
        help="Processes drawing the figures (default: the CPUs available, at most 4; 1 draws "
        "them in this process).",
    ),
    compare: tuple[str, str] | None = typer.Option(
        None,
        metavar="A B",
        help="Compare campaign B with A (ids or plan names) instead.",
        show_default=False,
    ),
    html: str = typer.Option(
        None,
        metavar="[PATH]",
        help=f"Also write the self-contained HTML report (default PATH {HTML_DEFAULT}).",
    ),
    no_pdf: bool = typer.Option(
        False,
        "--no-pdf",
        help="With --html or --findings: write only those (no latexmk needed).",
    ),
    findings: str = typer.Option(
        None,
        metavar="PATH",
        help="Also write the findings as JSON: page 1's claims with their numbers, the "
        "summary sentences and validity notes as text (report/findings/results.py).",
        show_default=False,
    ),
) -> None:
    """Build the PDF report (or, with --compare A B, the compare report); print the files
    written. Exit codes: 0 built, 1 the report cannot be built, 2 bad command line, 130
    interrupted (Ctrl-C), 143 stopped by SIGTERM."""
    if no_pdf and not (html or findings):
        raise typer.BadParameter(
            "--no-pdf needs --html or --findings (the PDF is the report's primary output)",
            param_hint="--no-pdf",
        )
    for option, given in (("--html", html), ("--findings", findings)):
        if given and compare:
            raise typer.BadParameter(f"{option} does not apply to --compare", param_hint=option)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("specsweep.report").setLevel(logging.INFO)
    from specsweep.report.data import ReportError  # pandas, duckdb: only once parsed

    pdf = out or (COMPARE_DEFAULT if compare else PDF_DEFAULT)
    outputs = {"--out": None if no_pdf else pdf, "--html": html, "--findings": findings}
    try:
        for option, path in outputs.items():
            if path:
                _require_writable_folder(Path(path), option)
        with unwind_on_signals(), file_faults():
            lines = _build(db, out, campaign, workers, compare, html, no_pdf)
            if findings:
                from specsweep.report.findings.results import export

                lines.append(str(export(db, findings, campaign)))
    except (ReportError, FileFault) as exc:  # the earlier files stay (publish)
        typer.echo(f"report: {exc}", err=True)
        raise typer.Exit(1) from None
    except Interrupted as exc:  # figure workers terminated, temporary folders gone
        typer.echo(f"report: {INTERRUPTED}", err=True)
        raise typer.Exit(exc.exit_code) from None
    typer.echo("\n".join(lines))


def _require_writable_folder(path: Path, option: str) -> None:
    """Fail before any work when no file can be written at path; creates nothing."""
    from specsweep.report.data import ReportError

    why = unwritable(path)
    if why:
        raise ReportError(f"cannot write {option} {path}: {why}: choose another {option}")


def _build(
    db: str,
    out: str | None,
    campaign: str | None,
    workers: int | None,
    compare: tuple[str, str] | None,
    html: str | None,
    no_pdf: bool,
) -> list[str]:
    """Build what the options ask for; return the lines to print (the files written)."""
    if compare:
        from specsweep.report.compare.build import run as run_compare

        pdf, sentence = run_compare(db, *compare, out or COMPARE_DEFAULT)
        return [sentence, str(pdf)]
    pdf = None if no_pdf else (out or PDF_DEFAULT)
    if html:
        from specsweep.report.html.build import run as run_html

        written = run_html(db, html, campaign, workers=workers, out_pdf=pdf)
        return [str(p) for p in (pdf, written) if p]
    if pdf is None:  # --findings alone
        return []
    from specsweep.report.build import run

    return [str(run(db, pdf, campaign, workers=workers))]


def _html_value(argv: list[str]) -> list[str]:
    """`--html` with no PATH after it (last, or followed by another option) gets the default
    PATH: typer options take a value or none, never an optional one."""
    out = list(argv)
    for i, arg in enumerate(argv):
        if arg == "--html" and (i + 1 == len(argv) or argv[i + 1].startswith("-")):
            out[i] = f"--html={HTML_DEFAULT}"
    return out


def main(argv: list[str] | None = None, prog_name: str = "specsweep report") -> int:
    """Run the command line on argv (default sys.argv[1:]) and return its exit code."""
    args = _html_value(sys.argv[1:] if argv is None else argv)
    try:  # standalone: typer prints usage errors (exit 2) and exits with the command's code
        app(args=args, prog_name=prog_name)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
