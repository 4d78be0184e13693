"""The vLLM adapter on bytes a real vLLM 0.24.0 sent (tests/data/vllm-0.24/, recorded on an
H200 on 2026-12-04 by .ci/gpu/record_vllm.py; README.md there says how). A replay server sends
each recorded reply over a real socket, with its recorded status and content type, a streamed
reply event by event; the expected values are read off the files by hand (or by plain JSON
parsing here), never by the adapter's own code."""

from __future__ import annotations

import asyncio
from functools import partial
from pathlib import Path

import httpx
import pytest

from specsweep.collect.engines.base import HookFailed
from specsweep.collect.engines.openai import parse_prometheus
from specsweep.collect.engines.vllm import VLLM, VLLMEngine, window_acceptance
from specsweep.collect.http import client
from tests.support.recorded import Recording
from tests.support.recorded import Replay as _Replay
from tests.support.shaped_servers import serve as serve_shaped

DATA = Path(__file__).resolve().parents[2] / "data" / "vllm-0.24"
RECORDING = Recording(DATA)
REPLIES = RECORDING.replies
Replay = partial(_Replay, RECORDING)  # Replay(routes): these files' server
MESSAGES = [{"role": "user", "content": "Copy this list"}]


def _adapter() -> VLLM:
    return VLLM(VLLMEngine.model_validate({"kind": "vllm", "model": "/tmp/models/smollm2-135m"}))


def test_the_recorded_chat_stream_gives_text_tokens_and_finish_reason() -> None:
    """The text is the deltas joined; 96 completion and 66 prompt tokens from the usage chunk,
    which comes after the finish chunk and carries no choices."""
    events = RECORDING.events("chat-stream.sse")
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e["choices"])
    usage = events[-1]["usage"]
    assert (usage["completion_tokens"], usage["prompt_tokens"]) == (96, 66)
    adapter = _adapter()

    async def one(base: str) -> client.Result:
        async with httpx.AsyncClient() as http:
            path, body = adapter.request(MESSAGES, 96)
            return await client.stream(http, base + path, body, adapter.parser(), 30)

    with serve_shaped(Replay({"POST /v1/chat/completions": "chat-stream.sse"})) as base:
        res = asyncio.run(one(base))
    assert res.ok, res.error_message
    assert res.text == text
    assert (res.stats["output_tokens"], res.stats["prompt_tokens"]) == (96, 66)
    assert res.stats["finish_reason"] == "length"
    assert res.stats["spec_verify_ct"] is None  # 0.24 has no per-request spec metrics
    content_events = sum(
        1 for e in events if e["choices"] and e["choices"][0]["delta"].get("content")
    )
    assert len(res.chunk_times_s) == content_events


def test_window_acceptance_from_the_real_metrics_text() -> None:
    """metrics-ngram.txt: drafts 70, draft tokens 272, accepted 219 (per position 60, 56, 52,
    51) after 5 requests on a fresh server: accept length 1 + 219/70 = 4.129, rate 219/272,
    position rates 60/70 ... 51/70. The autoregressive server's text has no drafts."""
    after = parse_prometheus((DATA / "metrics-ngram.txt").read_text())
    w = window_acceptance([], after)
    assert (w["drafts"], w["draft_tokens"], w["accepted_tokens"]) == (70, 272, 219)
    assert w["accept_length"] == pytest.approx(1 + 219 / 70)
    assert w["accept_rate"] == pytest.approx(219 / 272)
    assert w["per_position"] == {
        k: pytest.approx(v / 70) for k, v in zip(range(4), (60, 56, 52, 51))
    }
    plain = window_acceptance(
        [], parse_prometheus((DATA / "metrics-autoregressive.txt").read_text())
    )
    assert plain["accept_length"] is None and plain["drafts"] == 0


def test_scrape_and_fingerprint_over_a_socket() -> None:
    adapter = _adapter()
    routes = {
        "GET /version": "version.json",
        "GET /v1/models": "models.json",
        "GET /metrics": "metrics-ngram.txt",
    }

    async def both(base: str) -> tuple[dict, list]:
        async with httpx.AsyncClient() as http:
            return await adapter.fingerprint(http, base), await adapter.scrape(http, base)

    with serve_shaped(Replay(routes)) as base:
        facts, samples = asyncio.run(both(base))
    assert facts == {
        "engine.version": "0.24.0",
        "engine.served_model": "smollm2",
        "engine.model_root": "/tmp/models/smollm2-135m",
        "engine.max_model_len": "4096",
    }
    drafts = [s for s in samples if s["name"] == "vllm:spec_decode_num_drafts_total"]
    assert [s["value"] for s in drafts] == [70.0]


@pytest.mark.parametrize(
    "name, ok", [("reset-dev-mode.txt", True), ("reset-no-dev-mode.txt", False)]
)
def test_prefix_cache_reset_with_and_without_dev_mode(name: str, ok: bool) -> None:
    """With VLLM_SERVER_DEV_MODE=1, 0.24 answers an empty 200; without, 404 Not Found."""
    assert REPLIES[name]["status"] == (200 if ok else 404)
    adapter = _adapter()

    async def reset(base: str) -> str:
        async with httpx.AsyncClient() as http:
            return await adapter.reset_cache(http, base)

    with serve_shaped(Replay({"POST /reset_prefix_cache": name})) as base:
        if ok:
            assert asyncio.run(reset(base)) == "reset_prefix_cache"
        else:
            with pytest.raises(HookFailed, match="VLLM_SERVER_DEV_MODE=1"):
                asyncio.run(reset(base))


def test_a_real_start_up_failure_reaches_the_services_row(tmp_path: Path) -> None:
    """A stand-in `vllm` prints the recorded log of a failed start (a model folder that does
    not exist) and exits 1, as the real one did: the services row is failed and its log tail
    holds vLLM's own last error line."""
    state, error, tail = RECORDING.failed_start(
        tmp_path,
        "vllm",
        lambda fake: {"kind": "vllm", "executable": fake, "model": "/tmp/models/no-such-model"},
    )
    assert "OSError: Repo id must be in the form" in tail
    # the error names the cause without vLLM's "(APIServer pid=N) " prefix
    assert state == "failed"
    assert error.startswith("server exited during start-up: OSError: Repo id must be in the form")
    assert REPLIES["startup-failure.log"]["exit_code"] == 1
