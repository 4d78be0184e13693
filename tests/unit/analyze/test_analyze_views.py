"""The SQL views on hand-built rows: every expected value is worked out in the comments."""

from __future__ import annotations

import math

import pytest

from tests.support.analyze_rows import decode_req, fetch, in_rounds, one, req

CONTRACT = {
    "request_metrics": [
        "request_id", "ok", "start_s", "tpot_s", "decode_tps", "e2e_tps", "n_chunks",
        "itl_chunk_mean_s", "itl_chunk_max_s", "itl_token_mean_s", "end_s",
    ],
    "config_summary": [
        "campaign_id", "engine", "tp", "method", "workload", "max_tokens", "concurrency", "n",
        "n_ok", "error_rate", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_p50_s",
        "e2e_p50_s", "decode_tps_p50", "decode_tps_mean", "output_tokens_sum",
        "output_tokens_mean", "throughput_tps", "accept_length_tw", "accept_length_rw",
        "engine_accept_length_rw", "draft_tokens_sum", "accepted_tokens_sum", "accept_rate",
    ],
    "speedup": [
        "campaign_id", "engine", "tp", "workload", "max_tokens", "concurrency", "method",
        "speedup", "ci_low", "ci_high", "n", "n_prompts", "significant", "throughput_speedup",
        "ttft_ratio", "accept_length_tw", "baseline_decode_tps_p50", "method_decode_tps_p50",
    ],
    "best_config": [
        "campaign_id", "engine", "tp", "workload", "max_tokens", "concurrency", "method",
        "decode_tps_p50", "speedup", "significant",
    ],
    "agentic_turns": [
        "campaign_id", "engine", "tp", "method", "workload", "turn", "n", "ttft_p50_s",
        "e2e_p50_s", "decode_tps_p50", "prompt_tokens_p50", "cached_tokens_p50",
        "output_tokens_p50",
    ],
}  # fmt: skip

# the texts, the chunk lists and the per-step acceptance list stay in `requests` (join USING
# (request_id)): request_metrics is a table, and copying every chunk list would double the file
RAW_COLUMNS_DROPPED = {
    "output_text",
    "server_stats",
    "chunk_times_s",
    "chunk_tokens",
    "step_accepted",
}


def _columns(path, name: str) -> list[str]:
    sql = "SELECT column_name FROM information_schema.columns WHERE table_name = ?"
    rows = fetch(path, sql, [name])
    return [r["column_name"] for r in rows]


def test_every_contract_column_exists(analyzed):
    path = analyzed([req()])
    for name, expected in CONTRACT.items():
        missing = set(expected) - set(_columns(path, name))
        assert not missing, f"{name} lacks {missing}"
    raw = set(_columns(path, "requests"))
    assert raw - RAW_COLUMNS_DROPPED <= set(_columns(path, "request_metrics"))
    assert not RAW_COLUMNS_DROPPED & set(_columns(path, "request_metrics"))


def test_tpot_decode_and_e2e_speed(analyzed):
    # ttft 0.5, e2e 2.5, 9 tokens, start 1.0:
    #   tpot = (2.5 - 0.5) / (9 - 1) = 0.25; decode_tps = 8 / 2.0 = 4.0
    #   e2e_tps = 9 / 2.5 = 3.6; end_s = 1.0 + 2.5 = 3.5
    path = analyzed([req(request_id="a", start_s=1.0)])
    row = one(path, "SELECT * FROM request_metrics WHERE request_id = 'a'")
    assert row["tpot_s"] == pytest.approx(0.25)
    assert row["decode_tps"] == pytest.approx(4.0)
    assert row["e2e_tps"] == pytest.approx(3.6)
    assert row["end_s"] == pytest.approx(3.5)


def test_single_token_and_failed_requests_have_no_speed(analyzed):
    # one token: tpot and decode undefined (output_tokens - 1 = 0); e2e_tps = 1 / 2.5 = 0.4
    # a failed request keeps its row but every derived speed is NULL
    path = analyzed([
        req(request_id="one", output_tokens=1),
        req(request_id="bad", ok=False, error_kind="timeout", output_tokens=5),
    ])  # fmt: skip
    single = one(path, "SELECT * FROM request_metrics WHERE request_id = 'one'")
    assert single["tpot_s"] is None and single["decode_tps"] is None
    assert single["e2e_tps"] == pytest.approx(0.4)
    failed = one(path, "SELECT * FROM request_metrics WHERE request_id = 'bad'")
    assert (failed["tpot_s"], failed["decode_tps"], failed["e2e_tps"]) == (None, None, None)


def test_chunk_and_token_itl(analyzed):
    # chunks arrive at 0.5, 0.7, 1.0, 2.5 carrying 1, 2, 3, 3 tokens
    # per-chunk gaps: 0.2, 0.3, 1.5 -> mean 2.0 / 3 = 0.6667, longest 1.5
    # per-token gaps (chunks 2..4): 0.2 / 2 = 0.1, 0.3 / 3 = 0.1, 1.5 / 3 = 0.5 -> mean 0.2333
    # without chunk_tokens every chunk counts 1 token: per-token mean = per-chunk mean 0.6667
    times = [0.5, 0.7, 1.0, 2.5]
    path = analyzed([
        req(request_id="tok", chunk_times_s=times, chunk_tokens=[1, 2, 3, 3]),
        req(request_id="notok", chunk_times_s=times),
    ])  # fmt: skip
    row = one(path, "SELECT * FROM request_metrics WHERE request_id = 'tok'")
    assert row["n_chunks"] == 4
    assert row["itl_chunk_mean_s"] == pytest.approx(2.0 / 3)
    assert row["itl_chunk_max_s"] == pytest.approx(1.5)
    assert row["itl_token_mean_s"] == pytest.approx(0.7 / 3)
    plain = one(path, "SELECT * FROM request_metrics WHERE request_id = 'notok'")
    assert plain["itl_token_mean_s"] == pytest.approx(2.0 / 3)


def test_n_chunks_counts_every_measured_reply(analyzed):
    # analyze.itl counts them in its scan of the ok replies; a failed reply's chunks are
    # counted apart (the scan skips failed requests); a reply of one chunk has no gap
    path = analyzed([
        req(request_id="two", chunk_times_s=[0.5, 0.7], chunk_tokens=[1, 8]),
        req(request_id="one", chunk_times_s=[0.5], chunk_tokens=[9]),
        req(request_id="empty", chunk_times_s=[]),
        req(request_id="missing", chunk_times_s=None),
        req(request_id="failed", chunk_times_s=[0.5, 0.6, 0.9], ok=False, error_kind="http"),
        req(request_id="failed-none", ok=False, error_kind="http"),
    ])  # fmt: skip
    rows = fetch(
        path, "SELECT request_id, n_chunks, itl_chunk_mean_s, itl_chunk_max_s, "
        "itl_token_mean_s FROM request_metrics ORDER BY request_id"
    )  # fmt: skip
    got = {r["request_id"]: r for r in rows}
    assert {k: r["n_chunks"] for k, r in got.items()} == {
        "empty": 0, "failed": 3, "failed-none": 0, "missing": 0, "one": 1, "two": 2,
    }  # fmt: skip
    assert got["two"]["itl_chunk_mean_s"] == pytest.approx(0.2)
    for k in ("one", "empty", "missing", "failed", "failed-none"):
        figures = [got[k][c] for c in ("itl_chunk_mean_s", "itl_chunk_max_s", "itl_token_mean_s")]
        assert figures == [None, None, None], k


def _window_rows() -> list[dict]:
    # three ok requests, staggered: (start, e2e, tokens) = (1.0, 2.0, 10), (1.5, 3.0, 20),
    # (2.0, 3.0, 30); ends 3.0, 4.5, 5.0; ttft 0.1, 0.2, 0.6
    ok = [
        req(start_s=1.0, e2e_s=2.0, output_tokens=10, ttft_s=0.1, prompt_id="p1"),
        req(start_s=1.5, e2e_s=3.0, output_tokens=20, ttft_s=0.2, prompt_id="p2"),
        req(start_s=2.0, e2e_s=3.0, output_tokens=30, ttft_s=0.6, prompt_id="p3"),
    ]
    # a failed request sent first, and a long warm-up: both must not move throughput
    failed = req(start_s=0.0, e2e_s=1.0, output_tokens=5, ok=False, error_kind="http")
    warmup = req(start_s=0.0, e2e_s=9.0, output_tokens=100, is_warmup=True)
    return [*ok, failed, warmup]


def test_window_throughput_error_rate_and_warmup(analyzed):
    # throughput = (10 + 20 + 30) / (max end 5.0 - min ok start 1.0) = 60 / 4 = 15.0
    #   (with the failed request: 65 / 5.0 = 13; with the warm-up: 160 / 9)
    # n = 4 (warm-up excluded), n_ok = 3, error_rate = 1 - 3 / 4 = 0.25
    # ttft over ok: p50 0.2; p90 at position 1.8: 0.2 + 0.8 * 0.4 = 0.52; p99: 0.2 + 0.98 * 0.4
    path = analyzed(_window_rows())
    row = one(path, "SELECT * FROM config_summary")
    assert row["throughput_tps"] == pytest.approx(15.0)
    assert (row["n"], row["n_ok"]) == (4, 3)
    assert row["error_rate"] == pytest.approx(0.25)
    assert row["ttft_p50_s"] == pytest.approx(0.2)
    assert row["ttft_p90_s"] == pytest.approx(0.52)
    assert row["ttft_p99_s"] == pytest.approx(0.592)
    assert (row["output_tokens_sum"], row["output_tokens_mean"]) == (60, pytest.approx(20.0))
    assert one(path, "SELECT count(*) AS n FROM request_metrics")["n"] == 4


def test_accept_length_token_and_request_weighted(analyzed):
    # the one definition, (output_tokens - 1) / spec_verify_ct (the prefill token excluded):
    # A: 101 tokens in 25 verify steps = 100 / 25 = 4.0; B: 11 tokens in 5 steps = 10 / 5 = 2.0
    # token-weighted = (100 + 10) / (25 + 5) = 3.6667; request-weighted = (4 + 2) / 2 = 3.0
    # (their stored accept_length, 9.0, is not read)
    # engine_accept_length_rw = avg of the engine's own figures (4.04, 2.2) = 3.12
    # accept_rate = (75 + 5) / (300 + 20) = 0.25
    # a failed request, a warm-up (both 50 tokens in 1 step) and a one-token reply are ignored
    rows = [
        req(method="dflash", output_tokens=101, spec_verify_ct=25, accept_length=9.0,
            engine_accept_length=4.04, draft_tokens=300, accepted_tokens=75),
        req(method="dflash", output_tokens=11, spec_verify_ct=5, accept_length=9.0,
            engine_accept_length=2.2, draft_tokens=20, accepted_tokens=5),
        req(method="dflash", output_tokens=50, spec_verify_ct=1, ok=False),
        req(method="dflash", output_tokens=50, spec_verify_ct=1, is_warmup=True),
        req(method="dflash", output_tokens=1, spec_verify_ct=0),
    ]  # fmt: skip
    row = one(analyzed(rows), "SELECT * FROM config_summary")
    assert row["accept_length_tw"] == pytest.approx(110 / 30)
    assert row["accept_length_rw"] == pytest.approx(3.0)
    assert row["engine_accept_length_rw"] == pytest.approx(3.12)
    assert row["accept_rate"] == pytest.approx(0.25)


def _best_config_rows() -> list[dict]:
    # concurrency 1: autoregressive ~10 tok/s, dflash ~20, ddtree ~15 on prompts p1..p5
    # concurrency 8: autoregressive ~30, dflash ~20; per-prompt jitter of a few percent
    speeds = {1: {"autoregressive": 10, "dflash": 20, "ddtree": 15},
              8: {"autoregressive": 30, "dflash": 20}}  # fmt: skip
    jitter = [1.0, 1.03, 0.98, 1.01, 0.97]
    return [
        decode_req(
            tps * (1 if m == "autoregressive" else j),
            method=m,
            concurrency=c,
            prompt_id=f"p{i}",
            window_id=f"{m}-{c}",
        )
        for c, by_method in speeds.items()
        for m, tps in by_method.items()
        for i, j in enumerate(jitter)
    ]


def test_best_config_picks_the_largest_paired_speedup(analyzed):
    # c=1: dflash wins, speedup = 2 x the geometric mean of the jitter; its pick interval is
    # the simultaneous one over the 3 claims (dflash and ddtree at c=1, dflash at c=8), wider
    # than its 95% one, and still above 1. c=8: the baseline wins at 1.0, not significant.
    path = analyzed(in_rounds(_best_config_rows()))  # 3 rounds: intervals need 2+ starts
    rows = fetch(path, "SELECT * FROM best_config ORDER BY concurrency")
    assert [r["method"] for r in rows] == ["dflash", "autoregressive"]
    fast, base = rows
    geo = math.exp(sum(math.log(j) for j in (1.0, 1.03, 0.98, 1.01, 0.97)) / 5)
    assert fast["decode_tps_p50"] == pytest.approx(20.0)
    assert fast["speedup"] == pytest.approx(2.0 * geo) and fast["significant"] is True
    assert fast["pick_ci_low"] < fast["ci_low"] and fast["pick_ci_high"] > fast["ci_high"]
    sp = one(path, "SELECT * FROM speedup WHERE method = 'dflash' AND concurrency = 1")
    assert (fast["pick_ci_low"], fast["pick_ci_high"]) == (sp["sim_ci_low"], sp["sim_ci_high"])
    assert sp["n_family"] == 3 and fast["pick_holds"] is True
    assert fast["n_methods"] == 3
    assert base["speedup"] == 1.0 and base["significant"] is False
    assert base["pick_ci_low"] is None and base["decode_tps_p50"] == pytest.approx(30.0)


def _agentic_rows() -> list[dict]:
    # (session, turn, ttft, decode tok/s, prompt tokens, cached tokens)
    turns = [
        ("s1", 0, 0.2, 10, 100, 0), ("s2", 0, 0.4, 20, 200, 0),
        ("s1", 1, 0.5, 30, 300, 80), ("s2", 1, 0.9, 10, 500, 180),
    ]  # fmt: skip
    rows = [
        decode_req(tps, workload="agentic", session_id=s, turn=t, ttft_s=ttft,
                   prompt_tokens=prompt, cached_tokens=cached, prompt_id=f"{s}-{t}")
        for s, t, ttft, tps, prompt, cached in turns
    ]  # fmt: skip
    failed = req(workload="agentic", session_id="s3", turn=1, ttft_s=5.0, prompt_tokens=9000,
                 ok=False, error_kind="timeout")  # fmt: skip
    plain = req(workload="agentic", ttft_s=7.0)  # no session: not an agentic turn
    return [*rows, failed, plain]


def test_agentic_turn_medians(analyzed):
    # turn 0: ttft (0.2, 0.4) -> 0.3; decode (10, 20) -> 15; prompt (100, 200) -> 150
    #         e2e = ttft + 60 / decode: (6.2, 3.4) -> 4.8
    # turn 1: ttft (0.5, 0.9) -> 0.7; decode (30, 10) -> 20; prompt (300, 500) -> 400;
    #         cached (80, 180) -> 130; the failed s3 request counts in n only
    rows = fetch(analyzed(_agentic_rows()), "SELECT * FROM agentic_turns ORDER BY turn")
    assert [r["turn"] for r in rows] == [0, 1]
    first, second = rows
    assert first["ttft_p50_s"] == pytest.approx(0.3)
    assert first["decode_tps_p50"] == pytest.approx(15.0)
    assert first["prompt_tokens_p50"] == pytest.approx(150)
    assert first["e2e_p50_s"] == pytest.approx(4.8)
    assert (second["n"], second["n_ok"]) == (3, 2)
    assert second["ttft_p50_s"] == pytest.approx(0.7)
    assert second["decode_tps_p50"] == pytest.approx(20.0)
    assert second["prompt_tokens_p50"] == pytest.approx(400)
    assert second["cached_tokens_p50"] == pytest.approx(130)
    assert second["output_tokens_p50"] == pytest.approx(61)
