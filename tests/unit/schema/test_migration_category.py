"""Schema v11, requests.category: a v10 file gains the column on open, NOT NULL, its old rows
'uncategorized' (an mtbench/<id> prompt's category cannot be looked up in SQL); the file still
analyzes; a fresh file refuses a NULL category and the contract refuses a missing or
malformed one."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from specsweep.schema.store import SCHEMA_VERSION, Store
from tests.support.fixtures.schema import request_row
from tests.support.old_schemas import ddl_as_of

V10_REQUEST = (
    "INSERT INTO requests (request_id, campaign_id, config_id, service_id, engine, method, tp, "
    "workload, window_id, prompt_id, max_tokens, rep, concurrency, is_warmup, sent_at, start_s, "
    "ttft_s, e2e_s, output_tokens, ok) VALUES (?, 'c', 'k', 's', 'llamacpp', ?, 1, 'w', ?, ?, "
    "64, 0, 1, false, now(), 0, 0.5, 2.5, 9, true)"
)


def _v10_file(path: Path) -> None:
    """A results file as v10 wrote it: two methods on one MT-Bench and one HumanEval prompt."""
    with duckdb.connect(str(path)) as con:
        con.execute(ddl_as_of(10))
        con.execute("INSERT INTO schema_version VALUES (10, now()::TIMESTAMP)")
        assert "category" not in [c[0] for c in con.execute("DESCRIBE requests").fetchall()]
        for i, (method, prompt) in enumerate(
            [(m, p) for m in ("autoregressive", "ngram") for p in ("mtbench/81", "humaneval/0")]
        ):
            con.execute(V10_REQUEST, [f"r{i}", method, f"x-{method}", prompt])


def test_a_v10_file_gains_category_and_its_rows_are_uncategorized(tmp_path: Path) -> None:
    path = tmp_path / "v10.duckdb"
    _v10_file(path)
    Store(path)
    with duckdb.connect(str(path), read_only=True) as con:
        described = {c[0]: c[2] for c in con.execute("DESCRIBE requests").fetchall()}
        assert described["category"] == "NO"  # NOT NULL, as a fresh file's
        assert con.execute("SELECT DISTINCT category FROM requests").fetchall() == [
            ("uncategorized",)
        ]
        assert con.execute("SELECT max(version) FROM schema_version").fetchone() == (
            SCHEMA_VERSION,
        )
    with duckdb.connect(str(path)) as con, pytest.raises(duckdb.ConstraintException):
        con.execute("UPDATE requests SET category = NULL WHERE request_id = 'r0'")


def test_a_migrated_v10_file_still_analyzes(tmp_path: Path) -> None:
    from specsweep.analyze import build

    path = tmp_path / "v10.duckdb"
    _v10_file(path)
    build.run(path, baseline="autoregressive")
    with duckdb.connect(str(path), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM request_metrics").fetchone() == (4,)
        assert con.execute("SELECT count(*) FROM speedup").fetchone() == (1,)


def test_a_fresh_file_defaults_and_the_contract_requires_a_lowercase_category(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "fresh.duckdb")
    assert store.append("requests", [request_row(0, category="writing")]) == 1
    missing = request_row(1)
    del missing["category"]
    # the contract refuses a row without one, and a name that is not lowercase
    assert store.append("requests", [missing, request_row(2, category="Writing")]) == 0
    with duckdb.connect(str(tmp_path / "fresh.duckdb"), read_only=True) as con:
        assert con.execute("SELECT request_id, category FROM requests").fetchall() == [
            ("req-0", "writing")
        ]
        assert con.execute("SELECT count(*) FROM quarantine").fetchone() == (2,)
