"""analyze.build.run and the `specsweep analyze` command line."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import duckdb
import pytest

from specsweep.analyze import build
from specsweep.analyze.__main__ import INTERRUPTED, main
from specsweep.analyze.models import scope
from specsweep.schema.metrics import CATALOG
from tests.support.analyze_rows import decode_req, fetch, in_rounds, write_db

REPO = Path(__file__).resolve().parents[3]


def test_empty_database_builds_empty_objects(tmp_path):
    path = tmp_path / "empty.duckdb"
    write_db(path, [])
    build.run(path)
    # every object is empty but the metric catalogue, which lists the metrics, not the data
    expected = dict.fromkeys(build.OBJECTS, 0) | {"metric_catalog": len(CATALOG)}
    expected["speedup_pairs"] = None  # a view: not counted
    with duckdb.connect(str(path), read_only=True) as con:
        assert build.object_counts(con) == expected


def test_missing_database_is_not_created(tmp_path):
    path = tmp_path / "nowhere.duckdb"
    with pytest.raises(FileNotFoundError):
        build.run(path)
    assert not path.exists()


def test_database_without_raw_tables_is_refused(tmp_path):
    path = tmp_path / "other.duckdb"
    duckdb.connect(str(path)).close()
    with pytest.raises(build.NotAResultsDatabase):
        build.run(path)


def test_rebuild_gives_the_same_speedup(tmp_path):
    # two builds on the same data (three rounds) must give identical CIs
    rows = [decode_req(10 + i, prompt_id=f"p{i}") for i in range(6)]
    rows += [decode_req(14 + 2 * i % 5, method="dflash", prompt_id=f"p{i}") for i in range(6)]
    rows = in_rounds(rows, factor=lambda m, run, p: 1 + 0.02 * run * (m == "dflash"))
    path = tmp_path / "twice.duckdb"
    write_db(path, rows)
    build.run(path)
    first = fetch(path, "SELECT speedup, ci_low, ci_high FROM speedup")
    build.run(path)
    assert fetch(path, "SELECT speedup, ci_low, ci_high FROM speedup") == first
    assert first[0]["ci_low"] < first[0]["ci_high"]


def test_cli_says_what_it_rebuilt_and_what_the_layer_holds(tmp_path, capsys):
    path = tmp_path / "cli.duckdb"
    write_db(
        path, [decode_req(10, prompt_id="p1"), decode_req(20, method="dflash", prompt_id="p1")]
    )
    assert main(["--db", str(path)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 2
    assert out[0] == "analyze: rebuilt every campaign (no request_metrics table yet)"
    assert "request_metrics (2 rows)" in out[1] and "speedup (1 rows)" in out[1]
    assert main(["--db", str(path)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0].startswith("analyze: every campaign's analysis is up to date")
    assert main(["--db", str(path), "--full"]) == 0
    assert capsys.readouterr().out.startswith("analyze: rebuilt every campaign (--full)")


@pytest.mark.parametrize("in_query", [False, True])
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_build_a_signal_stops_leaves_the_analysis_as_it_was(
    tmp_path, capsys, signum, code, in_query
):
    """Ctrl-C or SIGTERM (a real signal to this process) while the models run, between two
    models or during a DuckDB query (which DuckDB turns into "Query interrupted"): exit 130
    or 143 with one line, the build's transaction rolled back (the next build has nothing to
    do), and the process's signal handlers as they were."""
    path = tmp_path / "signal.duckdb"
    write_db(path, [decode_req(10, prompt_id="p1"), decode_req(20, method="ngram", prompt_id="p1")])
    assert main(["--db", str(path)]) == 0
    before = fetch(path, "SELECT * FROM speedup"), fetch(path, "SELECT * FROM analysis_campaigns")
    handlers = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    model = build.MODELS[len(build.MODELS) // 2]
    run = model.run

    def signalled(state: build.Build) -> None:
        run(state)  # its table rewritten inside the build's transaction, then the signal
        if not in_query:
            os.kill(os.getpid(), signum)
            return
        threading.Timer(0.3, os.kill, (os.getpid(), signum)).start()
        state.con.execute("SELECT count(*) FROM range(10_000_000_000) t(i) WHERE i % 7 = 3")
        pytest.fail("the query outlived the signal")

    object.__setattr__(model, "run", signalled)  # a frozen dataclass
    try:
        capsys.readouterr()
        assert main(["--db", str(path), "--full"]) == code
    finally:
        object.__setattr__(model, "run", run)
    assert capsys.readouterr().err.strip().splitlines() == [f"analyze: {INTERRUPTED}"]
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == handlers
    assert (
        fetch(path, "SELECT * FROM speedup"),
        fetch(path, "SELECT * FROM analysis_campaigns"),
    ) == before
    assert main(["--db", str(path)]) == 0
    assert capsys.readouterr().out.startswith("analyze: every campaign's analysis is up to date")


def test_cli_says_how_far_a_build_of_several_groups_is(tmp_path, capsys, monkeypatch):
    path = tmp_path / "groups.duckdb"
    rows = [
        decode_req(10 * k, campaign_id=c, method=m, prompt_id="p1")
        for c in ("c1", "c2")
        for k, m in ((1, "autoregressive"), (2, "dflash"))
    ]
    write_db(path, rows)
    monkeypatch.setattr(scope, "GROUP_REQUESTS", 1)  # a campaign a group
    assert main(["--db", str(path)]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err[:2] == [
        "analyze: building 2 campaigns (4 requests) (every campaign: no request_metrics table yet)",
        "analyze: in 2 groups of about 1 requests",
    ]
    assert err[2].startswith("analyze: group 1 of 2 built (2 requests) in ")
    assert "left" in err[2] and err[3].startswith("analyze: group 2 of 2 built (4 requests)")


def test_cli_reports_a_missing_database(tmp_path, capsys):
    assert main(["--db", str(tmp_path / "missing.duckdb")]) == 1
    assert "no results database" in capsys.readouterr().err


def test_views_of_an_older_build_become_tables(tmp_path):
    # files analysed before issue 12 hold the analysis objects as views; a rebuild replaces
    # them with tables (CREATE OR REPLACE TABLE alone would refuse to replace a view)
    path = tmp_path / "old.duckdb"
    write_db(path, [decode_req(4.0), decode_req(8.0, method="ngram")])
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE VIEW request_metrics AS SELECT * FROM requests")
        con.execute("CREATE VIEW config_summary AS SELECT 1 AS stale")
    build.run(path, baseline="autoregressive")
    with duckdb.connect(str(path), read_only=True) as con:
        views = {
            r[0]
            for r in con.execute(
                "SELECT view_name FROM duckdb_views() WHERE NOT internal"
            ).fetchall()
        }
        n = con.execute("SELECT count(*) FROM config_summary").fetchone()[0]
    assert views == {"speedup_pairs"}
    assert n == 2
