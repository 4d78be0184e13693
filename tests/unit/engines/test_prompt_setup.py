"""The prompt set-up recorded per campaign (issue 27 item 5): the chat template a server applies
and where it came from, the thinking settings, and per workload the system prompt, sampling and
stop strings; `analyze compare` flags a change in any of them. Real servers on port 0 (the
engine-shaped ones of shaped_servers.py), real DuckDB; expected hashes computed here with
hashlib, not by the code under test."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

import duckdb
import httpx

from specsweep.analyze import build
from specsweep.analyze.compare import compare, lines
from specsweep.analyze.environment_diff import environment
from specsweep.collect.engines.llamacpp import LlamaCpp, LlamaCppEngine
from specsweep.collect.engines.templates import served
from specsweep.collect.engines.vllm import VLLM, VLLMEngine
from specsweep.collect.hosts.local import Local
from specsweep.collect.plan.components import LocalHost
from specsweep.collect.plan.fields import Method
from specsweep.collect.plan.file import parse_plan
from specsweep.collect.run import runner
from specsweep.collect.run.fingerprint import prompt_facts
from tests.support.collect_cli import external_plan
from tests.support.shaped_servers import Reply, Request, Script, SGLangServer, serve

TEMPLATE = "{% for m in messages %}{{ m.content }}\n{% endfor %}"
OTHER = "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"
SERVICE = "service.autoregressive.tp1"
PROMPT = "workload.w.prompt"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _plan(url: str, template: str = TEMPLATE, system: str | None = "Be terse.") -> str:
    return external_plan(
        url,
        name="prompt-setup",
        engine={
            "kind": "sglang",
            "model": "/models/m",
            "chat_template": template,
            "request_extra": {"chat_template_kwargs": {"enable_thinking": False}},
        },
        methods=[{"name": "autoregressive"}],
        workloads=[
            {
                "name": "w",
                "system": system,
                "prompts": {"kind": "inline", "texts": ["a"], "template": "Q: {text}"},
                "max_tokens": [28],
                "repetitions": 1,
            }
        ],
    )


def _campaign(url: str, db: Path, logs: Path, **kw: Any) -> str:
    text = _plan(url, **kw)
    return runner.run(parse_plan(text), text, db, logs, show_progress=False)


def _env(db: Path, campaign: str) -> dict[str, str]:
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT key, value FROM environment WHERE campaign_id = ?", [campaign]
        ).fetchall()
    return dict(rows)


def test_a_campaign_records_its_prompt_set_up(tmp_path: Path) -> None:
    db = tmp_path / "p.duckdb"
    with serve(SGLangServer(Script())) as url:
        env = _env(db, _campaign(url, db, tmp_path / "logs"))
    assert env[f"{SERVICE}.chat_template_sha256"] == sha(TEMPLATE)
    assert env[f"{SERVICE}.chat_template_source"] == "plan engine.chat_template"
    assert env[f"{SERVICE}.thinking"] == '{"chat_template_kwargs.enable_thinking": false}'
    assert env[f"{PROMPT}.system"] == "Be terse."
    assert env[f"{PROMPT}.temperature"] == "0"
    # SGLang's /generate body: sampling_params {temperature 0, max_new_tokens} + request_extra
    assert json.loads(env[f"{PROMPT}.sampling"]) == {
        "chat_template_kwargs": {"enable_thinking": False},
        "max_tokens": [28],
        "temperature": 0,
    }
    assert env[f"{PROMPT}.stop"] == ""
    assert env[f"{PROMPT}.template"] == sha("Q: {text}")


def test_compare_flags_another_chat_template_and_another_system_prompt(tmp_path: Path) -> None:
    db = tmp_path / "p.duckdb"
    long_system = "x" * 201
    with serve(SGLangServer(Script())) as url:
        a = _campaign(url, db, tmp_path / "logs")
        b = _campaign(url, db, tmp_path / "logs", template=OTHER)
        c = _campaign(url, db, tmp_path / "logs", system=long_system)
    build.run(db)
    with duckdb.connect(str(db)) as con:
        ab = {k: (va, vb) for _, k, va, vb in environment(con, a, b)}
        ac = {k: (va, vb) for _, k, va, vb in environment(con, a, c)}
        printed = "\n".join(lines(compare(con, a, b)))
    assert ab[f"{SERVICE}.chat_template_sha256"] == (sha(TEMPLATE), sha(OTHER))
    assert f"{PROMPT}.system" not in ab
    assert f"environment campaign {PROMPT}.system" not in printed
    assert f"{SERVICE}.chat_template_sha256" in printed
    # a system prompt over 200 characters is stored as its hash and length, not its text
    assert ac[f"{PROMPT}.system"] == ("Be terse.", f"sha256:{sha(long_system)} chars:201")
    assert f"{SERVICE}.chat_template_sha256" not in ac


class LlamaLike(SGLangServer):
    """llama-server's GET /props (the template from the GGUF) and /health."""

    def __init__(self, props: dict[str, Any]):
        super().__init__(Script())
        self.props = props

    async def route(self, req: Request, reply: Reply) -> None:
        if req.path == "/props":
            await reply.send(200, self.props)
        else:
            await reply.send(200 if req.path == "/health" else 404, "")


def _llama_fingerprint(props: dict[str, Any]) -> dict[str, str]:
    engine = LlamaCpp(LlamaCppEngine(kind="llamacpp", model="/m.gguf", binary="/bin/llama"))

    async def ask(url: str) -> dict[str, str]:
        async with httpx.AsyncClient() as client:
            return await engine.fingerprint(client, url)

    with serve(LlamaLike(props)) as url:
        facts = asyncio.run(ask(url))
    # the server's own answer wins over the adapter's (which knows nothing for llama.cpp)
    return {**facts, **prompt_facts(engine, Method(name="ar"), None, facts)}


def test_llamacpp_records_the_template_its_server_reports() -> None:
    facts = _llama_fingerprint({"chat_template": OTHER, "total_slots": 1})
    assert facts["chat_template_sha256"] == sha(OTHER)
    assert facts["chat_template_source"] == "llama-server GET /props chat_template"
    assert facts["thinking"] == ""
    bare = _llama_fingerprint({"total_slots": 1})
    assert (bare["chat_template_sha256"], bare["chat_template_source"]) == ("", "unknown")


def test_a_served_template_is_the_flag_then_the_model_default(tmp_path: Path) -> None:
    host = Local(LocalHost(kind="local"))
    model = tmp_path / "model"
    model.mkdir()
    assert served([], str(model), host) == {
        "chat_template_sha256": "",
        "chat_template_source": "unknown",
    }
    (model / "tokenizer_config.json").write_text(json.dumps({"chat_template": TEMPLATE}))
    assert served([], str(model), host)["chat_template_sha256"] == sha(TEMPLATE)
    (model / "chat_template.jinja").write_text(OTHER)  # transformers prefers this file
    assert served([], str(model), host) == {
        "chat_template_sha256": sha(OTHER),
        "chat_template_source": "model default (chat_template.jinja)",
    }
    flagged = tmp_path / "mine.jinja"
    flagged.write_text("{{ messages }}")
    vllm = VLLM(VLLMEngine(kind="vllm", model=str(model), args=["--reasoning-parser", "qwen3"]))
    method = Method(name="m", args=["--chat-template", str(flagged)])
    facts = prompt_facts(vllm, method, host, {})
    assert facts == {
        "chat_template_sha256": sha("{{ messages }}"),
        "chat_template_source": f"--chat-template {flagged}",
        "thinking": '{"--reasoning-parser": "qwen3"}',
    }
