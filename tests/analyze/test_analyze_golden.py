"""Golden file: the default campaign's raw tables (tests/data/default-campaign/*.parquet, a real
`make collect` run of plans/local.yaml on the 2-core VM, 2026-12-03) and the `speedup` table
the analysis built from them before issue 12 rewrote it (request_metrics as a table, the
chunk-list pass, the rank-space bootstrap): expected_speedup.csv, written by commit 37c26cb's
`python -m analyze`. Same seed, same data: every figure must come out the same, to the
printed digit and (floats) to 1e-12.

Except accept_length_tw, which issue 14 moved to the one definition, sum(output_tokens - 1) /
sum(spec_verify_ct): the prefill token is no longer counted. The files' llama.cpp rows were
written by the v6 collect, whose spec_verify_ct (predicted_n - draft_n_accepted) counted the
prefill as a verify step too; golden_db brings them to v7's meaning (predicted_n - 1 -
draft_n_accepted, what collect stores now) before analyze runs, and the expected
accept_length_tw are the new definition's on those rows (draft-simple chat 3.7647 -> 3.9375,
ngram-map-k chat 1.0 -> 1.0, ngram-simple agentic 1.5706 -> 1.5849)."""

from __future__ import annotations

import csv
from pathlib import Path

import duckdb
import pytest

from analyze import build
from schema.store import LLAMACPP_VERIFY_STEPS_V7, connect

DATA = Path(__file__).resolve().parents[1] / "data" / "default-campaign"
FLOATS = ("speedup", "ci_low", "ci_high", "throughput_speedup", "ttft_ratio",
          "accept_length_tw", "method_decode_tps_p50", "baseline_decode_tps_p50")


def golden_db(path: Path) -> Path:
    with connect(path, create=True) as con:  # the current schema; the files hold raw rows
        for table in sorted(DATA.glob("*.parquet")):
            con.execute(f"INSERT INTO {table.stem} BY NAME SELECT * FROM read_parquet(?)",
                        [str(table)])
        # the files hold v6 llama.cpp rows: what migrate_to_7 does to them
        con.execute(LLAMACPP_VERIFY_STEPS_V7)
    return path


def test_the_default_campaigns_speedup_table_is_unchanged(tmp_path: Path) -> None:
    path = golden_db(tmp_path / "golden.duckdb")
    build.run(path)
    with (DATA / "expected_speedup.csv").open() as f:
        expected = list(csv.DictReader(f))
    with duckdb.connect(str(path), read_only=True) as con:
        cursor = con.execute(f"SELECT {', '.join(expected[0])} FROM speedup ORDER BY ALL")
        names = [d[0] for d in cursor.description]
        got = [dict(zip(names, row)) for row in cursor.fetchall()]
    assert len(got) == len(expected) == 22
    for want, have in zip(expected, got):
        for name, text in want.items():
            if name in FLOATS:
                assert have[name] == pytest.approx(float(text), rel=1e-12), name
                assert f"{have[name]:.2f}" == f"{float(text):.2f}", name  # as printed
            elif name == "significant":
                assert have[name] == (text == "true"), name
            else:
                assert str(have[name]) == text, name
