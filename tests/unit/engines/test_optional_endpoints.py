"""A failing optional endpoint never ends the campaign: it lands in `endpoint_errors` (which
hook, which request, its status, why) and the measurement goes on. Engine-shaped servers
answer /metrics with an HTML page (as an OpenAI-compatible proxy does for unknown paths),
/v1/models with a shape the adapter does not expect, /flush_cache (the prefix-cache reset
before each measured window) by hanging up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb

from tests.support.collect_cli import external_plan, run_here
from tests.support.shaped_servers import Reply, Request, Script, SGLangServer, VLLMServer, serve

HTML = "<!doctype html><html><body><h1>It works</h1></body></html>"
FAST = Script(ttft_s=0.01, gap_s=0.005)


class ProxiedVLLM(VLLMServer):
    """vLLM behind a proxy that answers every unknown path with its own page."""

    async def route(self, req: Request, reply: Reply) -> None:
        if req.path == "/metrics":
            await reply.send(200, HTML, "text/html")
        elif req.path == "/v1/models":
            await reply.send(200, {"data": {"unexpected": "shape"}})
        else:
            await super().route(req, reply)


class HangingUpSGLang(SGLangServer):
    async def route(self, req: Request, reply: Reply) -> None:
        if req.path == "/flush_cache":
            raise ConnectionResetError  # the server closes without an answer
        await super().route(req, reply)


def _run(tmp_path: Path, url: str, engine: dict[str, Any]) -> Path:
    text = external_plan(
        url,
        name="optional",
        engine=engine,
        methods=[{"name": "m"}],
        baseline="m",
        workloads=[
            {
                "name": "w",
                "prompts": {"kind": "inline", "texts": ["a", "b"]},
                "max_tokens": [28],
                "concurrency": [1],
                "repetitions": 1,
            }
        ],
    )
    return run_here(text, tmp_path)


def _rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql).fetchall()


def test_metrics_answered_with_html_is_recorded_and_the_campaign_completes(tmp_path: Path) -> None:
    with serve(ProxiedVLLM(FAST)) as url:
        db = _run(tmp_path, url, {"kind": "vllm", "model": "shaped/model"})
    assert _rows(db, "SELECT status FROM campaigns") == [("complete",)]
    assert _rows(db, "SELECT count(*), bool_and(ok) FROM requests WHERE NOT is_warmup") == [
        (2, True)
    ]
    errors = _rows(
        db,
        "SELECT hook, workload, phase, endpoint, status, error "
        "FROM endpoint_errors ORDER BY failed_at",
    )
    assert [e[:5] for e in errors] == [
        ("fingerprint", "", "start", "GET /v1/models", 200),
        ("scrape", "w", "before", "GET /metrics", 200),
        ("scrape", "w", "after", "GET /metrics", 200),
    ]
    assert errors[0][5].startswith("KeyError")
    assert all("invalid metric name" in e[5] for e in errors[1:])
    # the fingerprint's other facts and the launch facts still land
    facts = dict(_rows(db, "SELECT key, value FROM environment"))
    assert any(k.endswith(".launch_command") for k in facts)


def test_a_cache_reset_that_hangs_up_marks_the_window_not_the_campaign(tmp_path: Path) -> None:
    engine = {
        "kind": "sglang",
        "model": "/models/m",
        "chat_template": "{% for m in messages %}{{ m.content }}\n{% endfor %}",
    }
    server = HangingUpSGLang(FAST)
    with serve(server) as url:
        db = _run(tmp_path, url, engine)
    assert server.calls["POST /flush_cache"] == 1  # one window, one reset before it
    errors = _rows(db, "SELECT hook, workload, phase, endpoint, status, error FROM endpoint_errors")
    assert [e[:5] for e in errors] == [("reset_cache", "w", "before", "POST /flush_cache", None)]
    assert errors[0][5].startswith("RemoteProtocolError")
    assert _rows(db, "SELECT cache_reset FROM windows") == [("failed",)]
    # the window is still measured (its cache state is what is flagged)
    assert _rows(db, "SELECT count(*), bool_and(ok) FROM requests WHERE NOT is_warmup") == [
        (2, True)
    ]
    assert _rows(db, "SELECT status FROM campaigns") == [("complete",)]
