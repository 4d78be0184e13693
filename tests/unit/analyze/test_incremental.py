"""Incremental analysis (analyze.models.scope): a file that gains, changes or loses a campaign
rebuilds only that campaign, and every analysis table then equals a full rebuild's.

The file: the default campaign's real rows (tests/data/default-campaign: closed-loop windows,
GPU samples, server metrics), the scale benchmark's synthetic campaign (four methods, agentic
sessions, several concurrencies; 600 requests) and a raced campaign (tests/support/race_rows)."""

from __future__ import annotations

import contextlib
import logging
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from specsweep.analyze import build, itl
from specsweep.analyze.models import scope
from specsweep.schema.store import connect
from tests.support import race_rows
from tests.support.analysis_tables import differences
from tests.unit.analyze.test_analyze_golden import golden_db

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import scale_campaign  # noqa: E402  (tests/bench/scale_campaign.py: the synthetic campaign)
import scale_copies  # noqa: E402

BASELINE = "autoregressive"  # the race campaign names another: every build is told this one
GOLDEN = "local-smollm2-7297cb746aa7"
GROUP_REQUESTS = scope.GROUP_REQUESTS  # the default, before a test changes it


def full_copy(path: Path, tmp_path: Path, group_requests: int, apart: bool = False) -> Path:
    """A copy of the file at path, analysed by a full rebuild: in one pass, or a group of
    campaigns at a time when they hold more than group_requests requests; apart: the chunk
    pass in worker processes before the build opens the file (a large file's way), not on
    the build's connection."""
    other = tmp_path / f"full-{group_requests}-{apart}.duckdb"
    shutil.copyfile(path, other)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(scope, "GROUP_REQUESTS", group_requests)
        if apart:
            patch.setattr(itl.scan, "PARALLEL_CHUNKS", 0)
        done = build.run(other, baseline=BASELINE, full=True)
    assert done.full == "--full"
    assert (len(done.groups) > 1) == (group_requests == 1)
    return other


def assert_same_as_full(path: Path, tmp_path: Path) -> None:
    """Equal to a full rebuild in one pass (its chunk pass on the build's connection, or in
    worker processes) and to one a campaign at a time."""
    for group_requests, apart in ((GROUP_REQUESTS, False), (GROUP_REQUESTS, True), (1, False)):
        other = full_copy(path, tmp_path, group_requests, apart)
        assert differences(path, other, build.TABLES) == []


@contextlib.contextmanager
def said(logger: logging.Logger) -> Iterator[list[str]]:
    """The messages logger says at INFO meanwhile."""
    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield lines
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def test_progress_says_how_long_the_rest_takes_at_the_same_time_per_request() -> None:
    assert build._progress([100, 300], 0, 10.0) == (
        "group 1 of 2 built (100 requests) in 10 s; about 30 s left"
    )
    assert (
        build._progress([1_000, 3_000], 1, 125.4)
        == "group 2 of 2 built (4,000 requests) in 2 min 05 s"
    )


def built_at(path: Path) -> dict[str, object]:
    with duckdb.connect(str(path), read_only=True) as con:
        return dict(con.execute("SELECT campaign_id, built_at FROM analysis_campaigns").fetchall())


def test_a_campaign_added_changed_or_removed_rebuilds_only_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(itl.scan, "GROUP_CHUNKS", 1)  # a full rebuild scans a campaign at a time
    path = golden_db(tmp_path / "results.duckdb")
    assert build.run(path, baseline=BASELINE).full == "no request_metrics table yet"
    first = built_at(path)

    scale = tmp_path / "scale.duckdb"
    scale_campaign.generate(scale, 600, seed=3, batch=600)
    added = scale_copies.add_campaign(path, scale, 1)
    done = build.run(path, baseline=BASELINE)
    assert (done.full, done.changed, done.removed, done.requests) == ("", [added], [], 600)
    assert built_at(path)[GOLDEN] == first[GOLDEN]  # the default campaign was not rebuilt
    assert_same_as_full(path, tmp_path)

    race_rows.write(path, {"A": [100.0, 104.0], "B": [150.0, 149.0]})
    with connect(path) as con:  # and the scale campaign loses a request
        con.execute("DELETE FROM requests WHERE request_id = (SELECT min(request_id) "
                    "FROM requests WHERE campaign_id = ?)", [added])  # fmt: skip
    with pytest.MonkeyPatch.context() as patch, said(build.progress) as lines:
        patch.setattr(scope, "GROUP_REQUESTS", 1)  # two changed campaigns: two groups
        done = build.run(path, baseline=BASELINE)
    assert (done.changed, done.groups) == (["c1", added], [["c1"], [added]])
    assert lines[0] == f"building 2 campaigns ({sum(done.sizes):,} requests)"
    assert done.sizes[1] == 599 and lines[1] == "in 2 groups of about 1 requests"
    assert re.fullmatch(
        rf"group 1 of 2 built \({done.sizes[0]:,} requests\) in \d+ s; about (\d+ min )?\d+ s left",
        lines[2],
    )
    assert re.fullmatch(r"group 2 of 2 built \([\d,]+ requests\) in (\d+ min )?\d+ s", lines[3])
    assert_same_as_full(path, tmp_path)

    with connect(path) as con:  # a unit of the default campaign is redone: its rows go
        con.execute(
            "DELETE FROM requests WHERE campaign_id = ? AND workload = "
            "(SELECT min(workload) FROM requests WHERE campaign_id = ?)",
            [GOLDEN, GOLDEN],
        )
        con.execute("DELETE FROM requests WHERE campaign_id = 'c1'")
        for table in ("races", "services", "campaigns"):
            con.execute(f"DELETE FROM {table} WHERE campaign_id = 'c1'")
    done = build.run(path, baseline=BASELINE)
    assert (done.changed, done.removed) == ([GOLDEN], ["c1"])
    assert_same_as_full(path, tmp_path)

    before = built_at(path)
    assert build.run(path, baseline=BASELINE).campaigns == []  # nothing changed: nothing built
    assert built_at(path) == before


def test_a_campaign_whose_rows_another_campaign_cuts_in_two(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a unit of the default campaign redone after another campaign ran: its rows now follow
    # the other's, so the chunk pass of the default campaign (in the results file) crosses
    # rows it must leave alone, and the scratch copy's rowids are not the file's
    monkeypatch.setattr(itl.scan, "BLOCK_CHUNKS", 2_000)  # many ranges, some of both
    path = golden_db(tmp_path / "results.duckdb")
    scale = tmp_path / "scale.duckdb"
    scale_campaign.generate(scale, 300, seed=4, batch=300)
    scale_copies.add_campaign(path, scale, 1)
    build.run(path, baseline=BASELINE)
    with connect(path) as con:
        unit = (
            "campaign_id = ? AND workload = "
            "(SELECT min(workload) FROM requests WHERE campaign_id = ?)"
        )
        con.execute(
            f"CREATE TEMP TABLE redone AS SELECT * FROM requests WHERE {unit}", [GOLDEN] * 2
        )
        con.execute(f"DELETE FROM requests WHERE {unit}", [GOLDEN] * 2)
        con.execute("UPDATE redone SET e2e_s = e2e_s + 0.001")
        con.execute("INSERT INTO requests SELECT * FROM redone")
        spans = itl.campaign_spans(con)
    ((_, lo, hi, _),) = [s for s in spans if s[0] == GOLDEN]
    assert any(
        lo < other_lo and other_hi < hi for cid, other_lo, other_hi, _ in spans if cid != GOLDEN
    )
    done = build.run(path, baseline=BASELINE)
    assert done.changed == [GOLDEN]
    assert_same_as_full(path, tmp_path)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ("UPDATE analysis_campaigns SET code_sha = 'older'", "the analysis code or the schema"),
        ("UPDATE analysis_campaigns SET baseline = 'other'", "the baseline is now"),
        ("DROP TABLE speedup", "no speedup table yet"),
    ],
)
def test_new_code_another_baseline_or_a_missing_table_rebuild_everything(
    tmp_path: Path, change: str, why: str
) -> None:
    path = golden_db(tmp_path / "results.duckdb")
    build.run(path, baseline=BASELINE)
    with connect(path) as con:
        con.execute(change)
    assert build.run(path, baseline=BASELINE).full.startswith(why)


def test_a_campaign_fingerprint_follows_every_raw_table_with_a_campaign(tmp_path: Path) -> None:
    """scope.RAW is every raw table with a campaign_id column, so a row added anywhere
    changes its campaign's fingerprint."""
    path = golden_db(tmp_path / "results.duckdb")
    with connect(path, read_only=True) as con:
        tables = {
            t
            for (t,) in con.execute(
                "SELECT table_name FROM duckdb_columns() WHERE column_name = 'campaign_id'"
            ).fetchall()
        }
        before = scope.fingerprints(con)[GOLDEN]
    assert tables == set(scope.RAW)
    with connect(path) as con:
        con.execute(
            "UPDATE services SET stopped_at = stopped_at + INTERVAL 1 SECOND "
            "WHERE service_id = (SELECT min(service_id) FROM services)"
        )
        assert scope.fingerprints(con)[GOLDEN] != before
