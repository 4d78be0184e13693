"""The metrics, written once: their SQL macros, their Python twins, and their catalogue.

- schema/metrics.sql: the formulas as DuckDB macros over a request's columns (tpot_s,
  decode_tps, e2e_tps, accept_length_of, accept_length_tw, accept_rate, meets_slo) and a
  window's counters (accept_length_counters).
- schema/measured.sql: which rows are measured, as table macros over the raw layer
  (incomplete_units(), kept_request_rows(), measured_request_rows()).
- schema/keys.sql: the comparison key, comparison_key() (schema.keys).
- Python twins of the formulas collect needs while a campaign runs, one request at a time
  (:func:`tpot_s` and :func:`meets_slo` for `Slo.met`, :func:`accept_length` for the engines'
  rows), where a DuckDB query per request would cost more than the request's own bookkeeping;
  each has a parity test that proves it equals its macro on hand-built rows
  (tests/unit/schema/test_metrics_parity.py).
- :data:`CATALOG`: each metric's unit, direction (which way is better), label (what tables
  and charts print), formula and the metrics and columns it needs, in one place. analyze and
  schema import it; analyze writes it into the results file as the `metric_catalog` table,
  which report reads (report imports nothing of the project).

The macros are created as persistent (not TEMP) macros: they live in the results file's
catalog, so the views that call them work from any later connection, read-only ones
included (report and `make sql` open the file read-only and never install anything).
`schema.store.connect` installs them on every writable open, after migrating, so whoever
writes a file (collect's Store, analyze's build) finds them; CREATE OR REPLACE makes
installing again harmless, and a changed definition replaces the old one on the next open.
DuckDB binds a table macro's tables when it is created, so measured.sql is installed only
where the raw tables exist (a results file; not a bare connection).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import duckdb


def macros_sql() -> str:
    """Text of schema/metrics.sql, read as package data (works from a wheel too)."""
    return _read("metrics.sql")


def keys_sql() -> str:
    """Text of schema/keys.sql (the comparison key's macro)."""
    return _read("keys.sql")


def measured_sql() -> str:
    """Text of schema/measured.sql (the measured-request filter's table macros)."""
    return _read("measured.sql")


def _read(name: str) -> str:
    return resources.files("specsweep.schema").joinpath(name).read_text(encoding="utf-8")


def install(con: duckdb.DuckDBPyConnection) -> None:
    """Create or replace every metric macro and the comparison key's on con (needs a
    writable connection); the measured-request macros too when con holds the raw tables
    they read."""
    con.execute(macros_sql())
    con.execute(keys_sql())
    found = con.execute(
        "SELECT count(DISTINCT table_name) FROM duckdb_tables() "
        "WHERE table_name IN ('requests', 'units')"
    ).fetchone()[0]
    if found == 2:
        con.execute(measured_sql())


# --- Python twins of the macros (parity: tests/unit/schema/test_metrics_parity.py) -------------


def _count(value: Any) -> int | None:
    """An integer count (numpy's too), or None (SQL NULL) for anything else: a float or a
    bool an engine sent where a count belongs is not one."""
    ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    return int(value) if ok else None


def _number(value: Any) -> float | None:
    """A real number, or None (SQL NULL) for None, NaN (pandas' NULL) and non-numbers."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    return float(value) if ok and not math.isnan(value) else None


def tpot_s(output_tokens: Any, e2e_s: Any, ttft_s: Any) -> float | None:
    """The tpot_s macro: (e2e_s - ttft_s) / (output_tokens - 1) when output_tokens > 1;
    None (NULL) otherwise or when a value is missing."""
    n, e2e_s, ttft_s = _number(output_tokens), _number(e2e_s), _number(ttft_s)
    if n is None or n <= 1 or e2e_s is None or ttft_s is None:
        return None
    return (e2e_s - ttft_s) / (n - 1)


def meets_slo(
    ok: bool,
    ttft_s: float | None,
    tpot_s: float | None,
    e2e_s: float | None,
    ttft_ms: float | None = None,
    tpot_ms: float | None = None,
    e2e_ms: float | None = None,
) -> bool:
    """The meets_slo macro: a request meets every objective given (None: not set); failed
    requests never do; one without a TPOT (None) meets a TPOT objective."""
    if not ok or ttft_s is None or e2e_s is None:
        return False
    return (
        (ttft_ms is None or ttft_s * 1000 <= ttft_ms)
        and (tpot_ms is None or tpot_s is None or tpot_s * 1000 <= tpot_ms)
        and (e2e_ms is None or e2e_s * 1000 <= e2e_ms)
    )


def accept_length(output_tokens: Any, spec_verify_ct: Any) -> float | None:
    """The accept_length_of macro: (output_tokens - 1) / spec_verify_ct when output_tokens > 1
    and spec_verify_ct > 0; None otherwise (a missing or non-integer count included)."""
    n, steps = _count(output_tokens), _count(spec_verify_ct)
    if n is None or steps is None or n <= 1 or steps <= 0:
        return None
    return (n - 1) / steps


# --- the catalogue -------------------------------------------------------------------------

Direction = Literal["higher", "lower"]


@dataclass(frozen=True)
class Metric:
    """One metric: `name` is its column (or compare's metric name); `label` is what a table
    or chart prints; `direction` says which way is better; `needs` names what it is computed
    from, each a metric of the catalogue or a column of the results file (a raw table's or an
    analysis object's); empty for a quantity measured, not derived."""

    name: str
    label: str
    unit: str
    direction: Direction
    formula: str
    needs: tuple[str, ...] = ()

    @property
    def higher_is_better(self) -> bool:
        return self.direction == "higher"


_TPOT = "(e2e_s - ttft_s) / (output_tokens - 1), output_tokens > 1 (macro tpot_s)"
_ACCEPT = (
    "(output_tokens - 1) / spec_verify_ct, output_tokens > 1 and spec_verify_ct > 0 "
    "(macro accept_length_of)"
)
_LATENCY = ("output_tokens", "e2e_s", "ttft_s")
CATALOG: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric(
            "decode_tps",
            "decode tok/s",
            "tok/s",
            "higher",
            "(output_tokens - 1) / (e2e_s - ttft_s), output_tokens > 1 and e2e_s > ttft_s "
            "(macro decode_tps)",
            _LATENCY,
        ),
        Metric(
            "e2e_tps",
            "end-to-end tok/s",
            "tok/s",
            "higher",
            "output_tokens / e2e_s, e2e_s > 0 (macro e2e_tps)",
            ("output_tokens", "e2e_s"),
        ),
        Metric(
            "ttft_s",
            "TTFT (s)",
            "s",
            "lower",
            "first chunk with generated text - t0 (request column ttft_s)",
        ),
        Metric(
            "ttft_s_p90", "TTFT p90 (s)", "s", "lower", "quantile_cont(ttft_s, 0.9)", ("ttft_s",)
        ),
        Metric("tpot_s", "TPOT (s)", "s", "lower", _TPOT, _LATENCY),
        Metric(
            "tpot_s_p90", "TPOT p90 (s)", "s", "lower", "quantile_cont(tpot_s, 0.9)", ("tpot_s",)
        ),
        Metric(
            "e2e_s",
            "E2E (s)",
            "s",
            "lower",
            "last chunk carrying generated tokens - t0 (request column e2e_s)",
        ),
        Metric(
            "accept_length",
            "acceptance length (tok/step)",
            "tok/step",
            "higher",
            _ACCEPT,
            ("output_tokens", "spec_verify_ct"),
        ),
        Metric(
            "accept_length_tw",
            "acceptance length (tok/step)",
            "tok/step",
            "higher",
            "sum(output_tokens - 1) / sum(spec_verify_ct) over ok rows with output_tokens > 1 "
            "and spec_verify_ct > 0 (macro accept_length_tw)",
            ("ok", "output_tokens", "spec_verify_ct"),
        ),
        Metric(
            "accept_length_rw",
            "acceptance length, request mean (tok/step)",
            "tok/step",
            "higher",
            "avg(" + _ACCEPT + ") over ok rows",
            ("ok", "accept_length"),
        ),
        Metric(
            "accept_length_window",
            "acceptance length, server counters (tok/step)",
            "tok/step",
            "higher",
            "1 + d_accepted / d_drafts over a window's drafting counters, d_drafts > 0 "
            "(macro accept_length_counters); where a server counts no drafts (SGLang), "
            "generated tokens / d_verify_calls",
            ("d_accepted", "d_drafts", "d_verify_calls"),
        ),
        Metric(
            "accept_rate",
            "acceptance rate",
            "",
            "higher",
            "accepted_tokens / draft_tokens, draft_tokens > 0 (macro accept_rate)",
            ("accepted_tokens", "draft_tokens"),
        ),
        Metric(
            "throughput_tps",
            "throughput (output tok/s)",
            "tok/s",
            "higher",
            "sum(output_tokens) / (last response end - first request sent) of a window",
            ("output_tokens", "start_s", "e2e_s"),
        ),
        Metric(
            "speedup",
            "speedup",
            "x",
            "higher",
            "exp(mean over (run, prompt) cells of mean ln decode_tps of M - of the baseline)",
            ("decode_tps",),
        ),
        Metric(
            "meets_slo",
            "meets the SLO",
            "",
            "higher",
            "ok and every objective given met: ttft_s * 1000 <= ttft_ms, tpot_s * 1000 <= "
            "tpot_ms (no TPOT meets it), e2e_s * 1000 <= e2e_ms (macro meets_slo)",
            ("ok", "ttft_s", "tpot_s", "e2e_s", "ttft_ms", "tpot_ms", "e2e_ms"),
        ),
        Metric(
            "attainment",
            "SLO attainment",
            "",
            "higher",
            "share of a window's steady requests that meet every objective",
            ("meets_slo", "steady"),
        ),
        Metric(
            "goodput_rps",
            "goodput (req/s)",
            "req/s",
            "higher",
            "requests that meet every objective (from the scheduled send) / elapsed_s of an "
            "open-loop window (vLLM's goodput); NULL when the window fell behind its schedule",
            ("meets_slo", "elapsed_s"),
        ),
    )
}


def metric(name: str) -> Metric:
    """The catalogue's entry; KeyError naming the metric when it has none."""
    try:
        return CATALOG[name]
    except KeyError:
        raise KeyError(f"metric {name!r} is not in schema.metrics.CATALOG") from None


CATALOG_DDL = """
CREATE OR REPLACE TABLE metric_catalog (
    metric     VARCHAR PRIMARY KEY,  -- the column, or compare's metric name
    label      VARCHAR NOT NULL,     -- what a table or chart prints
    unit       VARCHAR NOT NULL,     -- '' when dimensionless
    direction  VARCHAR NOT NULL,     -- 'higher' or 'lower' is better
    formula    VARCHAR NOT NULL,
    needs      VARCHAR[] NOT NULL    -- metrics and columns it is computed from ([]: measured)
)
"""


def write_catalog(con: duckdb.DuckDBPyConnection) -> None:
    """(Re)create `metric_catalog` on con, one row per CATALOG entry."""
    con.execute(CATALOG_DDL)
    con.executemany(
        "INSERT INTO metric_catalog VALUES (?, ?, ?, ?, ?, ?)",
        [
            (m.name, m.label, m.unit, m.direction, m.formula, list(m.needs))
            for m in CATALOG.values()
        ],
    )
