"""Record what a real vLLM server answers, byte for byte, as specsweep's test fixtures.

    python3 .ci/gpu/record_vllm.py MODEL_DIR OUT_DIR

Starts ``vllm.entrypoints.openai.api_server`` three times on 127.0.0.1 and writes into OUT_DIR
(copied into tests/data/vllm-0.24/ by hand, with README.md saying where each came from):

- n-gram speculation (K=4) with ``VLLM_SERVER_DEV_MODE=1``: ``version.json``, ``models.json``,
  ``chat-stream.sse`` (a streamed chat reply with the final usage chunk), ``completion-stream.sse``,
  ``metrics-ngram.txt`` (after the requests, so the speculative counters are not zero) and
  ``reset-dev-mode.txt`` (``POST /reset_prefix_cache``);
- autoregressive without dev mode: ``metrics-autoregressive.txt`` and ``reset-no-dev-mode.txt``;
- a model folder that does not exist: ``startup-failure.log`` (the server's output, its exit code
  in ``replies.json``).

``replies.json`` keeps each reply's status, content type and the request that asked for it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

PORT = 8011
BASE = f"http://127.0.0.1:{PORT}"
PROMPT = (
    "Copy this list exactly, one item per line, twice: alpha, beta, gamma, delta, epsilon, "
    "zeta, eta, theta, iota, kappa."
)
replies: dict[str, dict] = {}


def start(model: str, extra: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    cmd = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        model,
        "--served-model-name",
        "smollm2",
        "--host",
        "127.0.0.1",
        "--port",
        str(PORT),
        "--max-model-len",
        "4096",
        "--gpu-memory-utilization",
        "0.5",
        *extra,
    ]
    print("starting:", " ".join(cmd), flush=True)
    return subprocess.Popen(
        cmd,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        env={**os.environ, **env},
        start_new_session=True,
    )


def healthy(proc: subprocess.Popen, limit_s: float = 240) -> float:
    t = time.monotonic()
    while time.monotonic() - t < limit_s:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with {proc.returncode} while starting")
        try:
            if httpx.get(f"{BASE}/health", timeout=2).status_code == 200:
                return time.monotonic() - t
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise SystemExit("the server did not become healthy")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:  # it ended by itself (a failed start): nothing to stop
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def keep(out: Path, name: str, method: str, path: str, body: dict | None = None) -> None:
    """One request; its reply's bytes go to OUT/name exactly as they came."""
    with httpx.Client(timeout=60) as client, client.stream(method, BASE + path, json=body) as r:
        data = b"".join(r.iter_raw())
    (out / name).write_bytes(data)
    replies[name] = {
        "status": r.status_code,
        "content_type": r.headers.get("content-type"),
        "request": {"method": method, "path": path, "json": body},
    }
    print(f"{name}: {r.status_code}, {len(data)} bytes", flush=True)


def chat(stream: bool, max_tokens: int = 96) -> dict:
    return {
        "model": "smollm2",
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": stream,
        **({"stream_options": {"include_usage": True}} if stream else {}),
    }


def speculative(model: str, out: Path) -> None:
    spec = json.dumps({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4})
    proc = start(
        model,
        ["--speculative-config", spec],
        {"VLLM_SERVER_DEV_MODE": "1"},
        out / "server-ngram.log",
    )
    try:
        print(f"n-gram server healthy after {healthy(proc):.0f} s", flush=True)
        keep(out, "version.json", "GET", "/version")
        keep(out, "models.json", "GET", "/v1/models")
        keep(out, "chat-stream.sse", "POST", "/v1/chat/completions", chat(True))
        keep(
            out,
            "completion-stream.sse",
            "POST",
            "/v1/completions",
            {
                "model": "smollm2",
                "prompt": PROMPT,
                "max_tokens": 64,
                "temperature": 0,
                "stream": True,
                "stream_options": {"include_usage": True},
            },
        )
        for _ in range(3):
            httpx.post(f"{BASE}/v1/chat/completions", json=chat(False), timeout=60)
        keep(out, "metrics-ngram.txt", "GET", "/metrics")
        keep(out, "reset-dev-mode.txt", "POST", "/reset_prefix_cache")
    finally:
        stop(proc)


def autoregressive(model: str, out: Path) -> None:
    proc = start(model, [], {}, out / "server-autoregressive.log")
    try:
        print(f"autoregressive server healthy after {healthy(proc):.0f} s", flush=True)
        httpx.post(f"{BASE}/v1/chat/completions", json=chat(False), timeout=60)
        keep(out, "metrics-autoregressive.txt", "GET", "/metrics")
        keep(out, "reset-no-dev-mode.txt", "POST", "/reset_prefix_cache")
    finally:
        stop(proc)


def failure(out: Path) -> None:
    log = out / "startup-failure.log"
    proc = start("/tmp/models/no-such-model", [], {}, log)
    try:
        code = proc.wait(120)
    except subprocess.TimeoutExpired:
        stop(proc)
        code = None
    replies["startup-failure.log"] = {"exit_code": code, "model": "/tmp/models/no-such-model"}
    print(f"startup failure: exit {code}, {log.stat().st_size} bytes of log", flush=True)


def main(argv: list[str]) -> int:
    model, out = argv[0], Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    try:
        speculative(model, out)
        autoregressive(model, out)
        failure(out)
    finally:
        (out / "replies.json").write_text(json.dumps(replies, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
