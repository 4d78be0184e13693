"""The llama.cpp adapter, the service lifecycle and the streaming client against a real
llama-server on a free loopback port.

The tests that start real programs (servers, subprocesses, latexmk); the in-process ones, and
the helpers both use, are in tests/unit/collect/test_llamacpp_live.py."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from specsweep.collect.engines import create
from specsweep.collect.hosts.local import Local
from specsweep.collect.http import client
from specsweep.collect.plan.model import LocalHost, Method, ServiceConfig
from specsweep.collect.run.service import Service, ServiceFailed
from tests.unit.collect.test_llamacpp_live import (  # noqa: F401
    CODE,
    _engine,
    _one,
    _pid_alive,
    _service,
    ngram_service,
)


def test_stream_records_what_design_lists(ngram_service: Service) -> None:
    res = asyncio.run(_one(ngram_service, CODE, 48))
    assert res.ok, res.error_message
    assert 0 < res.ttft_s <= res.e2e_s
    assert res.chunk_times_s == sorted(res.chunk_times_s)
    assert res.chunk_times_s[0] == res.ttft_s and res.chunk_times_s[-1] == res.e2e_s
    stats = res.stats
    timings = json.loads(stats["server_stats"])["timings"]
    # the server's count, not max_tokens; llama.cpp streams one token per chunk
    assert stats["output_tokens"] == timings["predicted_n"] <= 48
    assert abs(len(res.chunk_times_s) - stats["output_tokens"]) <= 1
    assert stats["prompt_tokens"] > 20
    # the one definition: the token sampled at prefill is no verify step
    steps = timings["predicted_n"] - 1 - timings.get("draft_n_accepted", 0)
    assert stats["spec_verify_ct"] == steps
    assert stats["accept_length"] == pytest.approx((timings["predicted_n"] - 1) / steps)
    assert stats["engine_accept_length"] is None and stats["accept_histogram"] is None
    assert res.text.strip()


def test_ngram_drafts_on_a_rewrite_prompt(ngram_service: Service) -> None:
    res = asyncio.run(_one(ngram_service, CODE, 96))
    assert res.ok
    # the function is repeated in the answer, so the n-gram drafter must find matches
    assert res.stats["draft_tokens"] > 0
    assert res.stats["accept_length"] >= 1.0


def test_metrics_scrape_has_speculative_counters(ngram_service: Service) -> None:
    async def scrape() -> list[dict]:
        async with httpx.AsyncClient() as http:
            return await ngram_service.engine.scrape(http, ngram_service.base_url)

    names = {s["name"] for s in asyncio.run(scrape())}
    assert "llamacpp:tokens_predicted_total" in names
    assert any(n.startswith("llamacpp:spec_decode") for n in names)


def test_http_error_is_classified(ngram_service: Service) -> None:
    async def bad() -> client.Result:
        async with httpx.AsyncClient() as http:
            body = {"messages": "not a list", "stream": True}
            url = ngram_service.base_url + "/v1/chat/completions"
            return await client.stream(http, url, body, ngram_service.engine.parser(), 30)

    res = asyncio.run(bad())
    assert res.error_kind == "http" and res.error_message.startswith("HTTP 4")


def test_service_stops_its_process(tmp_path: Path, llama_server: str) -> None:
    method = Method(name="autoregressive", args=["--spec-type", "none"])
    svc = _service(tmp_path, _engine(llama_server), method)
    with svc:
        pid = svc.proc.pid
        assert _pid_alive(pid)
        assert svc.row["state"] == "ready" and svc.row["startup_s"] > 0
    assert not _pid_alive(pid)
    assert svc.row["state"] == "stopped" and svc.row["stopped_at"] is not None


def test_service_stops_on_exception(tmp_path: Path, llama_server: str) -> None:
    svc = _service(tmp_path, _engine(llama_server), Method(name="autoregressive"))
    with pytest.raises(RuntimeError, match="boom"), svc:
        pid = svc.proc.pid
        raise RuntimeError("boom")
    assert not _pid_alive(pid)


def test_bad_flag_fails_with_log_tail(tmp_path: Path, llama_server: str) -> None:
    method = Method(name="broken", args=["--no-such-flag"])
    svc = _service(tmp_path, _engine(llama_server), method)
    with pytest.raises(ServiceFailed) as err, svc:
        pass
    assert "exited during start-up" in str(err.value)
    assert "no-such-flag" in err.value.log_tail
    assert svc.row["state"] == "failed" and svc.row["log_tail"]


def test_start_timeout_kills_the_process(tmp_path: Path) -> None:
    script = tmp_path / "never-ready"
    script.write_text("#!/bin/sh\necho starting up forever\nexec sleep 60\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    cfg = _engine(str(script), startup_timeout_s=1.0)
    svc = _service(tmp_path, cfg, Method(name="autoregressive"))
    with pytest.raises(ServiceFailed, match="not healthy within 1 s") as err, svc:
        pass
    assert "starting up forever" in err.value.log_tail
    assert not _pid_alive(svc.proc.pid)


@contextlib.contextmanager
def _held_port() -> Iterator[int]:
    """A loopback port a listening socket holds until the block ends."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


@pytest.mark.parametrize(
    ("binary", "why"),
    [
        ("/nonexistent/llama-server", "No such file or directory"),
        ("/etc/passwd", "Permission denied"),
    ],
)
def test_a_binary_this_machine_cannot_execute_fails_the_service(
    tmp_path: Path, binary: str, why: str
) -> None:
    """A failed start the runner records (a cluster node's missing build, a build removed
    mid-campaign), not a traceback; `run` refuses such a plan before it starts anything."""
    svc = _service(tmp_path, _engine(binary), Method(name="autoregressive"))
    with pytest.raises(ServiceFailed, match=f"could not execute {binary}: {why}"), svc:
        pass
    assert (svc.row["state"], svc.row["error"]) == ("failed", f"could not execute {binary}: {why}")
    assert svc.proc is None


class _TakenFirst(Local):
    """This machine, where another process takes the first port free_port hands out before the
    server binds it (the moment between is real: Ray's workers took one in CI)."""

    def __init__(self, taken: int) -> None:
        super().__init__(LocalHost(kind="local"))
        self.taken, self.given = taken, []

    def free_port(self, address: str) -> int:
        port = super().free_port(address) if self.given else self.taken
        self.given.append(port)
        return port


def test_a_port_taken_before_the_server_binds_it_is_replaced(
    tmp_path: Path, llama_server: str
) -> None:
    with _held_port() as held:
        host = _TakenFirst(held)
        cfg = _engine(llama_server)
        config = ServiceConfig(method=Method(name="autoregressive"), tp=1, engine=cfg)
        with Service(host, create(cfg), config, tmp_path, "test") as svc:
            taken, port = host.given
            assert svc.port == port != taken and svc.base_url.endswith(f":{port}")
            assert httpx.get(svc.base_url + "/health", timeout=5).status_code == 200
            assert f"--port {port} " in svc.row["launch_command"] and svc.row["error"] is None
            assert svc.row["state"] == "ready"
    first = tmp_path / f"autoregressive-tp1-{svc.service_id}.log"
    second = tmp_path / f"autoregressive-tp1-{svc.service_id}-start2.log"
    assert sorted(tmp_path.glob("autoregressive-tp1-*.log")) == sorted([first, second])
    assert f"couldn't bind HTTP server socket, hostname: 127.0.0.1, port: {taken}" in (
        first.read_text()
    )


def test_a_fixed_port_that_is_taken_fails_without_another_start(
    tmp_path: Path, llama_server: str
) -> None:
    with _held_port() as held:
        cfg = _engine(llama_server, port=held)
        svc = _service(tmp_path, cfg, Method(name="autoregressive"))
        with pytest.raises(ServiceFailed, match="exited during start-up") as err, svc:
            pass
    assert "couldn't bind HTTP server socket" in err.value.log_tail
    assert len(list(tmp_path.glob("autoregressive-tp1-*.log"))) == 1
