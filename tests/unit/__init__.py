"""The unit tier: in-process tests on hand-built rows, real DuckDB and in-process servers on
loopback; `make test-fast` runs it (under 3 minutes on 2 cores)."""
