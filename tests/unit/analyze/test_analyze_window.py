"""window_acceptance on hand-built server counters and requests."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import duckdb

from specsweep.analyze import build
from tests.support.analyze_rows import create_raw_tables, one, req

T = datetime(2026, 1, 1, 12, 0, 0)


def _metric(service: str, phase: str, name: str, value: float, labels: str = "{}") -> tuple:
    return ("c1", service, "cfg", "chat", phase, "metrics", name, labels, value, T)


def _store(tmp_path: Path, rows: list[dict], metrics: list[tuple], engine: str, tp: int) -> Path:
    """A results file with these requests and counters from service `svc` (method m), built."""
    path = tmp_path / "r.duckdb"
    with duckdb.connect(str(path)) as con:
        create_raw_tables(con)
        for r in rows:
            con.execute(
                f"INSERT INTO requests BY NAME SELECT {', '.join('? AS ' + k for k in r)}",
                list(r.values()),
            )
        con.executemany("INSERT INTO server_metrics VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", metrics)
        con.execute(
            "INSERT INTO services (service_id, campaign_id, config_id, engine, method, "
            "tp, gpus, host, launch_command, requested_at, state) VALUES "
            "('svc', 'c1', 'cfg', ?, 'm', ?, '0', 'h', 'x', ?, 'stopped')",
            [engine, tp, T],
        )
    build.run(path)
    return path


def test_window_counters_and_per_request_figures(tmp_path: Path) -> None:
    """vLLM-style counters over the window: drafts 100 -> 120 (20), draft tokens 300 -> 380
    (80), accepted 150 -> 190 (40) summed over two engines' label sets (30 + 10).
    accept_length_window = 1 + 40 / 20 = 3.0; accept_rate_window = 40 / 80 = 0.5.
    Requests: 30 + 50 tokens in 13 + 26 verify steps -> (29 + 49) / 39 = 2.0 pooled (the one
    definition: the prefill token of each request is not a verify step's), so the diff is
    1.0. Generated-token counter delta 90 vs 80 measured -> 10 foreign tokens;
    accept_length_steps = 90 / (90 - 40) = 1.8 tokens per target step."""
    metrics = [
        _metric("svc", "before", "vllm:spec_decode_num_drafts_total", 100),
        _metric("svc", "after", "vllm:spec_decode_num_drafts_total", 120),
        _metric("svc", "before", "vllm:spec_decode_num_draft_tokens_total", 300),
        _metric("svc", "after", "vllm:spec_decode_num_draft_tokens_total", 380),
        _metric("svc", "before", "vllm:spec_decode_num_accepted_tokens_total", 100, '{"e":"0"}'),
        _metric("svc", "before", "vllm:spec_decode_num_accepted_tokens_total", 50, '{"e":"1"}'),
        _metric("svc", "after", "vllm:spec_decode_num_accepted_tokens_total", 130, '{"e":"0"}'),
        _metric("svc", "after", "vllm:spec_decode_num_accepted_tokens_total", 60, '{"e":"1"}'),
        _metric("svc", "before", "vllm:generation_tokens_total", 1000),
        _metric("svc", "after", "vllm:generation_tokens_total", 1090),
    ]
    rows = [
        req(service_id="svc", method="m", output_tokens=30, spec_verify_ct=13),
        req(service_id="svc", method="m", output_tokens=50, spec_verify_ct=26),
        req(service_id="svc", method="m", output_tokens=99, spec_verify_ct=1, is_warmup=True),
    ]
    path = _store(tmp_path, rows, metrics, engine="vllm", tp=4)
    w = one(path, "SELECT * FROM window_acceptance")
    assert (w["d_drafts"], w["d_draft_tokens"], w["d_accepted"]) == (20, 80, 40)
    assert w["accept_length_window"] == 3.0 and w["accept_rate_window"] == 0.5
    assert w["accept_length_requests"] == 2.0 and w["accept_length_diff"] == 1.0
    assert w["foreign_tokens"] == 10 and (w["method"], w["tp"]) == ("m", 4)
    assert w["accept_length_steps"] == 1.8


def test_no_drafts_gives_null_not_a_division_error(tmp_path: Path) -> None:
    path = tmp_path / "r.duckdb"
    with duckdb.connect(str(path)) as con:
        create_raw_tables(con)
        con.executemany(
            "INSERT INTO server_metrics VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                _metric("svc", "before", "llamacpp:spec_decode_num_draft_tokens_total", 7),
                _metric("svc", "after", "llamacpp:spec_decode_num_draft_tokens_total", 7),
            ],
        )
        con.execute(
            "INSERT INTO services (service_id, campaign_id, config_id, engine, method, "
            "tp, gpus, host, launch_command, requested_at, state) VALUES "
            "('svc', 'c1', 'cfg', 'llamacpp', 'm', 1, '', 'h', 'x', ?, 'stopped')",
            [T],
        )
    build.run(path)
    w = one(path, "SELECT * FROM window_acceptance")
    assert w["d_draft_tokens"] == 0 and w["accept_rate_window"] is None
    assert w["accept_length_window"] is None and w["accept_length_steps"] is None


def test_rows_of_an_incomplete_unit_are_left_out(tmp_path: Path) -> None:
    """An interrupted unit keeps its rows (units.complete = false) but no view counts them."""
    from tests.support.analyze_rows import write_db

    path = tmp_path / "r.duckdb"
    write_db(path, [req(workload="chat"), req(workload="code", method="m")])
    with duckdb.connect(str(path)) as con:
        cols = (
            "(campaign_id, config_id, workload, service_id, n_requests, complete, "
            "started_at, finished_at)"
        )
        con.execute(
            f"INSERT INTO units {cols} VALUES ('c1', 'cfg-m', 'code', 'svc-m', 1, false, ?, ?)",
            [T, T],
        )
        con.execute(
            f"INSERT INTO units {cols} VALUES ('c1', 'cfg-autoregressive', 'chat', "
            "'svc-autoregressive', 1, true, ?, ?)",
            [T, T],
        )
    build.run(path)
    assert one(path, "SELECT count(*) AS n FROM request_metrics")["n"] == 1
    assert one(path, "SELECT workload FROM request_metrics")["workload"] == "chat"


def test_sglang_verify_calls_give_tokens_per_verify_step(tmp_path: Path) -> None:
    """SGLang counts verify calls and generated tokens, no drafts: generated 456 -> 656 (200)
    over verify calls 249 -> 329 (80) = 2.5 tokens per verify step, each request's first token
    included. Its requests: (60 + 130 - 2) tokens after the first in 80 verify steps = 2.35."""
    metrics = [
        _metric("svc", "before", "sglang:generation_tokens_total", 456),
        _metric("svc", "after", "sglang:generation_tokens_total", 656),
        _metric("svc", "before", "sglang:spec_verify_calls_total", 249),
        _metric("svc", "after", "sglang:spec_verify_calls_total", 329),
    ]
    rows = [
        req(service_id="svc", method="m", output_tokens=60, spec_verify_ct=25),
        req(service_id="svc", method="m", output_tokens=130, spec_verify_ct=55),
    ]
    path = _store(tmp_path, rows, metrics, engine="sglang", tp=1)
    w = one(path, "SELECT * FROM window_acceptance")
    assert (w["d_drafts"], w["d_verify_calls"]) == (None, 80)
    assert w["accept_length_window"] == 2.5 and w["accept_length_steps"] == 2.5
    assert w["accept_length_requests"] == 188 / 80
    assert w["accept_length_diff"] == 2.5 - 188 / 80 and w["foreign_tokens"] == 10
