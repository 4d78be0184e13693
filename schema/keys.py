"""The comparison key, written once: the columns that name one measured load point, whose
methods the analysis compares (a speedup, an energy ratio, the best method, a prediction).

:data:`COMPARISON_KEY` is the Python definition; schema/keys.sql is the SQL one, the
``comparison_key()`` macro that schema.metrics.install puts in every results file beside the
metric macros (tests/unit/schema/test_keys.py proves the two agree). Python that builds SQL or
groups frames imports the constant; SQL calls the macro (keys.sql says how, and where DuckDB
lets it not). report imports nothing of the project: it reads the macro from the file
(report.data).
"""

from __future__ import annotations

COMPARISON_KEY: tuple[str, ...] = (
    "campaign_id",
    "engine",
    "tp",
    "workload",
    "max_tokens",
    "concurrency",
)
# one comparison: a method (M, against the baseline) at one load point
COMPARISON = (*COMPARISON_KEY, "method")
# one method's window at one load point, in the column order the per-window tables print
# (config_summary, the ITL windows, compare's window text): the key with `method` after `tp`
WINDOW_KEY = (*COMPARISON_KEY[:3], "method", *COMPARISON_KEY[3:])
