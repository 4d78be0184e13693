"""`specsweep remove` (analyze.models.scope.remove): a campaign leaves every table of the file,
raw and analysis, and the stored comparisons it is a side of; what stays equals a full rebuild
of the file without it. Without --yes, and for an id the file does not hold, nothing changes.

The file: the default campaign's real rows (tests/data/default-campaign) and two copies of the
scale benchmark's synthetic campaign (600 requests each), analysed, with the two copies
compared (`specsweep compare`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from specsweep.analyze import build
from specsweep.analyze.__main__ import main
from specsweep.analyze.models import scope
from specsweep.analyze.models.scope import RAW
from specsweep.schema import store
from tests.support.analysis_tables import differences
from tests.unit.analyze.test_analyze_golden import golden_db
from tests.unit.analyze.test_incremental import BASELINE, GOLDEN, GROUP_REQUESTS, full_copy

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import scale_campaign  # noqa: E402  (tests/bench/scale_campaign.py: the synthetic campaign)
import scale_copies  # noqa: E402


def rows(path: Path) -> dict[tuple[str, str], int]:
    """(table, campaign_id) -> rows, over every table of the file with a campaign_id column
    but the stored comparisons', and ('compare pair', a + ' ' + b) -> rows of compare_runs."""
    out: dict[tuple[str, str], int] = {}
    with duckdb.connect(str(path), read_only=True) as con:
        tables = con.execute(
            "SELECT table_name FROM duckdb_columns() JOIN duckdb_tables() "
            "USING (database_name, schema_name, table_name) WHERE column_name = 'campaign_id' "
            "AND NOT starts_with(table_name, 'compare_')"
        ).fetchall()
        for (table,) in tables:
            for cid, n in con.execute(
                f"SELECT campaign_id, count(*) FROM {table} GROUP BY ALL"
            ).fetchall():
                out[(table, cid)] = n
        rejected = con.execute(
            "SELECT row_json->>'campaign_id', count(*) FROM quarantine GROUP BY ALL"
        ).fetchall()
        for cid, n in rejected:
            out[("quarantine", cid)] = n
        stored = con.execute("FROM duckdb_tables() WHERE table_name = 'compare_runs'").fetchall()
        pairs = (
            con.execute("SELECT a, b, count(*) FROM compare_runs GROUP BY ALL").fetchall()
            if stored
            else []
        )
        for a, b, n in pairs:
            out[("compare pair", f"{a} {b}")] = n
    return out


@pytest.fixture
def campaigns(tmp_path: Path) -> tuple[Path, str, str]:
    path = golden_db(tmp_path / "results.duckdb")
    scale = tmp_path / "scale.duckdb"
    scale_campaign.generate(scale, 600, seed=3, batch=600)
    one, two = (scale_copies.add_campaign(path, scale, i) for i in (1, 2))
    # a row the contracts rejected, of each copy; the second marked running, as a run that is
    # still going, or was killed outright, leaves it
    with duckdb.connect(str(path)) as con:
        for cid in (one, two):
            con.execute(
                "INSERT INTO quarantine VALUES ('requests', ?, 'ttft_s < 0', now())",
                [f'{{"campaign_id": "{cid}", "ttft_s": -1}}'],
            )
        con.execute("UPDATE campaigns SET status = 'running' WHERE campaign_id = ?", [two])
    build.run(path, baseline=BASELINE)
    assert main(["compare", one, two, "--db", str(path)]) == 0
    return path, one, two


def test_remove_takes_a_campaign_out_of_every_table_and_leaves_a_full_rebuilds_tables(
    campaigns: tuple[Path, str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, one, two = campaigns
    before = rows(path)
    assert before[("requests", two)] == 600 and before[("request_metrics", two)] == 600
    assert (
        before[("analysis_campaigns", two)] == 1
        and before[("quarantine", two)] == 1
        and ("compare pair", f"{one} {two}") in before
    )
    capsys.readouterr()

    assert main(["remove", two, "--db", str(path)]) == 0  # without --yes: only says what
    out = capsys.readouterr().out
    assert f"remove: would remove {two}: raw rows " in out and "requests 600" in out
    assert "units 4, quarantine 1; " in out
    analysed = sum(n for (t, c), n in before.items() if c == two and t not in {*RAW, "quarantine"})
    assert f"; {analysed:,} analysis rows; 1 stored comparison(s)" in out
    assert "nothing removed: run again with --yes" in out
    assert out.count("warning") == 1 and f"warning: {two} is marked running: " in out
    assert rows(path) == before

    assert main(["remove", two, "no-such-campaign", "--db", str(path), "--yes"]) == 2
    err = capsys.readouterr().err
    assert (
        "no campaign 'no-such-campaign' in the file (ids are exact)" in err
        and f"{GOLDEN}, {one}, {two}" in err
    )
    assert rows(path) == before  # the known id of the same command was not removed either

    assert main(["remove", two, "--db", str(path), "--yes"]) == 0
    out = capsys.readouterr().out
    assert f"remove: removed {two}: raw rows " in out
    assert f"dropped the comparison of {one} and {two}: a side is no longer in the file" in out
    assert out.endswith("the file keeps its size until `specsweep compact` gives the space back\n")
    after = rows(path)
    assert after == {key: n for key, n in before.items() if two not in key[1]}
    assert build.run(path, baseline=BASELINE).campaigns == []  # nothing left to drop or build
    assert differences(path, full_copy(path, tmp_path, GROUP_REQUESTS), build.TABLES) == []


def test_an_unknown_id_among_many_campaigns_names_the_closest() -> None:
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE campaigns AS SELECT 'nightly-' || range AS campaign_id FROM range(12)"
    )
    assert scope._unknown(con, "nightly-1O") == (
        "no campaign 'nightly-1O' among the file's 12 (ids are exact); "
        "the closest: nightly-1, nightly-11, nightly-10"
    )
    assert scope._unknown(con, "zzz") == "no campaign 'zzz' among the file's 12 (ids are exact)"


def test_a_file_another_process_holds_is_left_as_it_is_with_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = golden_db(tmp_path / "results.duckdb")
    before = rows(path)
    holder = subprocess.Popen(  # a writer's connection, as a running `specsweep run` holds one
        [sys.executable, "-c", "import duckdb, sys, time\n"
         "con = duckdb.connect(sys.argv[1]); print('held', flush=True); time.sleep(60)", str(path)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        monkeypatch.setattr(store, "LOCK_WAIT_S", 0.3)
        assert main(["remove", GOLDEN, "--db", str(path), "--yes"]) == 1
    finally:
        holder.kill()
        holder.wait()
    err = capsys.readouterr().err
    assert err.startswith(f"remove: {path}: ") and "lock" in err
    assert rows(path) == before
