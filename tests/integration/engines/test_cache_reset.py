"""Each adapter's `reset_cache` (empty the prefix cache before a measured window) over real
sockets: SGLang and vLLM against their engine-shaped servers, llama.cpp against a real
llama-server, where a second request's timings.cache_n tells whether its prompt was cached.

The tests that start real programs (servers, subprocesses, latexmk); the in-process ones, and
the helpers both use, are in tests/unit/engines/test_cache_reset.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from specsweep.collect.engines.base import HookFailed
from specsweep.collect.engines.vllm import RESET_TRIES
from specsweep.collect.run.service import Service
from tests.support.shaped_servers import Script, VLLMServer, serve
from tests.unit.engines.test_cache_reset import (  # noqa: F401
    LONG,
    OTHER,
    _cached,
    _llama,
    _Refused,
    _reset,
    _vllm,
    _with_server,
)


def test_vllm_success_false_is_retried_then_refused() -> None:
    server = VLLMServer(Script(reset_refusals=2))
    with serve(server) as base:
        assert _reset(_vllm(), base)[0] == "reset_prefix_cache"
    assert server.calls["POST /reset_prefix_cache"] == 3
    server = VLLMServer(Script(reset_refusals=RESET_TRIES))
    with serve(server) as base, pytest.raises(HookFailed, match="did not reset.*success.*false"):
        _reset(_vllm(), base)
    assert server.calls["POST /reset_prefix_cache"] == RESET_TRIES


def test_llamacpp_erases_every_slot(tmp_path: Path, llama_server: str) -> None:
    args = ["-np", "2", "--slot-save-path", str(tmp_path / "slots"), "--cache-ram", "0"]
    cfg = _llama(llama_server, args, request_extra={"cache_prompt": True})

    async def work(svc: Service, http: httpx.AsyncClient) -> list[Any]:
        seen = [await _cached(svc, http, LONG), await _cached(svc, http, LONG)]
        seen.append(await svc.engine.reset_cache(http, svc.base_url))
        seen.append(await _cached(svc, http, LONG))
        slots = (await http.get(svc.base_url + "/slots")).json()
        return [*seen, len(slots)]

    (tmp_path / "slots").mkdir()
    first, warm, how, after, n_slots = _with_server(tmp_path, cfg, work)
    assert first == 0 and warm > 20  # the repeated prompt came from the cache
    assert (how, after, n_slots) == ("slots_erase", 0, 2)


def test_llamacpp_without_slot_save_path_names_the_flag(tmp_path: Path, llama_server: str) -> None:
    cfg = _llama(
        llama_server, ["-np", "1", "--cache-ram", "0"], request_extra={"cache_prompt": True}
    )

    async def work(svc: Service, http: httpx.AsyncClient) -> str:
        with pytest.raises(HookFailed, match=r"HTTP 501.*--slot-save-path") as failed:
            await svc.engine.reset_cache(http, svc.base_url)
        return str(failed.value)

    assert "This server does not support slots action" in _with_server(tmp_path, cfg, work)


def test_llamacpp_host_prompt_cache_survives_an_erase(tmp_path: Path, llama_server: str) -> None:
    """Why `--cache-ram 0` is required: with the host-memory prompt cache on (llama-server's
    default), a prompt pushed out of the only slot is served from it after every slot was
    erased; the adapter refuses before sending anything."""
    args = ["-np", "1", "--slot-save-path", str(tmp_path / "slots")]
    cfg = _llama(llama_server, args, request_extra={"cache_prompt": True})
    (tmp_path / "slots").mkdir()

    async def work(svc: Service, http: httpx.AsyncClient) -> int:
        with pytest.raises(HookFailed, match=r"--cache-ram 0"):
            await svc.engine.reset_cache(_Refused(), svc.base_url)  # no request was sent
        await _cached(svc, http, LONG)
        await _cached(svc, http, OTHER)  # LONG leaves the slot for the host cache
        erased = await http.post(svc.base_url + "/slots/0?action=erase")
        assert erased.status_code == 200
        return await _cached(svc, http, LONG)

    assert _with_server(tmp_path, cfg, work) > 20
