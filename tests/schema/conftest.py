"""Fixtures for the schema tests: valid raw rows to start from, and a fresh results file."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from specsweep.schema.store import Store


def request_row(i: int = 0, **changes: Any) -> dict[str, Any]:
    """A `requests` row that passes RequestsSchema; keyword arguments override columns."""
    row: dict[str, Any] = {
        "request_id": f"req-{i}",
        "campaign_id": "camp",
        "config_id": "cfg0",
        "service_id": "svc0",
        "engine": "llamacpp",
        "method": "autoregressive",
        "tp": 1,
        "workload": "rewrite",
        "window_id": "win0",
        "run": 1,
        "prompt_id": f"p{i % 3}",
        "max_tokens": 64,
        "rep": i,
        "concurrency": 1,
        "session_id": None,
        "turn": None,
        "is_warmup": False,
        "sent_at": datetime(2024, 5, 1, 12, 0, i % 60),
        "start_s": 0.01 * i,
        "ttft_s": 0.05,
        "e2e_s": 0.40,
        "chunk_times_s": [0.05, 0.2, 0.4],
        "chunk_tokens": [1, 3, 2],
        "prompt_tokens": 120,
        "cached_tokens": 0,
        "output_tokens": 6,
        "finish_reason": "length",
        "spec_verify_ct": 4,
        "draft_tokens": 8,
        "accepted_tokens": 3,
        "accept_length": 1.5,
        "output_text": "def f(): ...",
        "server_stats": '{"timings": {}}',
        "ok": True,
        "error_kind": None,
        "error_message": None,
        "category": "code",
    }
    unknown = set(changes) - set(row)
    assert not unknown, f"not requests columns: {unknown}"
    row.update(changes)
    return row


def unit_row(**changes: Any) -> dict[str, Any]:
    """A `units` row that passes UnitsSchema."""
    row: dict[str, Any] = {
        "campaign_id": "camp",
        "config_id": "cfg0",
        "workload": "rewrite",
        "service_id": "svc0",
        "n_requests": 3,
        "complete": True,
        "started_at": datetime(2024, 5, 1, 12, 0, 0),
        "finished_at": datetime(2024, 5, 1, 12, 1, 0),
    }
    row.update(changes)
    return row


@pytest.fixture
def make_row() -> Callable[..., dict[str, Any]]:
    return request_row


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "results" / "specsweep.duckdb"


@pytest.fixture
def store(db_path: Path) -> Store:
    return Store(db_path)


@pytest.fixture
def make_unit() -> Callable[..., dict[str, Any]]:
    return unit_row
