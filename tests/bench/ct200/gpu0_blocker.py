#!/usr/bin/env python3
"""A blocking service for the CT200-shaped plans: a real process that holds GPU 0.

    gpu0_blocker.py start STATE_DIR [GIB]   # start it (nothing to do when it runs already)
    gpu0_blocker.py stop STATE_DIR          # stop it and wait until it has exited

It is a sleeping Python process started in a session of its own, so that it outlives the
command that started it, as a systemd unit outlives `systemctl start`. With GIB it first
takes GIB GiB of memory on CUDA device 0 with torch (plans/gpu8-ct200-shape.yaml: nvidia-smi
then lists it as a compute process on GPU 0, as it would list the seed host's own service);
without, it holds nothing (plans/dry-ct200-shape.yaml, on the CPU). Its pid is kept in
STATE_DIR/blocker.pid while it runs; every start and stop appends one JSON line to
STATE_DIR/blocker.jsonl: {"event": "start" | "stop", "t": wall-clock seconds, "pid": ...}.
The wall clock, because these times are compared with the `services` table's requested_at and
stopped_at (also wall clock) of another process. The fake vLLM command
(tests/bench/ct200/dry_vllm.py) reads the pid file to record whether the blocker was alive when a
service was handed GPU 0.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

STOP_WAIT_S = 10.0


def alive(pid: int) -> bool:
    """True while process `pid` exists and is not a zombie of ours."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # an exited child not yet reaped by its parent still answers kill(0)
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][0] != "Z"
    except OSError:
        return False


def running_pid(state: Path) -> int | None:
    """The blocker's pid when it runs, else None."""
    try:
        pid = int((state / "blocker.pid").read_text())
    except (OSError, ValueError):
        return None
    return pid if alive(pid) else None


def record(state: Path, event: str, pid: int) -> None:
    with (state / "blocker.jsonl").open("a") as log:
        log.write(json.dumps({"event": event, "t": time.time(), "pid": pid}) + "\n")


HOLD = "import time; time.sleep(86400)"
HOLD_GPU = (
    "import time, torch; x = torch.empty(int({gib} * 2**30), dtype=torch.uint8, "
    "device='cuda:0'); print('ready', flush=True); time.sleep(86400)"
)


def start(state: Path, gib: float | None) -> int:
    if running_pid(state) is not None:
        return 0
    code = HOLD if gib is None else HOLD_GPU.format(gib=gib)
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE if gib is not None else subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    if gib is not None and proc.stdout is not None and proc.stdout.readline().strip() != "ready":
        print("the blocker could not take its GPU memory", file=sys.stderr)
        return 1  # like a unit that failed to start
    (state / "blocker.pid").write_text(str(proc.pid))
    record(state, "start", proc.pid)
    return 0


def stop(state: Path) -> int:
    pid = running_pid(state)
    if pid is None:
        (state / "blocker.pid").unlink(missing_ok=True)
        return 0
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_WAIT_S
    while alive(pid):
        if time.monotonic() > deadline:
            print(f"blocker {pid} did not exit in {STOP_WAIT_S:g} s", file=sys.stderr)
            return 1
        time.sleep(0.02)
    (state / "blocker.pid").unlink(missing_ok=True)
    record(state, "stop", pid)
    return 0


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3) or argv[0] not in ("start", "stop"):
        print(__doc__, file=sys.stderr)
        return 2
    state = Path(argv[1])
    state.mkdir(parents=True, exist_ok=True)
    if argv[0] == "stop":
        return stop(state)
    return start(state, float(argv[2]) if len(argv) == 3 else None)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
