"""specsweep analysis stage: raw DuckDB tables -> analysis tables and the speedup table.

`specsweep analyze` (or `analyze.build.run(db_path)`) runs the analysis models
(`analyze/models/`: the SQL files `analyze/sql/*.sql` and the Python models of
`analyze/models/registry.py`) in the order their declared reads give, and the paired
statistics fill the `speedup` table's intervals (`analyze.stats`). The contract for every
object built here is `analyze/VIEWS.md`, generated from the models.
"""
