"""`python -m analyze compare` and `gate` on two campaigns built from hand-made rows: a 20%
decode slowdown injected into one method of B is found with the right sign and size, the
gate fails on it (exit 1) and passes a pair without change (exit 0); windows of partly
different plans are listed, not dropped; bad input exits 2. Open-loop windows are matched on
their load (a 1.5x TTFT injected at 2 req/s is found; a ramp in one campaign only is
listed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from analyze_rows import AR, decode_req, open_req, req, store_rows, window, write_db

from analyze import build, compare
from analyze.environment_diff import argument_diff, stable

PROMPTS = [f"p{i}" for i in range(6)]


def _campaign(cid: str, slowdown: float, extra_workload: bool = False) -> list[dict]:
    rows = []
    for method, tps in (("autoregressive", 40.0), ("ngram", 60.0)):
        for i, prompt in enumerate(PROMPTS):
            for rep in range(3):
                speed = tps * (1 + 0.02 * i + 0.005 * rep)  # prompts differ, reps a little
                if method == "ngram":
                    speed *= slowdown
                rows.append(decode_req(speed, campaign_id=cid, method=method,
                                       prompt_id=prompt, rep=rep,
                                       config_id=f"{cid}-{method}", window_id=f"{cid}-{method}"))
                if extra_workload:
                    rows.append(decode_req(speed, campaign_id=cid, method=method,
                                           prompt_id=prompt, rep=rep, workload="code",
                                           window_id=f"{cid}-{method}-code"))
    return rows


def _db(tmp_path: Path, b_slowdown: float, extra: bool = False, plan: str = "nightly") -> Path:
    path = tmp_path / "r.duckdb"
    write_db(path, _campaign("A", 1.0) + _campaign("B", b_slowdown, extra))
    with duckdb.connect(str(path)) as con:
        for cid, name in (("A", plan), ("B", plan)):
            con.execute("INSERT INTO campaigns VALUES (?, ?, repeat('0', 64), '', "
                        "'autoregressive', ?, NULL, 'complete')",
                        [cid, name, f"2026-12-0{1 if cid == 'A' else 2} 00:00:00"])
        con.execute("INSERT INTO environment VALUES ('A', 'gpu1', 'engine.version', '0.29'), "
                    "('B', 'gpu1', 'engine.version', '0.30'), ('A', 'gpu1', 'cpu.model', 'x'), "
                    "('B', 'gpu1', 'cpu.model', 'x')")
    build.run(path, baseline="autoregressive")
    return path


def _compare(db: Path, a: str = "A", b: str = "B") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "analyze", "compare", "--db", str(db), a, b],
                          capture_output=True, text=True, timeout=120)


def _gate(db: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "analyze", "gate", "--db", str(db),
                           "--baseline", "A", "--candidate", "B", *extra],
                          capture_output=True, text=True, timeout=120)


def test_an_injected_slowdown_is_found_with_its_sign_and_size(tmp_path: Path) -> None:
    db = _db(tmp_path, 0.8)
    with duckdb.connect(str(db), read_only=True) as con:
        result = compare.compare(con, "A", "B")
    first = result.changes[0]  # the largest significant change comes first
    assert (first.window[2], first.metric) in {("ngram", "decode_tps"), ("ngram", "tpot_s")}
    decode = next(c for c in result.changes if c.window[2] == "ngram"
                  and c.metric == "decode_tps")
    assert decode.ratio == pytest.approx(0.8) and decode.significant and decode.worse
    assert decode.ci_low <= 0.8 <= decode.ci_high and decode.n_prompts == 6
    tpot = next(c for c in result.changes if c.window[2] == "ngram" and c.metric == "tpot_s")
    assert tpot.ratio == pytest.approx(1 / 0.8) and tpot.worse
    unchanged = [c for c in result.changes if c.window[2] == "autoregressive"]
    assert unchanged and all(c.ratio == pytest.approx(1) and not c.significant
                             for c in unchanged)
    # each campaign's own speedup: 1.5x in A, 1.2x in B
    (sa, sb), = result.speedup_ratio.values()
    assert (sa, sb) == (pytest.approx(1.5), pytest.approx(1.2))
    assert result.environment == [("gpu1", "engine.version", "0.29", "0.30")]
    done = _gate(db, "--max-regression", "5%")
    assert done.returncode == 1 and "FAIL" in done.stdout and "ngram" in done.stdout
    assert _gate(db, "--max-regression", "25%").returncode == 0  # smaller than the threshold


def test_no_change_passes_and_partly_different_plans_list_their_windows(tmp_path: Path) -> None:
    db = _db(tmp_path, 1.0, extra=True)
    with duckdb.connect(str(db), read_only=True) as con:
        result = compare.compare(con, "nightly", "A")  # a plan name: its latest campaign (B)
    assert result.a == "B" and result.b == "A"
    assert [k[3] for k in result.only_a] == ["code", "code"] and result.only_b == []
    assert not any(c.significant for c in result.changes)
    done = _gate(db)
    assert done.returncode == 0 and "gate: 0 regression(s) beyond 5.0%" in done.stdout


def test_bad_input_exits_2(tmp_path: Path) -> None:
    db = _db(tmp_path, 1.0)
    unknown = subprocess.run([sys.executable, "-m", "analyze", "compare", "--db", str(db), "A",
                              "nosuch"], capture_output=True, text=True, timeout=120)
    assert unknown.returncode == 2 and "no campaign 'nosuch'" in unknown.stderr
    assert _gate(db, "--max-regression", "150%").returncode == 2


def test_the_environment_diff_ignores_the_port_and_names_the_changed_arguments() -> None:
    a = "/bin/llama-server -m /m.gguf --port 34945 -t 2 -c 8192 --metrics"
    b = "/bin/llama-server -m /m.gguf --port 46953 -t 1 -c 8192 --metrics"
    assert stable(a) != stable(b)
    assert stable(a).replace("-t 2", "-t 1") == stable(b)
    assert "--port *" in stable(a)
    assert argument_diff(stable(a), stable(b)) == "-t 2 -> -t 1"
    assert argument_diff(a + " --flag", a) == "--flag -> (nothing)"
    assert argument_diff("0.29", "0.30") == "'0.29' -> '0.30'"


def _stored(db: Path, table: str, a: str = "A", b: str = "B") -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(f"SELECT * EXCLUDE (a, b) FROM {table} WHERE a = ? AND b = ? "
                           "ORDER BY ALL", [a, b]).fetchall()


def _counts(db: Path) -> dict[tuple[str, str, str], int]:
    with duckdb.connect(str(db), read_only=True) as con:
        return {(t, a, b): n for t in compare.OBJECTS for a, b, n in
                con.execute(f"SELECT a, b, count(*) FROM {t} GROUP BY ALL").fetchall()}


def test_compare_stores_what_compare_returns(tmp_path: Path) -> None:
    db = _db(tmp_path, 0.8, extra=True)
    done = _compare(db)
    assert done.returncode == 0, done.stderr
    assert "compare: stored in" in done.stdout and "compare_changes (10 rows)" in done.stdout
    with duckdb.connect(str(db), read_only=True) as con:
        result = compare.compare(con, "A", "B")
        changes = con.execute("SELECT * EXCLUDE (a, b) FROM compare_changes WHERE a = 'A' "
                              "AND b = 'B' ORDER BY rank").fetchall()
    assert changes == [(*c.window, c.metric, c.a, c.b, c.ratio, c.ci_low, c.ci_high,
                        c.n_prompts, c.significant, c.worse, c.effect, rank)
                       for rank, c in enumerate(result.changes, 1)]
    assert changes[0][2] == "ngram" and changes[0][-1] == 1 and changes[0][-3]  # worse
    assert _stored(db, "compare_speedups") == [(*k, pytest.approx(1.5), pytest.approx(1.2))
                                               for k in result.speedup_ratio]
    assert _stored(db, "compare_only") == sorted(("B", *k) for k in result.only_b) != []
    assert _stored(db, "compare_environment") == [
        ("gpu1", "engine.version", "0.29", "0.30", None)]
    runs = _stored(db, "compare_runs")  # 2 methods x 6 prompts x 3 reps, B twice (code)
    assert [(r[0], r[1], r[3]) for r in runs] == [("A", "nightly", 36), ("B", "nightly", 72)]


def test_a_second_compare_replaces_the_pairs_rows_and_keeps_other_pairs(tmp_path: Path) -> None:
    db = _db(tmp_path, 0.8)
    assert _compare(db).returncode == 0 and _compare(db, "B", "A").returncode == 0
    first = _counts(db)
    assert first[("compare_changes", "A", "B")] == first[("compare_changes", "B", "A")] == 10
    with duckdb.connect(str(db)) as con:  # a row the next compare of (A, B) must delete
        con.execute("INSERT INTO compare_only VALUES ('A', 'B', 'A', 'e', 1, 'm', 'w', 1, 1, "
                    "'closed')")
    assert _compare(db).returncode == 0
    assert _counts(db) == first  # (A, B) replaced, not doubled; (B, A) kept
    build.run(db, baseline="autoregressive")  # rebuilding the analysis keeps them
    assert _counts(db) == first


def test_gate_writes_nothing(tmp_path: Path) -> None:
    db = _db(tmp_path, 0.8)
    assert _gate(db).returncode == 1
    with duckdb.connect(str(db), read_only=True) as con:
        tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables")
                  .fetchall()}
    assert not tables & set(compare.OBJECTS)


def _open_db(tmp_path: Path, slo: dict[str, str] | None = None) -> Path:
    """Campaigns A and B, each one poisson window at 2 req/s on chat: 11 requests at 0..10 s
    (steady: 1..9), prompt p<i>, TTFT 0.1 * (1 + 0.03 i) s in A and 1.5x that in B, TPOT
    0.02 s in both; B also has a linear ramp 0.5-2 req/s that A lacks. slo: each
    campaign's slo.ttft_ms (none by default)."""
    requests, windows = [], []
    for cid, slower in (("A", 1.0), ("B", 1.5)):
        requests += [open_req(float(i), ttft=0.1 * (1 + 0.03 * i) * slower, campaign_id=cid,
                              window_id=f"{cid}-open", prompt_id=f"p{i}") for i in range(11)]
        windows.append(window(cid, f"{cid}-open", rate=2.0, n=11, span=10.0, elapsed=12.0))
    requests += [open_req(float(i), campaign_id="B", window_id="B-ramp", prompt_id=f"p{i}")
                 for i in range(5)]
    windows.append(window("B", "B-ramp", rate=None, n=5, span=4.0, elapsed=5.0,
                          ramp="linear", ramp_start_rate=0.5, ramp_end_rate=2.0))
    campaigns = [{"campaign_id": c, "plan_name": "open", "plan_sha256": "ab" * 32,
                  "plan_yaml": "name: open\n", "baseline": AR, "started_at": req()["sent_at"],
                  "finished_at": None, "status": "complete"} for c in "AB"]
    path = tmp_path / "open.duckdb"
    environment = [{"campaign_id": c, "host": "campaign", "key": "slo.ttft_ms", "value": v}
                   for c, v in (slo or {}).items()]
    store_rows(path, requests=requests, windows=windows, campaigns=campaigns,
               environment=environment)
    build.run(path, baseline=AR)
    return path


def test_open_loop_windows_are_matched_on_their_load(tmp_path: Path) -> None:
    db = _open_db(tmp_path)
    with duckdb.connect(str(db), read_only=True) as con:
        result = compare.compare(con, "A", "B")
    key = ("sglang", 1, AR, "chat", 256, None, "poisson 2 rps")
    by_metric = {c.metric: c for c in result.changes}
    assert {c.window for c in result.changes} == {key}
    ttft = by_metric["ttft_s"]
    assert result.changes[0] is ttft and ttft.significant and ttft.worse
    assert ttft.ratio == pytest.approx(1.5) and ttft.n_prompts == 9  # the steady requests
    assert by_metric["tpot_s"].ratio == pytest.approx(1) and not by_metric["tpot_s"].significant
    assert by_metric["ttft_s_p90"].ratio == pytest.approx(1.5)  # every TTFT 1.5x: the tail too
    assert by_metric["ttft_s_p90"].a == pytest.approx(0.1 * (1 + 0.03 * 8.2))  # p90 of 1..9
    assert "accept_length" not in by_metric  # no verify counts
    assert result.only_a == [] and result.only_b == [
        ("sglang", 1, AR, "chat", 256, None, "poisson linear ramp 0.5-2 rps")]
    assert compare.describe(ttft).startswith("sglang/1/autoregressive/chat/256/poisson 2 rps "
                                             "ttft_s: ")
    done = _gate(db, "--max-regression", "5%")
    assert done.returncode == 1 and "poisson 2 rps ttft_s" in done.stdout


def test_load_labels() -> None:
    label = compare.load_label
    assert label("closed", None, None, None, None, None) == "closed"
    assert label("poisson", 4.0, None, None, None, None) == "poisson 4 rps"
    assert label("gamma", 0.5, None, None, None, 0.25) == "gamma(0.25) 0.5 rps"
    assert label("constant", 2.5, None, None, None, None) == "constant 2.5 rps"
    assert label("poisson", None, "exponential", 1.0, 8.0, None) == (
        "poisson exponential ramp 1-8 rps")
    assert label("trace", None, None, None, None, None) == "trace"
    assert compare.window_text(("e", 1, "m", "w", 64, 8, "poisson 4 rps")) == (
        "e/1/m/w/64/poisson 4 rps cap 8")
    assert compare.window_text(("e", 1, "m", "w", 64, 4, "closed")) == "e/1/m/w/64/c=4"


def test_compare_tables_of_an_older_specsweep_are_made_anew(tmp_path: Path) -> None:
    """compare_only without the load column (as issue 15 wrote it) is dropped and created
    with this version's columns; the pair's rows are stored."""
    db = _db(tmp_path, 1.0, extra=True)
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE compare_only (a VARCHAR NOT NULL, b VARCHAR NOT NULL, "
                    "side VARCHAR NOT NULL, engine VARCHAR, tp INTEGER, method VARCHAR, "
                    "workload VARCHAR, max_tokens INTEGER, concurrency INTEGER)")
        con.execute("INSERT INTO compare_only VALUES ('X', 'Y', 'A', 'e', 1, 'm', 'w', 1, 1)")
    assert _compare(db, "A", "B").returncode == 0
    rows = _stored(db, "compare_only")
    assert rows and all(r[-1] == "closed" for r in rows)
    assert _stored(db, "compare_only", "X", "Y") == []


def test_attainment_is_compared_under_the_same_slo_only(tmp_path: Path) -> None:
    """TTFT objective 150 ms: A's steady TTFTs (0.103-0.127 s) all meet it, B's (0.155-0.19
    s) none: attainment 1.0 -> 0.0, ratio 0, every resample 0, significantly worse, and the
    gate fails on it. With B's objective at 200 ms there is no attainment row (the slo.*
    keys show in the environment diff instead)."""
    with duckdb.connect(str(_open_db(tmp_path, {"A": "150", "B": "150"})), read_only=True) as con:
        result = compare.compare(con, "A", "B")
    [att] = [c for c in result.changes if c.metric == "attainment"]
    assert (att.a, att.b, att.ratio, att.ci_low, att.ci_high) == (1.0, 0.0, 0.0, 0.0, 0.0)
    assert att.n_prompts == 9 and att.significant and att.worse and att.regresses_beyond(0.05)
    other = tmp_path / "other"
    other.mkdir()
    with duckdb.connect(str(_open_db(other, {"A": "150", "B": "200"})), read_only=True) as con:
        result = compare.compare(con, "A", "B")
    assert not [c for c in result.changes if c.metric == "attainment"]
    assert ("campaign", "slo.ttft_ms", "150", "200") in result.environment
