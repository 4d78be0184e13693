"""Fixtures for the analysis-stage tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from analyze_rows import write_db

from specsweep.analyze import build


@pytest.fixture
def analyzed(tmp_path: Path) -> Callable[..., Path]:
    """Factory: write rows to a fresh DuckDB file, run analyze on it, return its path."""

    def make(rows: list[dict[str, Any]], baseline: str = "autoregressive") -> Path:
        path = tmp_path / "specsweep.duckdb"
        write_db(path, rows)
        build.run(path, baseline=baseline)
        return path

    return make
