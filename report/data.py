"""Read one campaign's analysis views from the DuckDB file (read-only).

``report`` never writes to the database: the connection is opened with ``read_only=True`` and
every value is bound with ``?``. It reads only the objects that ``specsweep analyze`` builds
(analyze/VIEWS.md), never the raw tables ``collect`` writes: the campaign, its hosts and its
services come from ``campaign_summary``, ``environment_summary``, ``host_summary`` and
``service_summary``; GPU energy from ``window_energy``, ``energy_summary`` and ``energy_ratio``;
open-loop load from ``open_windows``, ``rate_speedup``, ``rate_limits``, ``rate_attainment``,
``slo_targets`` and ``cache_hygiene`` (optional: without them no open-loop section), its
speedup-versus-rate figure from ``rate_sweep`` and its goodput figure from ``rate_points``
(optional: without them no such figure; a ``rate_limits`` without the swept rates' columns is
read as none); the speedup-versus-concurrency figure from ``speedup_sweep`` (optional: without
it no such figure); speculation's knobs from ``method_families``, ``param_sweep``,
``speedup_decomposition``, ``best_setting``, ``position_acceptance``, ``accepted_histogram``,
``acceptance_by_load`` and ``category_pooled`` (optional: without them no such section);
replicas of one configuration from ``replica_agreement`` (optional: a threats note when the
baseline's replicas disagree); the start variance, spread and drift of every stratum from
``start_variance`` (optional: the noise floor and the rounds' note say the file predates it); a
raced phase's rounds, decisions and cost from ``race_rounds``, ``race_decisions`` and
``race_cost`` (optional: without rows no race section); the baseline it compared against from
``analysis_params`` (optional: the campaign's plan baseline without it); each metric's label
from ``metric_catalog`` (optional: a metric without a row is labelled by its name;
docs/metrics.md). A file that analyze has not (re)built lacks them, and the report says to run
``specsweep analyze``.

Only aggregates are read, never a table with a row per request: the distribution charts come
from ``request_distribution`` (box-plot statistics per method, computed in DuckDB) and the
number of measured requests from ``campaign_summary.n_measured``, so the report's time and
memory do not grow with the number of requests. ``request_distribution`` is REQUIRED like the
other objects: a file analysed before it existed gets the same "run specsweep analyze".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from specsweep.report.charts import BASELINE, method_palette
from specsweep.report.keys import WINDOW
from specsweep.report.labels import metric_label


class ReportError(RuntimeError):
    """The report cannot be built (missing data, missing tool, LaTeX failure)."""


W = ", ".join(WINDOW)  # the comparison key within the campaign, in ORDER BY
HAS_KEY_SQL = "SELECT count(*) FROM duckdb_functions() WHERE function_name = 'comparison_key'"


REQUIRED = (
    "campaign_summary",
    "environment_summary",
    "service_summary",
    "request_distribution",
    "config_summary",
    "speedup",
)
OPTIONAL = (
    "best_config",
    "agentic_turns",
    "lossless",
    "crossover",
    "speedup_sweep",
    "colocation",
    "host_summary",
    "window_energy",
    "energy_summary",
    "energy_ratio",
    "open_windows",
    "rate_speedup",
    "rate_limits",
    "rate_attainment",
    "rate_sweep",
    "rate_points",
    "slo_targets",
    "cache_hygiene",
    "method_families",
    "param_sweep",
    "speedup_decomposition",
    "best_setting",
    "position_acceptance",
    "accepted_histogram",
    "replica_agreement",
    "speedup_prediction",
    "acceptance_by_load",
    "category_pooled",
    "start_variance",
    "race_rounds",
    "race_decisions",
    "race_cost",
)


@dataclass
class ReportData:
    """Everything the report shows, for one campaign."""

    campaign: dict[str, Any]
    environment: pd.DataFrame
    services: pd.DataFrame
    distribution: pd.DataFrame  # request_distribution: box statistics per method and metric
    config_summary: pd.DataFrame
    speedup: pd.DataFrame
    best_config: pd.DataFrame
    agentic: pd.DataFrame
    lossless: pd.DataFrame = field(default_factory=pd.DataFrame)
    crossover: pd.DataFrame | None = None  # None: the database predates the crossover view
    # the concurrency figure's rows (swept settings, is_crossover, effective_concurrency);
    # empty: nothing swept, or analysed before it
    speedup_sweep: pd.DataFrame = field(default_factory=pd.DataFrame)
    colocation: pd.DataFrame = field(default_factory=pd.DataFrame)
    hosts: pd.DataFrame = field(default_factory=pd.DataFrame)  # empty: analysed before it
    window_energy: pd.DataFrame = field(default_factory=pd.DataFrame)  # empty: no telemetry
    energy_summary: pd.DataFrame = field(default_factory=pd.DataFrame)
    energy_ratio: pd.DataFrame = field(default_factory=pd.DataFrame)
    # open-loop load (report.openloop); empty: closed-loop only, or analysed before them
    open_windows: pd.DataFrame = field(default_factory=pd.DataFrame)
    rate_speedup: pd.DataFrame = field(default_factory=pd.DataFrame)
    rate_limits: pd.DataFrame = field(default_factory=pd.DataFrame)
    rate_attainment: pd.DataFrame = field(default_factory=pd.DataFrame)
    # the speedup-versus-rate figure's rows (is_crossover) and the goodput figure's points
    # (a swept rate over its starts, a ramp's window); empty: analysed before them
    rate_sweep: pd.DataFrame = field(default_factory=pd.DataFrame)
    rate_points: pd.DataFrame = field(default_factory=pd.DataFrame)
    slo_targets: pd.DataFrame = field(default_factory=pd.DataFrame)
    cache_hygiene: pd.DataFrame = field(default_factory=pd.DataFrame)
    # speculation's knobs (report.speculation); empty: analysed before them
    method_families: pd.DataFrame = field(default_factory=pd.DataFrame)
    param_sweep: pd.DataFrame = field(default_factory=pd.DataFrame)
    speedup_decomposition: pd.DataFrame = field(default_factory=pd.DataFrame)
    speedup_prediction: pd.DataFrame = field(default_factory=pd.DataFrame)
    acceptance_by_load: pd.DataFrame = field(default_factory=pd.DataFrame)
    category_pooled: pd.DataFrame = field(default_factory=pd.DataFrame)
    best_setting: pd.DataFrame = field(default_factory=pd.DataFrame)
    position_acceptance: pd.DataFrame = field(default_factory=pd.DataFrame)
    accepted_histogram: pd.DataFrame = field(default_factory=pd.DataFrame)
    replica_agreement: pd.DataFrame = field(default_factory=pd.DataFrame)
    # the start model (analyze.starts): start sd, spread and drift per stratum and metric
    start_variance: pd.DataFrame = field(default_factory=pd.DataFrame)
    # the races of raced phases (analyze.race); empty: no phase was raced
    race_rounds: pd.DataFrame = field(default_factory=pd.DataFrame)
    race_decisions: pd.DataFrame = field(default_factory=pd.DataFrame)
    race_cost: pd.DataFrame = field(default_factory=pd.DataFrame)
    n_warmup: int = 0
    baseline: str = BASELINE
    palette: dict[str, tuple] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)  # metric -> label (metric_catalog)

    def label(self, metric: str) -> str:
        """What a table or chart calls the metric: its catalogue label, else its name."""
        return metric_label(self.labels, metric)


LABELS_SQL = "SELECT metric, label FROM metric_catalog"


def read_labels(con: duckdb.DuckDBPyConnection, have: set[str]) -> dict[str, str]:
    """metric -> label from ``metric_catalog`` (schema.metrics.CATALOG, written by analyze);
    empty for a file analysed before the catalogue existed."""
    return dict(con.execute(LABELS_SQL).fetchall()) if "metric_catalog" in have else {}


def _objects(con: duckdb.DuckDBPyConnection) -> set[str]:
    rows = con.execute("SELECT table_name FROM information_schema.tables").fetchall()
    return {r[0] for r in rows}


def _frame(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any]) -> pd.DataFrame:
    return con.execute(sql, params).df()


def pick_campaign(con: duckdb.DuckDBPyConnection, campaign: str | None) -> dict[str, Any]:
    """The requested campaign, or the latest by ``started_at``."""
    if campaign is None:
        sql, params = "SELECT * FROM campaign_summary ORDER BY started_at DESC LIMIT 1", []
    else:
        sql, params = "SELECT * FROM campaign_summary WHERE campaign_id = ?", [campaign]
    frame = _frame(con, sql, params)
    if frame.empty:
        known = [r[0] for r in con.execute("SELECT campaign_id FROM campaign_summary").fetchall()]
        what = f"campaign {campaign!r}" if campaign else "any campaign"
        raise ReportError(f"no {what} in the database (known: {known or 'none'})")
    return frame.iloc[0].to_dict()


def _by_campaign(
    con: duckdb.DuckDBPyConnection, name: str, cid: str, cols: str = "*", order: str = ""
) -> pd.DataFrame:
    sql = f"SELECT {cols} FROM {name} WHERE campaign_id = ?"  # names are constants
    return _frame(con, sql + (f" ORDER BY {order}" if order else ""), [cid])


def _load_frames(con: duckdb.DuckDBPyConnection, cid: str, have: set[str]) -> dict:
    def opt(name: str, order: str) -> pd.DataFrame:
        return _by_campaign(con, name, cid, order=order) if name in have else pd.DataFrame()

    return {
        "environment": _by_campaign(
            con, "environment_summary", cid, "host, key, value", "host, key"
        ),
        "services": _by_campaign(con, "service_summary", cid, order="method, tp, requested_at"),
        "distribution": _distribution(con, cid, have),
        "config_summary": _by_campaign(
            con, "config_summary", cid, order="workload, method, max_tokens, concurrency"
        ),
        "speedup": _by_campaign(con, "speedup", cid, order=f"{W}, method"),
        "best_config": opt("best_config", W),
        "agentic": opt("agentic_turns", "engine, tp, method, workload, turn"),
        "lossless": opt("lossless", f"{W}, method"),
        "speedup_sweep": opt("speedup_sweep", f"{W}, method"),
        "colocation": opt("colocation", f"{W}, method"),
        "hosts": known_hosts(opt("host_summary", "campaign_id, host")),
        "window_energy": opt("window_energy", f"{W}, method, window_id"),
        "energy_summary": opt("energy_summary", f"{W}, method"),
        "energy_ratio": opt("energy_ratio", f"{W}, method"),
        "open_windows": opt("open_windows", "tp, workload, max_tokens, method, rate, window_id"),
        "rate_speedup": opt("rate_speedup", "tp, workload, max_tokens, method, rate"),
        "rate_limits": swept_limits(opt("rate_limits", "tp, workload, max_tokens, method")),
        "rate_attainment": opt("rate_attainment", "tp, workload, max_tokens, method, rate"),
        "rate_sweep": opt("rate_sweep", "tp, workload, max_tokens, method, rate"),
        "rate_points": opt("rate_points", "tp, workload, max_tokens, method, rate, window_id"),
        "slo_targets": opt("slo_targets", "campaign_id, target"),
        "cache_hygiene": opt("cache_hygiene", "tp, workload, max_tokens, method, window_id"),
        "method_families": opt("method_families", "family, method"),
        "param_sweep": opt(
            "param_sweep",
            f"family, param, {W}, held, value_num, value",
        ),
        "speedup_decomposition": opt("speedup_decomposition", f"{W}, method"),
        "speedup_prediction": opt("speedup_prediction", f"{W}, method"),
        "acceptance_by_load": opt(
            "acceptance_by_load", "engine, tp, workload, max_tokens, load_kind, method, load"
        ),
        "category_pooled": opt("category_pooled", "engine, tp, max_tokens, category, method"),
        "best_setting": opt(
            "best_setting", "engine, tp, workload, max_tokens, family, load_kind, load"
        ),
        "position_acceptance": opt("position_acceptance", f"{W}, method, position"),
        "accepted_histogram": opt("accepted_histogram", f"{W}, method, accepted"),
        "replica_agreement": opt(
            "replica_agreement", "run, config_id, max_tokens, concurrency, replica"
        ),
        "start_variance": opt("start_variance", "metric, engine, tp, load, level"),
        "race_rounds": opt("race_rounds", "phase, level, round, method"),
        "race_decisions": opt("race_decisions", "phase, level"),
        "race_cost": opt("race_cost", "phase, tp"),
        "crossover": (
            _by_campaign(con, "crossover", cid, order="workload, max_tokens, engine, tp, method")
            if "crossover" in have
            else None
        ),
    }


SWEPT = ("lowest_rate", "highest_rate", "compared")  # rate_limits' columns since issue 37


def swept_limits(limits: pd.DataFrame) -> pd.DataFrame:
    """rate_limits, or none when it lacks the swept rates' columns (:data:`SWEPT`: analysed
    before them), whose rate-limits table and sentences could not say what a NULL means."""
    return limits if set(SWEPT) <= set(limits.columns) else pd.DataFrame()


# the box statistics with each metric's catalogue label (NULL without a row: its name is shown)
DISTRIBUTION_SQL = (
    "SELECT d.*, c.label FROM request_distribution AS d "
    "LEFT JOIN metric_catalog AS c USING (metric) "
    "WHERE d.campaign_id = ? ORDER BY d.method, d.metric"
)


def _distribution(con: duckdb.DuckDBPyConnection, cid: str, have: set[str]) -> pd.DataFrame:
    """request_distribution, plus `label` from metric_catalog where the file has it."""
    if "metric_catalog" not in have:
        return _by_campaign(con, "request_distribution", cid, order="method, metric")
    return _frame(con, DISTRIBUTION_SQL, [cid])


def read_baseline(con: duckdb.DuckDBPyConnection, info: dict[str, Any], have: set[str]) -> str:
    """The method the analysis compared against: ``analysis_params.baseline`` (what analyze
    bound, a ``--baseline`` override included), else the campaign's plan baseline
    (``campaign_summary.baseline``), else :data:`report.charts.BASELINE` for a file with
    neither."""
    if "analysis_params" in have:
        row = con.execute("SELECT baseline FROM analysis_params LIMIT 1").fetchone()
        if row and row[0]:
            return str(row[0])
    named = info.get("baseline")
    return str(named) if isinstance(named, str) and named else BASELINE


def check_key(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Refuse a file whose comparison key (its comparison_key() macro) is not campaign_id and
    :data:`WINDOW`, the key every section groups by; a file written before the macro existed
    has WINDOW's."""
    if not con.execute(HAS_KEY_SQL).fetchone()[0]:
        return
    key = list(con.execute("SELECT comparison_key()").fetchone()[0])
    if key != ["campaign_id", *WINDOW]:
        raise ReportError(
            f"{path} compares methods by {key}, this report by campaign_id and {WINDOW}: "
            "use the specsweep that analysed it"
        )


def load(
    db_path: Path | str, campaign: str | None = None, baseline: str | None = None
) -> ReportData:
    """Load one campaign's views; raise :class:`ReportError` if analysis is missing.

    ``baseline``: the method the labels and palette treat as the baseline (default: the one
    the analysis used, :func:`read_baseline`)."""
    path = Path(db_path)
    if not path.exists():
        raise ReportError(f"database not found: {path}")
    with duckdb.connect(str(path), read_only=True) as con:
        have = _objects(con)
        missing = [n for n in REQUIRED if n not in have]
        if missing:
            raise ReportError(
                f"{path} lacks {', '.join(missing)}; run `specsweep analyze` "
                "after `specsweep run` first"
            )
        check_key(con, path)
        info = pick_campaign(con, campaign)
        cid = str(info["campaign_id"])
        frames = _load_frames(con, cid, have)
        baseline = baseline or read_baseline(con, info, have)
        labels = read_labels(con, have)
    data = ReportData(
        campaign=info, n_warmup=int(info["n_warmup"]), baseline=baseline, labels=labels, **frames
    )
    methods = pd.concat(
        [
            data.services.get("method", pd.Series(dtype=str)),
            data.config_summary.get("method", pd.Series(dtype=str)),
            data.open_windows.get("method", pd.Series(dtype=str)),
            data.param_sweep.get("method", pd.Series(dtype=str)),
            data.speedup_decomposition.get("method", pd.Series(dtype=str)),
        ]
    )
    data.palette = method_palette(methods, baseline)
    return data


HOST_COUNTS = ("n_gpus", "n_services")  # 0 when nothing is known, never NULL


def known_hosts(hosts: pd.DataFrame) -> pd.DataFrame:
    """host_summary's rows that know something of their host. A campaign records facts of
    its own (workload facts, SLO targets) under the host name 'campaign'; host_summary gives
    that name a row whose every fact is NULL, with no GPU and no service. It is no host: the
    host table leaves it out, and its facts stay in the appendix's key/value table and the
    views that read them (slo_targets)."""
    if hosts.empty:
        return hosts
    facts = hosts.drop(columns=["campaign_id", "host", *HOST_COUNTS], errors="ignore")
    known = (facts.notna() & (facts.astype(str) != "")).any(axis=1)
    for count in HOST_COUNTS:
        if count in hosts:
            known |= hosts[count].fillna(0) > 0
    return hosts[known].reset_index(drop=True)
