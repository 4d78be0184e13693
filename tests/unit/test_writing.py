"""specsweep.writing: files written whole, and a write the disk refused told in one line.
The refusals are real: /dev/full answers every write with ENOSPC."""

from __future__ import annotations

import errno
import signal
from pathlib import Path

import duckdb
import pytest

from specsweep.interrupt import Interrupted
from specsweep.writing import WriteRefused, publish, refused_writes, write_failure

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
    assert write_failure(python.value) == "No space left on device"  # write() names no file
    with pytest.raises(duckdb.IOException) as duck:
        duckdb.sql("COPY (SELECT * FROM range(100000)) TO '/dev/full' (FORMAT csv)")
    assert write_failure(duck.value) == 'Could not write file "/dev/full": No space left on device'
    try:  # a commit that failed, then the cleanup that failed after it: the cause is found
        try:
            duckdb.sql("COPY (SELECT 1) TO '/dev/full' (FORMAT csv)")
        except duckdb.IOException:
            raise RuntimeError("database has been invalidated") from None
    except RuntimeError as later:
        assert write_failure(later) == 'Could not write file "/dev/full": No space left on device'
    assert write_failure(RuntimeError("a bug")) is None
    assert write_failure(OSError(errno.ENOENT, "No such file or directory", "x")) is None


def test_refused_writes_converts_refusals_and_passes_the_rest(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    with pytest.raises(WriteRefused) as refused, refused_writes():
        publish(out, _fill)
    assert str(refused.value) == f"{out}: No space left on device"  # the file asked for
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="a bug"), refused_writes():
        raise ValueError("a bug")
