"""`specsweep import`: the committed vLLM and SGLang result files (tests/data/README.md)
land in the raw tables (and nothing else: views are analyze's), and once `specsweep analyze`
has run, the latency_conventions view reproduces the numbers the tools printed, to the printed
digit (the import_check view sets them side by side); broken files fail naming file, line and
key, writing nothing."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from specsweep.analyze import build
from specsweep.collect.__main__ import app
from specsweep.collect.importing import importer as importers

DATA = Path(__file__).resolve().parents[2] / "data"
VLLM = DATA / "vllm_deepseek-v2.5_tp8_pp2_sharegpt_qps_inf.json"
SGLANG = DATA / "sglang_bench_serving_shaped.jsonl"
OPTIONS = importers.ImportOptions(method="autoregressive", tp=8)


def counts(db: Path) -> dict[str, int]:
    with duckdb.connect(str(db), read_only=True) as con:
        return {
            t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in importers.TABLE_ORDER
        }


def compared(db: Path, path: Path) -> dict[tuple[str, str], dict]:
    """Import path, run analyze, and read the import_check view of that file."""
    cid, _ = importers.import_file(path, db, OPTIONS)
    build.run(db)
    with duckdb.connect(str(db), read_only=True) as con:
        cursor = con.execute("SELECT * FROM import_check WHERE campaign_id = ?", [cid])
        names = [d[0] for d in cursor.description]
        rows = [dict(zip(names, row)) for row in cursor.fetchall()]
    return {(r["metric"], r["stat"]): r for r in rows}


def latency_conventions(db: Path, cid: str) -> dict:
    with duckdb.connect(str(db), read_only=True) as con:
        cursor = con.execute("SELECT * FROM latency_conventions WHERE campaign_id = ?", [cid])
        names = [d[0] for d in cursor.description]
        (row,) = cursor.fetchall()
    return dict(zip(names, row))


@pytest.mark.parametrize("path", [VLLM, SGLANG], ids=["vllm", "sglang"])
def test_summary_equals_the_file_to_the_printed_digit(path: Path, tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    cid, _ = importers.import_file(path, db, OPTIONS)
    build.run(db)
    ours = latency_conventions(db, cid)
    data = json.loads(path.read_text().splitlines()[0])
    for metric in ("ttft", "tpot", "itl"):
        for stat in ("mean", "median", "p99"):
            value = ours[f"{metric}_ms_{stat}"]
            assert f"{value:.2f}" == f"{data[f'{stat}_{metric}_ms']:.2f}", (metric, stat)


@pytest.mark.parametrize("path", [VLLM, SGLANG], ids=["vllm", "sglang"])
def test_import_check_sets_the_files_figures_beside_ours(path: Path, tmp_path: Path) -> None:
    rows = compared(tmp_path / "r.duckdb", path)
    data = json.loads(path.read_text().splitlines()[0])
    e2e = "e2e_latency" if path == SGLANG else "e2el"
    expected = {(m, s) for m in ("ttft", "tpot", "itl") for s in ("mean", "median", "std", "p99")}
    expected |= {("e2el", s) for s in ("mean", "median", "std", "p99") if f"{s}_{e2e}_ms" in data}
    assert set(rows) == expected
    for (metric, stat), row in rows.items():
        key = f"{stat}_{e2e if metric == 'e2el' else metric}_ms"
        assert row["file_ms"] == data[key] and row["file_printed"] == f"{data[key]:.2f}"
        assert row["specsweep_printed"] == f"{row['specsweep_ms']:.2f}"
        assert row["match"] == (row["file_printed"] == row["specsweep_printed"])
        assert row["match"] or metric == "e2el", row  # only SGLang's E2E ends elsewhere


def test_sglang_e2e_ends_at_the_last_token_not_the_stream_end(tmp_path: Path) -> None:
    # SGLang's latency is taken at the last stream line ([DONE]); ours at the last token
    # chunk, so ours is smaller by that final gap (well under a millisecond locally)
    rows = compared(tmp_path / "r.duckdb", SGLANG)
    for stat in ("mean", "median"):
        gap = rows[("e2el", stat)]["file_ms"] - rows[("e2el", stat)]["specsweep_ms"]
        assert 0 <= gap < 1.0


def test_rows_follow_the_file(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    cid, _ = importers.import_file(VLLM, db, OPTIONS)
    data = json.loads(VLLM.read_text())
    with duckdb.connect(str(db), read_only=True) as con:
        row = con.execute(
            "SELECT ttft_s, e2e_s, chunk_times_s, output_tokens, prompt_tokens, chunk_tokens, "
            "tp, method, concurrency FROM requests WHERE campaign_id = ? AND prompt_id = '3'",
            [cid],
        ).fetchone()
        status, plan = con.execute(
            "SELECT status, plan_yaml FROM campaigns WHERE campaign_id = ?", [cid]
        ).fetchone()
    ttft, itls = data["ttfts"][3], data["itls"][3]
    assert row[0] == ttft
    assert row[1] == pytest.approx(ttft + sum(itls), abs=1e-12)
    assert len(row[2]) == len(itls) + 1 and row[2][1] == pytest.approx(ttft + itls[0])
    assert row[3:] == (
        data["output_lens"][3],
        data["input_lens"][3],
        None,
        8,
        "autoregressive",
        200,
    )  # no client limit: all 200 requests in flight
    assert cid.startswith("import-vllm_deepseek") and status == "complete"
    assert "not a plan" in plan


def test_reimport_is_idempotent(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    importers.import_file(SGLANG, db, OPTIONS)
    first = counts(db)
    importers.import_file(SGLANG, db, OPTIONS)
    assert counts(db) == first
    assert first["requests"] == 32 and first["units"] == 1 and first["campaigns"] == 1


def vllm_like(**changes: object) -> dict:
    data = {
        "completed": 2, "ttfts": [0.1, 0.0], "itls": [[0.02, 0.03], []],
        "output_lens": [3, 0], "input_lens": [5, 5], "generated_texts": ["abc", ""],
        "errors": ["", "Never received a valid chunk to calculate TTFT."],
        "mean_ttft_ms": 100.0, "median_ttft_ms": 100.0, "p99_ttft_ms": 100.0,
    }  # fmt: skip
    data.update(changes)
    return data


def test_failed_requests_become_error_rows(tmp_path: Path) -> None:
    path, db = tmp_path / "one.json", tmp_path / "r.duckdb"
    path.write_text(json.dumps(vllm_like(completed=1)))
    cid, _ = importers.import_file(path, db, OPTIONS)
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT ok, ttft_s, e2e_s, output_tokens, error_kind, error_message FROM requests "
            "WHERE campaign_id = ? ORDER BY prompt_id",
            [cid],
        ).fetchall()
    assert rows[0][:4] == (True, 0.1, pytest.approx(0.15), 3)
    assert rows[1][:5] == (False, None, None, None, "empty")
    assert rows[1][5].startswith("Never received")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            json.dumps({k: v for k, v in vllm_like(completed=1).items() if k != "itls"}),
            "one.json line 1: missing key 'itls'",
        ),
        (json.dumps(vllm_like(completed=1)) + "\n" + "{not json\n", "one.json line 2: not JSON"),
        (
            json.dumps(vllm_like(completed=1)) + "\n" + json.dumps(vllm_like(output_lens=[3])),
            "one.json line 2: 'output_lens' has 1 entries, ttfts 2",
        ),
        (json.dumps(vllm_like(completed=2)), "1 requests have no error but 'completed' is 2"),
        ("[1, 2]", "expected a JSON object"),
        ("", "empty file"),
    ],
    ids=["missing-key", "bad-json-line", "length", "completed", "not-object", "empty"],
)
def test_malformed_files_fail_clearly_and_write_nothing(
    text: str, message: str, tmp_path: Path
) -> None:
    path, db = tmp_path / "one.json", tmp_path / "r.duckdb"
    path.write_text(text)
    result = CliRunner().invoke(app, ["import", str(path), "--db", str(db)])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert not db.exists()
