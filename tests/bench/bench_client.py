"""Timing fidelity and capacity of specsweep's streaming client next to a vLLM-style client,
in the same run, against the same ground-truth servers (a benchmark: it prints figures).

    .venv/bin/python tests/bench/bench_client.py [--concurrency 1,16,64,256] [--rounds 3]

Fidelity: a vLLM-shaped server in its own process (tests/support/truth_server.py) sends the
first chunk 50 ms after a request and then one every 10 ms, stamping each event with its
perf_counter() at sending (CLOCK_MONOTONIC, shared by the processes). A chunk's error is
the client's arrival stamp minus that send stamp; TTFT's error is the first text chunk's.
Each client first sends one unmeasured batch of `streams` requests, so its pool holds a
connection per stream when measuring starts (`--cold`: 4 warm-up requests, the measured
batch opens the other connections itself, all at once).
Capacity: a second server process answers each request at once with one pre-built reply
of many chunks (one write per request, so the server costs next to nothing; its CPU share
over the window is printed to show it), and `--streams` streams ingest replies back to back
for `--seconds`; chunks/s counts the text chunks the client took in.

specsweep's side is collect.http.client.stream() with the vLLM adapter's parser. The vLLM-style
side follows vLLM's benchmarks/lib/endpoint_request_func.py (not imported: vLLM does not
install here): aiohttp, `response.content.iter_any()`, split on blank lines, a
perf_counter() per message before json.loads. Its TTFT is taken here at the first text
chunk, as specsweep's (vLLM itself takes the role-only chunk). The clients alternate
which goes first from round to round, so drift of the machine hits both.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import h11
import httpx

from specsweep.collect.engines.vllm import VLLMChatStream
from specsweep.collect.http import client, connection
from specsweep.collect.http.loop_lag import LATE_S, LoopLag, Shared
from specsweep.collect.http.reply import BadReply, ConnectionBroke, Reply, Sink

ENGINES = Path(__file__).resolve().parents[1] / "support"
TTFT_S, GAP_S, CHUNKS = 0.05, 0.01, 40
BODY = {
    "model": "m",
    "messages": [{"role": "user", "content": "x"}],
    "max_tokens": CHUNKS,
    "stream": True,
    "stream_options": {"include_usage": True},
}
PATH = "/v1/chat/completions"

# one stream's (arrival stamps, send stamps) of its text chunks, and its reads that carried
# bytes after a chunk (specsweep's client only; collect/http/loop_lag.py)
Pairs = tuple[list[float], list[float], list[Shared]]


class Recording(VLLMChatStream):
    """The adapter's parser, also keeping the server's send stamp of each text event."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[float] = []

    def feed(self, event: dict[str, Any]) -> tuple[str, int | None]:
        text, n = super().feed(event)
        if text and "t_sent" in event:
            self.sent.append(event["t_sent"])
        return text, n


# --- the two clients ---------------------------------------------------------------------


async def specsweep_one(http: httpx.AsyncClient, url: str) -> tuple[Pairs, int]:
    parser = Recording()
    res = await client.stream(http, url, BODY, parser, 120)
    return _checked(res, parser.sent)


async def specsweep_plain(http: httpx.AsyncClient, url: str) -> tuple[Pairs, int]:
    """The real adapter's parser, nothing recorded: for capacity."""
    return _checked(await client.stream(http, url, BODY, VLLMChatStream(), 120), [])


def _checked(res: client.Result, sent: list[float]) -> tuple[Pairs, int]:
    if not res.ok:
        raise RuntimeError(f"specsweep client: {res.error_kind}: {res.error_message}")
    return ([res.t0 + t for t in res.chunk_times_s], sent, res.shared), len(res.chunk_times_s)


async def vllm_one(session: aiohttp.ClientSession, url: str) -> tuple[Pairs, int]:
    """vLLM's chat request loop: read what arrived, strip it, buffer, split on blank lines,
    stamp each message before parsing it."""
    arrivals: list[float] = []
    sent: list[float] = []
    buffer = ""
    async with session.post(url, json=BODY) as response:
        if response.status != 200:
            raise RuntimeError(f"vLLM-style client: HTTP {response.status}")
        async for chunk_bytes in response.content.iter_any():
            chunk_bytes = chunk_bytes.strip()
            if not chunk_bytes:
                continue
            buffer, messages = _messages(buffer + chunk_bytes.decode("utf-8"))
            for message in messages:
                payload = message.removeprefix("data: ")
                if payload == "[DONE]":
                    continue
                timestamp = time.perf_counter()
                data = json.loads(payload)
                choices = data.get("choices")
                if choices and choices[0]["delta"].get("content"):
                    arrivals.append(timestamp)
                    if "t_sent" in data:
                        sent.append(data["t_sent"])
    return (arrivals, sent, []), len(arrivals)


def _messages(buffer: str) -> tuple[str, list[str]]:
    """Complete messages in buffer and the rest; a rest that is a whole JSON event or
    [DONE] counts as complete (the read was stripped of its blank line), as vLLM does."""
    *done, rest = buffer.split("\n\n")
    messages = [m.strip() for m in done if m.strip()]
    if rest.startswith("data: "):
        content = rest.removeprefix("data: ").strip()
        try:
            if content == "[DONE]" or json.loads(content) is not None:
                messages.append(rest.strip())
                rest = ""
        except json.JSONDecodeError:
            pass
    return rest, messages


Sender = Callable[[Any, str], Awaitable[tuple[Pairs, int]]]


class Client:
    """One client kind: how to open its session and send one request."""

    def __init__(
        self, name: str, session: Callable[[int], Any], one: Sender, plain: Sender | None = None
    ):
        self.name, self.session, self.one = name, session, one
        self.plain = plain or one  # the sender for capacity


def _httpx(n: int) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        limits=httpx.Limits(max_connections=n + 4, max_keepalive_connections=n + 4)
    )


def _aiohttp(n: int) -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(limit=n + 4, ttl_dns_cache=300, keepalive_timeout=60)
    return aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=6 * 60 * 60)
    )


class H11Reply(Reply):
    """The reply parsed by h11 instead of collect/http/reply.py's own parser, same kernel
    stamps (`arrival` is inherited): the candidate of issue 10, measured with
    `--parsers both`. h11 needs a request sent on its connection object before it reads a
    reply; the bytes it makes of it are dropped (connection.post sent the real one)."""

    def __init__(self, sink: Sink, t0: float):
        super().__init__(sink, t0)
        self.h11 = h11.Connection(h11.CLIENT)
        self.h11.send(
            h11.Request(method="POST", target="/", headers=[("Host", "x"), ("Content-Length", "0")])
        )
        self.h11.send(h11.EndOfMessage())

    def feed(self, stamp: float, data: bytes) -> bool:
        self.began = True
        try:
            self.h11.receive_data(data)
            while (event := self.h11.next_event()) is not h11.NEED_DATA:
                if self._event(stamp, event):
                    return True
        except h11.RemoteProtocolError as exc:
            raise BadReply(str(exc)) from None
        return False

    def _event(self, stamp: float, event: object) -> bool:
        if type(event) is h11.Data:
            return self._deliver(stamp, bytes(event.data))
        if type(event) is h11.Response:
            self.status = event.status_code
        elif type(event) is h11.EndOfMessage:
            self.complete = True
            self.keep_alive = self.h11.their_state is h11.DONE
            return True
        return False

    def eof(self) -> bool:
        self.keep_alive = False
        self.h11.receive_data(b"")
        try:
            while (event := self.h11.next_event()) not in (h11.NEED_DATA, h11.PAUSED):
                if type(event) is h11.EndOfMessage:
                    self.complete = True
                    return True
                if type(event) is h11.ConnectionClosed:
                    break
        except h11.RemoteProtocolError:
            pass
        raise ConnectionBroke("the server closed the connection before the reply was complete")


def _with_parser(reply: type[Reply], one: Sender) -> Sender:
    async def send(session: Any, url: str) -> tuple[Pairs, int]:
        connection.Reply = reply  # read by connection.post for each request
        try:
            return await one(session, url)
        finally:
            connection.Reply = Reply

    return send


OURS = Client("specsweep", _httpx, specsweep_one, specsweep_plain)
H11 = Client(
    "spec-h11",
    _httpx,
    _with_parser(H11Reply, specsweep_one),
    _with_parser(H11Reply, specsweep_plain),
)
CLIENTS = [OURS, Client("vllm-style", _aiohttp, vllm_one)]
# (client, streams) -> each round's loop lag p99, chunks, chunks in doubt (an expected
# count, collect/http/loop_lag.py), and specsweep's verdict: behind
LAGS: dict[tuple[str, int], list[tuple[float, int, float, bool]]] = {}


# --- runs --------------------------------------------------------------------------------


async def fidelity(
    c: Client, url: str, streams: int, requests: int, cold: bool = False
) -> list[tuple[Pairs, list[bool]]]:
    """`requests` requests in batches of `streams` concurrent ones, after a warm-up batch
    (of `streams`, or of 4 when `cold`); each stream with its chunks in doubt (the client's
    own verdict, collect/http/loop_lag.py; none for the vLLM-style client)."""
    out: list[Pairs] = []
    async with c.session(streams) as session:
        warm = min(streams, 4) if cold else streams
        await asyncio.gather(*(c.one(session, url) for _ in range(warm)))
        lag = LoopLag().start()  # the client's own check, as a window of collect's
        for _ in range(max(1, requests // streams)):
            done = await asyncio.gather(*(c.one(session, url) for _ in range(streams)))
            out += [pairs for pairs, _ in done]
        p99 = lag.stop()[0] or 0.0
    for arrivals, _, shared in out:
        lag.take(arrivals, shared)
    LAGS.setdefault((c.name, streams), []).append((p99, lag.chunks, lag.in_doubt(), lag.behind()))
    return [(pairs, doubt(lag, pairs)) for pairs in out]


def doubt(lag: LoopLag, pairs: Pairs) -> list[bool]:
    """Which of a stream's chunks were read with later bytes while the loop was late long
    enough for them to be late by more than LATE_S (what the verdict weighs)."""
    flags = [False] * len(pairs[0])
    for (_, _, start, end, _), late in zip(pairs[2], lag.late_at(pairs[2])):
        if late:
            flags[start:end] = [True] * (end - start)
    return flags


async def capacity(c: Client, url: str, streams: int, seconds: float) -> float:
    """Text chunks per second taken in by `streams` streams requesting back to back."""
    async with c.session(streams) as session:
        await asyncio.gather(*(c.plain(session, url) for _ in range(streams)))  # warm-up
        start, end, total = time.perf_counter(), time.perf_counter() + seconds, 0

        async def worker() -> None:
            nonlocal total
            while time.perf_counter() < end:
                _, n = await c.plain(session, url)
                total += n  # not `total += await ...`: that reads total before the await

        await asyncio.gather(*(worker() for _ in range(streams)))
        return total / (time.perf_counter() - start)


def errors(runs: list[tuple[Pairs, list[bool]]]) -> tuple[list[float], list[float], list[bool]]:
    """TTFT errors (one per request), per-chunk errors in seconds, and whether each chunk
    was in doubt."""
    ttft, chunks, doubted = [], [], []
    for (arrivals, sent, _), flags in runs:
        if len(arrivals) != len(sent) or not sent:
            raise RuntimeError(f"{len(arrivals)} arrivals for {len(sent)} stamped chunks")
        ttft.append(arrivals[0] - sent[0])
        chunks += [a - s for a, s in zip(arrivals, sent)]
        doubted += flags
    return ttft, chunks, doubted


def p99(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=100, method="inclusive")[98] if len(xs) > 1 else xs[0]


@contextmanager
def truth_server(*args: str) -> Iterator[tuple[str, int]]:
    """(base URL, pid) of a truth server process; it stops when this exits."""
    proc = subprocess.Popen(
        [sys.executable, str(ENGINES / "truth_server.py"), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ENGINES,
    )
    try:
        yield f"http://127.0.0.1:{int(proc.stdout.readline())}", proc.pid
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --- report ------------------------------------------------------------------------------


def fidelity_table(args: argparse.Namespace, url: str) -> None:
    found: dict[tuple[str, int], list[tuple[Pairs, list[bool]]]] = {}
    for r in range(args.rounds):
        order = CLIENTS if r % 2 == 0 else CLIENTS[::-1]
        for streams in args.concurrency:
            for c in order:
                runs = asyncio.run(fidelity(c, url + PATH, streams, args.requests, args.cold))
                found.setdefault((c.name, streams), []).extend(runs)
    print(
        f"\nMeasurement error, ms (arrival stamp - server send stamp); TTFT {TTFT_S * 1e3:g} "
        f"ms, a chunk every {GAP_S * 1e3:g} ms, {CHUNKS} chunks, {args.rounds} rounds, "
        + ("cold pools" if args.cold else "pools warmed to the concurrency")
    )
    print(
        f"{'streams':>7} {'client':<11} {'n req':>6} {'TTFT p50':>9} {'TTFT p99':>9} "
        f"{'chunk p50':>9} {'chunk p99':>9} {'loop p99':>9} {'late %':>7} {'doubt %':>7} "
        f"{'missed':>6} {'behind':>6}"
    )
    for streams in args.concurrency:
        rows = {}
        for c in CLIENTS:
            runs = found[(c.name, streams)]
            ttft, chunks, doubted = errors(runs)
            rows[c.name] = (p99(ttft), p99(chunks))
            rounds = LAGS[(c.name, streams)]
            print(
                f"{streams:>7} {c.name:<11} {len(runs):>6} {_ms(statistics.median(ttft))} "
                f"{_ms(p99(ttft))} {_ms(statistics.median(chunks))} {_ms(p99(chunks))} "
                f"{_ms(max(r[0] for r in rounds))} {verdict(c, chunks, doubted, rounds)}"
            )
        ours, theirs = rows["specsweep"], rows["vllm-style"]
        print(
            f"{streams:>7} {'ratio':<11} {'':>6} {'':>9} {ours[0] / theirs[0]:>9.3f} "
            f"{'':>9} {ours[1] / theirs[1]:>9.3f}"
        )
        if H11.name in rows:
            h = rows[H11.name]
            print(
                f"{streams:>7} {'h11/ours':<11} {'':>6} {'':>9} {h[0] / ours[0]:>9.3f} "
                f"{'':>9} {h[1] / ours[1]:>9.3f}"
            )


def capacity_table(args: argparse.Namespace) -> None:
    rates: dict[str, list[float]] = {c.name: [] for c in CLIENTS}
    with truth_server("0", "0", str(args.capacity_chunks), "--capacity") as (url, pid):
        server_cpu = wall = 0.0
        for r in range(args.rounds):
            for c in CLIENTS if r % 2 == 0 else CLIENTS[::-1]:
                cpu0, t0 = cpu_seconds(pid), time.perf_counter()
                rates[c.name].append(
                    asyncio.run(capacity(c, url + PATH, args.streams, args.seconds))
                )
                server_cpu += cpu_seconds(pid) - cpu0
                wall += time.perf_counter() - t0
    print(
        f"\nCapacity, text chunks/s ingested ({args.streams} streams, replies of "
        f"{args.capacity_chunks} chunks back to back, {args.seconds:g} s per round; server "
        f"process busy {server_cpu / wall:.0%} of one core)"
    )
    for name, xs in rates.items():
        print(
            f"  {name:<11} median {statistics.median(xs):>9,.0f}   rounds "
            + " ".join(f"{x:,.0f}" for x in xs)
        )
    ratio = statistics.median(rates["specsweep"]) / statistics.median(rates["vllm-style"])
    print(f"  {'ratio':<11} {ratio:>16.2f}")
    if H11.name in rates:
        ratio = statistics.median(rates[H11.name]) / statistics.median(rates["specsweep"])
        print(f"  {'h11/ours':<11} {ratio:>16.2f}")


def verdict(
    c: Client,
    chunks: list[float],
    doubted: list[bool],
    rounds: list[tuple[float, int, float, bool]],
) -> str:
    """The share of chunks truly late by more than LATE_S; for specsweep's client also the
    share it held in doubt (its expected count), the truly late ones not even read with
    later bytes in a late stretch (missed), and whether any round was behind (its verdict,
    collect/http/loop_lag.py). A client that stamps in user space is late by any lateness
    of its loop: no verdict."""
    late = [e > LATE_S for e in chunks]
    share = f"{100 * sum(late) / len(late):>7.2f}"
    if c.name != OURS.name:
        return f"{share} {'-':>7} {'-':>6} {'-':>6}"
    missed = sum(x and not d for x, d in zip(late, doubted))
    in_doubt = 100 * sum(r[2] for r in rounds) / sum(r[1] for r in rounds)
    behind = "yes" if any(r[3] for r in rounds) else "no"
    return f"{share} {in_doubt:>7.2f} {missed:>6} {behind:>6}"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:>9.3f}"


def main(argv: list[str]) -> None:
    global GAP_S
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--concurrency", default="1,16,64,256", type=lambda s: [int(x) for x in s.split(",")]
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--gap-ms", type=float, default=GAP_S * 1e3, help="fidelity: ms between a stream's chunks"
    )
    parser.add_argument(
        "--requests",
        type=int,
        default=16,
        help="requests per client, concurrency and round (at least one batch)",
    )
    parser.add_argument(
        "--cold",
        action="store_true",
        help="fidelity: warm up with 4 requests, not a batch per concurrency",
    )
    parser.add_argument("--streams", type=int, default=64, help="capacity: concurrent streams")
    parser.add_argument("--seconds", type=float, default=3.0, help="capacity: per client and round")
    parser.add_argument("--capacity-chunks", type=int, default=2000)
    parser.add_argument(
        "--parsers",
        choices=["ours", "both"],
        default="ours",
        help="both: also specsweep's client with h11 parsing the reply",
    )
    parser.add_argument("--skip", choices=["none", "fidelity", "capacity"], default="none")
    args = parser.parse_args(argv)
    GAP_S = args.gap_ms / 1e3
    if args.parsers == "both":
        CLIENTS.insert(1, H11)
    print(
        f"bench_client: {os.cpu_count()} cores, Python {sys.version.split()[0]}, "
        f"aiohttp {aiohttp.__version__}, httpx {httpx.__version__}, load average "
        + " ".join(f"{x:.2f}" for x in os.getloadavg())
    )
    if args.skip != "fidelity":
        with truth_server(str(TTFT_S), str(GAP_S), str(CHUNKS), "--shape", "vllm") as (url, _):
            fidelity_table(args, url)
    if args.skip != "capacity":
        capacity_table(args)


if __name__ == "__main__":
    main(sys.argv[1:])
