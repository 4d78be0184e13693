"""Record what a real SGLang server answers, byte for byte, as specsweep's test fixtures.

    PYTHONPATH=/tmp/sglang-site python3 .ci/gpu/record_sglang.py MODEL_DIR OUT_DIR

Standard library only (.ci/gpu/serving.py: the SGLang folder need not hold httpx). Starts
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

import sys
from pathlib import Path

from serving import BAD_MODEL, Recorder, launch, stop

rec = Recorder(30011)
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


def start(model: str, extra: list[str], log: Path):
    cmd = [sys.executable, "-m", "sglang.launch_server", "--model-path", model,
           "--host", "127.0.0.1", "--port", str(rec.port), "--mem-fraction-static", "0.5",
           "--enable-metrics", "--disable-cuda-graph", *extra]  # fmt: skip
    return launch(cmd, log)


def info(out: Path, name: str) -> None:
    if rec.keep(out, name, "GET", "/server_info") != 200:
        rec.keep(out, name, "GET", "/get_server_info")


def speculative(model: str, out: Path) -> None:
    proc = start(model, NGRAM, out / "server-ngram.log")
    try:
        print(f"n-gram server healthy after {rec.healthy(proc):.0f} s", flush=True)
        info(out, "server-info-before.json")
        rec.keep(out, "model-info.json", "GET", "/get_model_info")
        rec.keep(out, "models.json", "GET", "/v1/models")
        generate = {
            "text": PROMPT,
            "stream": True,
            "sampling_params": {"max_new_tokens": 64, "temperature": 0},
        }
        rec.keep(out, "generate-stream.sse", "POST", "/generate", generate)
        chat = {
            "model": "default",
            "messages": [{"role": "user", "content": PROMPT}],
            "max_tokens": 96,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
            "return_spec_tokens_details": True,
        }
        rec.keep(out, "chat-stream.sse", "POST", "/v1/chat/completions", chat)
        for _ in range(3):
            rec.call(
                "POST",
                "/generate",
                {"text": PROMPT, "sampling_params": {"max_new_tokens": 96, "temperature": 0}},
            )
        rec.keep(out, "metrics-ngram.txt", "GET", "/metrics")
        info(out, "server-info-after.json")
        rec.keep(out, "flush-cache.txt", "POST", "/flush_cache")
    finally:
        stop(proc)


def main(argv: list[str]) -> int:
    model, out = argv[0], Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    try:
        speculative(model, out)
        log = out / "startup-failure.log"
        rec.failed_start(start(BAD_MODEL, [], log), log)
    finally:
        rec.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
