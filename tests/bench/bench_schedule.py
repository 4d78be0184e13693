"""Schedule fidelity of specsweep's open-loop sender (a benchmark: it prints figures).

    .venv/bin/python tests/bench/bench_schedule.py [--rates 10,100,500] [--seconds 5] [--rounds 2]

A vLLM-shaped ground-truth server in its own process (tests/support/truth_server.py) answers
each chat request with its first chunk after 50 ms and then one chunk every 10 ms, 20 chunks
in all, so a request stays in flight about 250 ms and the sender reads streams while it keeps
its schedule (at 500 requests/s about 125 streams at once). For each rate, a Poisson schedule
of rate x seconds requests is sent through collect.run.openloop.send_schedule with the real vLLM
adapter and client, uncapped; each request's lag is its t0 (the actual send, stamped by
collect.http.client.stream) minus its scheduled time. Printed per rate: the lag's p50, p99
and max in ms, the sender's CPU seconds per second of window (this process), and the same
with the last-millisecond spin off (spin 0: plain asyncio sleeps). Rounds alternate which
variant goes first, so drift of the machine hits both.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from specsweep.collect.engines import create
from specsweep.collect.engines.vllm import VLLMEngine
from specsweep.collect.http import client
from specsweep.collect.plan.load import OpenLoad
from specsweep.collect.plan.workloads import Prompt
from specsweep.collect.run import openloop

ENGINES = Path(__file__).resolve().parents[1] / "support"
TTFT_S, GAP_S, CHUNKS = 0.05, 0.01, 20


@contextmanager
def truth_server() -> Iterator[str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            str(ENGINES / "truth_server.py"),
            str(TTFT_S),
            str(GAP_S),
            str(CHUNKS),
            "--shape",
            "vllm",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ENGINES,
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None
        yield f"http://127.0.0.1:{int(proc.stdout.readline())}"
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)


async def one_window(url: str, rate: float, seconds: float, spin_s: float) -> dict[str, float]:
    engine = create(VLLMEngine(kind="vllm", model="m", request_timeout_s=60))
    load = OpenLoad(arrival="poisson", rate=[rate], duration_s=seconds, seed=3)
    arrivals = openloop.schedule(load, rate, [Prompt("bench/0", "x")], None, CHUNKS)
    lags: list[float] = []
    failed = 0
    async with client.http_client(timeout=None) as http:
        ctx = SimpleNamespace(engine=engine, http=http, base_url=url)
        bodies = await openloop.prepare(ctx, arrivals, None)
        cpu0, t_start = time.process_time(), time.perf_counter()

        def done(a: openloop.Arrival, res: client.Result) -> None:
            nonlocal failed
            lags.append(res.t0 - t_start - a.t_s)
            failed += not res.ok

        await openloop.send_schedule(ctx, arrivals, bodies, None, t_start, done, spin_s)
        wall, cpu = time.perf_counter() - t_start, time.process_time() - cpu0
    ms = np.asarray(lags) * 1000
    return {
        "n": len(ms),
        "p50": float(np.quantile(ms, 0.5)),
        "p99": float(np.quantile(ms, 0.99)),
        "max": float(ms.max()),
        "cpu": cpu / wall,
        "failed": failed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="10,100,500")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    print(
        f"server: first chunk {TTFT_S * 1000:.0f} ms, then {CHUNKS - 1} chunks "
        f"{GAP_S * 1000:.0f} ms apart; {args.seconds:g} s per window, Poisson, uncapped"
    )
    print("rate/s  spin   n     lag p50 ms  lag p99 ms  lag max ms  sender CPU  failed")
    with truth_server() as url:
        for rate in rates:
            results: dict[float, list[dict[str, float]]] = {openloop.SPIN_S: [], 0.0: []}
            for r in range(args.rounds):
                order = [openloop.SPIN_S, 0.0] if r % 2 == 0 else [0.0, openloop.SPIN_S]
                for spin in order:
                    results[spin].append(asyncio.run(one_window(url, rate, args.seconds, spin)))
            for spin, runs in results.items():
                for run in runs:
                    print(
                        f"{rate:6g}  {spin * 1000:3g}ms {run['n']:5.0f}  {run['p50']:10.3f}  "
                        f"{run['p99']:10.3f}  {run['max']:10.3f}  {run['cpu']:9.0%}  "
                        f"{run['failed']:6.0f}"
                    )
            med = {s: statistics.median(r["p99"] for r in runs) for s, runs in results.items()}
            print(
                f"        median p99 lag: spin {med[openloop.SPIN_S]:.3f} ms, "
                f"no spin {med[0.0]:.3f} ms"
            )


if __name__ == "__main__":
    main()
