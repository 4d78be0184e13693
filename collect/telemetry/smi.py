"""The nvidia-smi source: `nvidia-smi --query-gpu=... -lms <period> -i <ids>` as a long-running
process whose lines are stamped with perf_counter as they arrive: a subprocess on this
machine, an exec channel on the SSH host's connection.

A line's stamp is its arrival at specsweep, later than the reading by nvidia-smi's write
(and over SSH the link's one-way delay); `stdbuf -oL`, where the host has it, keeps the
pipe line-buffered. `power.draw` is the driver's figure: on Ampere and newer GPUs (except
GA100) a one-second average, on older ones instantaneous. No energy counter on this path.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

from specsweep.collect.telemetry.sampler import Sample

NVIDIA_SMI = "nvidia-smi"  # the command; a test points it at a scripted stand-in
FIELDS = (
    "index",
    "power.draw",
    "clocks.sm",
    "clocks.mem",
    "utilization.gpu",
    "utilization.memory",
    "memory.used",
    "temperature.gpu",
    "clocks_event_reasons.active",
)
COLUMNS = (
    "power_w",
    "sm_clock_mhz",
    "mem_clock_mhz",
    "util_gpu_pct",
    "util_mem_pct",
    "memory_used_mib",
    "temperature_c",
)
# NVML's clock-event (throttle) reason bits; 0x1 (idle) is left out of throttle_reasons
REASONS = {
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
IDLE = 0x1
OLD_REASONS = "clocks_throttle_reasons.active"  # the reasons field's name before R535
# exec stdbuf -oL where the host has it (line-buffered pipe), else nvidia-smi itself
_WRAPPER = 'if command -v stdbuf >/dev/null 2>&1; then exec stdbuf -oL "$@"; fi; exec "$@"'


def command(gpus: list[int], period_s: float, reasons: str | None = None) -> list[str]:
    """The sampling command (argv) for these GPUs (the host's indices); `reasons` names the
    reasons field where the driver calls it otherwise."""
    fields = [*FIELDS[:-1], reasons or FIELDS[-1]]
    return [
        "sh",
        "-c",
        _WRAPPER,
        "sh",
        NVIDIA_SMI,
        f"--query-gpu={','.join(fields)}",
        "--format=csv,noheader,nounits",
        "-lms",
        str(max(1, round(period_s * 1000))),
        "-i",
        ",".join(map(str, gpus)),
    ]


def number(text: str) -> float | None:
    """A value, or None for what nvidia-smi prints instead ([N/A], [Not Supported], ...)."""
    try:
        return float(text)
    except ValueError:
        return None


def reason_names(mask: int) -> str:
    """Comma-separated names of the active reasons other than idle ('' for none); an unknown
    bit is named by its hex value."""
    names = []
    for bit in (1 << i for i in range(64)):
        if mask & bit and bit != IDLE:
            names.append(REASONS.get(bit, hex(bit)))
    return ",".join(names)


def decode_reasons(text: str) -> str:
    """clocks_event_reasons.active (hex, e.g. 0x0000000000000004) as names; '' if absent."""
    try:
        return reason_names(int(text, 16))
    except ValueError:
        return ""


def parse_line(line: str) -> tuple[int, dict[str, Any]] | None:
    """(GPU index, gpu_samples values) of one csv,noheader,nounits line; None if it is not
    one (a message, an error)."""
    values = [v.strip() for v in line.split(",")]
    if len(values) != len(FIELDS) or not values[0].isdigit():
        return None
    row: dict[str, Any] = dict(zip(COLUMNS, map(number, values[1:-1])))
    row["energy_j"] = None
    row["throttle_reasons"] = decode_reasons(values[-1])
    return int(values[0]), row


def stamped_lines(chunks: Iterator[bytes]) -> Iterator[tuple[float, str]]:
    """Complete lines of a byte stream, each stamped when the chunk ending it arrived."""
    pending = b""
    for chunk in chunks:
        t = time.perf_counter()
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield t, line.decode("utf-8", "replace").strip()


class _Stream:
    """Samples from a stream of nvidia-smi lines; other lines are kept to explain a failure.
    A driver older than R535 knows the reasons field by its old name: when the first
    stream ends refusing the field, the stream starts once more with that name."""

    name = "nvidia-smi"

    def __init__(self, gpus: list[int], period_s: float):
        self.gpus, self.period_s = gpus, period_s
        self.other: list[str] = []
        self._closed = threading.Event()
        self._open(command(gpus, period_s))

    def samples(self) -> Iterator[Sample]:
        retry = [OLD_REASONS]
        while True:
            sampled = False
            for t, line in stamped_lines(self._chunks()):
                parsed = parse_line(line)
                if parsed is None:
                    self.other = [*self.other[-4:], line] if line else self.other
                    continue
                sampled = True
                yield Sample(t, parsed[0], parsed[1])
            refused = any(FIELDS[-1] in line and "not a valid field" in line for line in self.other)
            if sampled or not retry or not refused or self._closed.is_set():
                break
            self.other = []
            self._open(command(self.gpus, self.period_s, retry.pop()))
            if self._closed.is_set():  # close() ran while it started
                self.close()
        if self.other:
            raise RuntimeError(f"nvidia-smi ended: {' | '.join(self.other)}")

    def _open(self, argv: list[str]) -> None:
        raise NotImplementedError

    def _chunks(self) -> Iterator[bytes]:
        raise NotImplementedError


class LocalSmi(_Stream):
    """nvidia-smi as a subprocess in a session of its own (it ends on SIGPIPE should
    specsweep die without closing it)."""

    def _open(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def _chunks(self) -> Iterator[bytes]:
        out = self.proc.stdout
        assert out is not None
        with out:
            while chunk := out.read1(65536):
                yield chunk
        self.proc.wait()

    def close(self) -> None:
        """SIGTERM the process group, SIGKILL it after 2 s; the reader then sees EOF."""
        self._closed.set()
        if self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


class RemoteSmi(_Stream):
    """nvidia-smi on an SSH host, over an exec channel of its connection (stderr merged);
    closing the channel ends the remote process at its next write (SIGPIPE)."""

    def __init__(self, host: Any, gpus: list[int], period_s: float):
        self.host = host
        super().__init__(gpus, period_s)

    def _open(self, argv: list[str]) -> None:
        self.chan = self.host.stream(argv)

    def _chunks(self) -> Iterator[bytes]:
        while not self._closed.is_set() and (chunk := self.chan.recv(65536)):
            yield chunk
        self.chan.close()

    def close(self) -> None:
        self._closed.set()
        self.chan.close()
