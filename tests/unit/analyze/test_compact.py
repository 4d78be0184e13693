"""`specsweep compact` (schema.compact): the file shrinks to its live rows, keeps every row,
object and analysis exactly, and an interruption, a full disk or a copy that differs leaves
it as it was, with no copy left beside it.

The file: test_remove's (the default campaign's real rows and two copies of the scale
benchmark's synthetic campaign, analysed and compared), one copy then removed."""

from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import duckdb
import pytest

from specsweep.analyze import build
from specsweep.analyze.__main__ import main
from specsweep.interrupt import Interrupted
from specsweep.schema import compact, store
from tests.support.analysis_tables import differences
from tests.unit.analyze.test_incremental import BASELINE, GROUP_REQUESTS, full_copy
from tests.unit.analyze.test_remove import campaigns  # noqa: F401  (the fixture)


def content(path: Path) -> dict[str, tuple[int, int]]:
    """Each table of the file -> (rows, the sum of its rows' hashes: every column, lists
    included), and each view and macro -> its definition's hash."""
    with duckdb.connect(str(path), read_only=True) as con:
        return {
            name: (int(h[:15], 16), 0) if name.startswith(("view", "macro")) else _rows(con, name)
            for name, h in (
                (key, hashlib.sha256(sql.encode()).hexdigest())
                for key, sql in compact._catalog(con, con.execute("SELECT current_database()")
                                                 .fetchone()[0]).items()
            )
        }  # fmt: skip


def _rows(con: duckdb.DuckDBPyConnection, key: str) -> tuple[int, int]:
    table = key.removeprefix("table ")
    n, total = con.execute(f"SELECT count(*), sum(hash(t)) FROM {table} AS t").fetchone()
    return n, int(total or 0)


def leftovers(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if ".compact" in p.name)


@pytest.fixture
def removed(campaigns: tuple[Path, str, str]) -> Path:  # noqa: F811
    """The fixture's file with its second scale campaign removed (its rows deleted, the file
    as large as before)."""
    path, _, two = campaigns
    assert main(["remove", two, "--db", str(path), "--yes"]) == 0
    return path


def test_compact_gives_the_space_back_and_keeps_every_row_and_the_analysis(
    removed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before, size = content(removed), compact._size(removed)
    capsys.readouterr()
    assert main(["compact", "--db", str(removed)]) == 0
    line = capsys.readouterr().out
    after = removed.stat().st_size
    said = re.fullmatch(
        rf"compact: {removed}: ([\d.]+) MB -> ([\d.]+) MB \(([\d.]+) MB given back\) in [\d.]+ s\n",
        line,
    )
    assert said, line
    assert float(said[1]) >= round(size / 1e6, 1) and float(said[2]) == round(after / 1e6, 1)
    assert after < 0.8 * size, (size, after)
    assert content(removed) == before and leftovers(removed) == []
    assert not Path(f"{removed}.wal").exists()
    # the analysis stays up to date (no rowid is stored), and equal to a full rebuild's
    assert build.run(removed, baseline=BASELINE).campaigns == []
    assert differences(removed, full_copy(removed, tmp_path, GROUP_REQUESTS), build.TABLES) == []


def test_a_symbolic_link_keeps_pointing_at_the_compacted_file(removed: Path) -> None:
    link = removed.with_name("link.duckdb")
    link.symlink_to(removed)
    before = content(removed)
    assert main(["compact", "--db", str(link)]) == 0
    assert link.is_symlink() and content(removed) == before and leftovers(removed) == []


@pytest.mark.parametrize(
    ("fault", "code", "said"),
    [
        (Interrupted(signal.SIGTERM), 143, "compact: interrupted: the results file is as it was"),
        (Interrupted(signal.SIGINT), 130, "compact: interrupted: the results file is as it was"),
        (
            duckdb.IOException('Could not write file "x": No space left on device'),
            1,
            'Could not write file "x": No space left on device; the results file is as it was',
        ),
        (
            compact.CopyMismatch("the compacted copy differs from the file in table main.units"),
            1,
            "the compacted copy differs from the file in table main.units",
        ),
    ],
)
def test_a_fault_once_the_copy_is_written_leaves_the_file_as_it_was(
    removed: Path,
    fault: BaseException,
    code: int,
    said: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The fault comes where the copy is whole and attached, before the rename: what a
    signal, a disk or a check could stop last."""
    before = content(removed)
    capsys.readouterr()

    def check(con: duckdb.DuckDBPyConnection, *_: object) -> None:
        assert Path(f"{removed.parent}/.{removed.name}.compact").stat().st_size > 0
        raise fault

    monkeypatch.setattr(compact, "_require_same", check)
    assert main(["compact", "--db", str(removed)]) == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err
    assert content(removed) == before and leftovers(removed) == []


def test_a_copy_that_differs_is_refused(removed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """_require_same compares the copy as it was written: a row dropped from it is found."""
    real = compact._catalog

    def catalog(con: duckdb.DuckDBPyConnection, database: str) -> dict[str, str]:
        if database == compact.COPY:
            con.execute(f"DELETE FROM {compact.COPY}.units WHERE rowid = 0")
        return real(con, database)

    monkeypatch.setattr(compact, "_catalog", catalog)
    before = content(removed)
    with pytest.raises(compact.CopyMismatch, match=r"differs from the file in table main\.units"):
        compact.compact(removed)
    assert content(removed) == before and leftovers(removed) == []


def test_an_earlier_copy_left_by_a_killed_compact_is_replaced(removed: Path) -> None:
    stale = removed.with_name(f".{removed.name}.compact")
    stale.write_bytes(b"half a copy")
    Path(f"{stale}.wal").write_bytes(b"its log")
    before = content(removed)
    compact.compact(removed)
    assert content(removed) == before and leftovers(removed) == []


def test_a_writer_that_waited_writes_into_the_compacted_file(
    removed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process that opens the file while compact holds it waits (schema.store's lock wait),
    then writes into the compacted file, not into the one the rename replaced."""
    writer = [
        sys.executable, "-c",
        "import sys\nfrom specsweep.schema.store import connect\n"
        "with connect(sys.argv[1]) as con:\n"
        "    con.execute(\"INSERT INTO environment VALUES ('waited', 'h', 'k', 'v')\")\n",
        str(removed),
    ]  # fmt: skip
    real, started = compact._require_same, []

    def check(con: duckdb.DuckDBPyConnection, *args: object) -> None:
        started.append(subprocess.Popen(writer, cwd=Path(__file__).parents[3]))
        threading.Event().wait(1.0)  # the writer is at the lock by now
        assert started[0].poll() is None  # and waits there
        real(con, *args)

    monkeypatch.setattr(compact, "_require_same", check)
    compact.compact(removed)
    assert started[0].wait(timeout=60) == 0
    with duckdb.connect(str(removed), read_only=True) as con:
        assert (
            con.execute("SELECT count(*) FROM environment WHERE campaign_id = 'waited'").fetchone()[
                0
            ]
            == 1
        )


def test_a_file_another_process_holds_is_left_as_it_is_with_exit_1(
    removed: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    holder = subprocess.Popen(  # a `make sql` prompt left open
        [sys.executable, "-c", "import duckdb, sys, time\n"
         "con = duckdb.connect(sys.argv[1]); print('held', flush=True); time.sleep(60)",
         str(removed)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    data = removed.read_bytes()  # never opened for writing: the same bytes
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        monkeypatch.setattr(store, "LOCK_WAIT_S", 0.3)
        assert main(["compact", "--db", str(removed)]) == 1
    finally:
        holder.kill()
        holder.wait()
    err = capsys.readouterr().err
    assert err.startswith(f"compact: {removed}: ") and "lock" in err
    assert removed.read_bytes() == data and leftovers(removed) == []


def test_no_results_file_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compact", "--db", str(tmp_path / "none.duckdb")]) == 2
    assert "no results database at" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []
