"""The HTML report: one self-contained file beside the PDF (``specsweep report --html``).

It shows what the PDF shows, read from the same places: the findings of report.findings
(one ``Findings`` object: its claims as page 1's table, report.findings.table, then the
headline chart, the method and the summary, its marked sentences rendered by
``report.text.html``), the
figures of report.figures (drawn once for both, embedded as PNG data URIs by
:mod:`report.html.figures`), and a sortable, filterable table of every analysis object in the
DuckDB file (:mod:`report.html.views`). :mod:`report.html.build` renders the ``*.j2``
templates beside it with jinja2's HTML autoescape. The PDF stays the primary output;
docs/html-report.md is the user's page.
"""

from __future__ import annotations
