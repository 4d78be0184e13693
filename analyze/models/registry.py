"""The Python models, declared in one place, and the list of every model in build order.

Each entry of PYTHON says what the model reads, what it builds (each object with the module
whose docstring documents it) and the function that builds it. `models()` adds the SQL
models (analyze/sql/*.sql, analyze.models.sql) and sorts them all (analyze.models.model):
analyze.build runs them in that order, `objects()` is the analysis layer's table list, and
analyze/VIEWS.md and docs/data-dictionary.md are written from the same list
(`python -m specsweep.analyze.models.docs`).

Adding a table is one SQL file with its `-- reads:` line (and its test); a Python model is
one entry here.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from types import ModuleType

import yaml

from specsweep.analyze import attainment, category, energy, itl, openloop, race, starts, stats
from specsweep.analyze.models import scope
from specsweep.analyze.models.model import TABLE, TEMP_TABLE, Build, Model, ordered
from specsweep.analyze.models.sql import raw_layer, sql_models
from specsweep.schema import metrics
from specsweep.schema.controls import aa_control_name

# the build's parameters, written first: not an analysis object (`objects()` leaves it out)
PARAMS = "analysis_params"
# Views cannot hold bound parameters, so the baseline name reaches SQL through this table.
PARAMS_DDL = """
CREATE OR REPLACE TABLE analysis_params (
    baseline     VARCHAR NOT NULL,   -- method every other method is compared with
    aa_method    VARCHAR NOT NULL,   -- its A/A control's name (schema.controls)
    level        DOUBLE NOT NULL,    -- the intervals' confidence level
    min_prompts  INTEGER NOT NULL,   -- fewer shared prompts: no interval (stats.paired)
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


def analysis_params(b: Build) -> None:
    """analysis_params: the build's parameters, one row.
      baseline    = the method every other is compared with (`specsweep analyze --baseline`,
                    else the campaigns' plans' `baseline`)
      aa_method   = its A/A control's name (schema.controls)
      level       = the intervals' confidence level
      min_prompts = fewer shared prompts: no interval (stats.paired)
      built_at    = when the layer was built: every table is a snapshot as of then
    SQL reads the baseline from here: a view cannot hold a bound parameter.
    """
    b.con.execute(PARAMS_DDL)
    b.con.execute(
        PARAMS_INSERT, [b.baseline, aa_control_name(b.baseline), stats.LEVEL, stats.MIN_PROMPTS]
    )


def metric_catalog(b: Build) -> None:
    """metric_catalog: one row per metric whose formula lives in schema/metrics.sql (or
    schema/metrics.py). grain: metric; key: metric.
      metric     = the column name the views use (or compare's metric name)
      label      = what tables and charts print
      unit       = '' when dimensionless
      direction  = 'higher' or 'lower' is better
      formula    = the formula, as text
      needs      = the metrics and columns it is computed from
    Written from schema/metrics.py's CATALOG, so compare, gate and the report (which imports
    nothing of the project and reads this table) take a metric's label and direction from one
    place (docs/metrics.md).
    """
    metrics.write_catalog(b.con)


def campaign_plan(b: Build) -> None:
    """campaign_plan: each campaign's plan description (YAML is parsed here, not in SQL).
    grain: campaign; key: campaign_id.
      description = the plan's `description`, folded to one line ('' when it has none or the
                    plan_yaml is not YAML); campaign_summary shows it.
    """
    b.con.execute(PLAN_DDL)
    rows = b.con.execute("SELECT campaign_id, plan_yaml FROM campaigns").fetchall()
    if rows:
        b.con.executemany(
            "INSERT INTO campaign_plan VALUES (?, ?)",
            [(cid, plan_description(text or "")) for cid, text in rows],
        )


def plan_description(plan_yaml: str) -> str:
    """The plan's `description` as one line ('' when missing or the text is not YAML)."""
    try:
        plan = yaml.safe_load(plan_yaml)
    except yaml.YAMLError:
        return ""
    text = plan.get("description") if isinstance(plan, dict) else None
    return " ".join(str(text).split()) if text else ""


def inter_token_latencies(b: Build) -> None:
    """request_itl and window_itl: the latencies analyze.itl computed from the chunk lists
    before the build (on its connection, or for a large file in worker processes)."""
    itl.write(b.con, b.latencies)


def claims(b: Build) -> None:
    """The campaign's claims: the paired speedups (`speedup`), energy ratios (`energy_ratio`)
    and open-loop TPOT ratios (TEMP `rate_tpot`), each paired metric adding its strata's rows
    to `start_variance`, adjusted together as one family per campaign (Holm and the
    simultaneous interval: the first page states all three, report.findings)."""
    b.con.execute(starts.START_VARIANCE_DDL)  # each paired metric adds its strata's rows
    speedups, b.variances = stats.build_speedup(b.con)
    ratios, tpot = energy.energy_frame(b.con), openloop.tpot_speedups(b.con)
    stats.adjust_family([(speedups, "speedup"), (ratios, "energy_ratio"), (tpot, "tpot_speedup")])
    stats.write_speedup(b.con, speedups)
    energy.write_energy_ratio(b.con, ratios)
    openloop.write_rate_tpot(b.con, tpot)


def rate_attainment(b: Build) -> None:
    """rate_attainment: SLO attainment over each configuration's service starts."""
    attainment.build(b.con)


def prompt_categories(b: Build) -> None:
    """category_speedup and category_pooled, with the closed-loop strata's start variance that
    `claims` left in the build."""
    category.build(b.con, b.variances)


def analysis_campaigns(b: Build) -> None:
    """analysis_campaigns: one row per campaign the analysis layer holds, saying what its rows
    were built from (analyze.models.scope: a later `specsweep analyze` rebuilds only the
    campaigns whose raw rows changed). grain: campaign; key: campaign_id.
      raw_sha   = fingerprint of the campaign's raw rows (sums of row hashes per raw table)
      code_sha  = fingerprint of the analysis code (analyze, stats, schema) and schema version
      baseline  = the method the campaign's figures compare with
      built_at  = when its analysis rows were built; a campaign that did not change keeps
                  its rows, and this time, across builds
    """
    scope.write_state(b.con, b.baseline)


def race_tables(b: Build) -> None:
    """race_rounds, race_decisions and race_cost: every raced phase (table `races`) replayed
    as collect replays it before each round (analyze.race)."""
    race.build(b.con)


@dataclass(frozen=True)
class Python:
    """One Python model: builds maps each object to the module (or function) whose docstring
    documents it; temp names the objects that are TEMP tables (gone when analyze ends)."""

    run: Callable[[Build], None]
    reads: tuple[str, ...]
    builds: dict[str, ModuleType | Callable[[Build], None]]
    temp: tuple[str, ...] = field(default=())

    def model(self) -> Model:
        docs = {n: inspect.cleandoc(source.__doc__ or "") for n, source in self.builds.items()}
        return Model(
            name=self.run.__name__,
            reads=self.reads,
            builds={n: TEMP_TABLE if n in self.temp else TABLE for n in self.builds},
            run=self.run,
            source=f"{__name__}.{self.run.__name__}",
            docs=docs,
        )


PYTHON = (
    Python(analysis_params, reads=(), builds={PARAMS: analysis_params}),
    Python(metric_catalog, reads=(), builds={"metric_catalog": metric_catalog}),
    Python(campaign_plan, reads=("campaigns",), builds={"campaign_plan": campaign_plan}),
    Python(
        inter_token_latencies,
        reads=("measured_requests", "requests"),
        builds={"request_itl": itl, "window_itl": itl},
        temp=("request_itl", "window_itl"),
    ),
    Python(
        claims,
        reads=(
            "analysis_params",
            "config_summary",
            "energy_summary",
            "open_requests",
            "request_energy",
            "service_starts",
            "speedup_pairs",
        ),
        builds={
            "start_variance": starts,
            "speedup": stats,
            "energy_ratio": energy,
            "rate_tpot": openloop,
        },
        temp=("rate_tpot",),
    ),
    Python(rate_attainment, reads=("open_windows",), builds={"rate_attainment": attainment}),
    Python(
        prompt_categories,
        # start_variance: the strata's variances come through the Build (claims writes both)
        reads=("analysis_params", "category_cells", "start_variance"),
        builds={"category_speedup": category, "category_pooled": category},
    ),
    Python(
        analysis_campaigns,
        reads=scope.RAW,
        builds={scope.STATE: analysis_campaigns},
    ),
    Python(
        race_tables,
        reads=("campaigns", "race_values", "races", "services"),
        builds={
            "race_rounds": race.rounds_rows,
            "race_decisions": race.decision_rows,
            "race_cost": race.cost_row,
        },
    ),
)


@cache
def models() -> tuple[Model, ...]:
    """Every model, SQL and Python, in build order."""
    return tuple(ordered([*sql_models(), *(p.model() for p in PYTHON)], raw_layer()))


def objects(found: tuple[Model, ...] | None = None) -> tuple[str, ...]:
    """The analysis objects (tables and views that stay in the file), in build order; the
    build's parameters (analysis_params) are not one of them."""
    return tuple(name for m in found or models() for name in m.persistent if name != PARAMS)


def sql_file(model: str) -> str:
    """The file name of a SQL model (e.g. measured_requests -> measured_requests.sql)."""
    for m in models():
        if m.name == model and m.source.startswith("analyze/sql/"):
            return m.source.removeprefix("analyze/sql/")
    raise KeyError(model)


__all__ = ["PARAMS_DDL", "models", "objects", "plan_description", "sql_file"]
