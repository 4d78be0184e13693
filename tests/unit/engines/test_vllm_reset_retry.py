"""vLLM's reset_cache retry rules (tenacity) over real sockets: only `{"success": false}`
is sent again, RESET_WAIT_S apart; a transport error ends it at the first send."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from specsweep.collect.engines.base import HookFailed
from specsweep.collect.engines.vllm import RESET_TRIES, RESET_WAIT_S, VLLM, VLLMEngine
from tests.support.shaped_servers import Script, VLLMServer, serve


def _vllm() -> VLLM:
    return VLLM(VLLMEngine.model_validate({"kind": "vllm", "model": "org/m"}))


def _reset(base: str, sent: list[str]) -> str:
    async def note(request: httpx.Request) -> None:
        sent.append(request.url.path)

    async def go() -> str:
        async with httpx.AsyncClient(event_hooks={"request": [note]}) as http:
            return await _vllm().reset_cache(http, base)

    return asyncio.run(go())


def test_refusals_are_sent_again_after_the_wait_and_named_with_the_count() -> None:
    sent: list[str] = []
    with serve(VLLMServer(Script(reset_refusals=RESET_TRIES))) as base:
        started = time.perf_counter()
        with pytest.raises(HookFailed) as caught:
            _reset(base, sent)
        took = time.perf_counter() - started
    assert len(sent) == RESET_TRIES
    assert took >= (RESET_TRIES - 1) * RESET_WAIT_S  # 4 waits of 0.2 s
    assert str(caught.value).startswith(
        f"vLLM did not reset its prefix cache: {RESET_TRIES} tries answered "
    )


def test_a_transport_error_is_not_retried() -> None:
    sent: list[str] = []
    with serve(VLLMServer(Script())) as base:
        pass  # the port is closed now: nothing listens there
    with pytest.raises(httpx.ConnectError):
        _reset(base, sent)
    assert sent == ["/reset_prefix_cache"]
