"""The report's LaTeX templates (``report.tex.j2``, ``preamble.tex``) as package data.

A package only so that an installed specsweep carries them: ``report.latex`` finds
this folder through ``importlib.resources``, not through a path relative to the repo.
"""
