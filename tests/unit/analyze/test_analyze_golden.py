"""Golden file: the default campaign's raw tables (tests/data/default-campaign/*.parquet, a real
`make collect` run of plans/local.yaml on the 2-core VM, 2026-12-03, one round) and the
`speedup` table the analysis builds from them: expected_speedup.csv, written by issue 36's
analysis (the geometric mean of per-prompt ratios; no interval with one start per side or
below 3 prompts). Same data: every figure
must come out the same, to the printed digit and (floats) to 1e-12; an empty cell is NULL.

The file is also a record of what issues 24 and 36 found: that run's baseline decoded at 3-13
tok/s (the other services at 100-110; the plan expects ~150), so its "speedups" of 5-18x with
an acceptance length of 1.0 are a slowed baseline, not speculation. Before issue 24, 18 of the
22 rows were significant; after it 7 were (Holm). Since issue 36 none is: the campaign started
each configuration once, so how far another start would land was never sampled, and every row
is a point estimate with that reason (the point estimates are unchanged to rounding).

accept_length_tw is issue 14's definition, sum(output_tokens - 1) / sum(spec_verify_ct): the
files' llama.cpp rows were written by the v6 collect, whose spec_verify_ct counted the
prefill as a verify step too; golden_db brings them to v7's meaning (predicted_n - 1 -
draft_n_accepted, what collect stores now) before analyze runs."""

from __future__ import annotations

import csv
from pathlib import Path

import duckdb
import pytest

from specsweep.analyze import build
from specsweep.schema.migrations import LLAMACPP_VERIFY_STEPS_V7
from specsweep.schema.store import connect

DATA = Path(__file__).resolve().parents[2] / "data" / "default-campaign"
FLOATS = (
    "speedup",
    "ci_low",
    "ci_high",
    "df",
    "p_value",
    "p_holm",
    "sim_ci_low",
    "sim_ci_high",
    "throughput_speedup",
    "ttft_ratio",
    "accept_length_tw",
    "method_decode_tps_p50",
    "baseline_decode_tps_p50",
)
BOOLS = ("significant", "significant_raw")


def golden_db(path: Path) -> Path:
    with connect(path, create=True) as con:  # the current schema; the files hold raw rows
        for table in sorted(DATA.glob("*.parquet")):
            con.execute(
                f"INSERT INTO {table.stem} BY NAME SELECT * FROM read_parquet(?)", [str(table)]
            )
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
            if text == "":
                assert have[name] is None, name
            elif name in FLOATS:
                assert have[name] == pytest.approx(float(text), rel=1e-12), name
                assert f"{have[name]:.2f}" == f"{float(text):.2f}", name  # as printed
            elif name in BOOLS:
                assert have[name] == (text == "true"), name
            elif name == "n_family":
                assert have[name] == int(float(text)), name
            else:
                assert str(have[name]) == text, name


def test_a_baseline_no_service_ran_is_refused(tmp_path: Path) -> None:
    """--baseline names a method; a typo would build every comparison empty, so it is an
    error that lists the methods the file's services ran, and nothing is built."""
    path = golden_db(tmp_path / "golden.duckdb")
    with pytest.raises(
        ValueError,
        match=r"--baseline 'autoregresive': no service in .* ran it; "
        r"methods: \['autoregressive', 'draft-simple', 'ngram-map-k', 'ngram-simple'\]$",
    ):
        build.run(path, baseline="autoregresive")
    with duckdb.connect(str(path), read_only=True) as con:
        assert not con.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'speedup'"
        ).fetchone()[0]
