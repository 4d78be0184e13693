"""The `specsweep` command: a typer app whose subcommands forward to the stages' command lines.

Each subcommand hands its arguments, `--help` included, to the stage's own `main` (the typer
apps of collect, analyze and report), with the name the user typed, so options, help and exit
codes are the stage's and are written once, and every usage line says `specsweep ...`
(`export --findings PATH` goes to the report's, whose findings they are). The
stages are imported inside the commands, never at the top: `specsweep --help` and `specsweep
sql` load no pandas, DuckDB or matplotlib.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

# the subcommand parses nothing itself: every argument (and --help) goes to the stage's parser
FORWARD = {
    "context_settings": {"allow_extra_args": True, "ignore_unknown_options": True},
    "add_help_option": False,
}
COLLECT, ANALYZE, REPORT = "Collect", "Analyze", "Report and query"

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Plan, run, analyze and report speculative-decoding benchmarks. "
    "`specsweep COMMAND --help` shows a command's options.",
)


def _prog(ctx: typer.Context) -> str:
    """The name the user typed: 'specsweep', or 'python -m specsweep'."""
    return ctx.find_root().info_name or "specsweep"


def _collect(ctx: typer.Context) -> None:
    from specsweep.collect.__main__ import main

    main([ctx.info_name, *ctx.args], prog_name=_prog(ctx))  # exits with the command's code


def _analyze(argv: list[str], prog: str) -> None:
    from specsweep.analyze.__main__ import main

    raise typer.Exit(main(argv, prog_name=prog))


@app.command(rich_help_panel=COLLECT, **FORWARD)
def run(ctx: typer.Context) -> None:
    """Run or resume a plan's campaign into the results file."""
    _collect(ctx)


@app.command(rich_help_panel=COLLECT, **FORWARD)
def check(ctx: typer.Context) -> None:
    """Validate a plan: the services and requests it would run, time estimate, GPU memory."""
    _collect(ctx)


@app.command(rich_help_panel=COLLECT, **FORWARD)
def simulate(ctx: typer.Context) -> None:
    """Schedule a plan on simulated services: makespan, bounds and the packed order."""
    _collect(ctx)


@app.command(rich_help_panel=COLLECT, **FORWARD)
def provision(ctx: typer.Context) -> None:
    """Build the cached llama-server and fetch the prompt sets."""
    _collect(ctx)


@app.command("import", rich_help_panel=COLLECT, **FORWARD)
def import_results(ctx: typer.Context) -> None:
    """Import a vLLM or SGLang benchmark result file as raw rows."""
    _collect(ctx)


@app.command(rich_help_panel=ANALYZE, **FORWARD)
def analyze(ctx: typer.Context) -> None:
    """Build the analysis views of a results file."""
    _analyze(ctx.args, f"{_prog(ctx)} analyze")


@app.command(rich_help_panel=ANALYZE, **FORWARD)
def compare(ctx: typer.Context) -> None:
    """Compare two campaigns (ids or plan names) and store the result for the report."""
    _analyze(["compare", *ctx.args], _prog(ctx))


@app.command(rich_help_panel=ANALYZE, **FORWARD)
def gate(ctx: typer.Context) -> None:
    """Exit 1 when the candidate campaign regressed beyond --max-regression, 3 when undecided."""
    _analyze(["gate", *ctx.args], _prog(ctx))


@app.command(rich_help_panel=ANALYZE, **FORWARD)
def remove(ctx: typer.Context) -> None:
    """Remove campaigns (raw rows, analysis rows, stored comparisons) from the results file."""
    _analyze(["remove", *ctx.args], _prog(ctx))


@app.command(rich_help_panel=ANALYZE, **FORWARD)
def compact(ctx: typer.Context) -> None:
    """Give the results file back the space its deleted rows hold (after remove, rebuilds)."""
    _analyze(["compact", *ctx.args], _prog(ctx))


@app.command(rich_help_panel=ANALYZE, **FORWARD)
def export(ctx: typer.Context) -> None:
    """Write every raw table and analysis view to Parquet, CSV or a JSON summary; with
    --findings PATH [--db DB] [--campaign ID], the report's findings as JSON."""
    if any(a == "--findings" or a.startswith("--findings=") for a in ctx.args):
        # the findings are the report's (report.findings): its parser, without the PDF
        from specsweep.report.__main__ import main

        raise typer.Exit(main([*ctx.args, "--no-pdf"], prog_name=f"{_prog(ctx)} export"))
    _analyze(["export", *ctx.args], _prog(ctx))


@app.command(rich_help_panel=REPORT, **FORWARD)
def report(ctx: typer.Context) -> None:
    """Build the PDF report (or, with --compare A B, the compare report)."""
    from specsweep.report.__main__ import main

    raise typer.Exit(main(ctx.args, prog_name=f"{_prog(ctx)} report"))


@app.command(rich_help_panel=REPORT, context_settings=FORWARD["context_settings"])
def sql(
    ctx: typer.Context,
    db: str | None = typer.Option(
        None,
        help="DuckDB results file (':memory:' for none) [default: the one `specsweep run` "
        "writes and the other commands read]",
        show_default=False,
    ),
) -> None:
    """Open a DuckDB prompt on the results file (SQL piped in runs without one).

    Further arguments go to the duckdb CLI, e.g. -readonly or -c 'SELECT ...'."""
    from specsweep.schema.defaults import DEFAULT_DB  # here: `specsweep --help` loads no stage

    db = db or str(DEFAULT_DB)
    # the duckdb CLI of this environment (package duckdb-cli, pinned with the duckdb library in
    # pyproject): one storage format for both; a duckdb on PATH may be another version
    binary = Path(sys.executable).parent / "duckdb"
    if not os.access(binary, os.X_OK):
        typer.echo(
            f"error: no duckdb CLI at {binary}: install the duckdb-cli package into "
            f"this environment (make sql does)",
            err=True,
        )
        raise typer.Exit(2)
    if db != ":memory:" and not Path(db).is_file():
        typer.echo(f"error: no results file {db} (specsweep run writes one)", err=True)
        raise typer.Exit(2)
    sys.stdout.flush()
    # exec, not a child: Ctrl-C then cancels a query in the prompt instead of killing Python
    os.execv(binary, [str(binary), db, *ctx.args])


def main() -> None:
    """The console script `specsweep` (pyproject [project.scripts])."""
    app()


if __name__ == "__main__":
    main()
