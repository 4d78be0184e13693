"""The analysis layer's models: each table, view or macro `specsweep analyze` builds belongs to
one model that declares what it reads, and the build order is derived from those declarations
(dbt's way). A SQL model is a file analyze/sql/<name>.sql whose first lines say
`-- reads: a, b`; a Python model is one entry of `registry.PYTHON`. `registry.models()` is the
one list of analysis objects: analyze.build runs it, and `python -m specsweep.analyze.models.docs`
writes analyze/VIEWS.md and the data dictionary's table list from it.
"""
