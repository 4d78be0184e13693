"""A campaign's results as one JSON document other tools can read
(`specsweep export --format json --out DIR` writes DIR/summary.json).

Versioned: `summary_version` (now 1) changes whenever a key is removed or changes meaning;
keys may be added within a version. Layout (docs/data-dictionary.md "JSON summary"
documents every key):

    {"summary_version": 1, "generator": "specsweep", "built_at": ...,
     "campaigns": [{"campaign_id", "plan_name", "plan_sha256", "baseline", "status",
                    "started_at", "finished_at",
                    "windows": [{"engine", "tp", "method", "workload", "max_tokens",
                                 "concurrency", "n", "n_ok", "error_rate",
                                 "metrics": {<name>: value, ...},
                                 "speedup": {"value", "ci_low", "ci_high", "significant",
                                             "baseline", "n_prompts", "n_runs",
                                             "run_speedup_min", "run_speedup_max",
                                             "between_run_share"} | null}]}]}

One window per closed-loop config_summary row; speedup from the `speedup` table (null for the
baseline and where no pair exists). NaN and missing figures are null. Read from the analysis
layer (run `specsweep analyze` first) and the campaigns table; windows are aggregates, so the
document stays small however many requests the file holds.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import duckdb

from specsweep.schema.keys import WINDOW_KEY
from specsweep.writing import publish

SUMMARY_VERSION = 1
# a window within its campaign (campaign_id is the file's own field)
KEY = WINDOW_KEY[1:]
METRICS = [
    "ttft_p50_s",
    "ttft_p90_s",
    "ttft_p99_s",
    "tpot_p50_s",
    "e2e_p50_s",
    "decode_tps_p50",
    "decode_tps_mean",
    "throughput_tps",
    "output_tokens_mean",
    "accept_length_tw",
    "accept_length_rw",
    "engine_accept_length_rw",
    "accept_rate",
]
WINDOWS_SQL = f"""
SELECT c.campaign_id, {", ".join("c." + k for k in KEY)}, c.n, c.n_ok, c.error_rate,
       {", ".join("c." + m for m in METRICS)},
       s.speedup, s.ci_low, s.ci_high, s.significant, s.baseline, s.n_prompts, s.n_runs,
       s.run_speedup_min, s.run_speedup_max, s.between_run_share
FROM config_summary AS c
LEFT JOIN speedup AS s USING (campaign_id, {", ".join(KEY)})
ORDER BY ALL
"""
CAMPAIGNS_SQL = """
SELECT campaign_id, plan_name, plan_sha256, baseline, status, started_at, finished_at
FROM campaigns ORDER BY started_at, campaign_id
"""
# the speedup's spread over repeated runs (docs/statistics.md); added in
# version 1 (keys may be added): a reader of an older document finds them absent
RUN_KEYS = ("n_runs", "run_speedup_min", "run_speedup_max", "between_run_share")


def build(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """The summary document of every campaign in the file con reads."""
    windows: dict[str, list[dict[str, Any]]] = {}
    cursor = con.execute(WINDOWS_SQL)
    names = [d[0] for d in cursor.description]
    for row in cursor.fetchall():
        r = dict(zip(names, map(_plain, row)))
        speedup = (
            None
            if r["speedup"] is None and r["baseline"] is None
            else {
                "value": r["speedup"],
                "ci_low": r["ci_low"],
                "ci_high": r["ci_high"],
                "significant": r["significant"],
                "baseline": r["baseline"],
                "n_prompts": r["n_prompts"],
                **{k: r[k] for k in RUN_KEYS},
            }
        )
        windows.setdefault(r["campaign_id"], []).append(
            {
                **{k: r[k] for k in [*KEY, "n", "n_ok", "error_rate"]},
                "metrics": {m: r[m] for m in METRICS},
                "speedup": speedup,
            }
        )
    cursor = con.execute(CAMPAIGNS_SQL)
    names = [d[0] for d in cursor.description]
    campaigns = [dict(zip(names, map(_plain, row))) for row in cursor.fetchall()]
    built = con.execute("SELECT max(built_at) FROM analysis_params").fetchone()[0]
    return {
        "summary_version": SUMMARY_VERSION,
        "generator": "specsweep",
        "built_at": _plain(built),
        "campaigns": [{**c, "windows": windows.get(c["campaign_id"], [])} for c in campaigns],
    }


def write(db_path: str | Path, out_dir: str | Path) -> Path:
    """DIR/summary.json of the results file at db_path (opened read-only)."""
    with duckdb.connect(str(db_path), read_only=True) as con:
        document = build(con)
    text = json.dumps(document, indent=1, allow_nan=False) + "\n"
    return publish(Path(out_dir) / "summary.json", text)


def _plain(value: Any) -> Any:
    """A JSON value: NaN -> None, timestamps as ISO text, numpy/decimal numbers as floats."""
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    return float(value)
