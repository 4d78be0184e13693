"""`specsweep compare` and `gate` on two campaigns built from hand-made rows (3
rounds each unless a test says otherwise), every expected figure computed here from the
injected factors (never by the code under test):

The tests that start real programs (servers, subprocesses, latexmk); the in-process ones, and
the helpers both use, are in tests/unit/analyze/test_analyze_compare.py."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from specsweep.analyze import build, compare
from specsweep.stats.paired import ONE_START
from tests.support.analyze_rows import (
    AR,
)
from tests.unit.analyze.test_analyze_compare import (  # noqa: F401
    JITTER,
    _b_ttft,
    _compare,
    _counts,
    _db,
    _gate,
    _get,
    _open_db,
    _plan,
    _prompt_var,
    _result,
    _stored,
    _t_interval,
    _wilson,
)


def test_holm_over_the_family_decides_the_gate(tmp_path: Path) -> None:
    """A 30% slowdown with a wide per-prompt spread (jitter 0.18) at c=1 and c=4: four tests
    (decode and TPOT, two windows) with the same raw p ~ 0.02 < 0.05; Holm's adjusted p is
    4p > 0.05, so none counts and the gate passes although each raw interval excludes 1."""
    db = _db(tmp_path, 0.7, A={"concurrency": (1, 4)}, B={"concurrency": (1, 4), "jitter": 0.18})
    result = _result(db)
    _, _, p = _t_interval(math.log(0.7), _prompt_var(0.18), 5)
    assert 0.0125 < p < 0.05  # raw: significant; 4p: not
    tested = [c for c in result.changes if c.p_holm is not None]
    assert len(tested) == 4 and all(c.n_family == 4 for c in tested)
    for c in tested:
        assert c.p_value == pytest.approx(p, rel=1e-6)
        assert c.p_holm == pytest.approx(4 * p, rel=1e-6)
        assert c.significant_raw and not c.significant and c.verdict == "not significant"
    done = _gate(db)
    assert done.returncode == 0 and "significant after Holm over 4 tests" in done.stdout


def test_prompts_of_another_text_or_template_are_not_paired(tmp_path: Path) -> None:
    """B's plan changes the text of inline/1: that prompt is left out and named; a chat
    template set in B's plan only refuses every prompt of the workload."""
    texts = [f"t{i}" for i in range(6)]
    db = _db(tmp_path, 0.6, plans=(_plan(texts), _plan([*texts[:1], "other", *texts[2:]])))
    result = _result(db)
    decode = _get(result, "ngram", "decode_tps")
    kept = [j for i, j in enumerate(JITTER) if i != 1]
    assert decode.n_prompts == 5
    assert decode.ratio == pytest.approx(0.6 * math.exp(0.02 * sum(kept) / 5))
    assert result.prompts == [("chat", None, None, "inline/1", "text differs", "text")]
    assert "prompts chat inline/1: text differs (text), not paired" in "\n".join(
        compare.lines(result)
    )
    other = tmp_path / "template"
    other.mkdir()
    db = _db(other, 0.6, plans=(_plan(texts), _plan(texts, chat_template="x")))
    result = _result(db)
    assert result.changes == []
    assert (
        "chat",
        "ngram",
        1,
        None,
        "chat template differs",
        "engine.chat_template",
    ) in result.prompts
    done = _compare(db)
    assert "chat ngram tp1: chat template differs (engine.chat_template), not paired" in done.stdout


def test_no_change_passes_and_partly_different_plans_list_their_windows(tmp_path: Path) -> None:
    db = _db(tmp_path, 1.0, extra=True)
    with duckdb.connect(str(db), read_only=True) as con:
        result = compare.compare(con, "nightly", "A")  # a plan name: its latest campaign (B)
    assert result.a == "B" and result.b == "A"
    assert [k[3] for k in result.only_a] == ["code", "code"] and result.only_b == []
    assert not any(c.significant for c in result.changes)
    # plans without workload definitions: the prompts could not be checked, and it says so
    assert (
        "chat",
        None,
        None,
        None,
        "not checked",
        "a plan does not define the workload",
    ) in result.prompts
    done = _gate(db)
    assert done.returncode == 0 and "gate: 0 regression(s) beyond 5.0%" in done.stdout


def test_bad_input_exits_2(tmp_path: Path) -> None:
    db = _db(tmp_path, 1.0)
    unknown = subprocess.run(
        [sys.executable, "-m", "specsweep.analyze", "compare", "--db", str(db), "A", "nosuch"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert unknown.returncode == 2 and "no campaign 'nosuch'" in unknown.stderr
    assert _gate(db, "--max-regression", "150%").returncode == 2


def test_compare_stores_what_compare_returns(tmp_path: Path) -> None:
    db = _db(tmp_path, 0.6, extra=True)
    done = _compare(db)
    assert done.returncode == 0, done.stderr
    assert "compare: stored in" in done.stdout and "compare_changes (10 rows)" in done.stdout
    result = _result(db)
    with duckdb.connect(str(db), read_only=True) as con:
        changes = con.execute(
            "SELECT metric, kind, ratio, ci_low, ci_high, p_value, p_holm, "
            "significant, significant_raw, start_source, verdict, worse, rank "
            "FROM compare_changes WHERE a = 'A' AND b = 'B' ORDER BY rank"
        ).fetchall()
    assert changes == [
        (
            c.metric,
            c.kind,
            c.ratio,
            c.ci_low,
            c.ci_high,
            c.p_value,
            c.p_holm,
            c.significant,
            c.significant_raw,
            c.start_source,
            c.verdict,
            c.worse,
            rank,
        )
        for rank, c in enumerate(result.changes, 1)
    ]
    assert changes[0][-3:] == ("worse", True, 1)
    kinds = {(m, k) for m, k, *_ in changes}
    assert ("ttft_s_p90", "point") in kinds and ("decode_tps", "ratio") in kinds
    assert all(r[3] is None and r[6] is None for r in changes if r[1] == "point")
    assert _stored(db, "compare_speedups") == [
        (*k, pytest.approx(1.5), pytest.approx(0.9)) for k in result.speedup_ratio
    ]
    assert _stored(db, "compare_only") == sorted(("B", *k) for k in result.only_b) != []
    assert _stored(db, "compare_prompts") == [
        ("chat", None, None, None, "not checked", "a plan does not define the workload")
    ]
    assert _stored(db, "compare_environment") == [("gpu1", "engine.version", "0.29", "0.30", None)]
    runs = _stored(db, "compare_runs")  # 2 methods x 6 prompts x 3 reps x 3 rounds, B twice
    assert [(r[0], r[1], r[3]) for r in runs] == [("A", "nightly", 108), ("B", "nightly", 216)]


def test_a_second_compare_replaces_the_pairs_rows_and_keeps_other_pairs(tmp_path: Path) -> None:
    db = _db(tmp_path, 0.8)
    assert _compare(db).returncode == 0 and _compare(db, "B", "A").returncode == 0
    first = _counts(db)
    assert first[("compare_changes", "A", "B")] == first[("compare_changes", "B", "A")] == 10
    with duckdb.connect(str(db)) as con:  # a row the next compare of (A, B) must delete
        con.execute(
            "INSERT INTO compare_only VALUES ('A', 'B', 'A', 'e', 1, 'm', 'w', 1, 1, 'closed')"
        )
    assert _compare(db).returncode == 0
    assert _counts(db) == first  # (A, B) replaced, not doubled; (B, A) kept
    build.run(db, baseline="autoregressive")  # rebuilding the analysis keeps them
    assert _counts(db) == first


def test_gate_writes_nothing(tmp_path: Path) -> None:
    db = _db(tmp_path, 0.6)
    assert _gate(db).returncode == 1
    with duckdb.connect(str(db), read_only=True) as con:
        tables = {
            r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()
        }
    assert not tables & set(compare.OBJECTS)


def test_open_loop_windows_are_matched_on_their_load(tmp_path: Path) -> None:
    db = _open_db(tmp_path)
    result = _result(db)
    key = ("sglang", 1, AR, "chat", 256, None, "poisson 2 rps")
    by_metric = {c.metric: c for c in result.changes}
    assert {c.window for c in result.changes} == {key}
    ttft = by_metric["ttft_s"]
    assert result.changes[0] is ttft and ttft.significant and ttft.worse
    assert ttft.ratio == pytest.approx(1.5) and ttft.n_prompts == 9  # the steady requests
    # one configuration per campaign: no start contrast to pool, its 3 paired rounds carry it
    assert (ttft.start_source, ttft.n_runs, ttft.start_sd) == ("own rounds", 3, None)
    assert by_metric["tpot_s"].ratio == pytest.approx(1) and not by_metric["tpot_s"].significant
    p90 = by_metric["ttft_s_p90"]  # a point estimate: no interval, never significant
    # p90 of 1..9 three times: sorted position 0.9 x 26 = 23.4, between an 8 and a 9
    assert p90.a == pytest.approx(0.1 * (1 + 0.03 * 8.4))
    assert p90.b == pytest.approx(_b_ttft(8) + 0.4 * (_b_ttft(9) - _b_ttft(8)))
    assert p90.ratio == pytest.approx(p90.b / p90.a) and p90.kind == "point"
    assert p90.ci_low is None and p90.p_value is None and not p90.significant
    assert "accept_length" not in by_metric  # no verify counts
    assert result.only_a == [] and result.only_b == [
        ("sglang", 1, AR, "chat", 256, None, "poisson linear ramp 0.5-2 rps")
    ]
    assert compare.describe(ttft).startswith(
        "sglang/1/autoregressive/chat/256/poisson 2 rps ttft_s: "
    )
    assert "point estimate, no interval" in compare.describe(p90)
    done = _gate(db, "--max-regression", "5%")
    assert done.returncode == 1 and "poisson 2 rps ttft_s" in done.stdout


def test_compare_tables_of_an_older_specsweep_are_made_anew(tmp_path: Path) -> None:
    """compare_only without the load column (as issue 15 wrote it) is dropped and created
    with this version's columns; the pair's rows are stored."""
    db = _db(tmp_path, 1.0, extra=True)
    with duckdb.connect(str(db)) as con:
        con.execute(
            "CREATE TABLE compare_only (a VARCHAR NOT NULL, b VARCHAR NOT NULL, "
            "side VARCHAR NOT NULL, engine VARCHAR, tp INTEGER, method VARCHAR, "
            "workload VARCHAR, max_tokens INTEGER, concurrency INTEGER)"
        )
        con.execute("INSERT INTO compare_only VALUES ('X', 'Y', 'A', 'e', 1, 'm', 'w', 1, 1)")
    assert _compare(db, "A", "B").returncode == 0
    rows = _stored(db, "compare_only")
    assert rows and all(r[-1] == "closed" for r in rows)
    assert _stored(db, "compare_only", "X", "Y") == []


def test_attainment_is_compared_under_the_same_slo_only(tmp_path: Path) -> None:
    """TTFT objective 140 ms: A's steady TTFTs (0.103-0.127 s) all meet it, B's (0.148-0.19
    s) none, in each of 3 rounds: attainment 1 -> 0, difference -1 with Newcombe's interval
    [-1, -1 + sqrt(u_B^2 + (1 - l_A)^2)] (Wilson of 0/27 and 27/27; every start's share is
    the same, so the start variance is 0 on 2 + 2 df), not a zero-width one; significantly
    worse and the gate fails on it. One round a side: no interval. With B's objective at 200
    ms there is no attainment row (the slo.* keys show in the environment diff instead)."""
    with duckdb.connect(str(_open_db(tmp_path, {"A": "140", "B": "140"})), read_only=True) as con:
        result = compare.compare(con, "A", "B")
    [att] = [c for c in result.changes if c.metric == "attainment"]
    (_, u_b), (l_a, _) = _wilson(0, 27), _wilson(27, 27)
    assert (att.a, att.b, att.difference, att.kind) == (1.0, 0.0, -1.0, "difference")
    assert att.ci_low == pytest.approx(-1.0)
    assert att.ci_high == pytest.approx(-1 + math.hypot(u_b, 1 - l_a)) and att.ci_high < -0.5
    assert (att.start_sd, att.start_df, att.start_source) == (0.0, 4.0, "pooled")
    assert att.n_prompts == 9 and att.significant and att.worse and att.regresses_beyond(0.05)
    assert "-100.0 points" in compare.describe(att)
    once = tmp_path / "once"
    once.mkdir()
    with duckdb.connect(str(_open_db(once, {"A": "140", "B": "140"}, 1)), read_only=True) as con:
        [att] = [c for c in compare.compare(con, "A", "B").changes if c.metric == "attainment"]
    assert att.ci_low is None and att.reason == ONE_START and att.undecided(0.05)
    other = tmp_path / "other"
    other.mkdir()
    with duckdb.connect(str(_open_db(other, {"A": "140", "B": "200"})), read_only=True) as con:
        result = compare.compare(con, "A", "B")
    assert not [c for c in result.changes if c.metric == "attainment"]
    assert ("campaign", "slo.ttft_ms", "140", "200") in result.environment


def test_analyze_compares_a_stored_pair_again_when_a_side_changed(tmp_path: Path, capsys) -> None:
    """A stored comparison is derived from both campaigns' analysis rows: `specsweep analyze`
    compares the pair again when one side's rows changed, leaves it alone when neither did,
    and drops it when a side is gone."""
    from specsweep.analyze.__main__ import main

    db = _db(tmp_path, 0.8)
    assert _compare(db).returncode == 0
    assert [r[3] for r in _stored(db, "compare_runs")] == [108, 108]
    with duckdb.connect(str(db)) as con:  # B loses one round: its comparison must follow
        con.execute("DELETE FROM requests WHERE campaign_id = 'B' AND run = 3")
    assert main(["--db", str(db)]) == 0
    assert "analyze: compared A and B again" in capsys.readouterr().out
    assert [r[3] for r in _stored(db, "compare_runs")] == [108, 72]
    assert main(["--db", str(db)]) == 0
    assert "compared" not in capsys.readouterr().out  # nothing changed
    with duckdb.connect(str(db)) as con:
        for table in ("requests", "services", "campaigns"):
            con.execute(f"DELETE FROM {table} WHERE campaign_id = 'B'")
    assert main(["--db", str(db)]) == 0
    assert "dropped the comparison of A and B" in capsys.readouterr().out
    assert _counts(db) == {}
