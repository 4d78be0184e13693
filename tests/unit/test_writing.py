"""specsweep.writing: files written whole, and a write the disk refused told in one line.
The refusals are real: /dev/full answers every write with ENOSPC."""

from __future__ import annotations

import errno
import signal
from pathlib import Path

import duckdb
import pytest

from specsweep.interrupt import Interrupted
from specsweep.writing import FileFault, file_fault, file_faults, publish

FULL = Path("/dev/full")


def test_publish_writes_the_file_whole_or_leaves_the_earlier_one(tmp_path: Path) -> None:
    out = tmp_path / "reports" / "report.pdf"
    assert publish(out, b"%PDF new") == out and out.read_bytes() == b"%PDF new"
    publish(out, "text é")
    assert out.read_text(encoding="utf-8") == "text é"

    class Torn(str):  # a build stopped while the content is being written
        def encode(self, *args: object, **kwargs: object) -> bytes:
            (tmp_path / "reports" / ".report.pdf.part").write_bytes(b"%PDF half")
            raise Interrupted(signal.SIGINT)

    with pytest.raises(Interrupted):
        publish(out, Torn("x"))
    assert out.read_text(encoding="utf-8") == "text é"
    assert sorted(p.name for p in out.parent.iterdir()) == ["report.pdf"]


def _fill(path: str) -> None:
    """Write to /dev/full (``path`` unused): what a full disk answers."""
    with FULL.open("wb") as f:
        f.write(b"x")


def test_a_write_to_a_full_disk_is_named_in_one_line() -> None:
    with pytest.raises(OSError) as python:
        _fill("")
    assert file_fault(python.value) == "No space left on device"  # write() names no file
    with pytest.raises(duckdb.IOException) as duck:
        duckdb.sql("COPY (SELECT * FROM range(100000)) TO '/dev/full' (FORMAT csv)")
    assert file_fault(duck.value) == 'Could not write file "/dev/full": No space left on device'
    try:  # a commit that failed, then the cleanup that failed after it: the cause is found
        try:
            duckdb.sql("COPY (SELECT 1) TO '/dev/full' (FORMAT csv)")
        except duckdb.IOException:
            raise RuntimeError("database has been invalidated") from None
    except RuntimeError as later:
        assert file_fault(later) == 'Could not write file "/dev/full": No space left on device'
    assert file_fault(RuntimeError("a bug")) is None
    assert file_fault(OSError(errno.ENOENT, "No such file or directory", "x")) is None


def test_file_faults_converts_refusals_and_passes_the_rest(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    with pytest.raises(FileFault) as refused, file_faults():
        publish(out, _fill)
    assert str(refused.value) == f"{out}: No space left on device"  # the file asked for
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="a bug"), file_faults():
        raise ValueError("a bug")


def test_a_damaged_duckdb_file_is_a_fault_but_not_a_refused_write(tmp_path: Path) -> None:
    db = tmp_path / "cut.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE t AS SELECT random() AS x FROM range(2000000)")
    db.write_bytes(db.read_bytes()[: db.stat().st_size // 2])
    with pytest.raises(FileFault) as damaged, file_faults():
        duckdb.connect(str(db)).execute("SELECT sum(x) FROM t").fetchall()
    assert str(damaged.value).startswith(f'Could not read enough bytes from file "{db}"')
    assert not damaged.value.refused
    with pytest.raises(FileFault) as full, file_faults():
        _fill("")
    assert full.value.refused
