"""Per-request acceptance details and the one acceptance-length definition, for all three
engines: hand-built replies, the engine-shaped servers over real sockets (fields as the
engines' sources document them), a round trip through a real Store, and the service
fingerprint of what changes acceptance."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest

from specsweep.collect.engines.acceptance import accept_length, dense_histogram, vllm_details
from specsweep.collect.engines.llamacpp import ChatStream, LlamaCpp, LlamaCppEngine
from specsweep.collect.engines.sglang import SGLang, SGLangEngine
from specsweep.collect.engines.vllm import VLLM, VLLMEngine
from specsweep.collect.hosts.local import Local
from specsweep.collect.http import client
from specsweep.collect.plan.components import LocalHost
from specsweep.collect.plan.fields import Method
from specsweep.collect.run.fingerprint import draft_facts, request_facts
from tests.support.shaped_details import sglext_details, vllm_spec
from tests.support.shaped_servers import Script, SGLangServer, VLLMServer, serve

MESSAGES = [{"role": "user", "content": "Hi"}]
SPEC = '{"method": "draft_model", "model": "{model}-draft", "num_speculative_tokens": 7}'


def _stream(adapter: object, base: str) -> client.Result:
    async def one() -> client.Result:
        async with httpx.AsyncClient() as http:
            path, body = adapter.request(MESSAGES, 64)  # type: ignore[attr-defined]
            return await client.stream(http, base + path, body, adapter.parser(), 10)  # type: ignore[attr-defined]

    return asyncio.run(one())


# --- the one definition, on hand-built numbers ----------------------------------------------


def test_accept_length_excludes_the_prefill_token() -> None:
    assert accept_length(64, 33) == 63 / 33
    assert accept_length(10, 9) == 1.0  # plain decoding: one token per step after the first
    assert accept_length(1, 0) is None and accept_length(0, 0) is None
    assert accept_length(10, 0) is None and accept_length(10, None) is None
    assert accept_length(None, 4) is None


def test_llamacpp_reply_follows_the_one_definition() -> None:
    parser = ChatStream()
    parser.feed({"choices": [{"delta": {"content": "x"}, "finish_reason": None}]})
    parser.feed({"choices": [{"delta": {}, "finish_reason": "length"}]})
    timings = {"predicted_n": 64, "draft_n": 40, "draft_n_accepted": 30, "prompt_n": 9}
    parser.feed({"choices": [], "usage": {"completion_tokens": 64}, "timings": timings})
    stats = parser.stats()
    counts = (stats["spec_verify_ct"], stats["draft_tokens"], stats["accepted_tokens"])
    assert counts == (33, 40, 30)  # 64 - 1 - 30 verify steps
    assert stats["accept_length"] == 63 / 33 == 1 + 30 / 33
    details = ("engine_accept_length", "accept_histogram", "accepted_per_pos", "step_accepted")
    assert [stats[k] for k in details] == [None] * 4  # llama.cpp reports none of them


def test_vllm_metrics_renamed_and_sparse_histograms_made_dense() -> None:
    spec = {
        "mean_acceptance_length": 2.5,
        "acceptance_histogram": [1, 0, 2, 1],
        "num_spec_steps": 4,
        "num_accepted_draft_tokens": 6,
        "num_draft_tokens": 12,
        "num_spec_tokens": 3,
        "per_step_accepted": [0, 2, 3, 2],
    }
    got = vllm_details(spec)
    assert (got["spec_verify_ct"], got["draft_tokens"], got["accepted_tokens"]) == (4, 12, 6)
    assert got["engine_accept_length"] == 2.5 and got["accept_histogram"] == [1, 0, 2, 1]
    assert got["step_accepted"] == [0, 2, 3, 2] and got["accepted_per_pos"] is None
    assert dense_histogram({"0": 39, "1": 1, "3": 3}, 3) == [39, 1, 0, 3]
    assert dense_histogram({"0": 2}, 4) == [2, 0, 0, 0, 0]
    assert dense_histogram([1, -1]) is None and dense_histogram({"x": 1}) is None
    assert vllm_details(None)["spec_verify_ct"] is None


# --- engine-shaped servers over real sockets -----------------------------------------------


@pytest.mark.parametrize("level", ["summary", "detailed", "stats"])
def test_vllm_per_request_metrics_over_sockets(level: str) -> None:
    script = Script(gap_s=0.005, spec_metrics=level)
    adapter = VLLM(VLLMEngine.model_validate({"kind": "vllm", "model": "org/m"}))
    with serve(VLLMServer(script)) as base:
        res = _stream(adapter, base)
    stats, sent = res.stats, vllm_spec(script.chunk_tokens, script.drafts_per_step, "detailed")
    assert res.ok and stats["output_tokens"] == 28
    assert (stats["spec_verify_ct"], stats["accepted_tokens"], stats["draft_tokens"]) == (8, 19, 56)
    assert stats["accept_length"] == 27 / 8 == stats["engine_accept_length"]  # = vLLM's mean
    assert stats["accept_histogram"] == sent["acceptance_histogram"] == [0, 0, 5, 3, 0, 0, 0, 0]
    step = sent["per_step_accepted"] if level != "summary" else None
    assert stats["step_accepted"] == step and stats["accepted_per_pos"] is None
    assert json.loads(stats["server_stats"])["speculative_decoding"]["num_spec_steps"] == 8


def test_vllm_launch_adds_the_per_request_flag_to_speculative_methods() -> None:
    def argv(method: Method, **kw: object) -> list[str]:
        cfg = VLLMEngine.model_validate({"kind": "vllm", "model": "org/m", **kw})
        return VLLM(cfg).launch(method, 1, 8000)[0]

    spec = Method(name="d", args=["--speculative-config", SPEC])
    assert argv(spec)[-2:] == ["--per-request-spec-decode-metrics", "detailed"]
    assert argv(spec, per_request_spec_metrics="summary")[-1] == "summary"
    assert "--per-request-spec-decode-metrics" not in argv(spec, per_request_spec_metrics="none")
    assert "--per-request-spec-decode-metrics" not in argv(Method(name="ar"))
    given = Method(
        name="d", args=["--speculative-config", SPEC, "--per-request-spec-decode-metrics=summary"]
    )
    assert argv(given).count("--per-request-spec-decode-metrics=summary") == 1
    assert not any(a == "--per-request-spec-decode-metrics" for a in argv(given))


@pytest.mark.parametrize("sglext", [True, False])
def test_sglang_chat_api_reads_spec_tokens_details(sglext: bool) -> None:
    script = Script(gap_s=0.005, sglext=sglext)
    adapter = SGLang(
        SGLangEngine.model_validate(
            {
                "kind": "sglang",
                "model": "org/m",
                "api": "chat",
                "request_extra": {"chat_template_kwargs": {"enable_thinking": False}},
            }
        )
    )
    adapter.prepare(None)  # the chat endpoint applies SGLang's own template: nothing to read
    server = SGLangServer(script)
    with serve(server) as base:
        res = _stream(adapter, base)
    body = server.bodies[0]
    assert body["return_spec_tokens_details"] is True and body["model"] == "org/m"
    assert body["messages"] == MESSAGES and body["stream_options"] == {"include_usage": True}
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    stats = res.stats
    assert res.ok and res.text == script.text and stats["output_tokens"] == 28
    assert (stats["prompt_tokens"], stats["cached_tokens"], stats["finish_reason"]) == (
        17,
        5,
        "length",
    )
    if not sglext:  # a build without PR #33518: no speculative fields on OpenAI endpoints
        assert stats["spec_verify_ct"] is None and stats["accept_length"] is None
        assert stats["engine_accept_length"] is None and stats["accept_histogram"] is None
        return
    sent = sglext_details(server.meta(28, 8, True))
    assert (stats["spec_verify_ct"], stats["accepted_tokens"]) == (8, 19)
    assert stats["accept_length"] == 27 / 8 and stats["engine_accept_length"] == 28 / 8
    assert stats["accept_histogram"] == sent["spec_correct_drafts_histogram"]
    assert json.loads(stats["server_stats"])["sglext"]["spec_tokens_details"] == sent


# --- stored exactly: a campaign against an external vLLM-shaped server -----------------------


# --- the fingerprint: request body and draft model ----------------------------------------


def test_request_facts_leave_out_the_prompt_and_the_token_limit() -> None:
    sglang = SGLang(
        SGLangEngine.model_validate(
            {"kind": "sglang", "model": "org/m", "chat_template": "{{ messages[0].content }}"}
        )
    )
    facts = request_facts(sglang)
    assert facts["request_path"] == "/generate"
    assert json.loads(facts["request_body"]) == {
        "sampling_params": {"temperature": 0},
        "stream": True,
    }
    assert (
        request_facts(SGLang(SGLangEngine.model_validate({"kind": "sglang", "model": "org/m"})))
        == {}
    )  # no chat template yet: nothing


def test_draft_model_per_engine_with_its_size_on_the_host(tmp_path: Path) -> None:
    weights = tmp_path / "m-draft"
    weights.mkdir()
    (weights / "model.safetensors").write_bytes(b"x" * 5000)
    host = Local(LocalHost(kind="local"))
    target = str(tmp_path / "m")
    vllm = VLLM(VLLMEngine.model_validate({"kind": "vllm", "model": target}))
    facts = draft_facts(vllm, Method(name="d", args=["--speculative-config", SPEC]), host)
    assert facts["draft_model"] == str(weights)
    assert int(facts["draft_model_bytes"]) >= 5000
    sglang = SGLang(SGLangEngine.model_validate({"kind": "sglang", "model": "org/m"}))
    method = Method(name="e", args=["--speculative-draft-model-path", "z-lab/Qwen3.5-DFlash"])
    assert draft_facts(sglang, method, host) == {"draft_model": "z-lab/Qwen3.5-DFlash"}  # a hub id
    gguf = tmp_path / "draft.gguf"
    gguf.write_bytes(b"g" * 1234)
    llama = LlamaCpp(LlamaCppEngine.model_validate({"kind": "llamacpp", "model": str(gguf)}))
    assert draft_facts(llama, Method(name="ds", args=["-md", str(gguf)]), host) == {
        "draft_model": str(gguf),
        "draft_model_bytes": "1234",
    }
    assert draft_facts(llama, Method(name="ng", args=["--spec-type", "ngram-simple"]), host) == {}
    assert draft_facts(llama, Method(name="ds", args=["-md", str(gguf)]), object()) == {
        "draft_model": str(gguf)
    }  # a host that runs no commands (external): the path only
