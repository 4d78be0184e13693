"""The vLLM adapter against a vLLM-shaped server over real sockets, with the real streaming
client, and window acceptance from its /metrics counters and from hand-built samples."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from specsweep.collect.engines.vllm import VLLM, VLLMEngine, vllm_stats, window_acceptance
from specsweep.collect.http import client
from specsweep.collect.plan.fields import Method
from tests.support.shaped_servers import Script, SGLangServer, VLLMServer, serve

TOL = 0.03  # seconds of delivery noise allowed on a loaded 2-core machine
MESSAGES = [{"role": "user", "content": "Hi"}]


def _adapter(**kw: object) -> VLLM:
    return VLLM(VLLMEngine.model_validate({"kind": "vllm", "model": "org/model", **kw}))


async def _requests(adapter: VLLM, base: str, n: int) -> list[client.Result]:
    async with httpx.AsyncClient() as http:
        path, body = adapter.request(MESSAGES, 64)
        return [
            await client.stream(http, base + path, body, adapter.parser(), 10) for _ in range(n)
        ]


def test_stream_timing_text_and_usage() -> None:
    script = Script(tail_s=0.1)  # finish and usage chunks 100 ms after the last text
    server = VLLMServer(script)
    with serve(server) as base:
        [res] = asyncio.run(_requests(_adapter(), base, 1))
    assert res.ok, res.error_message
    truth = [script.ttft_s + i * script.gap_s for i in range(script.steps)]
    assert len(res.chunk_times_s) == script.steps  # the role-only chunk is not one
    for measured, scripted in zip(res.chunk_times_s, truth):
        assert scripted - 0.002 <= measured <= scripted + TOL
    assert res.e2e_s == res.chunk_times_s[-1] <= truth[-1] + TOL  # the usage chunk does not count
    assert res.text == script.text
    assert res.chunk_tokens is None  # vLLM does not say unless asked for token ids
    stats = res.stats
    assert (stats["output_tokens"], stats["prompt_tokens"], stats["cached_tokens"]) == (28, 17, 5)
    assert stats["finish_reason"] == "length"
    speculative = (
        "spec_verify_ct",
        "draft_tokens",
        "accepted_tokens",
        "accept_length",
        "engine_accept_length",
        "accept_histogram",
        "accepted_per_pos",
        "step_accepted",
    )  # no --per-request-spec-decode-metrics: none of them
    assert [stats[k] for k in speculative] == [None] * 8
    assert json.loads(stats["server_stats"])["usage"]["total_tokens"] == 45
    sent = server.bodies[0]
    assert sent["messages"] == MESSAGES and sent["max_tokens"] == 64 and sent["temperature"] == 0
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}


def test_token_ids_give_tokens_per_chunk() -> None:
    script = Script(gap_s=0.01)
    with serve(VLLMServer(script)) as base:
        [res] = asyncio.run(_requests(_adapter(request_extra={"return_token_ids": True}), base, 1))
    assert res.chunk_tokens == list(script.chunk_tokens) and res.text == script.text


@pytest.mark.parametrize("total_suffix", [True, False])
def test_window_acceptance_from_the_servers_metrics(total_suffix: bool) -> None:
    adapter = _adapter()
    script = Script(gap_s=0.01, total_suffix=total_suffix)

    async def window(base: str) -> tuple[list[dict], list[dict]]:
        async with httpx.AsyncClient() as http:
            before = await adapter.scrape(http, base)
            results = await _requests(adapter, base, 2)
            assert all(r.ok for r in results)
            return before, await adapter.scrape(http, base)

    with serve(VLLMServer(script)) as base:
        before, after = asyncio.run(window(base))
    assert {s["source"] for s in before} == {"metrics"}
    got = window_acceptance(before, after)
    # two requests of 8 drafts each (the first token is the prefill's); 2,2,3,2,3,2,3,2
    # drafts accepted of 7 proposed per draft
    assert (got["drafts"], got["draft_tokens"], got["accepted_tokens"]) == (16, 112, 38)
    assert got["accept_length"] == 1 + 38 / 16 == 2 * 27 / 16  # = (tokens - 1) / verify steps
    assert got["accept_rate"] == 38 / 112
    assert got["per_position"] == {0: 1.0, 1: 1.0, 2: 3 / 8, 3: 0.0, 4: 0.0, 5: 0.0, 6: 0.0}


def _sample(name: str, value: float, labels: dict | str | None = None) -> dict:
    labels = labels if isinstance(labels, str) else json.dumps(labels or {"engine": "0"})
    return {"source": "metrics", "name": name, "labels": labels, "value": value}


def _scrape(suffix: str, drafts: float, tokens: float, accepted: float, pos: list[float]) -> list:
    p = "vllm:spec_decode_"
    rows = [
        _sample(f"{p}num_drafts{suffix}", drafts),
        _sample(f"{p}num_drafts_created", 1.7e9),
        _sample(f"{p}num_draft_tokens{suffix}", tokens),
        _sample(f"{p}num_accepted_tokens{suffix}", accepted),
        _sample("vllm:num_requests_running", 3),
    ]
    for k, v in enumerate(pos):
        rows.append(_sample(f"{p}num_accepted_tokens_per_pos{suffix}", v, {"position": str(k)}))
    return rows


@pytest.mark.parametrize("suffix", ["_total", ""])
def test_window_acceptance_on_hand_built_samples(suffix: str) -> None:
    before = _scrape(suffix, 10, 40, 12, [8, 4, 0, 0])
    after = _scrape(suffix, 30, 120, 52, [26, 16, 6, 4])
    got = window_acceptance(before, after)
    assert got["accept_length"] == 1 + 40 / 20 == 3.0
    assert got["accept_rate"] == 40 / 80 == 0.5
    assert got["per_position"] == {0: 0.9, 1: 0.6, 2: 0.3, 3: 0.2}


def test_window_acceptance_sums_engines_and_reads_dict_labels() -> None:
    p = "vllm:spec_decode_"
    one = [
        _sample(f"{p}num_drafts_total", 5, {"engine": "0"}),
        _sample(f"{p}num_drafts_total", 5, {"engine": "1"}),
    ]
    two = [
        {"name": f"{p}num_drafts_total", "labels": {"engine": "0"}, "value": 9},
        {"name": f"{p}num_drafts_total", "labels": {"engine": "1"}, "value": 13},
        {"name": f"{p}num_accepted_tokens_total", "labels": {"engine": "0"}, "value": 24},
        {"name": f"{p}num_accepted_tokens_per_pos_total", "labels": {"position": 0}, "value": 8},
    ]
    got = window_acceptance(one, two)
    assert (
        got["drafts"] == 12 and got["accept_length"] == 3.0 and got["per_position"] == {0: 8 / 12}
    )
    assert got["accept_rate"] is None  # no draft-token counter in the window


def test_window_without_drafts_has_no_ratios() -> None:
    same = _scrape("_total", 10, 40, 12, [8, 4])
    got = window_acceptance(same, same)
    assert (got["accept_length"], got["accept_rate"]) == (None, None)
    assert got["per_position"] == {0: None, 1: None}
    assert window_acceptance([], [])["accept_length"] is None  # no speculation at all


def test_scrape_and_fingerprint() -> None:
    adapter = _adapter()

    async def go(base: str) -> tuple[list[dict], dict[str, str]]:
        async with httpx.AsyncClient() as http:
            return await adapter.scrape(http, base), await adapter.fingerprint(http, base)

    with serve(VLLMServer(Script())) as base:
        samples, facts = asyncio.run(go(base))
    assert facts == {
        "engine.version": "0.0.shaped",
        "engine.served_model": "shaped/model",
        "engine.model_root": "/models/shaped",
        "engine.max_model_len": "4096",
    }
    drafts = [s for s in samples if s["name"] == "vllm:spec_decode_num_drafts_total"]
    assert [(s["value"], json.loads(s["labels"])["engine"]) for s in drafts] == [(100.0, "0")]
    with serve(SGLangServer(Script())) as base:  # no /metrics, /version or /v1/models
        assert asyncio.run(go(base)) == ([], {})


def test_stats_without_usage() -> None:
    stats = vllm_stats({}, None)
    assert stats["output_tokens"] is None and stats["cached_tokens"] is None


def test_launch_argv_and_environment() -> None:
    adapter = _adapter(
        executable="/opt/vllm/bin/vllm", args=["--max-model-len", "8192"], env={"A": "1"}
    )
    spec = '{"method": "dflash", "model": "z-lab/Qwen3.5-27B-DFlash", "num_speculative_tokens": 15}'
    argv, env = adapter.launch(
        Method(name="dflash", args=["--speculative-config", spec], env={"B": "2"}), 8, 8001
    )
    assert argv == [
        "/opt/vllm/bin/vllm", "serve", "org/model", "--tensor-parallel-size", "8",
        "--host", "127.0.0.1", "--port", "8001", "--max-model-len", "8192",
        "--speculative-config", spec, "--per-request-spec-decode-metrics", "detailed",
    ]  # fmt: skip
    # dev mode serves /reset_prefix_cache (the reset before every window); a plan may turn it off
    assert env == {"VLLM_SERVER_DEV_MODE": "1", "A": "1", "B": "2"}
    off = _adapter(env={"VLLM_SERVER_DEV_MODE": "0"}).launch(Method(name="m"), 1, 8001)[1]
    assert off == {"VLLM_SERVER_DEV_MODE": "0"}
    assert (adapter.kind, adapter.health_path) == ("vllm", "/health")
