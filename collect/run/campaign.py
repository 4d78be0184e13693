"""The state one campaign run shares between the runner, its workers and each configuration's
run: the store, the plan, the host and engine, the progress display and the stop flag."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from collect import engines
from collect.hosts.base import Host
from collect.plan.model import Plan
from collect.run.progress import CampaignProgress
from schema.store import Store


@dataclass
class Campaign:
    """What every step of one campaign run shares."""

    store: Store
    plan: Plan
    campaign_id: str
    host: Host
    engine: engines.Engine
    log_dir: Path
    progress: CampaignProgress
    stopping: threading.Event = field(default_factory=threading.Event)
    # service_id -> (launched, stopped or None): who shared the host during a unit
    spans: dict[str, tuple[datetime, datetime | None]] = field(default_factory=dict)
    only: list[tuple[str, int | None]] | None = None  # --only METHOD[/TP]: these configs only
