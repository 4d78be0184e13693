"""specsweep analysis stage: raw DuckDB tables -> analysis views and the speedup table.

`python -m analyze` (or `analyze.build.run(db_path)`) executes `analyze/sql/NN_*.sql` in
order and writes the `speedup` table with bootstrap confidence intervals (`analyze.stats`).
The contract for every object built here is `analyze/VIEWS.md`.
"""
