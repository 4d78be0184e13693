"""The compare report, ``specsweep report --compare A B``: what changed between two campaigns
and whether it is real. It reads only the compare_* tables that ``specsweep compare A
B`` stores (:mod:`report.compare.data`), words the verdict, the likely cause and the tables
(:mod:`report.compare.text`), draws the B/A decode-speed chart with the report's theme
(:mod:`report.compare.figure`) and renders ``latex/compare.tex.j2`` with the report's
escape-by-default environment and latexmk (:mod:`report.compare.build`).
"""
