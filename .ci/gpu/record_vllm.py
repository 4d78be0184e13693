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
import sys
from pathlib import Path

from serving import BAD_MODEL, Recorder, launch, stop

rec = Recorder(8011)
PROMPT = (
    "Copy this list exactly, one item per line, twice: alpha, beta, gamma, delta, epsilon, "
    "zeta, eta, theta, iota, kappa."
)


def start(model: str, extra: list[str], env: dict[str, str], log: Path):
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model,
           "--served-model-name", "smollm2", "--host", "127.0.0.1", "--port", str(rec.port),
           "--max-model-len", "4096", "--gpu-memory-utilization", "0.5", *extra]  # fmt: skip
    return launch(cmd, log, env)


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
        print(f"n-gram server healthy after {rec.healthy(proc):.0f} s", flush=True)
        rec.keep(out, "version.json", "GET", "/version")
        rec.keep(out, "models.json", "GET", "/v1/models")
        rec.keep(out, "chat-stream.sse", "POST", "/v1/chat/completions", chat(True))
        completion = {
            "model": "smollm2",
            "prompt": PROMPT,
            "max_tokens": 64,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        rec.keep(out, "completion-stream.sse", "POST", "/v1/completions", completion)
        for _ in range(3):
            rec.call("POST", "/v1/chat/completions", chat(False))
        rec.keep(out, "metrics-ngram.txt", "GET", "/metrics")
        rec.keep(out, "reset-dev-mode.txt", "POST", "/reset_prefix_cache")
    finally:
        stop(proc)


def autoregressive(model: str, out: Path) -> None:
    proc = start(model, [], {}, out / "server-autoregressive.log")
    try:
        print(f"autoregressive server healthy after {rec.healthy(proc):.0f} s", flush=True)
        rec.call("POST", "/v1/chat/completions", chat(False))
        rec.keep(out, "metrics-autoregressive.txt", "GET", "/metrics")
        rec.keep(out, "reset-no-dev-mode.txt", "POST", "/reset_prefix_cache")
    finally:
        stop(proc)


def main(argv: list[str]) -> int:
    model, out = argv[0], Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    try:
        speculative(model, out)
        autoregressive(model, out)
        log = out / "startup-failure.log"
        rec.failed_start(start(BAD_MODEL, [], {}, log), log, 120)
    finally:
        rec.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
