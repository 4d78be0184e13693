"""import_check (analyze/sql/import_check.sql) on hand-built rows: the figures an imported
file printed (environment 'import.run<k>.<field>') beside latency_conventions of run k's
window ('<campaign_id>-w<k>'), equal when they print the same with "%.2f"."""

from __future__ import annotations

import json
from pathlib import Path

from specsweep.analyze import build
from specsweep.schema.store import connect
from tests.support.analyze_rows import fetch, req, write_db

CID = "import-x-123"


def facts(path: Path, cid: str, tool: str, fields: dict[str, object]) -> None:
    """environment rows as the importer writes them: JSON text of each scalar field."""
    rows = [("import.tool", tool)] + [(k, json.dumps(v)) for k, v in fields.items()]
    with connect(path) as con:
        con.executemany(
            "INSERT INTO environment VALUES (?, 'imported', ?, ?)",
            [[cid, key, value] for key, value in rows],
        )


def window(k: int, ttfts: list[float], cid: str = CID) -> list[dict]:
    """Run k's requests: ttft as given, e2e = ttft + 1 s, 11 tokens (tpot = 100 ms)."""
    return [
        req(
            campaign_id=cid,
            window_id=f"{cid}-w{k}",
            workload=f"wl-run{k}",
            prompt_id=str(i),
            ttft_s=t,
            e2e_s=t + 1.0,
            output_tokens=11,
        )
        for i, t in enumerate(ttfts)
    ]


def check(path: Path) -> dict[tuple[int, str, str], dict]:
    rows = fetch(path, "SELECT * FROM import_check")
    return {(r["run"], r["metric"], r["stat"]): r for r in rows}


def test_figures_equal_to_the_printed_digit_match_and_others_do_not(tmp_path: Path) -> None:
    path = tmp_path / "r.duckdb"
    # ours: run 0 ttft 100 and 300 ms -> mean 200, median 200; run 1 ttft 50 ms
    write_db(path, window(0, [0.1, 0.3]) + window(1, [0.05]))
    facts(path, CID, "vllm", {
        "import.run0.mean_ttft_ms": 200.004,     # prints 200.00: match
        "import.run0.median_ttft_ms": 200.006,   # prints 200.01: differs
        "import.run0.mean_tpot_ms": 100.0,
        "import.run0.p99_itl_ms": 0.0,           # no chunk times: ours NULL, printed 0.00
        "import.run1.mean_ttft_ms": 50.0,        # run 1 is window -w1, not -w0
        "import.run0.completed": 2,              # not a compared figure
        "import.run0.p95_itl_ms": 1.0,           # a statistic the check does not cover
    })  # fmt: skip
    build.run(path, baseline="autoregressive")
    rows = check(path)
    assert set(rows) == {
        (0, "ttft", "mean"),
        (0, "ttft", "median"),
        (0, "tpot", "mean"),
        (0, "itl", "p99"),
        (1, "ttft", "mean"),
    }
    mean, median = rows[(0, "ttft", "mean")], rows[(0, "ttft", "median")]
    assert (mean["file_printed"], mean["specsweep_printed"], mean["match"]) == (
        "200.00",
        "200.00",
        True,
    )
    assert (median["file_printed"], median["specsweep_printed"], median["match"]) == (
        "200.01",
        "200.00",
        False,
    )
    assert rows[(0, "tpot", "mean")]["match"] and rows[(1, "ttft", "mean")]["match"]
    itl = rows[(0, "itl", "p99")]
    assert (itl["specsweep_ms"], itl["specsweep_printed"], itl["match"]) == (None, "0.00", True)
    assert rows[(1, "ttft", "mean")]["workload"] == "wl-run1"


def test_each_tool_names_e2e_its_own_way(tmp_path: Path) -> None:
    path = tmp_path / "r.duckdb"
    write_db(path, window(0, [0.1]) + window(0, [0.1], cid="import-y-456"))
    # SGLang writes mean_e2e_latency_ms; vLLM mean_e2el_ms. A key of the other spelling is
    # not the tool's figure and is left out.
    facts(
        path,
        CID,
        "sglang",
        {"import.run0.mean_e2e_latency_ms": 1100.0, "import.run0.mean_e2el_ms": 1.0},
    )
    facts(
        path,
        "import-y-456",
        "vllm",
        {"import.run0.mean_e2el_ms": 1100.0, "import.run0.mean_e2e_latency_ms": 1.0},
    )
    build.run(path, baseline="autoregressive")
    rows = fetch(
        path, "SELECT campaign_id, metric, file_ms, match FROM import_check ORDER BY campaign_id"
    )
    assert rows == [
        {"campaign_id": CID, "metric": "e2el", "file_ms": 1100.0, "match": True},
        {"campaign_id": "import-y-456", "metric": "e2el", "file_ms": 1100.0, "match": True},
    ]


def test_a_measured_campaign_has_no_rows(tmp_path: Path) -> None:
    path = tmp_path / "r.duckdb"
    write_db(path, [req()])
    with connect(path) as con:  # a measured campaign's facts look nothing like an import's
        con.execute("INSERT INTO environment VALUES ('c1', 'h', 'import.run0.mean_ttft_ms', '1.0')")
    build.run(path, baseline="autoregressive")
    assert fetch(path, "SELECT * FROM import_check") == []
    assert lines(path) == []


def test_analyze_prints_the_count_and_each_figure_that_differs(tmp_path: Path) -> None:
    path = tmp_path / "r.duckdb"
    write_db(path, window(0, [0.1]))
    facts(path, CID, "vllm", {"import.run0.mean_ttft_ms": 100.0, "import.run0.p99_ttft_ms": 120.0})
    build.run(path, baseline="autoregressive")
    assert lines(path) == [
        "import_check: 1 of 2 figures printed by 1 imported file(s) equal specsweep's to the "
        "printed digit",
        f"  differs: {CID} wl-run0 p99 ttft (ms): file 120.00, specsweep 100.00",
    ]


def test_sglangs_e2e_difference_is_named_as_expected(tmp_path: Path) -> None:
    path = tmp_path / "r.duckdb"
    write_db(path, window(0, [0.1]))
    facts(
        path,
        CID,
        "sglang",
        {"import.run0.mean_e2e_latency_ms": 1100.02, "import.run0.mean_ttft_ms": 101.0},
    )
    build.run(path, baseline="autoregressive")
    e2e, ttft = lines(path)[1:]
    assert e2e.endswith("specsweep 1100.00" + build.SGLANG_E2E)
    assert ttft.endswith("mean ttft (ms): file 101.00, specsweep 100.00")  # no excuse here


def lines(path: Path) -> list[str]:
    with connect(path, read_only=True) as con:
        return build.import_check_lines(con)
