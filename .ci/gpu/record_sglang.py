"""Record what a real SGLang server answers, byte for byte, as specsweep's test fixtures.

    PYTHONPATH=/tmp/sglang-site python3 .ci/gpu/record_sglang.py MODEL_DIR OUT_DIR

Standard library only (the SGLang folder need not hold httpx). Starts
``sglang.launch_server`` on 127.0.0.1 with n-gram speculation (4 drafted tokens in one chain:
``--speculative-num-draft-tokens 5`` counts the root) and ``--enable-metrics``, without CUDA
graphs (start-up time is what the lent machine lacks; the replies' shape does not depend on
them), and writes into OUT_DIR:

- ``server-info-before.json`` / ``server-info-after.json`` (GET /server_info, else
  /get_server_info, before and after the requests: ``avg_spec_accept_length``),
  ``model-info.json`` (GET /get_model_info), ``models.json`` (GET /v1/models);
- ``generate-stream.sse`` (POST /generate, streamed, 64 new tokens, temperature 0) and
  ``chat-stream.sse`` (POST /v1/chat/completions, streamed with usage and
  ``return_spec_tokens_details``), the bodies as sent (chunked framing removed);
- ``metrics-ngram.txt`` (GET /metrics after the requests), ``flush-cache.txt`` (POST
  /flush_cache);
- ``startup-failure.log``: the output of a start on a model folder that does not exist.

``replies.json`` keeps each reply's status, content type and request.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

PORT = 30011
PROMPT = (
    "Copy this list exactly, one item per line, twice: alpha, beta, gamma, delta, epsilon, "
    "zeta, eta, theta, iota, kappa."
)
NGRAM = [
    "--speculative-algorithm",
    "NGRAM",
    "--speculative-num-draft-tokens",
    "5",
    "--speculative-ngram-max-bfs-breadth",
    "1",
    "--speculative-ngram-max-trie-depth",
    "4",
]
replies: dict[str, dict] = {}


def call(method: str, path: str, body: dict | None = None) -> tuple[int, str | None, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", PORT, timeout=120)
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"} if data else {}
    conn.request(method, path, body=data, headers=headers)
    reply = conn.getresponse()
    out = reply.status, reply.getheader("content-type"), reply.read()
    conn.close()
    return out


def start(model: str, extra: list[str], log: Path) -> subprocess.Popen:
    cmd = [
        sys.executable,
        "-m",
        "sglang.launch_server",
        "--model-path",
        model,
        "--host",
        "127.0.0.1",
        "--port",
        str(PORT),
        "--mem-fraction-static",
        "0.5",
        "--enable-metrics",
        "--disable-cuda-graph",
        *extra,
    ]
    print("starting:", " ".join(cmd), flush=True)
    return subprocess.Popen(
        cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True
    )


def healthy(proc: subprocess.Popen, limit_s: float = 300) -> float:
    t = time.monotonic()
    while time.monotonic() - t < limit_s:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with {proc.returncode} while starting")
        try:
            if call("GET", "/health")[0] == 200:
                return time.monotonic() - t
        except OSError:
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


def keep(out: Path, name: str, method: str, path: str, body: dict | None = None) -> int:
    status, ctype, data = call(method, path, body)
    (out / name).write_bytes(data)
    replies[name] = {
        "status": status,
        "content_type": ctype,
        "request": {"method": method, "path": path, "json": body},
    }
    print(f"{name}: {status}, {len(data)} bytes", flush=True)
    return status


def info(out: Path, name: str) -> None:
    if keep(out, name, "GET", "/server_info") != 200:
        keep(out, name, "GET", "/get_server_info")


def speculative(model: str, out: Path) -> None:
    proc = start(model, NGRAM, out / "server-ngram.log")
    try:
        print(f"n-gram server healthy after {healthy(proc):.0f} s", flush=True)
        info(out, "server-info-before.json")
        keep(out, "model-info.json", "GET", "/get_model_info")
        keep(out, "models.json", "GET", "/v1/models")
        keep(
            out,
            "generate-stream.sse",
            "POST",
            "/generate",
            {
                "text": PROMPT,
                "stream": True,
                "sampling_params": {"max_new_tokens": 64, "temperature": 0},
            },
        )
        keep(
            out,
            "chat-stream.sse",
            "POST",
            "/v1/chat/completions",
            {
                "model": "default",
                "messages": [{"role": "user", "content": PROMPT}],
                "max_tokens": 96,
                "temperature": 0,
                "stream": True,
                "stream_options": {"include_usage": True},
                "return_spec_tokens_details": True,
            },
        )
        for _ in range(3):
            call(
                "POST",
                "/generate",
                {"text": PROMPT, "sampling_params": {"max_new_tokens": 96, "temperature": 0}},
            )
        keep(out, "metrics-ngram.txt", "GET", "/metrics")
        info(out, "server-info-after.json")
        keep(out, "flush-cache.txt", "POST", "/flush_cache")
    finally:
        stop(proc)


def failure(out: Path) -> None:
    log = out / "startup-failure.log"
    proc = start("/tmp/models/no-such-model", [], log)
    try:
        code = proc.wait(180)
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
        failure(out)
    finally:
        (out / "replies.json").write_text(json.dumps(replies, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
