"""Timing error added by an SSH port forward: the same streams read directly, through
specsweep's paramiko forward and through OpenSSH `ssh -L` processes (a benchmark: it prints
figures, it asserts nothing).

    .venv/bin/python tests/bench/bench_tunnel.py [--concurrency 1,16,64] [--rounds 3]

A real sshd on 127.0.0.1 (tests/support/sshd.py, its own host key in a known_hosts file) and
a vLLM-shaped ground-truth server (tests/support/truth_server.py: first chunk after 50 ms,
then one every 10 ms, each stamped with perf_counter() as it is sent) run in their own
processes. Paths: `direct`; `paramiko` and `ssh -tt -L`, what a campaign uses
(`SSH.forward()` of a host whose plan says forward: paramiko, threads in this process, which
also runs the client; or forward: openssh, an ssh process holding a terminal session, with
StrictHostKeyChecking yes against the same known_hosts); and `ssh -N -L`, the same ssh
process without a session (then sshd leaves Nagle's algorithm on). specsweep's client
(collect.http.client.stream, warmed to the concurrency first, as in bench_client.py) records
each text chunk's kernel arrival stamp; error = arrival stamp - server send stamp. The
paths alternate order from round to round (rotated), so drift of the machine hits each.

A second table (`--fresh N` per path and round) times a request on a NEW connection, what
a forward adds when the pool opens one (pool growth, a resend after NoReply): from the
connect call to the first byte of the reply to `GET /health`, raw sockets, one at a time.
Results of 2026-12-04: docs/benchmarks-tunnel.md.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests" / "bench")]

from bench_client import (  # noqa: E402
    CHUNKS,
    GAP_S,
    OURS,
    PATH,
    TTFT_S,
    errors,
    fidelity,
    p99,
    truth_server,
)  # fmt: skip

from specsweep.collect.hosts.ssh import SSH  # noqa: E402
from specsweep.collect.hosts.tunnel import OpenSSHTunnel, ssh_command  # noqa: E402
from specsweep.collect.plan.components import SSHHost  # noqa: E402
from tests.support.sshd import Sshd, running_sshd  # noqa: E402

PATHS = ["direct", "paramiko", "ssh -N -L", "ssh -tt -L"]


def _host(sshd: Sshd, folder: Path, forward: str) -> SSH:
    return SSH(SSHHost(
        kind="ssh", name=f"bench-{forward}", address="127.0.0.1", port=sshd.port,
        user=getpass.getuser(), key_file=str(sshd.key_file),
        known_hosts_file=str(sshd.known_hosts), use_ssh_config=False,
        workdir=str(folder / "remote"), tunnel=True, forward=forward,
    ))  # fmt: skip


def measure(args: argparse.Namespace, urls: dict[str, str]) -> dict[tuple[str, int], list]:
    found: dict[tuple[str, int], list] = {}
    for r in range(args.rounds):
        order = PATHS[r % len(PATHS) :] + PATHS[: r % len(PATHS)]
        for streams in args.concurrency:
            for name in order:
                try:
                    runs = asyncio.run(fidelity(OURS, urls[name] + PATH, streams, args.requests))
                except RuntimeError as exc:  # say which path failed: the client's error does not
                    raise RuntimeError(f"{name}, {streams} streams, round {r + 1}: {exc}") from None
                found.setdefault((name, streams), []).extend(runs)
    return found


async def first_byte(url: str) -> float:
    """Seconds from opening a new connection to url's port to the first byte of the reply
    to `GET /health` on it."""
    port = int(url.rsplit(":", 1)[1])
    started = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    if not await reader.read(1):
        raise RuntimeError(f"{url} closed the connection without a reply")
    took = time.perf_counter() - started
    writer.close()
    await writer.wait_closed()
    return took


def fresh(args: argparse.Namespace, urls: dict[str, str]) -> None:
    """The new-connection table: per path, quantiles and the median added to direct's."""
    found: dict[str, list[float]] = {name: [] for name in PATHS}
    for r in range(args.rounds):
        for name in PATHS[r % len(PATHS) :] + PATHS[: r % len(PATHS)]:
            found[name] += [asyncio.run(first_byte(urls[name])) for _ in range(args.fresh)]
    base = statistics.median(found["direct"])
    print(
        f"\nNew connection to first reply byte (GET /health), ms; {args.rounds} rounds of "
        f"{args.fresh} connections per path, one at a time"
    )
    print(
        "| path | connections | median | p90 | p99 | max | median added to direct |\n"
        "|---|---:|---:|---:|---:|---:|---:|"
    )
    for name in PATHS:
        xs = found[name]
        p90 = statistics.quantiles(xs, n=10, method="inclusive")[8]
        cells = [statistics.median(xs), p90, p99(xs), max(xs), statistics.median(xs) - base]
        print(f"| {name} | {len(xs)} | " + " | ".join(f"{x * 1e3:.3f}" for x in cells) + " |")


def table(args: argparse.Namespace, found: dict[tuple[str, int], list]) -> None:
    print(
        f"\nMeasurement error, ms (arrival stamp - server send stamp); TTFT {TTFT_S * 1e3:g} "
        f"ms, a chunk every {GAP_S * 1e3:g} ms, {CHUNKS} chunks; {args.rounds} rounds of "
        f"{args.requests} requests per path and stream count"
    )
    print(
        "| streams | path | requests | chunks | chunk median | chunk p99 | chunk max "
        "| TTFT median | TTFT p99 |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|"
    )
    for streams in args.concurrency:
        for name in PATHS:
            runs = found[(name, streams)]
            ttft, chunks = errors(runs)
            cells = [
                statistics.median(chunks),
                p99(chunks),
                max(chunks),
                statistics.median(ttft),
                p99(ttft),
            ]
            print(
                f"| {streams} | {name} | {len(runs)} | {len(chunks)} | "
                + " | ".join(f"{x * 1e3:.3f}" for x in cells)
                + " |"
            )


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--concurrency", default="1,16,64", type=lambda s: [int(x) for x in s.split(",")]
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--requests",
        type=int,
        default=16,
        help="requests per path, stream count and round (at least one batch)",
    )
    parser.add_argument(
        "--fresh",
        type=int,
        default=20,
        help="new connections per path and round (0: no such table)",
    )
    args = parser.parse_args(argv)
    print(
        f"bench_tunnel: {os.cpu_count()} cores, Python {sys.version.split()[0]}, load average "
        + " ".join(f"{x:.2f}" for x in os.getloadavg())
    )
    started = time.perf_counter()
    truth = truth_server(str(TTFT_S), str(GAP_S), str(CHUNKS), "--shape", "vllm")
    with tempfile.TemporaryDirectory() as tmp, running_sshd(Path(tmp)) as sshd, \
            truth as (url, _), _host(sshd, Path(tmp), "paramiko") as paramiko_host, \
            _host(sshd, Path(tmp), "openssh") as openssh_host:  # fmt: skip
        port = int(url.rsplit(":", 1)[1])
        target = {
            "hostname": "127.0.0.1",
            "port": sshd.port,
            "username": getpass.getuser(),
            "key_filename": str(sshd.key_file),
        }
        command = ssh_command(target, "127.0.0.1", sshd.known_hosts, False, False, 5)
        plain = OpenSSHTunnel(command, ("127.0.0.1", port), 5, pty=False)
        urls = {
            "direct": url,
            "paramiko": f"http://127.0.0.1:{paramiko_host.forward(port)}",
            "ssh -N -L": f"http://127.0.0.1:{plain.port}",
            "ssh -tt -L": f"http://127.0.0.1:{openssh_host.forward(port)}",
        }
        kinds = (paramiko_host.transport("127.0.0.1"), openssh_host.transport("127.0.0.1"))
        print(f"forwards: paramiko -> {kinds[0]}, ssh -tt -L -> {kinds[1]}")
        try:
            table(args, measure(args, urls))
            if args.fresh:
                fresh(args, urls)
        finally:
            plain.close()
    print(
        f"\n{time.perf_counter() - started:.0f} s; load average after "
        + " ".join(f"{x:.2f}" for x in os.getloadavg())
    )


if __name__ == "__main__":
    main(sys.argv[1:])
