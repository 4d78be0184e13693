"""The defaults every stage shares, written once: the results file a command reads and
writes when none is given, and the method a plan compares against when it names none.

Kept free of imports beyond pathlib: `specsweep --help` reads DEFAULT_DB without loading
DuckDB. report imports nothing of the project: it takes the baseline from the file
(analysis_params, campaign_summary; report.charts.BASELINE only orders the palette and
serves a file that names none) and keeps its `--db` default in report/__main__.py;
tests/unit/test_one_definition.py checks that default and the Makefile's DB against this one.
"""

from __future__ import annotations

from pathlib import Path

DEFAULT_DB = Path("results/specsweep.duckdb")
DEFAULT_BASELINE = "autoregressive"
