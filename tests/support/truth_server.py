"""An engine-shaped server in its own process, for timing ground truth: every event carries
the perf_counter() of its sending (CLOCK_MONOTONIC, shared with the client's process).

    python tests/support/truth_server.py TTFT_S GAP_S N_CHUNKS [--shape vllm]
    python tests/support/truth_server.py 0 0 N_CHUNKS --capacity   # for tests/bench

It prints its port and serves until stdin closes. --shape picks SGLang's /generate (the
default) or vLLM's /v1/chat/completions. --capacity answers every chat request at once with
one pre-built reply of N_CHUNKS chat chunks (encoded at start-up, written in one call), so
the server costs one write per request and a client's ingest rate is what gets measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: tests.support
from tests.support.shaped_servers import Reply, Request, Script, SGLangServer, VLLMServer, _chunk  # noqa: E402


class CapacityServer(VLLMServer):
    """Chat replies as fast as the socket takes them: one pre-built stream per request."""

    def __init__(self, n_chunks: int):
        super().__init__(Script(chunk_tokens=(1,) * n_chunks))
        events = [_chunk({"content": f"t{i} "}) for i in range(n_chunks)]
        events.append(_chunk({}, finish_reason="length"))
        body = b"".join(_framed(json.dumps(e)) for e in events) + _framed("[DONE]")
        self.payload = (
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n" + body + b"0\r\n\r\n"
        )

    async def chat(self, req: Request, reply: Reply) -> None:
        # a send buffer that holds the whole reply: the kernel delivers it as the client
        # reads, without waking this process (which may wait for a core) for every part
        sock = reply.writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 2 * len(self.payload))
        reply.writer.write(self.payload)
        await reply.writer.drain()


def _framed(text: str) -> bytes:
    """One server-sent event as one HTTP chunk, as Reply.event sends it."""
    data = f"data: {text}\n\n".encode()
    return b"%x\r\n%s\r\n" % (len(data), data)


async def main(args: argparse.Namespace) -> None:
    if args.capacity:
        server = CapacityServer(args.n_chunks)
    else:
        script = Script(
            ttft_s=args.ttft_s, gap_s=args.gap_s, chunk_tokens=(1,) * args.n_chunks, stamp=True
        )
        server = VLLMServer(script) if args.shape == "vllm" else SGLangServer(script)
    listener = await asyncio.start_server(server.connection, "127.0.0.1", 0, backlog=1024)
    print(listener.sockets[0].getsockname()[1], flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)  # until the client closes our stdin
    listener.close()


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ttft_s", type=float)
    parser.add_argument("gap_s", type=float)
    parser.add_argument("n_chunks", type=int)
    parser.add_argument("--shape", choices=("sglang", "vllm"), default="sglang")
    parser.add_argument("--capacity", action="store_true")
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse(sys.argv[1:])))
