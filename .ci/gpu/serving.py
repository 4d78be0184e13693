"""What both recorders (record_vllm.py, record_sglang.py) do to a server on the device: start it
in its own session, wait until /health answers, send a request and keep its reply's bytes with
status and content type, stop it, and record a start that fails. Standard library only, so it
runs in any interpreter the engine lives in."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import time
from pathlib import Path

BAD_MODEL = "/tmp/models/no-such-model"


class Recorder:
    """One server port on 127.0.0.1 and the replies kept so far (name -> metadata)."""

    def __init__(self, port: int):
        self.port = port
        self.replies: dict[str, dict] = {}

    def call(self, method: str, path: str, body: dict | None = None) -> tuple[int, str, bytes]:
        """One request; the reply's status, content type and body (chunked framing removed)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        data = json.dumps(body).encode() if body is not None else None
        conn.request(
            method, path, body=data, headers={"Content-Type": "application/json"} if data else {}
        )
        reply = conn.getresponse()
        out = reply.status, reply.getheader("content-type") or "", reply.read()
        conn.close()
        return out

    def keep(self, out: Path, name: str, method: str, path: str, body: dict | None = None) -> int:
        """One request whose reply's bytes go to OUT/name as they came; returns the status."""
        status, ctype, data = self.call(method, path, body)
        (out / name).write_bytes(data)
        self.replies[name] = {
            "status": status,
            "content_type": ctype,
            "request": {"method": method, "path": path, "json": body},
        }
        print(f"{name}: {status}, {len(data)} bytes", flush=True)
        return status

    def healthy(self, proc: subprocess.Popen, limit_s: float = 300) -> float:
        """Seconds until GET /health answered 200; SystemExit if the server ends or is late."""
        t = time.monotonic()
        while time.monotonic() - t < limit_s:
            if proc.poll() is not None:
                raise SystemExit(f"the server exited with {proc.returncode} while starting")
            try:
                if self.call("GET", "/health")[0] == 200:
                    return time.monotonic() - t
            except OSError:
                pass
            time.sleep(1)
        raise SystemExit("the server did not become healthy")

    def failed_start(self, proc: subprocess.Popen, log: Path, limit_s: float = 180) -> None:
        """Wait for a start that must fail; keep its exit code beside its log."""
        try:
            code = proc.wait(limit_s)
        except subprocess.TimeoutExpired:
            stop(proc)
            code = None
        self.replies[log.name] = {"exit_code": code, "model": BAD_MODEL}
        print(f"startup failure: exit {code}, {log.stat().st_size} bytes of log", flush=True)

    def write(self, out: Path) -> None:
        (out / "replies.json").write_text(json.dumps(self.replies, indent=1) + "\n")


def launch(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start a server in its own session, its output into log."""
    print("starting:", " ".join(cmd), flush=True)
    return subprocess.Popen(
        cmd,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        env={**os.environ, **(env or {})},
        start_new_session=True,
    )


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the server's session, SIGKILL after 30 s; nothing if it already ended."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
