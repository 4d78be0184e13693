"""Sentences generated from the data: the summary of findings and the validity notes.

Each sentence is raw LaTeX (``NoEscape``) assembled from escaped data values. The summary
(each workload's headline under the project's claim rule, crossover) is
:mod:`report.findings.headlines`'; the physics check that keeps a gain larger than
speculation can give out of the headlines is :mod:`report.findings.physics`'; what the
experiment's design lets page 1 say (the Holm family and its m, the noise floor of a service
start, the rounds) is :mod:`report.findings.design`'; the data-driven threats to validity are
:mod:`report.findings.validity`'. The names below are re-exported because the report's
context, its HTML build and several tests call them as ``findings.X``.
"""

from __future__ import annotations

from report.findings.design import runs_sentence, several_runs
from report.findings.headlines import baseline_slows, headline, summary
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
