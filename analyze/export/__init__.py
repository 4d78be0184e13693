"""What leaves a results file for other tools: every raw table and analysis object to Parquet
or CSV (`tables`), or one versioned JSON summary of every campaign (`summary`); `specsweep
export --format parquet|csv|json --out DIR` calls `run`."""

from __future__ import annotations

from specsweep.analyze.export.tables import read_back, run

__all__ = ["read_back", "run"]
