"""The comparison key within one campaign (a report is one campaign's): schema.keys'
COMPARISON_KEY less campaign_id. report imports nothing of the project, so the key is written
here once for every section and chart, and report.data.check_key compares it with the file's
comparison_key() macro (schema/keys.sql) on every load; tests/unit/test_one_definition.py checks
it against schema.keys."""

from __future__ import annotations

WINDOW = ["engine", "tp", "workload", "max_tokens", "concurrency"]
COMPARISON = [*WINDOW, "method"]  # one method at one load point
