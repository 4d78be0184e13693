"""Sentences generated from the data: the summary of findings and the validity notes.

Each sentence is raw LaTeX (``NoEscape``) assembled from escaped data values. The summary
(each workload's headline under the project's claim rule, the noise floor, runs, crossover)
is :mod:`report.findings.headlines`'; the data-driven threats to validity are
:mod:`report.findings.validity`'. The names below are re-exported because the report's
context, its HTML build and several tests call them as ``findings.X``.
"""

from __future__ import annotations

from report.findings.headlines import (
    baseline_slows,
    headline,
    runs_sentence,
    several_runs,
    summary,
)
from report.findings.validity import replica_notes, validity_notes

__all__ = [
    "baseline_slows",
    "headline",
    "replica_notes",
    "runs_sentence",
    "several_runs",
    "summary",
    "validity_notes",
]
