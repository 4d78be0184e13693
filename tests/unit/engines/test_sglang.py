"""The SGLang adapter against an SGLang-shaped server over real sockets, with the real
streaming client; the script fixes timing and acceptance, so both are known truth."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from jinja2.exceptions import SecurityError

from specsweep.collect.engines.sglang import (
    ChatTemplateError,
    FlushRefused,
    SGLang,
    SGLangEngine,
    chat_template_from_tokenizer_config,
    sglang_stats,
    special_tokens_from_tokenizer_config,
)
from specsweep.collect.http import client
from specsweep.collect.plan.fields import Method
from tests.support.shaped_servers import Script, SGLangServer, serve

TOL = 0.03  # seconds of delivery noise allowed on a loaded 2-core machine
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
CHATML_PROMPT = (
    "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
    "<|im_start|>assistant\n"
)


def _adapter(**kw: object) -> SGLang:
    cfg = {"kind": "sglang", "model": "org/model", "chat_template": CHATML, **kw}
    return SGLang(SGLangEngine.model_validate(cfg))


def _run(script: Script, adapter: SGLang | None = None) -> tuple[client.Result, SGLangServer]:
    adapter = adapter or _adapter()
    server = SGLangServer(script)
    with serve(server) as base:
        path, body = adapter.request(MESSAGES, 64)

        async def one() -> client.Result:
            async with httpx.AsyncClient() as http:
                return await client.stream(http, base + path, body, adapter.parser(), 10)

        return asyncio.run(one()), server


def test_stream_timing_text_tokens_and_accept_length() -> None:
    script = Script()  # 8 verify steps of 4,3,4,3,... tokens: 28 tokens
    res, server = _run(script)
    assert res.ok, res.error_message
    truth = [script.ttft_s + i * script.gap_s for i in range(script.steps)]
    assert len(res.chunk_times_s) == script.steps
    for measured, scripted in zip(res.chunk_times_s, truth):
        assert scripted - 0.002 <= measured <= scripted + TOL
    assert (res.ttft_s, res.e2e_s) == (res.chunk_times_s[0], res.chunk_times_s[-1])
    assert res.text == script.text  # reassembled from cumulative text
    assert res.chunk_tokens == [4, 3, 4, 3, 4, 3, 4, 3]
    stats = res.stats
    assert (stats["output_tokens"], stats["prompt_tokens"], stats["cached_tokens"]) == (28, 17, 5)
    # the first token is the prefill's; 8 verify steps accepted 2,2,3,2,3,2,3,2 drafts
    assert (stats["spec_verify_ct"], stats["accepted_tokens"], stats["draft_tokens"]) == (8, 19, 56)
    assert stats["accept_length"] == (28 - 1) / 8 == 1 + 19 / 8  # the one definition
    assert stats["engine_accept_length"] == 28 / 8  # SGLang's own: the prefill token counted
    assert stats["accept_histogram"] == [0, 0, 5, 3, 0, 0, 0, 0]  # as meta_info sent it
    assert stats["accepted_per_pos"] is None and stats["step_accepted"] is None
    assert stats["finish_reason"] == "length"  # from {"type": "length", "length": 28}
    assert json.loads(stats["server_stats"])["e2e_latency"] == pytest.approx(0.29)
    sent = server.bodies[0]
    assert sent["text"] == CHATML_PROMPT and sent["stream"] is True
    assert sent["sampling_params"] == {"max_new_tokens": 64, "temperature": 0}


def test_one_token_per_chunk_means_accept_length_one() -> None:
    script = Script(chunk_tokens=(1,) * 5, gap_s=0.01)
    res, _ = _run(script)
    assert res.chunk_tokens == [1] * 5 and res.stats["spec_verify_ct"] == 4
    assert res.stats["accept_length"] == 1.0 and res.stats["engine_accept_length"] == 5 / 4
    assert res.stats["accept_histogram"] == [4, 0, 0, 0, 0, 0, 0, 0]


def test_old_spellings_and_plain_finish_reason() -> None:
    res, _ = _run(Script(old_names=True, finish_as_dict=False, gap_s=0.01))
    stats = res.stats
    assert (stats["accepted_tokens"], stats["draft_tokens"]) == (19, 56)
    assert stats["finish_reason"] == "length" and stats["accept_length"] == 27 / 8
    assert stats["accept_histogram"] is None  # older builds send none


def test_without_verify_count_only_the_engines_own_figure() -> None:
    res, _ = _run(Script(report_verify_ct=False, gap_s=0.01))
    assert res.stats["spec_verify_ct"] is None and res.stats["accept_length"] is None
    assert res.stats["engine_accept_length"] == 28 / 8  # spec_accept_length, as reported


def test_stats_on_hand_built_meta_info() -> None:
    base = {"completion_tokens": 10, "finish_reason": {"type": "stop", "matched": 2}}
    spec = sglang_stats({**base, "spec_verify_ct": 4})
    assert spec["accept_length"] == (10 - 1) / 4 == 2.25  # the one definition
    assert spec["engine_accept_length"] == 10 / 4  # none reported: completion / verify
    reported = sglang_stats(
        {
            **base,
            "spec_verify_ct": 4,
            "spec_accept_length": 2.4,
            "spec_correct_drafts_histogram": [1, 0, 3],
        }
    )
    assert (reported["engine_accept_length"], reported["accept_histogram"]) == (2.4, [1, 0, 3])
    assert sglang_stats({**base, "spec_verify_ct": 0})["accept_length"] is None
    assert sglang_stats({"completion_tokens": 1, "spec_verify_ct": 0})["accept_length"] is None
    plain = sglang_stats(base)  # autoregressive: no spec fields
    assert plain["accept_length"] is None and plain["engine_accept_length"] is None
    assert plain["accept_histogram"] is None
    assert sglang_stats(base)["finish_reason"] == "stop"
    assert sglang_stats({"finish_reason": None})["finish_reason"] is None


def test_incremental_text_is_appended() -> None:
    parser = _adapter().parser()
    assert parser.feed({"text": "ab", "meta_info": {"completion_tokens": 2}}) == ("ab", 2)
    assert parser.feed({"text": "abcd", "meta_info": {"completion_tokens": 5}}) == ("cd", 3)
    assert parser.feed({"text": "xy"}) == ("xy", None)  # a delta, and no token count
    assert parser.text == "abcdxy"


def test_template_from_tokenizer_config_string_and_list() -> None:
    adapter = _adapter(chat_template=None)
    config = json.dumps({"chat_template": CHATML, "eos_token": "<|im_end|>"})
    adapter.set_chat_template(chat_template_from_tokenizer_config(config))
    assert adapter.render_prompt(MESSAGES) == CHATML_PROMPT
    listed = json.dumps(
        {
            "chat_template": [
                {"name": "tool_use", "template": "T"},
                {"name": "default", "template": CHATML},
            ]
        }
    )
    assert chat_template_from_tokenizer_config(listed) == CHATML
    with pytest.raises(ChatTemplateError, match="no 'default' template"):
        chat_template_from_tokenizer_config(
            json.dumps({"chat_template": [{"name": "rag", "template": "R"}]})
        )
    with pytest.raises(ChatTemplateError, match="no chat_template"):
        chat_template_from_tokenizer_config(json.dumps({"eos_token": "</s>"}))


def test_bos_and_eos_tokens_reach_the_template() -> None:
    config = json.dumps({"bos_token": {"content": "<s>", "lstrip": False}, "eos_token": "</s>"})
    tokens = special_tokens_from_tokenizer_config(config)
    assert tokens == {"bos_token": "<s>", "eos_token": "</s>"}
    adapter = _adapter(chat_template=None)
    adapter.set_chat_template(
        "{{ bos_token }}{{ messages[-1]['content'] }}{{ eos_token }}", **tokens
    )
    assert adapter.render_prompt(MESSAGES) == "<s>Hi</s>"


def test_missing_template_and_template_errors_are_named() -> None:
    with pytest.raises(ChatTemplateError, match="needs a chat template"):
        _adapter(chat_template=None).request(MESSAGES, 8)
    adapter = _adapter(chat_template="{{ raise_exception('no system role') }}")
    with pytest.raises(ChatTemplateError, match="no system role"):
        adapter.render_prompt(MESSAGES)
    with pytest.raises(SecurityError):  # immutable sandbox: templates cannot mutate input
        _adapter(chat_template="{{ messages.append(1) }}").render_prompt(MESSAGES)


@pytest.mark.parametrize("legacy", [False, True])
def test_fingerprint_and_scrape_from_server_info(legacy: bool) -> None:
    adapter, server = _adapter(), SGLangServer(Script(legacy_info_path=legacy, gap_s=0.01))

    async def go(base: str) -> tuple[dict[str, str], list[dict], list[dict]]:
        async with httpx.AsyncClient() as http:
            before = await adapter.scrape(http, base)
            path, body = adapter.request(MESSAGES, 64)
            assert (await client.stream(http, base + path, body, adapter.parser(), 10)).ok
            return await adapter.fingerprint(http, base), before, await adapter.scrape(http, base)

    with serve(server) as base:
        facts, before, after = asyncio.run(go(base))
    assert facts["engine.version"] == "0.0.shaped" and facts["engine.tp_size"] == "2"
    assert facts["engine.speculative_algorithm"] == "DFLASH"
    assert facts["engine.speculative_num_draft_tokens"] == "8"
    assert facts["engine.speculative_draft_model_path"] == ""
    assert facts["engine.attention_backend"] == "fa3"
    sample = {"source": "server_info", "name": "avg_spec_accept_length", "labels": "{}"}
    assert before == [{**sample, "value": 0.0}]
    assert after == [{**sample, "value": 28 / 8}]  # /metrics answers 404: no Prometheus samples


@pytest.mark.parametrize("refusal", [None, "Flush cache failed.\n"])
def test_flush_cache_refused_while_a_request_runs(refusal: str | None) -> None:
    adapter, script = _adapter(), Script(flush_refusal_body=refusal)

    async def go(base: str) -> client.Result:
        async with httpx.AsyncClient() as http:
            path, body = adapter.request(MESSAGES, 64)
            running = asyncio.create_task(
                client.stream(http, base + path, body, adapter.parser(), 10)
            )
            await asyncio.sleep(script.ttft_s + script.gap_s)
            with pytest.raises(FlushRefused, match="HTTP 200" if refusal else "HTTP 400"):
                await adapter.flush_cache(http, base)
            result = await running
            await adapter.flush_cache(http, base)  # idle now: flushed, no error
            return result

    with serve(SGLangServer(script)) as base:
        assert asyncio.run(go(base)).ok


def test_launch_argv_and_environment() -> None:
    adapter = _adapter(
        python="/opt/venv/bin/python",
        args=["--mem-fraction-static", "0.75"],
        env={"A": "1", "B": "1"},
    )
    method = Method(
        name="dflash",
        args=[
            "--speculative-algorithm",
            "DFLASH",
            "--speculative-draft-model-path",
            "{model}-DFlash",
        ],
        env={"B": "2", "SGLANG_ENABLE_SPEC_V2": "1"},
    )
    argv, env = adapter.launch(method, 4, 30001)
    assert argv == [
        "/opt/venv/bin/python", "-m", "sglang.launch_server", "--model-path", "org/model",
        "--tp-size", "4", "--host", "127.0.0.1", "--port", "30001",
        "--mem-fraction-static", "0.75",
        "--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "org/model-DFlash",
    ]  # fmt: skip
    assert env == {"A": "1", "B": "2", "SGLANG_ENABLE_SPEC_V2": "1"}
    assert (adapter.kind, adapter.health_path) == ("sglang", "/health")


def test_request_extra_sampling_params_join_the_defaults() -> None:
    adapter = _adapter(
        chat_template="{{ messages[0]['content'] }}",
        request_extra={"sampling_params": {"ignore_eos": True}, "rid": "x"},
    )
    path, body = adapter.request([{"role": "user", "content": "hi"}], 16)
    assert path == "/generate"
    assert body["sampling_params"] == {"max_new_tokens": 16, "temperature": 0, "ignore_eos": True}
    assert (body["rid"], body["text"], body["stream"]) == ("x", "hi", True)
