"""Build the analysis layer of a specsweep DuckDB file (contract: analyze/VIEWS.md).

Every analysis object belongs to one model (analyze.models): a SQL file analyze/sql/*.sql whose
`-- reads:` line says what it reads, or a Python model of analyze.models.registry. The models
run in the order their declarations give (a topological sort: each after what it reads), on
one connection, inside one transaction: everything is CREATE OR REPLACE, so a failed build
leaves the previous analysis layer in place. The raw layer is schema's: `connect` migrates the
file before anything here runs. The inter-token latencies are computed first (analyze.itl): for
a file of up to itl.PARALLEL_CHUNKS chunks on the build's own connection, one open of the file
in all (an open costs 35-70 ms); for a larger one read-only, in worker processes, before this
process takes the write lock.

Every analysis object is a TABLE (a snapshot of the raw tables as of analysis_params.built_at)
except speedup_pairs, a view over the request_metrics table: a view is recomputed by every
read, and a dozen objects read request_metrics, so views made each `count(*)` re-derive every
request (3 minutes and 7.5 GB for 100k requests; docs/measurements/2026-12-03-scale-*.md).

`specsweep analyze` rebuilds only the campaigns whose raw rows changed since the last build
(analyze.models.scope): a file that grows for a year pays for its new campaign, not for every
chunk list it holds (2.4 billion in 10M requests). `--full` rebuilds everything, as does a
change of the analysis code, the schema or the baseline.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

import duckdb

from specsweep.analyze import itl
from specsweep.analyze.models import registry, scope
from specsweep.analyze.models.model import VIEW, Build
from specsweep.analyze.models.registry import PARAMS
from specsweep.analyze.models.registry import PARAMS_DDL as PARAMS_DDL  # re-exported
from specsweep.analyze.models.registry import plan_description as plan_description  # re-exported
from specsweep.analyze.models.sql import read_sql as read_sql  # re-exported: tests run single files
from specsweep.schema.defaults import DEFAULT_BASELINE
from specsweep.schema.store import READER_MEMORY, connect, scratch_folder
from specsweep.schema.store import NotAResultsDatabase as NotAResultsDatabase  # re-exported

log = logging.getLogger(__name__)
# a build of several groups (a large file's full rebuild: 13 minutes at 10M requests) says how
# far it is; `specsweep analyze` prints this logger's lines whatever its --verbose
progress = logging.getLogger("specsweep.analyze.progress")


MODELS = registry.models()  # every model, in build order
OBJECTS = registry.objects(MODELS)  # the analysis objects, in build order
MEASURED = registry.sql_file("measured_requests")  # the view analyze.itl scans too
# what an incremental build replaces per campaign: every analysis table (speedup_pairs is a
# view over request_metrics) and the build's parameters
TABLES = [PARAMS, *(name for name in OBJECTS if name != "speedup_pairs")]
VIEWS = [m for m in MODELS if VIEW in m.builds.values()]  # the views over those tables


Then = Callable[[duckdb.DuckDBPyConnection, scope.Plan], None]


def run(
    db_path: str | Path, baseline: str | None = None, full: bool = False, then: Then | None = None
) -> scope.Plan:
    """Bring the analysis layer of the DuckDB file at db_path up to date, comparing against
    `baseline` (default: the baseline the campaigns' plans name): only the campaigns whose raw
    rows changed since the last build, or everything (full=True, or when analyze.models.scope
    says so). Returns what was done. then: called with a writable connection to the file and
    what was done, once the analysis is up to date; a small file's (or an unchanged one's)
    connection is the build's own."""
    db_path = Path(db_path)
    # schema's connect refuses a missing or foreign file and migrates an older one
    with connect(db_path, memory=READER_MEMORY) as con:
        if baseline:
            require_method(con, baseline, db_path)
        baseline = baseline or plan_baseline(con)
        todo = scope.Plan(full="--full") if full else scope.plan(con, baseline, OBJECTS)
        building = list(scope.fingerprints(con)) if todo.full else todo.changed
        scope.group(todo, con, building)
        whole = todo.full and len(todo.groups) <= 1
        spans = itl.campaign_spans(con) if whole else []
        small = whole and itl.in_process(spans)
        if small:  # on this connection
            log.info("inter-token latencies from every chunk list")
            build_on(con, baseline, itl.compute(db_path, read_sql(MEASURED), con=con, spans=spans))
        unchanged = not (todo.full or todo.groups or todo.removed)
        if small or unchanged:
            if then:
                then(con, todo)
            return todo
    if whole:
        build_apart(db_path, baseline, spans)
    removed = todo.removed  # dropped with the first group
    steps = [] if whole else todo.groups or [[]]
    if len(steps) > 1:
        why = f" (every campaign: {todo.full})" if todo.full else ""
        campaigns, requests = sum(map(len, steps)), sum(todo.sizes)
        progress.info(f"building {campaigns} campaigns ({requests:,} requests){why}")
        progress.info(f"in {len(steps)} groups of about {scope.GROUP_REQUESTS:,} requests")
    started = time.monotonic()
    for i, group in enumerate(steps):
        log.info("group %d of %d: %d campaign(s)", i + 1, len(todo.groups), len(group))
        build_some(db_path, baseline, group, removed if i == 0 else [], whole=todo.full and i == 0)
        if len(steps) > 1:
            progress.info(_progress(todo.sizes, i, time.monotonic() - started))
    if then:
        with connect(db_path, memory=READER_MEMORY) as con:
            then(con, todo)
    return todo


def _progress(sizes: list[int], i: int, elapsed_s: float) -> str:
    """After group i of groups of `sizes` requests: how long it took so far and, at the same
    time per request, how long the rest will take."""
    done = sum(sizes[: i + 1])
    left = elapsed_s / max(done, 1) * (sum(sizes) - done)
    tail = f"; about {_minutes(left)} left" if i + 1 < len(sizes) else ""
    return f"group {i + 1} of {len(sizes)} built ({done:,} requests) in {_minutes(elapsed_s)}{tail}"


def _minutes(seconds: float) -> str:
    seconds = round(seconds)
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


def build_some(
    db_path: Path, baseline: str, changed: list[str], removed: list[str], whole: bool
) -> None:
    """Analyse the campaigns `changed` in a scratch file beside db_path and swap their rows
    into its analysis tables, dropping those of `removed`; whole: replace the tables outright
    (the first group of a full rebuild), then make the views over them. Their chunk lists
    are scanned where they are, in db_path (read-only; worker processes past
    itl.PARALLEL_CHUNKS), and not copied."""
    log.info("inter-token latencies from the chunk lists of %d campaign(s)", len(changed))
    latencies = itl.compute(db_path, read_sql(MEASURED), campaigns=changed)
    with scratch_folder(db_path, "analyze") as folder:
        scratch = Path(folder) / "campaigns.duckdb"
        moved = scope.copy_campaigns(db_path, scratch, changed)
        with connect(scratch, memory=READER_MEMORY) as con:
            build_on(con, baseline, itl.renumbered(latencies, moved))
        if whole:
            with connect(db_path, memory=READER_MEMORY) as con:
                drop_views(con)  # a table cannot replace an older build's view
        scope.merge(db_path, scratch, [*changed, *removed], TABLES, whole)
    if whole:
        with connect(db_path, memory=READER_MEMORY) as con:
            state = Build(con, baseline)
            for model in VIEWS:
                model.run(state)


def plan_line(done: scope.Plan) -> str:
    """What `run` did, in one line."""
    if done.full:
        groups = f" in {len(done.groups)} groups of campaigns" if len(done.groups) > 1 else ""
        return f"rebuilt every campaign ({done.full}){groups}"
    if not done.campaigns:
        return "every campaign's analysis is up to date (nothing changed since the last build)"
    groups = f" in {len(done.groups)} groups" if len(done.groups) > 1 else ""
    parts = [
        f"rebuilt {len(done.changed)} changed campaign(s) ({done.requests:,} requests){groups}"
    ]
    if done.removed:
        parts.append(f"dropped {len(done.removed)} campaign(s) no longer in the file")
    return "; ".join(parts) + ": " + ", ".join(done.campaigns)


def build_apart(db_path: Path, baseline: str, spans: list[tuple] | None = None) -> None:
    """The chunk pass in worker processes on read-only connections, with no connection of
    this process open (DuckDB's write lock would refuse them), then the build (spans:
    itl.campaign_spans of the file, when the caller has them)."""
    log.info("inter-token latencies from every chunk list, in worker processes")
    latencies = itl.compute(db_path, read_sql(MEASURED), spans=spans)
    with connect(db_path, memory=READER_MEMORY) as con:
        build_on(con, baseline, latencies)


def build_on(con: duckdb.DuckDBPyConnection, baseline: str, latencies: itl.Latencies) -> None:
    """Build every analysis object on con in one transaction: a failed build leaves the
    earlier analysis whole."""
    con.begin()
    try:
        build(con, baseline, latencies)
    except BaseException:
        con.rollback()
        raise
    con.commit()


def build(con: duckdb.DuckDBPyConnection, baseline: str, latencies: itl.Latencies) -> None:
    """Create the analysis objects on an open connection, each model after what it reads."""
    drop_views(con)
    state = Build(con, baseline, latencies)
    for model in MODELS:
        log.info("building %s (%s)", model.name, model.source)
        model.run(state)


def drop_views(con: duckdb.DuckDBPyConnection) -> None:
    """Drop analysis objects an older build made as views (CREATE OR REPLACE TABLE cannot
    replace a view); speedup_pairs stays a view."""
    rows = con.execute(
        "SELECT view_name FROM duckdb_views() WHERE NOT internal AND schema_name = 'main'"
    ).fetchall()
    for (name,) in rows:
        if name in OBJECTS and name != "speedup_pairs":
            con.execute(f'DROP VIEW "{name}"')  # names from OBJECTS, the models' own


def require_method(con: duckdb.DuckDBPyConnection, method: str, db_path: Path) -> None:
    """ValueError when the file's services ran methods and `method` (a --baseline) is not
    one of them: every comparison would be empty, without a word."""
    ran = sorted(r[0] for r in con.execute("SELECT DISTINCT method FROM services").fetchall())
    if ran and method not in ran:
        raise ValueError(f"--baseline {method!r}: no service in {db_path} ran it; methods: {ran}")


def plan_baseline(con: duckdb.DuckDBPyConnection) -> str:
    """The baseline the campaigns' plans name; schema.defaults.DEFAULT_BASELINE when none is
    recorded (con is migrated, so `campaigns` exists)."""
    names = [r[0] for r in con.execute("SELECT DISTINCT baseline FROM campaigns").fetchall()]
    if len(names) > 1:
        raise ValueError(f"campaigns name different baselines {sorted(names)}: pass --baseline")
    return names[0] if names else DEFAULT_BASELINE


def object_counts(con: duckdb.DuckDBPyConnection) -> dict[str, int | None]:
    """Row count of each analysis object, in build order; None for a view (speedup_pairs:
    counting it joins every request again, 4 s of a 10M-request file)."""
    views = {name for model in VIEWS for name, kind in model.builds.items() if kind == VIEW}
    return {
        name: None if name in views else con.table(name).count("*").fetchall()[0][0]
        for name in OBJECTS
    }


def import_check_lines(con: duckdb.DuckDBPyConnection) -> list[str]:
    """What the import_check view says, for `specsweep analyze` to print: how many figures
    of imported files equal ours to the printed digit, then each one that differs."""
    rows = con.execute(
        "SELECT campaign_id, workload, stat, metric, file_printed, specsweep_printed, "
        "match, tool FROM import_check ORDER BY campaign_id, run, metric, stat"
    ).fetchall()
    if not rows:
        return []
    files = len({row[0] for row in rows})
    same = sum(1 for row in rows if row[6])
    lines = [
        f"import_check: {same} of {len(rows)} figures printed by {files} imported "
        "file(s) equal specsweep's to the printed digit"
    ]
    for cid, workload, stat, metric, theirs, ours, match, tool in rows:
        if not match:
            why = SGLANG_E2E if (tool, metric) == ("sglang", "e2el") else ""
            lines.append(
                f"  differs: {cid} {workload} {stat} {metric} (ms): file {theirs}, "
                f"specsweep {ours}{why}"
            )
    return lines


# the one known, explained difference (collect/importing/importer.py's docstring)
SGLANG_E2E = (
    " (expected: SGLang stops its E2E clock at the stream's last line, ours at the last token)"
)
