"""Per-request cost of the live progress display on the measurement loop (a benchmark: it
prints figures).

    .venv/bin/python tests/bench/bench_progress.py [--jobs 60] [--gpus 8] [--requests 20000]

A campaign-sized ETA (`--jobs` configurations of 1-4 GPUs packed on `--gpus` GPUs, the
first ones running) takes `--requests` calls of `CampaignProgress.request_done`, the call
the measurement loop makes after every request, with the display off and on (rendering
to a throw-away console, refreshed by rich's own thread as in a campaign). Also printed:
one full ETA computation (`Eta.seconds_left`, the scheduler replay), which is what every
request paid before the ETA moved to the display's refresh.
"""

from __future__ import annotations

import argparse
import io
import time

from rich.console import Console

from specsweep.collect.run import progress as progress_module
from specsweep.collect.run.progress import CampaignProgress, Eta
from specsweep.collect.scheduling.schedule import Job

# the display renders as in a terminal, into a buffer (not onto the bench's output)
progress_module.Console = lambda **_: Console(file=io.StringIO(), force_terminal=True, width=120)


def campaign(jobs: int, gpus: int, enabled: bool) -> tuple[CampaignProgress, list[str]]:
    eta = Eta(gpus=list(range(gpus)), packed=True)
    progress = CampaignProgress(0, enabled=enabled, eta=eta)
    keys = []
    for i in range(jobs):
        job = Job(f"p:{i}", 1 + i % 4, 300.0 + 10 * i)
        progress.job_added(job, requests=200, fixed_s=60.0)
        keys.append(job.key)
    progress.add_total(jobs * 200)
    for key in keys[: gpus // 2]:
        progress.job_started(key)
    return progress, keys[: gpus // 2]


def per_request_us(jobs: int, gpus: int, n: int, enabled: bool) -> float:
    progress, running = campaign(jobs, gpus, enabled)
    with progress:
        start = time.perf_counter()
        for i in range(n):
            progress.request_done(running[i % len(running)])
        elapsed = time.perf_counter() - start
        progress.seconds_left()
    return elapsed / n * 1e6


def replay_us(jobs: int, gpus: int, n: int = 50) -> float:
    progress, _ = campaign(jobs, gpus, False)
    start = time.perf_counter()
    for _ in range(n):
        progress.eta.seconds_left()
    return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=60)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--requests", type=int, default=20000)
    args = parser.parse_args()
    print(f"ETA of {args.jobs} jobs packed on {args.gpus} GPUs, {args.requests} requests")
    for enabled in (False, True):
        cost = per_request_us(args.jobs, args.gpus, args.requests, enabled)
        print(f"  request_done, display {'on ' if enabled else 'off'}: {cost:9.1f} us/request")
    print(f"  one ETA computation (scheduler replay): {replay_us(args.jobs, args.gpus):9.1f} us")


if __name__ == "__main__":
    main()
