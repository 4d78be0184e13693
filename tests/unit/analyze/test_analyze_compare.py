"""`specsweep compare` and `gate` on two campaigns built from hand-made rows (3
rounds each unless a test says otherwise), every expected figure computed here from the
injected factors (never by the code under test):

- a slowdown injected into one method of B is found with its sign, size and t interval; a
  40% slowdown fails the gate; windows of partly different plans are listed;
- service starts: the start variance pooled from both campaigns' starts enters the interval
  (hand-computed: var(ln start factors) / 2 per campaign, weighted by df), small start
  spread keeps a 15% change significant and large spread does not; rounds pair in run
  order (A's extra rounds left out), and a campaign whose starts leave too few contrasts
  lends none; with one start per side there is no interval and the gate says it cannot
  decide (exit 3), unless no change reaches the threshold even in its point estimate;
- Holm: four equal raw p-values of 0.02-0.03 adjust to 4p > 0.05 and the gate passes;
- prompts whose text or chat template differs are not paired and are named;
- open-loop windows are matched on their load, p90s are point estimates, and SLO attainment
  differences carry Newcombe's interval (tests/unit/analyze/test_compare_stats.py checks the
  formula on Newcombe's worked example).

Power through the SQL path: tests/coverage/test_compare_power.py."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pytest
from scipy import stats

from specsweep.analyze import build, compare
from specsweep.analyze.environment_diff import argument_diff, stable
from specsweep.stats.paired import ONE_START
from tests.support.analyze_rows import (
    AR,
    decode_req,
    open_req,
    req,
    store_rows,
    window,
    write_db,
)

PROMPTS = [f"inline/{i}" for i in range(6)]
JITTER = (-1.0, 1.0, -2.0, 2.0, 0.5, -0.5)  # B's per-prompt log jitter / 50: mean 0
ROUNDS = {1: 1.0, 2: 1.0, 3: 1.0}  # run -> ngram's start factor: 3 rounds, starts alike
ONE = {1: 1.0}  # one start per configuration


def _plan(texts: list[str], chat_template: str | None = None) -> str:
    engine = "engine: {kind: sglang, model: m" + (
        f", chat_template: '{chat_template}'}}" if chat_template else "}"
    )
    return (
        f"name: nightly\n{engine}\nworkloads:\n  - name: chat\n    prompts:\n"
        f"      kind: inline\n      texts: {texts}\n    max_tokens: [256]\n"
    )


def _campaign(
    cid: str,
    slowdown: float,
    extra_workload: bool = False,
    concurrency: tuple[int, ...] = (1,),
    runs: dict[int, float] | None = None,
    jitter: float = 0.02,
) -> list[dict]:
    """autoregressive 40 tok/s and ngram 60 tok/s on 6 prompts x 3 reps; ngram times
    slowdown * exp(jitter * JITTER[i]) (B's change); runs: run -> ngram's start factor
    (default: 3 rounds, every start alike)."""
    rows = []
    methods = [("autoregressive", 40.0), ("ngram", 60.0)]
    for (run, start), c, (method, tps) in (
        (r, c, m) for r in (runs or ROUNDS).items() for c in concurrency for m in methods
    ):
        for i, prompt in enumerate(PROMPTS):
            for rep in range(3):
                speed = tps * (1 + 0.02 * i + 0.005 * rep)
                if method == "ngram":
                    speed *= slowdown * math.exp(jitter * JITTER[i]) * start
                tail = f"-c{c}/run{run}"
                rows.append(
                    decode_req(
                        speed,
                        campaign_id=cid,
                        method=method,
                        concurrency=c,
                        prompt_id=prompt,
                        rep=rep,
                        config_id=f"{cid}-{method}",
                        window_id=f"{cid}-{method}{tail}",
                    )
                )
                if extra_workload:
                    rows.append(
                        decode_req(
                            speed,
                            campaign_id=cid,
                            method=method,
                            prompt_id=prompt,
                            rep=rep,
                            workload="code",
                            window_id=f"{cid}-{method}-code{tail}",
                        )
                    )
    return rows


def _db(
    tmp_path: Path,
    b_slowdown: float,
    extra: bool = False,
    plan: str = "nightly",
    plans: tuple[str, str] = ("", ""),
    **options: dict,
) -> Path:
    """Campaigns A (no change, no jitter) and B (ngram times b_slowdown, jittered);
    options: per campaign ('A'/'B') the keyword arguments of _campaign."""
    path = tmp_path / "r.duckdb"
    write_db(
        path,
        _campaign("A", 1.0, **{"jitter": 0.0, **options.get("A", {})})
        + _campaign("B", b_slowdown, extra, **options.get("B", {})),
    )
    with duckdb.connect(str(path)) as con:
        con.execute(
            "UPDATE requests SET run = regexp_extract(window_id, '/run(\\d+)$', 1)::INTEGER"
        )
        for cid, yaml_text in zip("AB", plans):
            con.execute(
                "INSERT INTO campaigns VALUES (?, ?, repeat('0', 64), ?, "
                "'autoregressive', ?, NULL, 'complete')",
                [cid, plan, yaml_text, f"2026-12-0{1 if cid == 'A' else 2} 00:00:00"],
            )
        con.execute(
            "INSERT INTO environment VALUES ('A', 'gpu1', 'engine.version', '0.29'), "
            "('B', 'gpu1', 'engine.version', '0.30'), ('A', 'gpu1', 'cpu.model', 'x'), "
            "('B', 'gpu1', 'cpu.model', 'x')"
        )
    build.run(path, baseline="autoregressive")
    return path


def _compare(db: Path, a: str = "A", b: str = "B") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "specsweep.analyze", "compare", "--db", str(db), a, b],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _gate(db: Path, *extra: str, candidate: str = "B") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "specsweep.analyze",
            "gate",
            "--db",
            str(db),
            "--baseline",
            "A",
            "--candidate",
            candidate,
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _result(db: Path) -> compare.Comparison:
    with duckdb.connect(str(db), read_only=True) as con:
        return compare.compare(con, "A", "B")


def _get(result: compare.Comparison, method: str, metric: str, c: int = 1) -> compare.Change:
    return next(
        x
        for x in result.changes
        if x.window[2] == method and x.metric == metric and x.window[5] == c
    )


def _t_interval(mean: float, var: float, df: float) -> tuple[float, float, float]:
    """exp(mean -/+ t_{df, 0.975} sqrt(var)) and the two-sided p of mean = 0, by hand."""
    half = stats.t.ppf(0.975, df) * math.sqrt(var)
    p = 2 * stats.t.sf(abs(mean) / math.sqrt(var), df)
    return math.exp(mean - half), math.exp(mean + half), p


def _prompt_var(jitter: float = 0.02) -> float:
    """var_p(d) / P of B's injected jitter: the prompts-only variance of mean d."""
    return jitter**2 * float(np.var(JITTER, ddof=1)) / len(JITTER)


def test_a_slowdown_is_found_and_fails_the_gate(tmp_path: Path) -> None:
    """3 rounds, every start alike: the pooled start variance is 0 and the interval is the
    prompts' (V = var_p(d) / P on P - 1 df)."""
    db = _db(tmp_path, 0.6)
    result = _result(db)
    decode = _get(result, "ngram", "decode_tps")
    lo, hi, p = _t_interval(math.log(0.6), _prompt_var(), 5)
    assert decode.ratio == pytest.approx(0.6)  # the jitter's logs sum to 0
    assert (decode.ci_low, decode.ci_high, decode.p_value) == (
        pytest.approx(lo),
        pytest.approx(hi),
        pytest.approx(p, rel=1e-6),
    )
    assert decode.start_source == "pooled" and decode.n_runs == 3
    assert decode.start_sd == pytest.approx(0.0, abs=1e-9) and decode.start_df == 4
    assert decode.significant and decode.worse
    assert decode.verdict == "worse" and decode.n_prompts == 6
    tpot = _get(result, "ngram", "tpot_s")  # TPOT = 1 / decode speed per request
    assert tpot.ratio == pytest.approx(1 / 0.6) and tpot.worse and tpot.significant
    # TTFT is 0.5 s everywhere: no spread, no interval; autoregressive unchanged: no spread
    assert _get(result, "ngram", "ttft_s").verdict == "no interval"
    assert all(not c.significant for c in result.changes if c.window[2] == AR)
    assert result.changes[0].window[2] == "ngram" and result.changes[0].significant
    ((sa, sb),) = result.speedup_ratio.values()  # each campaign's own speedup: 1.5x, 0.9x
    assert (sa, sb) == (pytest.approx(1.5), pytest.approx(0.9))
    assert result.environment == [("gpu1", "engine.version", "0.29", "0.30")]
    done = _gate(db, "--max-regression", "5%")
    assert done.returncode == 1 and "FAIL" in done.stdout and "ngram" in done.stdout
    assert (
        "service starts: the start variance pooled from both campaigns entered 2 "
        "interval(s), the paired rounds' own spread 0; 4 change(s) have no interval" in done.stdout
    )
    assert _gate(db, "--max-regression", "70%").returncode == 0  # TPOT +67%: within


def test_one_start_per_side_gives_no_interval_and_the_gate_cannot_decide(tmp_path: Path) -> None:
    """One round in each campaign: no interval, no verdict; the gate exits 3 and names the
    changes it cannot decide (15% slower, TPOT 18% longer: beyond 5%); at 20% no point
    estimate reaches the threshold, so no interval could fail one: it passes, saying so."""
    db = _db(tmp_path, 0.85, A={"runs": ONE}, B={"runs": ONE})
    decode = _get(_result(db), "ngram", "decode_tps")
    assert decode.ratio == pytest.approx(0.85) and decode.n_runs == 1
    assert (decode.ci_low, decode.p_value, decode.reason) == (None, None, ONE_START)
    assert decode.verdict == "no interval" and not decode.significant
    assert decode.start_source is None and decode.start_sd is None
    done = _gate(db)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "gate: 0 regression(s) beyond 5.0%" in done.stdout
    assert "gate: cannot decide 2 change(s): worse than 5.0% in their point estimate" in done.stdout
    assert done.stdout.count("  UNDECIDED ") == 2 and "one service start per side" in done.stdout
    wide = _gate(db, "--max-regression", "20%")
    assert wide.returncode == 0
    assert "gate: 6 change(s) have no interval; each lies within 20.0%" in wide.stdout
    several = tmp_path / "several"  # 3 rounds in A, 1 in B: one paired round, no interval
    several.mkdir()
    one_paired = _get(_result(_db(several, 0.85, B={"runs": ONE})), "ngram", "decode_tps")
    assert one_paired.n_runs == 1 and one_paired.reason == ONE_START


def test_a_campaign_compared_with_itself_is_refused(tmp_path: Path) -> None:
    """Every change would be 0: a plan name given twice (it stands for its latest campaign)
    or one id twice is bad input, exit 2, before anything is stored."""
    db = _db(tmp_path, 0.85)
    done = _gate(db, candidate="A")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        "analyze: 'A' and 'A' are the same campaign, A (a plan name stands for its latest "
        "campaign): give two campaign ids\n"
    )


def _start_s2(*factors: float) -> float:
    """One campaign's pooled start variance, by hand: two configurations, R rounds, ngram's
    start factors f_r against a steady baseline; the config x round interaction is
    +/-(ln f_r - mean) / 2, so A = sum_r (ln f_r - mean)^2 / 2 / (R - 1) = var(ln f) / 2 on
    R - 1 degrees of freedom (the cells' own noise is 0 here)."""
    return float(np.var(np.log(factors), ddof=1)) / 2


@pytest.mark.parametrize(
    ("a_starts", "b_starts", "counts"),
    [((1.01, 0.99, 1.0), (1.0, 1.01, 0.99), True), ((1.2, 0.8, 1.0), (0.9, 1.1, 1.0), False)],
)
def test_the_start_variance_of_both_campaigns_enters_the_interval(
    tmp_path: Path, a_starts: tuple, b_starts: tuple, counts: bool
) -> None:
    """ngram's starts vary by round in both campaigns: s2 = (2 s2_A + 2 s2_B) / 4 on 4 df,
    V = var_p(d) / P + 2 s2 / 3 with Satterthwaite's df; a 15% slowdown counts over the
    small start spread and not over the large one."""
    runs = [dict(enumerate(f, 1)) for f in (a_starts, b_starts)]
    db = _db(tmp_path, 0.85, A={"runs": runs[0]}, B={"runs": runs[1]})
    decode = _get(_result(db), "ngram", "decode_tps")
    s2 = (_start_s2(*a_starts) + _start_s2(*b_starts)) / 2
    v_p, v_s = _prompt_var(), 2 * s2 / 3
    df = (v_p + v_s) ** 2 / (v_p**2 / 5 + v_s**2 / 4)
    shift = float(np.mean(np.log(b_starts) - np.log(a_starts)))
    lo, hi, p = _t_interval(math.log(0.85) + shift, v_p + v_s, df)
    assert decode.ratio == pytest.approx(0.85 * math.exp(shift))
    assert (decode.start_sd, decode.start_df) == (pytest.approx(s2**0.5), pytest.approx(4))
    assert (decode.ci_low, decode.ci_high, decode.p_value) == (
        pytest.approx(lo),
        pytest.approx(hi),
        pytest.approx(p, rel=1e-6),
    )
    assert decode.start_source == "pooled" and decode.significant is counts


def test_rounds_of_two_campaigns_pair_by_run_order(tmp_path: Path) -> None:
    """A measured 3 rounds (ngram's start 1.0, 1.1, 0.95), B 2 (0.9, 1.0) and 30% slower:
    round 1 pairs with round 1 and round 2 with round 2, A's round 3 is left out, so the
    ratio is 0.7 * sqrt(0.9 * 1.0 / (1.0 * 1.1)). B's 4 starts of 2 configurations in 2
    rounds leave 1 contrast: only A's start variance (2 df) enters, on A's 3 rounds."""
    db = _db(tmp_path, 0.7, A={"runs": {1: 1.0, 2: 1.1, 3: 0.95}}, B={"runs": {1: 0.9, 2: 1.0}})
    decode = _get(_result(db), "ngram", "decode_tps")
    assert decode.start_source == "pooled" and decode.n_runs == 2
    assert decode.ratio == pytest.approx(0.7 * math.sqrt(0.9 / 1.1))
    s2 = _start_s2(1.0, 1.1, 0.95)
    v_p, v_s = _prompt_var(), 2 * s2 / 2
    df = (v_p + v_s) ** 2 / (v_p**2 / 5 + v_s**2 / 2)
    lo, hi, _ = _t_interval(math.log(decode.ratio), v_p + v_s, df)
    assert (decode.start_sd, decode.start_df) == (pytest.approx(s2**0.5), pytest.approx(2))
    assert (decode.ci_low, decode.ci_high) == (pytest.approx(lo), pytest.approx(hi))


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
        return con.execute(
            f"SELECT * EXCLUDE (a, b) FROM {table} WHERE a = ? AND b = ? ORDER BY ALL", [a, b]
        ).fetchall()


def _counts(db: Path) -> dict[tuple[str, str, str], int]:
    with duckdb.connect(str(db), read_only=True) as con:
        return {
            (t, a, b): n
            for t in compare.OBJECTS
            for a, b, n in con.execute(f"SELECT a, b, count(*) FROM {t} GROUP BY ALL").fetchall()
        }


def _b_ttft(i: int) -> float:
    """B's TTFT of prompt p<i>: A's 0.1 (1 + 0.03 i) times 1.5 exp(0.01 (i - 5)); over the
    steady prompts 1..9 the jitter's logs sum to 0."""
    return 0.1 * (1 + 0.03 * i) * 1.5 * math.exp(0.01 * (i - 5))


def _open_db(tmp_path: Path, slo: dict[str, str] | None = None, rounds: int = 3) -> Path:
    """Campaigns A and B, each one poisson window at 2 req/s on chat in `rounds` rounds: 11
    requests at 0..10 s a round (steady: 1..9), prompt p<i>, TTFT 0.1 * (1 + 0.03 i) s in A
    and _b_ttft(i) in B, TPOT 0.02 s in both; B also has a linear ramp 0.5-2 req/s that A
    lacks. slo: each campaign's slo.ttft_ms (none by default)."""
    requests, windows = [], []
    for cid, run in ((c, r) for c in "AB" for r in range(1, rounds + 1)):
        wid = f"{cid}-open/run{run}"
        requests += [
            open_req(
                float(i),
                ttft=_b_ttft(i) if cid == "B" else 0.1 * (1 + 0.03 * i),
                campaign_id=cid,
                window_id=wid,
                prompt_id=f"p{i}",
                run=run,
            )
            for i in range(11)
        ]
        windows.append(window(cid, wid, rate=2.0, n=11, span=10.0, elapsed=12.0, run=run))
    requests += [
        open_req(float(i), campaign_id="B", window_id="B-ramp", prompt_id=f"p{i}") for i in range(5)
    ]
    windows.append(
        window(
            "B",
            "B-ramp",
            rate=None,
            n=5,
            span=4.0,
            elapsed=5.0,
            ramp="linear",
            ramp_start_rate=0.5,
            ramp_end_rate=2.0,
            run=1,
        )
    )
    campaigns = [
        {
            "campaign_id": c,
            "plan_name": "open",
            "plan_sha256": "ab" * 32,
            "plan_yaml": "name: open\n",
            "baseline": AR,
            "started_at": req()["sent_at"],
            "finished_at": None,
            "status": "complete",
        }
        for c in "AB"
    ]
    path = tmp_path / "open.duckdb"
    environment = [
        {"campaign_id": c, "host": "campaign", "key": "slo.ttft_ms", "value": v}
        for c, v in (slo or {}).items()
    ]
    store_rows(
        path, requests=requests, windows=windows, campaigns=campaigns, environment=environment
    )
    build.run(path, baseline=AR)
    return path


def test_load_labels() -> None:
    label = compare.load_label
    assert label("closed", None, None, None, None, None) == "closed"
    assert label("poisson", 4.0, None, None, None, None) == "poisson 4 rps"
    assert label("gamma", 0.5, None, None, None, 0.25) == "gamma(0.25) 0.5 rps"
    assert label("constant", 2.5, None, None, None, None) == "constant 2.5 rps"
    assert label("poisson", None, "exponential", 1.0, 8.0, None) == (
        "poisson exponential ramp 1-8 rps"
    )
    assert label("trace", None, None, None, None, None) == "trace"
    assert compare.window_text(("e", 1, "m", "w", 64, 8, "poisson 4 rps")) == (
        "e/1/m/w/64/poisson 4 rps cap 8"
    )
    assert compare.window_text(("e", 1, "m", "w", 64, 4, "closed")) == "e/1/m/w/64/c=4"


def _wilson(x: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    p = x / n
    centre, half = (
        (p + z * z / (2 * n)) / (1 + z * z / n),
        z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)),
    )
    return centre - half, centre + half
