"""What differs between two campaigns' `environment` rows, for `analyze compare`: the keys
whose values differ or exist on one side, with what changes on every run masked (the port a
service listened on, start-up times: never a cause), and a changed command line shown as
only its changed arguments (`-t 2 -> -t 1`)."""

from __future__ import annotations

import re
import shlex
from collections import defaultdict

import duckdb

VOLATILE = (".startup_s",)  # environment keys that differ on every run: not a cause
# parts of a value chosen anew each run (the port a service listens on): not a cause either
VOLATILE_PARTS = re.compile(r"(--port[ =])\d+")


def environment(
    con: duckdb.DuckDBPyConnection, a: str, b: str
) -> list[tuple[str, str, str | None, str | None]]:
    """(host, key, A's value, B's value) for every key that differs (host names kept: a
    host renamed between campaigns shows as keys on one side only)."""
    rows = con.execute(
        "SELECT campaign_id, host, key, value FROM environment WHERE campaign_id IN (?, ?)", [a, b]
    ).fetchall()
    sides: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)
    for campaign, host, key, value in rows:
        sides[(host, key)][campaign] = stable(value)
    return sorted(
        (h, k, v.get(a), v.get(b))
        for (h, k), v in sides.items()
        if v.get(a) != v.get(b) and not k.endswith(VOLATILE)
    )


def stable(value: str | None) -> str | None:
    """The value without what changes on every run (`--port 43123` -> `--port *`)."""
    return None if value is None else VOLATILE_PARTS.sub(r"\1*", value)


def argument_diff(a: str | None, b: str | None) -> str:
    """What changed between two values, short: for command lines the arguments only in A
    and only in B (`-t 2 -> -t 1`), else the two values."""
    if a is None or b is None or not a.startswith("/") or " -" not in a:
        return f"{a!r} -> {b!r}"
    try:
        ta, tb = _options(shlex.split(a)), _options(shlex.split(b))
    except ValueError:
        return f"{a!r} -> {b!r}"
    gone = [o for o in ta if o not in tb]
    new = [o for o in tb if o not in ta]
    return f"{' '.join(gone) or '(nothing)'} -> {' '.join(new) or '(nothing)'}"


def arguments(a: str | None, b: str | None) -> str | None:
    """argument_diff of two command lines; None for other values (the two values say it)."""
    diff = argument_diff(a, b)
    return None if diff == f"{a!r} -> {b!r}" else diff


def _options(tokens: list[str]) -> list[str]:
    """A command line as its options, each with its value (`-t 2`), in order."""
    out: list[str] = []
    for token in tokens:
        if out and not token.startswith("-") and out[-1].startswith("-") and " " not in out[-1]:
            out[-1] += " " + token
        else:
            out.append(token)
    return out
