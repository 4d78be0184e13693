"""Build the analysis layer of a specsweep DuckDB file (contract: analyze/VIEWS.md).

Order: analysis_params (the bound baseline name), campaign_plan (each plan's description, read
from its YAML), 00 measured_requests (a TEMP view), the per-request and per-window inter-token
latencies (analyze.itl, TEMP tables); then what the campaign's claims read: 01 request_metrics,
02 config_summary, 03 speedup_pairs, 38 service_starts (every start in campaign order), 15-17
GPU energy (segments, windows, requests), 19 energy_summary, the open-loop objects 21-25
(analyze.openloop.prepare); then the claims: the `start_variance` table (analyze.starts: each
paired metric adds its strata), the `speedup` (analyze.stats), `energy_ratio` (analyze.energy)
and open-loop TPOT ratios (analyze.openloop), adjusted together as one family per campaign;
then 04 best_config (reads speedup), 05-10 the per-window views, 11-13 the campaign,
environment and service summaries (the only way `report` sees the raw tables), 14 import_check
(imported files' printed figures beside ours), 18 host_summary, 20 request_distribution, the
open-loop objects 26-27 (rate_speedup, rate_limits), then the speculation objects 28-33
(method_families, param_sweep, speedup_decomposition, best_setting, which reads speedup and
rate_speedup, position_acceptance, accepted_histogram, 35 speedup_prediction, 36
acceptance_by_load), then 34 replica_agreement (each replica's median decode speed and its
interval), then the category tables (analyze.category). The raw layer is
schema's: `connect` migrates the file before anything here runs. Everything is CREATE OR
REPLACE inside one transaction, so a failed build leaves the previous analysis layer in place.
metric_catalog (schema.metrics.CATALOG: each metric's label, unit, direction and formula) is
written first: report imports nothing of ours and reads the labels from it.

Every analysis object is a TABLE (a snapshot of the raw tables as of analysis_params.built_at)
except speedup_pairs, a view over the request_metrics table: a view is recomputed by every
read, and a dozen objects read request_metrics, so views made each `count(*)` re-derive every
request (3 minutes and 7.5 GB for 100k requests; docs/measurements/2026-12-03-scale-*.md). A
full rebuild is what `python -m analyze` does after every collect: rebuilding 1M requests takes
seconds, so nothing is rebuilt incrementally.
"""

from __future__ import annotations

import logging
from importlib import resources
from pathlib import Path

import duckdb
import yaml

from analyze import category, energy, itl, openloop, starts, stats
from schema import metrics
from schema.controls import aa_control_name
from schema.defaults import DEFAULT_BASELINE
from schema.store import NotAResultsDatabase as NotAResultsDatabase  # re-exported
from schema.store import connect

log = logging.getLogger(__name__)


# DuckDB's buffer pool would otherwise cache up to 80% of RAM of a file read once; past this
# it evicts pages and spills intermediates to a temporary folder (a 1M-request file is 4.5 GB)
MEMORY_LIMIT = "1GB"
MEASURED = "00_measured_requests.sql"
# what the campaign's claims (speedup, energy_ratio, the open-loop TPOT ratios) read
BEFORE_CLAIMS = (
    "01_request_metrics.sql",
    "02_config_summary.sql",
    "03_speedup_pairs.sql",
    "38_service_starts.sql",
    "15_energy_segments.sql",
    "16_window_energy.sql",
    "17_request_energy.sql",
    "19_energy_summary.sql",
)
AFTER_CLAIMS = (
    "04_best_config.sql",
    "05_agentic_turns.sql",
    "06_window_acceptance.sql",
    "07_lossless.sql",
    "08_latency_conventions.sql",
    "09_crossover.sql",
    "10_colocation.sql",
    "11_campaign_summary.sql",
    "12_environment_summary.sql",
    "13_service_summary.sql",
    "14_import_check.sql",
    "18_host_summary.sql",
    "20_request_distribution.sql",
)
# after the open-loop objects: best_setting reads rate_speedup
SPECULATION = (
    "28_method_families.sql",
    "29_param_sweep.sql",
    "30_speedup_decomposition.sql",
    "31_best_setting.sql",
    "32_position_acceptance.sql",
    "33_accepted_histogram.sql",
    "35_speedup_prediction.sql",
    "36_acceptance_by_load.sql",
)
REPLICAS = ("34_replica_agreement.sql",)
OBJECTS = (
    "request_metrics",
    "config_summary",
    "speedup_pairs",
    "service_starts",
    "start_variance",
    "speedup",
    "best_config",
    "agentic_turns",
    "window_acceptance",
    "lossless",
    "latency_conventions",
    "crossover",
    "colocation",
    "campaign_summary",
    "environment_summary",
    "service_summary",
    "import_check",
    "energy_segments",
    "window_energy",
    "request_energy",
    "host_summary",
    "energy_summary",
    "request_distribution",
    "energy_ratio",
    "campaign_plan",
    *openloop.OBJECTS,
    "rate_attainment",  # analyze.attainment, from openloop.finish
    "method_families",
    "param_sweep",
    "speedup_decomposition",
    "best_setting",
    "position_acceptance",
    "accepted_histogram",
    "speedup_prediction",
    "acceptance_by_load",
    *category.OBJECTS,
    "replica_agreement",
    "metric_catalog",
)

# Views cannot hold bound parameters, so the baseline name reaches SQL through this table.
PARAMS_DDL = """
CREATE OR REPLACE TABLE analysis_params (
    baseline     VARCHAR NOT NULL,   -- method every other method is compared with
    aa_method    VARCHAR NOT NULL,   -- its A/A control's name (schema.controls)
    level        DOUBLE NOT NULL,    -- the intervals' confidence level
    min_prompts  INTEGER NOT NULL,   -- fewer shared prompts: no interval (schema.paired)
    built_at     TIMESTAMP NOT NULL
)
"""
PARAMS_INSERT = "INSERT INTO analysis_params VALUES (?, ?, ?, ?, current_timestamp)"

PLAN_DDL = """
CREATE OR REPLACE TABLE campaign_plan (
    campaign_id  VARCHAR PRIMARY KEY,
    description  VARCHAR NOT NULL     -- the plan's `description` ('' when it has none)
)
"""


def read_sql(name: str) -> str:
    """Text of analyze/sql/<name>, read as package data (works from a wheel too)."""
    return resources.files("analyze").joinpath("sql", name).read_text(encoding="utf-8")


def run(db_path: str | Path, baseline: str | None = None) -> None:
    """Build every analysis object in the DuckDB file at db_path, comparing against
    `baseline` (default: the baseline the campaigns' plans name)."""
    # schema's connect refuses a missing or foreign file and migrates an older one
    with connect(db_path) as con:
        baseline = baseline or plan_baseline(con)
    log.info("inter-token latencies from every chunk list")
    # read-only, in worker processes: before this process takes the write lock
    latencies = itl.compute(db_path, read_sql(MEASURED))
    with connect(db_path) as con:
        con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
        con.begin()
        try:
            build(con, baseline, latencies)
        except BaseException:
            con.rollback()
            raise
        con.commit()


def build(con: duckdb.DuckDBPyConnection, baseline: str, latencies: itl.Latencies) -> None:
    """Create the analysis objects on an open connection, in dependency order."""
    con.execute(PARAMS_DDL)
    con.execute(
        PARAMS_INSERT, [baseline, aa_control_name(baseline), stats.LEVEL, stats.MIN_PROMPTS]
    )
    drop_views(con)
    metrics.write_catalog(con)  # each metric's unit, direction and label, for report
    build_campaign_plan(con)
    con.execute(read_sql(MEASURED))
    itl.write(con, latencies)
    for name in BEFORE_CLAIMS:
        log.info("building %s", name)
        con.execute(read_sql(name))
    openloop.prepare(con, read_sql)
    log.info("paired speedups, energy and TPOT ratios against %s", baseline)
    con.execute(starts.START_VARIANCE_DDL)  # each paired metric adds its strata's rows
    speedups, variances = stats.build_speedup(con)
    ratios, tpot = energy.energy_frame(con), openloop.tpot_speedups(con)
    # one family per campaign: the first page states all three (report.findings)
    stats.adjust_family([(speedups, "speedup"), (ratios, "energy_ratio"), (tpot, "tpot_speedup")])
    stats.write_speedup(con, speedups)
    energy.write_energy_ratio(con, ratios)
    for name in AFTER_CLAIMS:
        log.info("building %s", name)
        con.execute(read_sql(name))
    log.info("open-loop objects")
    openloop.finish(con, read_sql, tpot)
    for name in (*SPECULATION, *REPLICAS):
        log.info("building %s", name)
        con.execute(read_sql(name))
    log.info("acceptance and speedup per prompt category")
    category.build(con, read_sql, variances)


def drop_views(con: duckdb.DuckDBPyConnection) -> None:
    """Drop analysis objects an older build made as views (CREATE OR REPLACE TABLE cannot
    replace a view); speedup_pairs stays a view."""
    rows = con.execute(
        "SELECT view_name FROM duckdb_views() WHERE NOT internal AND schema_name = 'main'"
    ).fetchall()
    for (name,) in rows:
        if name in OBJECTS and name != "speedup_pairs":
            con.execute(f'DROP VIEW "{name}"')  # names from OBJECTS, constants of this module


def plan_description(plan_yaml: str) -> str:
    """The plan's `description` as one line ('' when missing or the text is not YAML)."""
    try:
        plan = yaml.safe_load(plan_yaml)
    except yaml.YAMLError:
        return ""
    text = plan.get("description") if isinstance(plan, dict) else None
    return " ".join(str(text).split()) if text else ""


def build_campaign_plan(con: duckdb.DuckDBPyConnection) -> None:
    """campaign_plan: each campaign's plan description (YAML is parsed here, not in SQL)."""
    con.execute(PLAN_DDL)
    rows = con.execute("SELECT campaign_id, plan_yaml FROM campaigns").fetchall()
    if rows:
        con.executemany(
            "INSERT INTO campaign_plan VALUES (?, ?)",
            [(cid, plan_description(text or "")) for cid, text in rows],
        )


def plan_baseline(con: duckdb.DuckDBPyConnection) -> str:
    """The baseline the campaigns' plans name; schema.defaults.DEFAULT_BASELINE when none is
    recorded (con is migrated, so `campaigns` exists)."""
    names = [r[0] for r in con.execute("SELECT DISTINCT baseline FROM campaigns").fetchall()]
    if len(names) > 1:
        raise ValueError(f"campaigns name different baselines {sorted(names)}: pass --baseline")
    return names[0] if names else DEFAULT_BASELINE


def object_counts(db_path: str | Path) -> dict[str, int]:
    """Row count of each analysis object, in build order."""
    with connect(db_path, read_only=True) as con:
        return {name: con.table(name).aggregate("count(*)").fetchall()[0][0] for name in OBJECTS}


def import_check_lines(db_path: str | Path) -> list[str]:
    """What the import_check view says, for `python -m analyze` to print: how many figures
    of imported files equal ours to the printed digit, then each one that differs."""
    with connect(db_path, read_only=True) as con:
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
