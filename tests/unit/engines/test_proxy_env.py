"""Environment proxies are ignored on both HTTP paths (collect/http/__init__.py says why):
with HTTP_PROXY / ALL_PROXY pointing at a dead port, the measurement client, the health
check, the fingerprint and the scrapes all still reach the server directly."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import duckdb
import httpx
import pytest

from specsweep.collect.engines.llamacpp import ChatStream
from specsweep.collect.http import client
from specsweep.collect.run.service import _healthy
from tests.support.collect_cli import EAGLE_TWICE, external_plan, run_here
from tests.support.shaped_servers import Script, VLLMServer, serve


@pytest.fixture
def dead_proxy(monkeypatch: pytest.MonkeyPatch) -> str:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        proxy = f"http://127.0.0.1:{s.getsockname()[1]}"
    for name in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ):
        monkeypatch.setenv(name, proxy)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    return proxy


def test_the_proxy_would_break_a_default_httpx_client(dead_proxy: str) -> None:
    """The premise: httpx alone honours the variables (so the test below can fail)."""
    with serve(VLLMServer(Script())) as url, pytest.raises(httpx.ConnectError):
        httpx.get(url + "/health", timeout=2)


def test_both_paths_ignore_environment_proxies(dead_proxy: str) -> None:
    async def go(url: str) -> tuple[int, client.Result]:
        async with client.http_client() as http:
            status = (await http.get(url + "/version")).status_code
            body = {"messages": [{"role": "user", "content": "x"}], "stream": True}
            result = await client.stream(
                http, url + "/v1/chat/completions", body, ChatStream(), 5.0
            )
        return status, result

    with serve(VLLMServer(Script(ttft_s=0.01, gap_s=0.005))) as url:
        assert _healthy(url + "/health")
        status, result = asyncio.run(go(url))
    assert status == 200
    assert result.ok, result.error_message


def test_a_campaign_runs_with_a_dead_proxy_set(dead_proxy: str, tmp_path: Path) -> None:
    script = Script(ttft_s=0.01, gap_s=0.005)
    with serve(VLLMServer(script)) as url:
        text = external_plan(
            url,
            name="proxied",
            engine={"kind": "vllm", "model": "shaped/model"},
            **EAGLE_TWICE,
        )
        db = run_here(text, tmp_path)
    with duckdb.connect(str(db), read_only=True) as con:
        ok = con.execute(
            "SELECT bool_and(ok), count(*) FROM requests WHERE NOT is_warmup"
        ).fetchone()
        scraped = con.execute("SELECT count(*) FROM server_metrics").fetchone()[0]
        version = con.execute("SELECT value FROM environment WHERE key LIKE '%engine.version'")
        facts = version.fetchall()
    assert ok == (True, 2)
    assert scraped > 0 and facts == [("0.0.shaped",)]
