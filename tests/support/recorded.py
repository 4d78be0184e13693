"""Replaying replies recorded from a real engine (tests/data/<engine>-<version>/, made by
.ci/gpu/record_*.py) over a real socket: each reply with its recorded status and content
type, a streamed reply event by event. Shared by test_vllm_recorded and test_sglang_recorded."""

from __future__ import annotations

import asyncio
import json
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import yaml

from tests.support.collect_cli import run_here
from tests.support.shaped_http import REASONS, Reply, Request
from tests.support.shaped_servers import Script, ShapedServer


class Recording:
    """One recorded folder: its files and replies.json (each reply's status, content type)."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.replies = json.loads((folder / "replies.json").read_text())

    def failed_start(
        self, tmp: Path, program: str, engine: Callable[[str], dict[str, Any]]
    ) -> tuple[str, ...]:
        """Run a one-request campaign whose server is a stand-in `program` (in tmp) that prints
        the recorded startup-failure.log and exits 1, as the real one did; engine(path of the
        stand-in) is the plan's engine. The services row's (state, error, log_tail)."""
        fake = tmp / program
        fake.write_text(f"#!/bin/sh\ncat '{self.folder / 'startup-failure.log'}'\nexit 1\n")
        fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
        text = yaml.safe_dump(
            {
                "name": "recorded-failure",
                "repeat": 1,  # one round: this test is not about rounds
                "host": {"kind": "local"},
                "engine": {**engine(str(fake)), "startup_timeout_s": 20},
                "methods": [{"name": "autoregressive"}],
                "workloads": [
                    {"name": "w", "prompts": {"kind": "inline", "texts": ["x"]}, "max_tokens": [4]}
                ],
            }
        )
        db = run_here(text, tmp)
        with duckdb.connect(str(db), read_only=True) as con:
            return con.execute("SELECT state, error, log_tail FROM services").fetchone()

    def events(self, name: str) -> list[dict]:
        """A recorded stream's JSON events, parsed plainly ([DONE] left out)."""
        lines = (self.folder / name).read_text().splitlines()
        return [json.loads(x[6:]) for x in lines if x.startswith("data: ") and x != "data: [DONE]"]


class Replay(ShapedServer):
    """Answers each "METHOD path" with the recorded reply of that file name, 404 otherwise;
    keeps the request bodies. A stream's first event waits `first_event_s` (a known TTFT)."""

    def __init__(self, recording: Recording, routes: dict[str, str], first_event_s: float = 0):
        super().__init__(Script())
        self.recording, self.routes, self.first_event_s = recording, routes, first_event_s

    async def route(self, req: Request, reply: Reply) -> None:
        name = self.routes.get(f"{req.method} {req.path}")
        if name is None:
            await reply.send(404, {"detail": "Not Found"})
            return
        self.bodies.append(req.json())
        meta = self.recording.replies[name]
        data = (self.recording.folder / name).read_bytes()
        ctype = meta.get("content_type") or ""
        if ctype.startswith("text/event-stream"):
            await self._stream(reply, data)
        elif ctype:
            await reply.send(meta["status"], data.decode(), ctype)
        else:  # a reply recorded without a Content-Type is sent without one
            head = f"HTTP/1.1 {meta['status']} {REASONS[meta['status']]}\r\n"
            reply.writer.write(f"{head}Content-Length: {len(data)}\r\n\r\n".encode() + data)
            await reply.writer.drain()

    async def _stream(self, reply: Reply, data: bytes) -> None:
        await reply.start_stream()
        await asyncio.sleep(self.first_event_s)
        for event in data.split(b"\n\n"):
            if event.strip():
                chunk = event + b"\n\n"
                reply.writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                await reply.writer.drain()
                await asyncio.sleep(0.001)
        reply.writer.write(b"0\r\n\r\n")
        await reply.writer.drain()
