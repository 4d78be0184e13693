"""The SGLang adapter on bytes a real SGLang 0.5.15 sent (tests/data/sglang-0.5.15/, recorded
on an H200 on 2026-12-04 by .ci/gpu/record_sglang.py; README.md there says how). A replay
server sends each recorded reply over a real socket, with its recorded status and content
type, a streamed reply event by event; the expected values are read off the files by hand
(or by plain JSON parsing here), never by the adapter's own code.

Findings the real bytes gave (README.md there keeps them too):
- 0.5.15 has no `return_spec_tokens_details` (SGLang PR #33518 is not in it): the streamed
  chat reply carries no `sglext`, so `api: chat` rows have no speculative counters on it;
  `api: generate` (the default) has them all.
- `spec_correct_drafts_histogram` ends at the largest accepted count seen (SGLang extends the
  list on demand), so 4 entries here for 4 drafted tokens; the missing tail is zeros.
- `cuda_graph_max_bs` is no longer a server argument; `disable_cuda_graph` and the resolved
  `cuda_graph_config` are, and the fingerprint now keeps them.
"""

from __future__ import annotations

import asyncio
import json
import re
from functools import partial
from pathlib import Path

import httpx
import pytest

from specsweep.collect.engines.openai import parse_prometheus
from specsweep.collect.engines.sglang import SGLang, SGLangEngine
from specsweep.collect.http import client
from tests.support.recorded import Recording
from tests.support.recorded import Replay as _Replay
from tests.support.shaped_servers import serve as serve_shaped

DATA = Path(__file__).resolve().parents[2] / "data" / "sglang-0.5.15"
RECORDING = Recording(DATA)
REPLIES = RECORDING.replies
MODEL = "/tmp/models/smollm2-135m"
PROMPT = REPLIES["chat-stream.sse"]["request"]["json"]["messages"][0]["content"]
MESSAGES = [{"role": "user", "content": PROMPT}]
# the recorded /generate sent the prompt as it is: a template that renders it unchanged
PLAIN = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
TTFT_S = 0.05  # the replay holds the first event back this long
Replay = partial(_Replay, RECORDING, first_event_s=TTFT_S)  # Replay(routes): these files' server


def _adapter(**kw: object) -> SGLang:
    cfg = {"kind": "sglang", "model": MODEL, "chat_template": PLAIN, **kw}
    return SGLang(SGLangEngine.model_validate(cfg))


def _info(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def _send(adapter: SGLang, path: str, name: str, max_tokens: int) -> tuple[client.Result, dict]:
    """One streamed request of the adapter against the recorded reply; (result, body sent)."""

    async def one(base: str) -> client.Result:
        async with httpx.AsyncClient() as http:
            route, body = adapter.request(MESSAGES, max_tokens)
            return await client.stream(http, base + route, body, adapter.parser(), 30)

    server = Replay({f"POST {path}": name})
    with serve_shaped(server) as base:
        res = asyncio.run(one(base))
    return res, server.bodies[0]


def test_the_recorded_generate_stream_gives_text_timing_tokens_and_spec_counters() -> None:
    """The last event's meta_info: 64 completion and 36 prompt tokens, finish length, 38
    verify steps, 28 of 152 drafts correct, histogram [27, 0, 5, 6] (38 steps; 0*27 + 1*0 +
    2*5 + 3*6 = 28 correct), SGLang's own accept length 64/38. specsweep's accept length
    leaves the prefill token out: (64 - 1)/38. Text is cumulative; tokens per chunk are the
    steps of completion_tokens between events."""
    events = RECORDING.events("generate-stream.sse")
    meta = events[-1]["meta_info"]
    assert (meta["completion_tokens"], meta["spec_verify_ct"]) == (64, 38)
    counts = [0] + [e["meta_info"]["completion_tokens"] for e in events]
    steps = [b - a for a, b in zip(counts, counts[1:])]
    res, body = _send(_adapter(), "/generate", "generate-stream.sse", 64)
    assert res.ok, res.error_message
    assert body == REPLIES["generate-stream.sse"]["request"]["json"]  # SGLang took the same
    assert res.text == events[-1]["text"]
    assert res.chunk_tokens == steps and sum(steps) == 64
    assert TTFT_S <= res.ttft_s < TTFT_S + 1.0 and res.ttft_s == res.chunk_times_s[0]
    s = res.stats
    assert (s["output_tokens"], s["prompt_tokens"], s["cached_tokens"]) == (64, 36, 0)
    assert s["finish_reason"] == "length"
    assert (s["spec_verify_ct"], s["draft_tokens"], s["accepted_tokens"]) == (38, 152, 28)
    assert s["accept_length"] == pytest.approx(63 / 38)
    assert s["engine_accept_length"] == 1.6842105263157894 == pytest.approx(64 / 38)
    assert s["accept_histogram"] == [27, 0, 5, 6] == meta["spec_accept_histogram"]
    assert json.loads(s["server_stats"]) == meta


def test_the_recorded_chat_stream_has_text_and_usage_but_no_spec_details() -> None:
    """0.5.15 took `return_spec_tokens_details` and ignored it: no event carries `sglext`,
    so the row has 96 completion and 66 prompt tokens and no speculative counters."""
    events = RECORDING.events("chat-stream.sse")
    assert not any("sglext" in e for e in events)
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e["choices"])
    usage = events[-1]["usage"]
    res, body = _send(_adapter(api="chat"), "/v1/chat/completions", "chat-stream.sse", 96)
    assert res.ok, res.error_message
    recorded = REPLIES["chat-stream.sse"]["request"]["json"]
    assert {**body, "model": "default"} == recorded  # SGLang took the same body
    assert res.text == text
    s = res.stats
    assert (s["output_tokens"], s["prompt_tokens"]) == (usage["completion_tokens"], 66) == (96, 66)
    assert s["finish_reason"] == "length" and s["cached_tokens"] is None
    spec = ("spec_verify_ct", "draft_tokens", "accepted_tokens", "accept_length")
    assert [s[k] for k in spec] == [None] * 4
    assert s["engine_accept_length"] is None and s["accept_histogram"] is None
    assert json.loads(s["server_stats"])["sglext"] == {"spec_tokens_details": {}}
    content = sum(1 for e in events if e["choices"] and e["choices"][0]["delta"].get("content"))
    assert len(res.chunk_times_s) == content


def test_fingerprint_and_scrape_from_the_real_server_info_and_metrics() -> None:
    """Before any request internal_states[0] has no avg_spec_accept_length (no sample);
    after, 1.8791666666666667. /metrics: sglang:spec_accept_length 1.2 (the server log's
    last decode batch says 'accept len: 1.20'), 249 verify calls, 456 generated tokens."""
    before, after = _info("server-info-before.json"), _info("server-info-after.json")
    assert "avg_spec_accept_length" not in before["internal_states"][0]
    adapter = _adapter()

    async def both(base: str) -> tuple[dict, list]:
        async with httpx.AsyncClient() as http:
            return await adapter.fingerprint(http, base), await adapter.scrape(http, base)

    results = []
    for name in ("server-info-before.json", "server-info-after.json"):
        routes = {"GET /server_info": name, "GET /metrics": "metrics-ngram.txt"}
        with serve_shaped(Replay(routes)) as base:
            results.append(asyncio.run(both(base)))
    (facts, samples_before), (_, samples_after) = results
    assert {k: facts[k] for k in ("engine.version", "engine.model_path")} == {
        "engine.version": "0.5.15",
        "engine.model_path": MODEL,
    }
    assert facts["engine.speculative_algorithm"] == "NGRAM"
    assert facts["engine.speculative_num_draft_tokens"] == "5"
    assert facts["engine.context_length"] == ""  # null: the model's own
    assert facts["engine.disable_cuda_graph"] == "true"
    assert json.loads(facts["engine.cuda_graph_config"])["decode"]["backend"] == "disabled"
    spec = {k for k in before if k.startswith("speculative_")}
    assert {k[7:] for k in facts if k.startswith("engine.speculative_")} == spec
    assert not any("key" in k or "password" in k for k in facts)

    def own(samples: list[dict]) -> list[float]:
        return [s["value"] for s in samples if s["source"] == "server_info"]

    assert own(samples_before) == []
    assert own(samples_after) == [after["internal_states"][0]["avg_spec_accept_length"]]
    assert own(samples_after) == [1.8791666666666667]
    assert _metric(samples_after, "sglang:spec_accept_length") == [1.2]
    log = (DATA / "server-ngram.log").read_text()
    assert re.findall(r"accept len: ([0-9.]+)", log)[-1] == "1.20"


def _metric(samples: list[dict], name: str) -> list[float]:
    return [s["value"] for s in samples if s["name"] == name]


def test_the_metrics_text_parses_with_the_adapters_parser() -> None:
    """Read off metrics-ngram.txt: one sample each, without labels beyond the model's."""
    samples = parse_prometheus((DATA / "metrics-ngram.txt").read_text())
    assert _metric(samples, "sglang:spec_accept_length") == [1.2]
    assert _metric(samples, "sglang:spec_accept_rate") == [0.05]
    assert _metric(samples, "sglang:spec_verify_calls_total") == [249.0]
    assert _metric(samples, "sglang:generation_tokens_total") == [456.0]
    assert _metric(samples, "sglang:num_requests_total") == [6.0]


def test_the_real_flush_cache_reply_counts_as_flushed() -> None:
    """200, no Content-Type, 'Cache flushed.' and a second line about busy servers."""
    assert REPLIES["flush-cache.txt"]["status"] == 200
    assert (DATA / "flush-cache.txt").read_text().startswith("Cache flushed.\n")
    adapter = _adapter()

    async def reset(base: str) -> str:
        async with httpx.AsyncClient() as http:
            return await adapter.reset_cache(http, base)

    server = Replay({"POST /flush_cache": "flush-cache.txt"})
    with serve_shaped(server) as base:
        assert asyncio.run(reset(base)) == "flush_cache"
    assert server.calls["POST /flush_cache"] == 1


def test_the_served_model_name_is_the_model_path() -> None:
    """/v1/models, /get_model_info and server_info agree: SGLang serves the model under its
    path, which is what the adapter sends as `model` in api: chat."""
    models = _info("models.json")["data"]
    assert [m["id"] for m in models] == [MODEL]
    assert _info("model-info.json")["model_path"] == MODEL
    assert _info("server-info-before.json")["served_model_name"] == MODEL
    _, body = _adapter(api="chat").request(MESSAGES, 8)
    assert body["model"] == MODEL


def test_a_real_start_up_failure_reaches_the_services_row(tmp_path: Path) -> None:
    """A stand-in `python` prints the recorded log of a failed start (a model folder that
    does not exist) and exits 1, as the real one did: the services row is failed and its log
    tail holds SGLang's last error line, which names the missing folder."""
    missing = REPLIES["startup-failure.log"]["model"]
    state, error, tail = RECORDING.failed_start(
        tmp_path,
        "python3",
        lambda fake: {"kind": "sglang", "python": fake, "model": missing, "chat_template": PLAIN},
    )
    last = tail.strip().splitlines()[-1]
    assert last.startswith("OSError: Repo id must be in the form") and f"'{missing}'" in last
    assert state == "failed" and error == f"server exited during start-up: {last}"
    assert REPLIES["startup-failure.log"]["exit_code"] == 1
