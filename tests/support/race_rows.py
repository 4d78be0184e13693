"""A raced campaign as raw rows, for the race tables' tests: one window of one request per
(arm, round) at one level, whose decode speed is the value given, so each round's race value is
ln of that number; one service start per (arm, round), stopped after the seconds given; the
campaign's row and its `races` row. Written through Store.append (the raw contracts check them).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from specsweep.schema.store import Store
from tests.support.analyze_rows import decode_req

T = datetime(2026, 1, 1, 12, 0, 0)
LEVEL = "w:64:c1"  # workload w, max_tokens 64, concurrency 1


def campaign(status: str = "complete") -> dict[str, Any]:
    return {
        "campaign_id": "c1", "plan_name": "race", "plan_sha256": "ab" * 32,
        "plan_yaml": "name: race\n", "baseline": "A", "started_at": T,
        "finished_at": T + timedelta(hours=1) if status == "complete" else None,
        "status": status,
    }  # fmt: skip


def race(arms: list[str], **rule: Any) -> dict[str, Any]:
    """The phase's `races` row: within 0.05, confidence 0.95, rounds 2..4 unless given."""
    return {
        "campaign_id": "c1", "phase": "p", "tp": 1, "methods": ",".join(arms),
        "workloads": "", "objective": "decode_tps", "within": 0.05, "confidence": 0.95,
        "first_rounds": 2, "max_rounds": 4, "priors": "{}", **rule,
    }  # fmt: skip


def start(arm: str, run: int, seconds: float, state: str = "stopped") -> dict[str, Any]:
    """One service start of `arm` in round `run`, `seconds` from request to stop."""
    at = T + timedelta(minutes=10 * run)
    return {
        "service_id": f"svc-{arm}-{run}", "campaign_id": "c1", "config_id": f"cfg-{arm}",
        "engine": "llamacpp", "method": arm, "tp": 1, "gpus": "", "host": "h",
        "launch_command": "x", "requested_at": at, "ready_at": None,
        "stopped_at": at + timedelta(seconds=seconds), "startup_s": None, "state": state,
        "error": None, "log_tail": None, "transport": "direct", "run": run,
    }  # fmt: skip


def window(arm: str, run: int, tps: float, workload: str = "w", conc: int = 1) -> dict[str, Any]:
    """The one request of arm's window in round `run` at concurrency `conc`, at `tps` decode
    tok/s."""
    return decode_req(
        tps, campaign_id="c1", engine="llamacpp", method=arm, config_id=f"cfg-{arm}",
        service_id=f"svc-{arm}-{run}", window_id=f"w-{arm}-{run}-{workload}-{conc}", run=run,
        workload=workload, max_tokens=64, concurrency=conc, prompt_id="p1",
    )  # fmt: skip


def write(
    path: Path,
    values: dict[str, list[float | None]],
    status: str = "complete",
    seconds: dict[str, float] | None = None,
    at4: dict[str, list[float | None]] | None = None,
    **rule: Any,
) -> Path:
    """The raced campaign: values[arm][r - 1] its decode tok/s in round r at level w:64:c1
    (None: that start failed, no request); at4 the same at w:64:c4, measured on the same
    starts (None: no value there); seconds[arm] each of its starts' length (10 s unless
    given)."""
    services, requests = [], []
    for arm, row in values.items():
        for run, tps in enumerate(row, 1):
            secs = (seconds or {}).get(arm, 10.0)
            services.append(start(arm, run, secs, "failed" if tps is None else "stopped"))
            requests += [] if tps is None else [window(arm, run, tps)]
            more = (at4 or {}).get(arm, [])
            at = more[run - 1] if run <= len(more) else None
            requests += [] if at is None or tps is None else [window(arm, run, at, conc=4)]
    store = Store(path)
    for table, rows in (("campaigns", [campaign(status)]), ("races", [race(list(values), **rule)]),
                        ("services", services), ("requests", requests)):  # fmt: skip
        assert store.append(table, rows) == len(rows), table
    store.close()
    return path
