"""Sentences generated from the data: the summary of findings and the validity notes.

Each sentence is written once, as marked Unicode text (:mod:`report.text`: plain
strings whose code, emphasis and bold spans are marked by private-use delimiters), and each
output renders it: the PDF with ``text.latex``, the HTML report with ``text.html``, the JSON
export with ``text.plain``. :func:`report.findings.results.build` reads a campaign's data once
into one :class:`~report.findings.results.Findings` (the sentences and page 1's claims as
data) that the three outputs share. The summary (each workload's headline under the project's
claim rule, crossover) is :mod:`report.findings.headlines`'; the physics check that keeps a
gain larger than speculation can give out of the headlines is :mod:`report.findings.physics`';
what the experiment's design lets page 1 say (the Holm family and its m, the noise floor of a
service start, the rounds) is :mod:`report.findings.design`'; the energy sentence is
:mod:`report.findings.energy`'; the data-driven threats to validity are
:mod:`report.findings.validity`'. The names below are re-exported because the report's
context, its HTML build and several tests call them as ``findings.X``.
"""

from __future__ import annotations

from specsweep.report.findings.design import runs_sentence, several_runs
from specsweep.report.findings.headlines import baseline_slows, headline, method, summary
from specsweep.report.findings.results import Findings, build
from specsweep.report.findings.validity import replica_notes, validity_notes

__all__ = [
    "Findings",
    "baseline_slows",
    "build",
    "headline",
    "method",
    "replica_notes",
    "runs_sentence",
    "several_runs",
    "summary",
    "validity_notes",
]
