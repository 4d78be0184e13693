"""Files a command writes for its user: asked before any work whether they can be written
(`unwritable`), written whole or not at all (`publish`); and a file that fails a command
told in one line (`file_faults`: a write the disk refused, for no space left, a quota or a
read-only file system; a results file DuckDB cannot read, damaged or truncated).

This module sits below the stages (the `stages` import contract) so that collect, analyze
and report, which may not import one another, share it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

REFUSED = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG, errno.EIO)
"""The errors of a write the disk refused, whatever the program asked: specsweep's code
cannot mend them, the user can (free space, a quota, a writable mount, `ulimit -f`)."""


def unwritable(path: str | Path) -> str | None:
    """Why no file can be written at path, else None; creates nothing. The nearest existing
    folder must take a probe file: permission bits say nothing to root or of a read-only
    mount. `run`, `export` and `report` ask before any work (docs/reference.md, exit codes)."""
    path = Path(path).absolute()
    if path.is_dir():
        return f"{path} is a folder"
    if path.exists():
        return None if os.access(path, os.W_OK) else f"{path}: permission denied"
    folder = next(p for p in path.parents if p.exists())
    if not folder.is_dir():
        return f"{folder} is not a folder"
    try:
        with tempfile.TemporaryFile(dir=folder):
            return None
    except OSError as exc:
        return f"{folder}: {exc.strerror or exc}"


def publish(path: Path, content: str | bytes | Callable[[str], object]) -> Path:
    """Write ``content`` to ``path`` whole or not at all: bytes, text (UTF-8), or a function
    that writes the file named by the string it is given (a DuckDB relation's
    ``write_parquet``). It is written
    to a hidden file beside ``path``, then renamed over it, so a command interrupted or
    failing while it writes leaves the earlier file, never part of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f".{path.name}.part")
    try:
        if callable(content):
            content(str(part))
        else:
            part.write_bytes(content.encode() if isinstance(content, str) else content)
        os.replace(part, path)
    except OSError as exc:  # named as the file the user asked for
        raise OSError(exc.errno, exc.strerror, str(path)) from exc
    finally:
        part.unlink(missing_ok=True)
    return path


class FileFault(Exception):
    """A file the command needs was refused or is damaged; the message says which and why,
    in one line. `refused`: a write the disk refused (the file itself is sound)."""

    def __init__(self, why: str, refused: bool):
        super().__init__(why)
        self.refused = refused


@contextlib.contextmanager
def file_faults() -> Iterator[None]:
    """An exception of the block that `file_fault` explains leaves it as FileFault; any
    other passes as it is."""
    try:
        yield
    except Exception as exc:
        fault = _fault(exc)
        if fault is None:
            raise
        raise FileFault(*fault) from exc


def file_fault(exc: BaseException) -> str | None:
    """One line saying which file failed the command and why, when ``exc``, or an exception
    it was raised from or during (a failed commit is often followed by a failed clean-up),
    is a write the disk refused (REFUSED) or DuckDB's IOException (a results file that is
    damaged, truncated, locked or unreadable). None for any other error, which stays a
    traceback: a bug to report. DuckDB says which file in its message ('Failed to commit:
    Could not write file "x.duckdb.wal": No space left on device'), Python in the OSError."""
    fault = _fault(exc)
    return None if fault is None else fault[0]


def _fault(exc: BaseException) -> tuple[str, bool] | None:
    """file_fault's line, and whether it is a write the disk refused."""
    reasons = [os.strerror(code) for code in REFUSED]
    duckdb = sys.modules.get("duckdb")  # not loaded: the error cannot be DuckDB's
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in REFUSED:
            return f"{seen.filename}: {seen.strerror}" if seen.filename else seen.strerror, True
        text = str(seen).splitlines()[0] if str(seen) else ""
        if any(reason in text for reason in reasons):
            return text[text.find("Could not") :] if "Could not" in text else text, True
        if duckdb is not None and isinstance(seen, duckdb.IOException):
            return text.removeprefix("IO Error: "), False
        seen = seen.__cause__ or seen.__context__
    return None
