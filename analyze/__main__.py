"""Command line of the analysis stage: `specsweep analyze` and its subcommands, which
`specsweep compare|gate|export|remove|compact` run.

`specsweep analyze [--db PATH] [--baseline METHOD]` builds the analysis layer; `export --format
parquet|csv|json --out DIR [--db PATH]` writes every raw table and analysis object to files
(analyze/export/; exit codes 0 written, 2 bad input, an --out that cannot be written or a
disk that refused a write, 130/143 interrupted: each file is written whole or not at all);
`remove ID... [--yes]` removes campaigns from the file (raw and analysis rows, stored
comparisons); `compact` gives the file back the space of its deleted rows
(schema/compact.py); `compare A B` and `gate --baseline A --candidate B --max-regression 5%`
compare two campaigns (analyze/compare/; exit codes 0 pass, 1 regression, 2 bad input, 3
undecided); compare writes the compare_* tables (for `specsweep report --compare A B`), gate
does not write.
Exit codes of the build: 0 built, 1 no or bad results file, 2 bad command line, 130
interrupted (Ctrl-C), 143 stopped by SIGTERM; an interrupted build leaves the analysis as the
last build left it."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import typer

import specsweep.schema.defaults
from specsweep.interrupt import Interrupted, unwind_on_signals
from specsweep.writing import FileFault, file_faults

DEFAULT_DB = str(specsweep.schema.defaults.DEFAULT_DB)
FORMATS = ("parquet", "csv", "json")
app = typer.Typer(
    add_completion=False,
    pretty_exceptions_enable=False,
    help="Build the analysis views of a specsweep database.",
)


@app.callback(invoke_without_command=True)
def build(
    ctx: typer.Context,
    db: str = typer.Option(DEFAULT_DB, help="DuckDB results file."),
    baseline: str = typer.Option(
        None, help="Method the others are compared with (default: the baseline the plan names)."
    ),
    full: bool = typer.Option(
        False, "--full", help="Rebuild every campaign, not only those whose rows changed."
    ),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log each step."),
) -> None:
    """Bring the analysis layer up to date (only the campaigns whose raw rows changed since
    the last build, unless --full), then print what was rebuilt and what the layer holds
    (and, when the file holds imported result files, how their printed figures compare with
    ours), on the build's connection when it had one."""
    if ctx.invoked_subcommand is not None:
        # the subcommand has its own --db: one given here would be silently ignored
        for name in ("db", "baseline", "full"):
            if ctx.get_parameter_source(name).name != "DEFAULT":
                raise typer.BadParameter(f"give --{name} after '{ctx.invoked_subcommand}'")
        return
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING)
    _show_progress()
    import duckdb

    from specsweep.analyze import build as building  # duckdb, numpy, pandas: only once parsed

    def then(con: duckdb.DuckDBPyConnection, done: building.scope.Plan) -> None:
        typer.echo(f"analyze: {building.plan_line(done)}")
        if done.full or done.campaigns:  # stored pairs read the rows rebuilt
            from specsweep.analyze.compare.store import refresh

            for line in refresh(con, None if done.full else done.campaigns):
                typer.echo(f"analyze: {line}")
        counts = building.object_counts(con)
        built = ", ".join(
            f"{name} ({'view' if rows is None else f'{rows} rows'})"
            for name, rows in counts.items()
        )
        typer.echo(f"analyze: built {built} in {db}")
        for line in building.import_check_lines(con):  # only when the file holds imports
            typer.echo(f"analyze: {line}")

    try:
        with unwind_on_signals(), file_faults():
            building.run(db, baseline=baseline, full=full, then=then)
    except Interrupted as exc:  # the build's transaction rolled back, its workers are gone
        typer.echo(f"analyze: {INTERRUPTED}", err=True)
        raise typer.Exit(exc.exit_code) from None
    except FileFault as exc:  # a write the disk refused is rolled back too
        kept = "; the analysis is as the last build left it" if exc.refused else ""
        typer.echo(f"analyze: {exc}{kept}", err=True)
        raise typer.Exit(1) from None
    except (FileNotFoundError, ValueError, building.NotAResultsDatabase) as exc:
        typer.echo(f"analyze: {exc}", err=True)
        raise typer.Exit(1) from None


INTERRUPTED = (
    "interrupted: the analysis is as the last build left it (a full rebuild of a large file "
    "keeps the groups it finished); rerun to finish"
)


class _Progress(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        typer.echo(f"analyze: {record.getMessage()}", err=True)  # today's stderr


def _show_progress() -> None:
    """Print analyze.build's progress lines (a build of several groups) on stderr."""
    progress = logging.getLogger("specsweep.analyze.progress")
    if not any(isinstance(h, _Progress) for h in progress.handlers):
        progress.addHandler(_Progress())
    progress.setLevel(logging.INFO)
    progress.propagate = False  # once, with --verbose too


def _format(value: str) -> str:
    if value not in FORMATS:
        raise typer.BadParameter(f"invalid choice: {value!r} (choose from {', '.join(FORMATS)})")
    return value


@app.command()
def export(
    db: str = typer.Option(DEFAULT_DB, help="DuckDB results file."),
    format: str = typer.Option(
        "parquet",
        callback=_format,
        help="parquet, csv or json (json: one summary.json of every campaign).",
    ),
    out: str = typer.Option(..., help="Folder to write (raw/, analysis/, columns.json)."),
) -> None:
    """Write every raw table and analysis object to Parquet or CSV files."""
    from specsweep.analyze import export as exporting
    from specsweep.writing import unwritable

    why = unwritable(Path(out) / "probe")
    if why:
        typer.echo(f"analyze export: cannot write --out {out}: {why}: choose another", err=True)
        raise typer.Exit(2)
    try:
        with unwind_on_signals(), file_faults():
            files = exporting.run(db, out, format)
    except Interrupted as exc:
        typer.echo(f"analyze export: interrupted: each file in {out} is whole; rerun", err=True)
        raise typer.Exit(exc.exit_code) from None
    except FileFault as exc:
        typer.echo(f"analyze export: {exc}; each file in {out} is whole", err=True)
        raise typer.Exit(2) from None
    except (FileNotFoundError, ValueError) as exc:
        typer.echo(f"analyze export: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"analyze export: {len(files)} files ({format}) in {out}")


@app.command()
def compare(
    a: str = typer.Argument(..., help="Campaign id or plan name (the reference)."),
    b: str = typer.Argument(..., help="Campaign id or plan name (compared with A)."),
    db: str = typer.Option(DEFAULT_DB, help="DuckDB results file."),
) -> None:
    """Print what changed from campaign A to campaign B and store the compare_* tables
    (for `specsweep report --compare A B`). Exit codes: 0 done, 2 bad input."""
    _compare(db, a, b, threshold=None)


@app.command()
def gate(
    baseline: str = typer.Option(..., help="Campaign id or plan name (A)."),
    candidate: str = typer.Option(..., help="Campaign id or plan name (B)."),
    max_regression: str = typer.Option("5%", help="e.g. 5% or 0.05."),
    db: str = typer.Option(DEFAULT_DB, help="DuckDB results file."),
) -> None:
    """Exit 1 when a matched metric of B regressed significantly from A beyond
    --max-regression (Holm-adjusted over the comparison's tests, the start variance of both
    campaigns in every interval: analyze.compare.stats); writes nothing. Exit codes: 0 pass,
    1 regression, 2 bad input, 3 undecided (a change worse than the threshold has no
    interval)."""
    try:
        threshold = _fraction(max_regression)
    except ValueError as exc:
        typer.echo(f"analyze: {exc}", err=True)
        raise typer.Exit(2) from None
    _compare(db, baseline, candidate, threshold)


@app.command()
def remove(
    campaigns: list[str] = typer.Argument(
        ...,
        metavar="ID",
        help="Campaign ids, exact (SELECT campaign_id, plan_name FROM campaigns lists them).",
    ),
    db: str = typer.Option(DEFAULT_DB, help="DuckDB results file."),
    yes: bool = typer.Option(False, "--yes", help="Remove them (without: only say what would go)."),
) -> None:
    """Remove campaigns from the results file: their raw rows (the rejected ones in quarantine
    too) and analysis rows, in one transaction, then the stored comparisons with one of them
    as a side. The other campaigns' rows and analysis stay as they are. Without --yes, only
    print what would be removed. Exit codes: 0 removed (or shown), 1 the file cannot be
    opened or written, 2 bad input."""
    import duckdb

    from specsweep.analyze.build import TABLES
    from specsweep.analyze.compare.store import pairs, refresh
    from specsweep.analyze.models import scope
    from specsweep.schema.store import NotAResultsDatabase, campaign_filter, connect

    try:
        with connect(db, read_only=not yes) as con:
            running = con.execute(
                "SELECT campaign_id FROM campaigns WHERE status = 'running' AND "
                + campaign_filter(campaigns)
            ).fetchall()
            counts = scope.remove(con, campaigns, TABLES, apply=yes)
            stored = pairs(con, campaigns)
            dropped = refresh(con, campaigns) if yes else []
    except (ValueError, FileNotFoundError, NotAResultsDatabase) as exc:
        typer.echo(f"remove: {exc}", err=True)
        raise typer.Exit(2) from None
    except duckdb.Error as exc:  # a file locked by a running collect, or not writable
        typer.echo(f"remove: {db}: {str(exc).splitlines()[0]}", err=True)
        raise typer.Exit(1) from None
    raw_tables = (*scope.RAW, "quarantine")
    raw = ", ".join(f"{table} {counts[table]:,}" for table in raw_tables if counts.get(table))
    analysed = sum(n for table, n in counts.items() if table not in raw_tables)
    what = (
        f"{', '.join(campaigns)}: raw rows {raw}; {analysed:,} analysis rows; "
        f"{len(stored)} stored comparison(s)"
    )
    for (cid,) in running:  # a run killed outright (SIGKILL, power) leaves 'running' too
        typer.echo(
            f"remove: warning: {cid} is marked running: if its `specsweep run` still runs, "
            "it writes its next units into the file again (stop it first)"
        )
    if not yes:
        typer.echo(f"remove: would remove {what}")
        typer.echo("remove: nothing removed: run again with --yes to remove them")
        return
    typer.echo(f"remove: removed {what}")
    for line in dropped:
        typer.echo(f"remove: {line}")
    typer.echo("remove: the file keeps its size until `specsweep compact` gives the space back")


@app.command()
def compact(db: str = typer.Option(DEFAULT_DB, help="DuckDB results file.")) -> None:
    """Give the results file back the space its deleted rows hold (removed campaigns, the
    analysis rows each build replaced): a copy of its content beside it, checked against it,
    then renamed over it (schema.compact). Other commands wait for it. Exit codes: 0
    compacted, 1 the file cannot be used (held past the lock's wait, a full disk, a copy that
    differs), 2 no results file, 130/143 interrupted (the file as it was)."""
    import duckdb

    from specsweep.schema.compact import CopyMismatch
    from specsweep.schema.compact import compact as compacting
    from specsweep.schema.store import NotAResultsDatabase

    try:
        with unwind_on_signals(), file_faults():
            done = compacting(db)
    except Interrupted as exc:
        typer.echo("compact: interrupted: the results file is as it was", err=True)
        raise typer.Exit(exc.exit_code) from None
    except (FileNotFoundError, NotAResultsDatabase) as exc:
        typer.echo(f"compact: {exc}", err=True)
        raise typer.Exit(2) from None
    except (FileFault, CopyMismatch, duckdb.Error) as exc:  # a lock held too long is duckdb's
        kept = "; the results file is as it was" if not isinstance(exc, CopyMismatch) else ""
        typer.echo(f"compact: {db}: {str(exc).splitlines()[0]}{kept}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"compact: {done.line(db)}")


def _compare(db: str, a: str, b: str, threshold: float | None) -> None:
    """Compare (threshold None: store the result) or gate (read only, exit 1 on a failure, 3
    when it cannot decide)."""
    import duckdb

    from specsweep.analyze import compare as comparing
    from specsweep.schema.store import NotAResultsDatabase, connect

    gating = threshold is not None
    try:
        with connect(db, read_only=gating) as con:
            result = comparing.compare(con, a, b)
            stored = {} if gating else comparing.store(con, result)
    except (duckdb.Error, ValueError, FileNotFoundError, NotAResultsDatabase) as exc:
        typer.echo(f"analyze: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo("\n".join(comparing.lines(result)))
    if stored:
        typer.echo(
            f"compare: stored in {db}: "
            + ", ".join(f"{name} ({n} rows)" for name, n in stored.items())
            + f"; specsweep report --compare {result.a} {result.b} builds its PDF"
        )
    if not gating:
        return
    verdict, code = comparing.gate_lines(result, threshold)
    typer.echo("\n".join(verdict))
    if code:
        raise typer.Exit(code)


def _fraction(text: str) -> float:
    value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    if not 0 <= value < 1:
        raise ValueError(f"--max-regression must lie in [0, 100%), got {text!r}")
    return value


def main(argv: list[str] | None = None, prog_name: str = "specsweep analyze") -> int:
    """Run the command line on argv (default sys.argv[1:]) and return its exit code."""
    try:  # standalone: typer prints usage errors (exit 2) and exits with every command's code
        app(args=argv, prog_name=prog_name)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
