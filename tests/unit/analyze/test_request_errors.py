"""request_errors (analyze/sql/request_errors.sql) on hand-built rows: one row per window and
kind of error, its share of the window, and the earliest failure's message."""

from __future__ import annotations

from tests.support.analyze_rows import decode_req, fetch, req


def _failed(kind: str | None, message: str | None, **overrides) -> dict:
    return req(ok=False, error_kind=kind, error_message=message, ttft_s=None, e2e_s=None,
               output_tokens=0, **overrides)  # fmt: skip


def test_each_window_lists_its_kinds_of_failure(analyzed) -> None:
    rows = [decode_req(10.0, prompt_id=f"p{i}") for i in range(6)]
    rows += [
        _failed("timeout", "read timed out after 60 s", run=2, start_s=1.0),
        _failed("timeout", "read timed out after 30 s", run=1, start_s=5.0),
        _failed("timeout", None, run=1, start_s=9.0),
        _failed(None, None, start_s=2.0),  # failed without a kind: 'unknown'
        _failed("http", "HTTP 500", method="m", workload="code"),
        decode_req(12.0, method="m", workload="code"),
        req(ok=False, error_kind="empty", is_warmup=True),  # a warm-up: not measured
    ]
    path = analyzed(rows)
    got = fetch(path, "SELECT * FROM request_errors")
    assert [(r["method"], r["workload"], r["error_kind"]) for r in got] == [
        ("autoregressive", "chat", "timeout"),
        ("autoregressive", "chat", "unknown"),
        ("m", "code", "http"),
    ]
    timeout, unknown, http = got
    assert (timeout["n_failed"], timeout["n"], timeout["n_runs"]) == (3, 10, 2)
    assert timeout["share"] == 0.3 and timeout["n_messages"] == 2
    # the earliest failure is run 1's at 5.0 s, not run 2's at 1.0 s
    assert timeout["first_message"] == "read timed out after 30 s"
    assert (unknown["n_failed"], unknown["first_message"]) == (1, None)
    assert (http["n"], http["share"], http["first_message"]) == (2, 0.5, "HTTP 500")
    # a window's kinds add up to its error rate
    rate = fetch(
        path,
        "SELECT error_rate FROM config_summary WHERE method = 'autoregressive'",
    )[0]["error_rate"]
    assert abs(timeout["share"] + unknown["share"] - rate) < 1e-12


def test_no_failure_no_row(analyzed) -> None:
    path = analyzed([decode_req(10.0), decode_req(12.0, method="m")])
    assert fetch(path, "SELECT * FROM request_errors") == []
