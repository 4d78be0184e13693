"""An SGLang-shaped server in its own process, for timing ground truth: every event carries
the perf_counter() of its sending (CLOCK_MONOTONIC, shared with the client's process).

    python tests/engines/truth_server.py TTFT_S GAP_S N_CHUNKS   # prints the port, serves
                                                                # until stdin closes
"""

from __future__ import annotations

import asyncio
import sys

from shaped_servers import Script, SGLangServer


async def main(ttft_s: float, gap_s: float, n_chunks: int) -> None:
    server = SGLangServer(Script(ttft_s=ttft_s, gap_s=gap_s, chunk_tokens=(1,) * n_chunks,
                                 stamp=True))
    listener = await asyncio.start_server(server.connection, "127.0.0.1", 0, backlog=512)
    print(listener.sockets[0].getsockname()[1], flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)  # until the test closes our stdin
    listener.close()


if __name__ == "__main__":
    asyncio.run(main(float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])))
