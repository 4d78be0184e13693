"""The report stage: read one campaign's analysis views from DuckDB and render a PDF.

``report`` only reads the database. Charts (matplotlib) are drawn by ``report.charts``
(which to draw: ``report.figures``), tables and escaping live in ``report.tables`` and
``report.latex``, the open-loop part in ``report.openloop``, the section on speculation's
knobs in ``report.speculation``, templates in ``latex/``, and ``report.build.run`` ties them
together with latexmk. Entry point: ``specsweep report``
(``specsweep report``).
"""
