"""Service lifecycle: start one configuration's server, wait until healthy, always stop it.

`Service` is a context manager: leaving it by any path (normal end, exception, Ctrl-C,
SIGTERM turned into SystemExit by the CLI) stops the server and its whole process group
(collect/hosts/local.py: SIGTERM to the server, SIGKILL to what is left).
"""

from __future__ import annotations

import logging
import re
import secrets
import shlex
import threading
import time
from pathlib import Path

import httpx

from specsweep.collect.engines.base import Engine
from specsweep.collect.hosts.base import Host, Process
from specsweep.collect.plan.model import ServiceConfig
from specsweep.collect.redact import MASK, redact, redact_argv
from specsweep.schema.store import utcnow

log = logging.getLogger("specsweep.collect")

STOP_GRACE_S = 10.0  # SIGTERM -> SIGKILL at the end of a configuration
INTERRUPT_GRACE_S = 3.0  # the same when the campaign is stopping (Ctrl-C, SIGTERM)
TAIL_LINES = 40  # of a failed server's log kept in its services row
# starts of one service in all when the port free_port chose was taken by another process
# before the server bound it (a port is free when chosen, not held: Ray's workers took one
# in CI); a fixed port (the engine's `port`) is never changed
PORT_TRIES = 3


class ServiceFailed(RuntimeError):
    """The server exited or never became healthy; carries the log tail."""

    def __init__(self, message: str, log_tail: str, cause: str | None = None):
        super().__init__(message)
        self.log_tail = log_tail
        self.cause = cause  # the log's line that says why (failure_cause), if one does


class Cancelled(Exception):
    """The campaign is stopping (Ctrl-C, SIGTERM) while this service starts."""


class Service:
    """One running server of a ServiceConfig.

    `gpus`: the GPU set the scheduler gave this service (None: take the first `tp` free
    GPUs). `port_offset` is added to a fixed engine port, so that services packed side by
    side on one host listen on different ports (the runner passes the first GPU index).
    `cancel`, once set, aborts a start-up that is still waiting.
    """

    def __init__(
        self, host: Host, engine: Engine, config: ServiceConfig, log_dir: Path,
        campaign_id: str, gpus: tuple[int, ...] | None = None, port_offset: int = 0,
        cancel: threading.Event | None = None,
    ):  # fmt: skip
        self.host, self.engine, self.config = host, engine, config
        self.gpus, self.cancel = gpus, cancel or threading.Event()
        self.service_id = f"{config.config_id}-{secrets.token_hex(4)}"
        address = engine.cfg.host_address
        self.port = engine.cfg.port + port_offset if engine.cfg.port else host.free_port(address)
        self.argv, self.env = self._launch()
        self.log_path = (
            host.log_dir(log_dir) / f"{config.method.name}-tp{config.tp}-{self.service_id}.log"
        )
        self.base_url = host.endpoint(address, self.port)
        self.proc: Process | None = None
        self.row = {
            "service_id": self.service_id,
            "campaign_id": campaign_id,
            "config_id": config.config_id,
            "engine": engine.kind,
            "method": config.method.name,
            "tp": config.tp,
            "gpus": "",
            "host": host.name,
            "launch_command": self._command(),
            "requested_at": utcnow(),
            "ready_at": None,
            "stopped_at": None,
            "startup_s": None,
            "state": "failed",
            "error": None,
            "log_tail": None,
            "transport": host.transport(address),
        }

    def __enter__(self) -> Service:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _launch(self) -> tuple[list[str], dict[str, str]]:
        """The server's argv on self.port (the API key filled in) and its extra environment."""
        argv, env = self.engine.launch(self.config.method, self.config.tp, self.port)
        argv += self.engine.cfg.tp_args.get(self.config.tp, [])
        key = self.engine.cfg.api_key()
        return ([a.replace("{api_key}", key) for a in argv] if key else argv), env

    def start(self) -> None:
        """Launch and wait for /health = 200; raise ServiceFailed with the log tail. A server
        that could not bind the port free_port chose for it starts again on a new one, up to
        PORT_TRIES starts in all, each with a log of its own (<name>-start2.log, ...)."""
        self._claim_gpus()
        first = self.log_path
        for tries in range(1, PORT_TRIES + 1):
            try:
                return self._start_once()
            except ServiceFailed as exc:
                if (
                    self.engine.cfg.port
                    or tries == PORT_TRIES
                    or not _PORT_TAKEN.search(exc.log_tail)
                ):
                    raise
                taken = self.port
            self.host.stop(self.proc, STOP_GRACE_S)  # it exited: reaps it and what it left
            address = self.engine.cfg.host_address
            self.port = self.host.free_port(address)
            self.argv = self._launch()[0]  # the environment does not name the port
            self.base_url = self.host.endpoint(address, self.port)
            self.log_path = first.with_name(f"{first.stem}-start{tries + 1}.log")
            self.row.update(
                launch_command=self._command(), state="failed", error=None, log_tail=None
            )
            log.warning(
                "%s (tp %d): port %d was taken before the server bound it; starting it again on %d",
                self.config.method.name,
                self.config.tp,
                taken,
                self.port,
            )

    def _start_once(self) -> None:
        t0 = time.perf_counter()
        try:
            self.proc = self.host.start(self.argv, self.env, self.log_path)
        except OSError as exc:  # this machine's exec: no such file, not executable
            self._failed(f"could not execute {self.argv[0]}: {exc.strerror}")
        deadline = t0 + self.engine.cfg.startup_timeout_s
        url = self.base_url + self.engine.health_path
        while time.perf_counter() < deadline:
            if self.cancel.is_set():
                raise Cancelled(f"{self.config.method.name} (tp {self.config.tp}): cancelled")
            if not self.host.alive(self.proc):
                tail = self.log_tail(CAUSE_LINES)  # one read (over SSH, one round trip)
                cause = failure_cause(tail)
                reason = "server exited during start-up" + (f": {cause}" if cause else "")
                self._failed(reason, cause, "\n".join(tail.splitlines()[-TAIL_LINES:]))
            if _healthy(url):
                self.row.update(
                    state="ready", ready_at=utcnow(), startup_s=time.perf_counter() - t0
                )
                return
            time.sleep(0.1)
        self._failed(f"not healthy within {self.engine.cfg.startup_timeout_s:g} s")

    def _claim_gpus(self) -> None:
        """Run on the GPUs the scheduler gave (or else the first `tp` free ones) once no
        compute process holds them (none on a CPU host); wait up to the host's gpu_wait_s,
        then fail, and so skip the configuration."""
        inventory = list(self.gpus) if self.gpus is not None else self.host.gpu_indices()
        if not inventory:
            return
        tp = self.config.tp
        deadline = time.monotonic() + self.host.cfg.gpu_wait_s
        while True:
            busy = self.host.busy_gpus()
            free = [g for g in inventory if g not in busy]
            if len(free) >= tp:
                break
            if time.monotonic() >= deadline:
                given = f" of the GPUs {inventory} given to it" if self.gpus is not None else ""
                self._failed(f"needs {tp} free GPUs{given}; free {free}, busy {sorted(busy)}")
            if self.cancel.wait(10):
                raise Cancelled(f"{self.config.method.name} (tp {self.config.tp}): cancelled")
        gpus = ",".join(map(str, free[:tp]))
        # nvidia-smi and NVML number GPUs in PCI bus order, CUDA fastest first: without
        # PCI_BUS_ID, on a host of mixed GPUs the server could run on another GPU than the
        # one specsweep claimed, checked for other processes and samples
        self.env.update(CUDA_DEVICE_ORDER="PCI_BUS_ID", CUDA_VISIBLE_DEVICES=gpus)
        self.row.update(gpus=gpus, launch_command=self._command())

    def _command(self) -> str:
        return self.host.describe(
            self._scrub(_env_prefix(self.env) + shlex.join(redact_argv(self.argv)))
        )

    def _scrub(self, text: str) -> str:
        """Redact secret-looking values and, whatever its shape, the API key itself."""
        key = self.engine.cfg.api_key()
        text = redact(text)
        return text.replace(key, MASK) if key else text

    def fail(self, reason: str) -> None:
        """Mark the service failed with its log tail and raise ServiceFailed."""
        self._failed(reason)

    def _failed(self, reason: str, cause: str | None = None, tail: str | None = None) -> None:
        tail = self.log_tail() if tail is None else tail
        self.row.update(state="failed", error=reason, log_tail=tail)
        name = f"{self.config.method.name} (tp {self.config.tp})"
        raise ServiceFailed(f"{name}: {reason}", tail, cause)

    def alive(self) -> bool:
        return self.proc is not None and self.host.alive(self.proc)

    def log_tail(self, lines: int = TAIL_LINES) -> str:
        return self._scrub(self.host.log_tail(self.proc, lines)) if self.proc else ""

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after STOP_GRACE_S, or after INTERRUPT_GRACE_S when the
        campaign is stopping: a user who pressed Ctrl-C waits for no graceful shutdown, and
        llama-server can take many seconds to honour SIGTERM while a batch is in its
        decode loop (llama.cpp PR 18292 added --shutdown-timeout for that)."""
        if self.proc is None:
            return
        self.host.stop(self.proc, INTERRUPT_GRACE_S if self.cancel.is_set() else STOP_GRACE_S)
        if self.row["state"] == "ready":
            self.row.update(state="stopped")
        self.row["stopped_at"] = utcnow()


# A server that could not bind its HTTP port: llama.cpp's "couldn't bind HTTP server socket,
# hostname: 127.0.0.1, port: 47314", uvicorn's (vLLM, SGLang) "[Errno 98] error while attempting
# to bind on address ('127.0.0.1', 8000): address already in use", vLLM's socket's OSError
_PORT_TAKEN = re.compile(r"couldn't bind HTTP server socket|address already in use", re.I)
# A line of a server's log, less what the engines put before their own text: vLLM's
# "(APIServer pid=5538) ", SGLang's "[2026-12-04 15:59:14] ", llama.cpp's "0.00.010.205 E ".
_PREFIX = re.compile(r"^(?:\(\w+ pid=\d+\) |\[[\d\- :.,]+\] |[\d.]+ [A-Z] )*")
# Python's exception line ("ModuleNotFoundError: No module named 'cutlass'",
# "torch.OutOfMemoryError: CUDA out of memory ..."): the last one is what ended the process
_EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception)(?::\s.*)?$")
# otherwise the first line that starts with "error" after "name: " parts: argparse
# ("launch_server.py: error: ..."), llama.cpp ("error: invalid argument: --x",
# "llama_model_load: error loading model: ..."); not a warning that mentions an error
_ERROR = re.compile(r"^(?:[\w.\-]+: )*error\b", re.IGNORECASE)
# an exception that only points at another one: vLLM's API server ends with "RuntimeError:
# Engine core initialization failed. See root cause above. Failed core proc(s): {...}" after
# the engine core's own traceback, whatever that said
_POINTER = re.compile(r"root cause above|see (?:the )?(?:log|above)", re.IGNORECASE)
# the process manager's `env ARGV` (collect/hosts/managers.py) when it cannot execute the
# server: "env: '/x/server': No such file or directory" (coreutils; the quotes follow the locale)
_ENV_EXEC = re.compile(r"^env: .+: (?:No such file or directory|Permission denied)$")
CAUSE_CHARS = 300
CAUSE_LINES = 200  # of the log's end searched for it: the engine core's traceback comes first


def failure_cause(tail: str) -> str | None:
    """The line of a failed start's log tail that says why: Python's last exception line that
    does not only point at another, or else the first line that starts with "error"
    (llama.cpp, argparse) or says that `env` could not execute the server; None when no line
    does.
    Cut to CAUSE_CHARS: it joins the services row's `error` and the console's message."""
    lines = [_PREFIX.sub("", line).strip() for line in tail.splitlines()]
    found = [line for line in lines if _EXCEPTION.match(line) and not _POINTER.search(line)]
    if not found:
        found = [line for line in lines if _ERROR.match(line) or _ENV_EXEC.match(line)][:1]
    return found[-1][:CAUSE_CHARS] if found else None


def _healthy(url: str) -> bool:
    """/health answers 200; environment proxies ignored (collect/http/__init__.py says why)."""
    try:
        return httpx.get(url, timeout=2.0, trust_env=False).status_code == 200
    except httpx.HTTPError:
        return False


def _env_prefix(env: dict[str, str]) -> str:
    return "".join(f"{k}={shlex.quote(v)} " for k, v in sorted(env.items()))
