"""Helpers for the analysis-stage tests: hand-built `requests` rows written to a real DuckDB
file created from schema/ddl.sql, and small query helpers."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb

from specsweep.schema.store import Store

DDL = Path(__file__).resolve().parents[2] / "schema" / "ddl.sql"
# the raw tables analyze reads
TABLES_READ = (
    "campaigns",
    "requests",
    "services",
    "server_metrics",
    "units",
    "gpu_samples",
    "environment",
    "method_params",
)
CREATE_TABLE = re.compile(r"CREATE TABLE IF NOT EXISTS (\w+) \(.*?\n\);", re.DOTALL)

COLUMNS = (
    "request_id", "campaign_id", "config_id", "service_id", "engine", "method", "tp",
    "workload", "window_id", "prompt_id", "max_tokens", "rep", "concurrency", "session_id",
    "turn", "is_warmup", "sent_at", "start_s", "ttft_s", "e2e_s", "chunk_times_s",
    "chunk_tokens", "prompt_tokens", "cached_tokens", "output_tokens", "finish_reason",
    "spec_verify_ct", "draft_tokens", "accepted_tokens", "accept_length", "output_text",
    "server_stats", "ok", "error_kind", "error_message", "engine_accept_length",
    "accept_histogram", "accepted_per_pos", "step_accepted", "run",
)  # fmt: skip

_ids = itertools.count()
AR = "autoregressive"


def req(**overrides: Any) -> dict[str, Any]:
    """One requests row: an ok autoregressive chat request unless overridden.

    Defaults: ttft 0.5 s, e2e 2.5 s, 9 output tokens -> decode_tps = 8 / 2.0 = 4.0.
    """
    method = overrides.get("method", "autoregressive")
    row = {
        "request_id": f"r{next(_ids)}", "campaign_id": "c1", "config_id": f"cfg-{method}",
        "service_id": f"svc-{method}", "engine": "sglang", "method": method, "tp": 1,
        "workload": "chat", "window_id": f"w-{method}", "prompt_id": "p1", "max_tokens": 256,
        "rep": 0, "concurrency": 1, "session_id": None, "turn": None, "is_warmup": False,
        "sent_at": datetime(2026, 1, 1, 12, 0, 0), "start_s": 0.0, "ttft_s": 0.5,
        "e2e_s": 2.5, "chunk_times_s": None, "chunk_tokens": None, "prompt_tokens": 100,
        "cached_tokens": 0, "output_tokens": 9, "finish_reason": "length",
        "spec_verify_ct": None, "draft_tokens": None, "accepted_tokens": None,
        "accept_length": None, "output_text": "text", "server_stats": "{}", "ok": True,
        "error_kind": None, "error_message": None, "engine_accept_length": None,
        "accept_histogram": None, "accepted_per_pos": None, "step_accepted": None,
        "category": "uncategorized", "run": 1,
    }  # fmt: skip
    unknown = overrides.keys() - row.keys()
    assert not unknown, f"not a requests column: {unknown}"
    row.update(overrides)
    return row


def decode_req(decode_tps: float, **overrides: Any) -> dict[str, Any]:
    """A request whose decode speed is decode_tps: 61 tokens, ttft 0.5 s,
    e2e = 0.5 + (61 - 1) / decode_tps."""
    ttft = overrides.pop("ttft_s", 0.5)
    return req(ttft_s=ttft, e2e_s=ttft + 60 / decode_tps, output_tokens=61, **overrides)


def create_raw_tables(con: duckdb.DuckDBPyConnection) -> None:
    """Run the CREATE TABLE statements of schema/ddl.sql for the tables analyze reads."""
    tables = {m.group(1): m.group(0) for m in CREATE_TABLE.finditer(DDL.read_text())}
    for name in TABLES_READ:
        con.execute(tables[name])


def write_db(path: Path, rows: list[dict[str, Any]]) -> None:
    """A DuckDB file holding the raw `requests` table with exactly these rows."""
    with duckdb.connect(str(path)) as con:
        create_raw_tables(con)
        if not rows:
            return
        placeholders = ", ".join("?" for _ in COLUMNS)
        con.executemany(
            f"INSERT INTO requests ({', '.join(COLUMNS)}) VALUES ({placeholders})",
            [[row[c] for c in COLUMNS] for row in rows],
        )


def fetch(path: Path, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
    """Rows of a query as dicts."""
    with duckdb.connect(str(path), read_only=True) as con:
        cursor = con.execute(sql, params or [])
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row)) for row in cursor.fetchall()]


def one(path: Path, sql: str, params: list[Any] | None = None) -> dict[str, Any]:
    """The single row of a query (fails the test if there is not exactly one)."""
    rows = fetch(path, sql, params)
    assert len(rows) == 1, rows
    return rows[0]


SAMPLE_COLUMNS = (
    "campaign_id", "service_id", "config_id", "workload", "window_id", "gpu_index", "t_s",
    "power_w", "energy_j", "sm_clock_mhz", "mem_clock_mhz", "util_gpu_pct", "util_mem_pct",
    "memory_used_mib", "temperature_c", "throttle_reasons",
)  # fmt: skip


def gpu_sample(t_s: float, power_w: float | None, **overrides: Any) -> dict[str, Any]:
    """One gpu_samples row of GPU 0 of req()'s autoregressive window ('w-autoregressive'):
    busy (util 90 %), SM clock 1980 MHz, no throttle reason, unless overridden."""
    method = overrides.pop("method", "autoregressive")
    row = {
        "campaign_id": "c1", "service_id": f"svc-{method}", "config_id": f"cfg-{method}",
        "workload": "chat", "window_id": f"w-{method}", "gpu_index": 0, "t_s": t_s,
        "power_w": power_w, "energy_j": None, "sm_clock_mhz": 1980.0, "mem_clock_mhz": 2619.0,
        "util_gpu_pct": 90.0, "util_mem_pct": 40.0, "memory_used_mib": 1000.0,
        "temperature_c": 50.0, "throttle_reasons": "",
    }  # fmt: skip
    unknown = overrides.keys() - row.keys()
    assert not unknown, f"not a gpu_samples column: {unknown}"
    row.update(overrides)
    return row


def power_trace(
    times: list[float], watts: float | list[float], **overrides: Any
) -> list[dict[str, Any]]:
    """gpu_sample rows at `times`, at a constant power or one power per time."""
    powers = watts if isinstance(watts, list) else [watts] * len(times)
    return [gpu_sample(t, w, **overrides) for t, w in zip(times, powers)]


def insert_rows(path: Path, table: str, rows: list[dict[str, Any]]) -> None:
    """Append dict rows to a raw table of the file (columns by name; table is a constant)."""
    with duckdb.connect(str(path)) as con:
        for row in rows:
            names = ", ".join(row)
            marks = ", ".join("?" for _ in row)
            con.execute(f"INSERT INTO {table} ({names}) VALUES ({marks})", list(row.values()))


# --- open-loop windows -------------------------------------------------------------------


def open_req(
    scheduled_s: float,
    lag_s: float = 0.0,
    *,
    ttft: float | None = 0.1,
    tpot: float | None = 0.02,
    tokens: int = 11,
    failed: bool = False,
    **overrides: Any,
) -> dict[str, Any]:
    """A requests row of an open-loop window, e2e = ttft + (tokens - 1) * tpot."""
    if failed:
        shape = {
            "ok": False,
            "error_kind": "timeout",
            "ttft_s": None,
            "e2e_s": None,
            "output_tokens": None,
            "cached_tokens": None,
        }
    else:
        e2e = ttft if tokens < 2 else ttft + (tokens - 1) * tpot
        shape = {"ttft_s": ttft, "e2e_s": e2e, "output_tokens": tokens}
    row = req(
        start_s=scheduled_s + lag_s,
        concurrency=overrides.pop("concurrency", 0),
        **{**shape, **overrides},
    )
    return {**row, "scheduled_s": scheduled_s}


def window(
    campaign: str,
    window_id: str,
    method: str = AR,
    *,
    rate: float | None,
    n: int,
    span: float | None,
    elapsed: float,
    **overrides: Any,
) -> dict[str, Any]:
    """A windows row of an open-loop window: poisson at `rate` on chat, 256 tokens, no cap."""
    row = {
        "campaign_id": campaign,
        "service_id": f"svc-{method}",
        "config_id": f"cfg-{method}",
        "workload": "chat",
        "window_id": window_id,
        "max_tokens": 256,
        "load": "poisson",
        "rate": rate,
        "ramp": None,
        "ramp_start_rate": None,
        "ramp_end_rate": None,
        "burstiness": None,
        "seed": 1,
        "max_concurrency": None,
        "n_scheduled": n,
        "schedule_span_s": span,
        "cache_reset": "flush_cache",
        "started_at": req()["sent_at"],
        "elapsed_s": elapsed,
    }
    row.update(overrides)
    return row


def store_rows(path: Path, **tables: list[dict]) -> None:
    """Append rows per table through Store.append (the raw contracts check them)."""
    store = Store(path)
    for table, rows in tables.items():
        if rows:
            assert store.append(table, rows) == len(rows), table  # nothing quarantined


# the speculation tests' raw rows besides requests (services, method_params), Store-appendable
SERVICE_T = datetime(2026, 1, 1, 12, 0, 0)


def service(campaign: str, method: str, engine: str) -> dict[str, Any]:
    return {
        "service_id": f"svc-{campaign}-{method}",
        "campaign_id": campaign,
        "config_id": f"cfg-{campaign}-{method}",
        "engine": engine,
        "method": method,
        "tp": 1,
        "gpus": "0",
        "host": "h",
        "launch_command": "x",
        "requested_at": SERVICE_T,
        "ready_at": None,
        "stopped_at": None,
        "startup_s": None,
        "state": "stopped",
        "error": None,
        "log_tail": None,
        "transport": "direct",
    }


def params(campaign: str, method: str, family: str, **values: Any) -> list[dict[str, Any]]:
    return [
        {
            "campaign_id": campaign,
            "method": method,
            "family": family,
            "param": k,
            "value": str(v),
            "value_num": float(v) if isinstance(v, int) else None,
        }
        for k, v in values.items()
    ]


def ident(campaign: str, method: str, engine: str) -> dict[str, Any]:
    return {
        "campaign_id": campaign,
        "method": method,
        "engine": engine,
        "service_id": f"svc-{campaign}-{method}",
        "config_id": f"cfg-{campaign}-{method}",
    }


def rt_window(method: str, rate: float, tpot: Callable[[int], float]) -> tuple[list[dict], dict]:
    """An open-loop window of campaign rt (vllm): 11 requests at 0..10 s on prompts p0..p10,
    request i with TPOT tpot(i), and its windows row."""
    wid = f"rt-{method}-{rate:g}"
    rows = [
        {
            **req(
                **ident("rt", method, "vllm"),
                window_id=wid,
                prompt_id=f"p{i}",
                concurrency=0,
                start_s=float(i),
                ttft_s=0.1,
                e2e_s=0.1 + 10 * tpot(i),
                output_tokens=11,
            ),
            "scheduled_s": float(i),
        }
        for i in range(11)
    ]
    row = window(
        "rt",
        wid,
        method,
        rate=rate,
        n=11,
        span=10.0,
        elapsed=12.0,
        service_id=f"svc-rt-{method}",
        config_id=f"cfg-rt-{method}",
        started_at=SERVICE_T,
    )
    return rows, row


def crossing_rows(spaced: bool = False) -> list[dict[str, Any]]:
    """A campaign whose method m pays at concurrency 1 and not at 4: on 8 prompts (decode
    speed 10 + p tok/s for prompt p), m is 2x the baseline at concurrency 1 and 0.6x at 4, its
    speeds jittered by a few percent; spaced: prompt p's requests start at p * 100 s."""
    rows = []
    for p in range(8):
        speed = 10.0 + p
        for method, conc, factor in (
            ("autoregressive", 1, 1),
            ("m", 1, 2),
            ("autoregressive", 4, 1),
            ("m", 4, 0.6),
        ):
            jitter = 1 + 0.03 * ((p * 7) % 5 - 2) if method == "m" else 1
            start = {"start_s": float(p * 100)} if spaced else {}
            rows.append(
                decode_req(
                    speed * factor * jitter,
                    method=method,
                    concurrency=conc,
                    prompt_id=f"p{p}",
                    window_id=f"w-{method}-{conc}",
                    **start,
                )
            )
    return rows


def in_rounds(
    rows: list[dict[str, Any]],
    rounds: int = 3,
    factor: Callable[[str, int, str], float] | None = None,
) -> list[dict[str, Any]]:
    """One round's requests repeated as rounds 1..rounds of a campaign, each round its own
    service start (service_id, window_id and request_id end in /run<r>, as collect writes run
    r > 1's). factor(method, run, prompt_id) multiplies a request's decode speed: its e2e_s
    becomes ttft_s + (e2e_s - ttft_s) / factor."""
    out = []
    for run in range(1, rounds + 1):
        for row in rows:
            copy = {**row, "run": run, "request_id": f"{row['request_id']}/run{run}",
                    "service_id": f"{row['service_id']}/run{run}",
                    "window_id": f"{row['window_id']}/run{run}"}  # fmt: skip
            if factor is not None:
                f = factor(row["method"], run, row["prompt_id"])
                copy["e2e_s"] = row["ttft_s"] + (row["e2e_s"] - row["ttft_s"]) / f
            out.append(copy)
    return out


def rows_in_rounds(table: str, rows: list[dict[str, Any]], rounds: int = 3) -> list[dict[str, Any]]:
    """Rows of `windows` or `services` (or `requests`: in_rounds) repeated as rounds
    1..rounds, their ids ending in /run<r> as in_rounds writes them; a service's requested_at
    moves a minute per round (the rounds' starts come one after another)."""
    if table == "requests":
        return in_rounds(rows, rounds)
    ids = {"windows": ("window_id", "service_id"), "services": ("service_id",)}[table]
    out = []
    for run in range(1, rounds + 1):
        for row in rows:
            copy = {**row, "run": run, **{k: f"{row[k]}/run{run}" for k in ids if row.get(k)}}
            if table == "services":
                copy["requested_at"] = row["requested_at"] + timedelta(minutes=run)
            out.append(copy)
    return out
