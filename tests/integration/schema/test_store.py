"""Tests for schema/store.py on real DuckDB files: validated appends, quarantine,
transactions, resume bookkeeping, re-opening and migrations.

The tests that start real programs (servers, subprocesses, latexmk); the in-process ones, and
the helpers both use, are in tests/unit/schema/test_store.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from specsweep.schema.store import Store
from tests.unit.schema.test_store import Row, count  # noqa: F401


def test_a_write_waits_for_a_reader_in_another_process(
    store: Store, db_path: Path, make_row: Row
) -> None:
    """`make sql` open on the file must delay a campaign's write, not crash it."""
    import time

    store.append("requests", [make_row(0)])
    reader = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys, time; c = duckdb.connect(sys.argv[1], read_only=True); "
            "print('open', flush=True); time.sleep(1.5)",
            str(db_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert reader.stdout.readline().strip() == "open"
    t0 = time.monotonic()
    assert store.append("requests", [make_row(1)]) == 1
    waited = time.monotonic() - t0
    reader.wait(timeout=10)
    assert waited > 0.5  # it really had to wait for the reader to let go
    assert count(db_path, "requests") == 2
