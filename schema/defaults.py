"""The defaults every stage shares, written once: the results file a command reads and
writes when none is given, and the method a plan compares against when it names none.

Kept free of imports: `specsweep --help` reads DEFAULT_DB without loading DuckDB. report
imports nothing of the project: it takes the baseline from the file (analysis_params,
campaign_summary) and its own `--db` default is checked against this one
(tests/schema/test_keys.py).
"""

from __future__ import annotations

from pathlib import Path

DEFAULT_DB = Path("results/specsweep.duckdb")
DEFAULT_BASELINE = "autoregressive"
