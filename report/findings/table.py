"""Page 1's table of claims: one row per claim of :class:`~report.findings.results.Findings`
(its ``claims``), as plain Unicode cells that the PDF (report.context) and the HTML report
(report.html.build) each print as they print any table cell.

The columns: the claim (method, workload, load point, speedup), its interval (the
simultaneous one over the family for a workload's headline, which is picked after looking, the
plain 95% one for the rest: report.findings.headlines says why), its family (whether it is
significant and its Holm-adjusted p among the campaign's m claims: m in the header when every
claim has the same, as a campaign analysed in one family does, else in each cell), and
whether it passed the physics check (report.findings.physics; only a significant gain is
checked). Headlines come first, then the other significant claims by Holm p, then the rest by
Holm p; at most :data:`MAX_ROWS` rows, the others are counted for the page to point at the
full table. Cells are short: the table shares page 1 with the headline chart.
"""

from __future__ import annotations

import math
from typing import Any

from specsweep.report.findings.results import EXCEEDS, UNCHECKED, WITHIN
from specsweep.report.latex import fmt_sig
from specsweep.report.text import num, times

MAX_ROWS = 12  # claims on page 1; every claim is in the report's "All speedups" section
HEADERS = {
    "claim": "claim",
    "interval": "95% interval",
    "family": "family",
    "check": "check passed",
}
CHECK = {WITHIN: "yes", EXCEEDS: "no", UNCHECKED: "not checked"}


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _setup(c: dict[str, Any], several: bool) -> str:
    return f"{c['engine']} TP{c['tp']}, " if several else ""


def claim(c: dict[str, Any], several: bool = False) -> str:
    """``dflash on code_gen, max_tokens 128, conc. 1: 1.84×``, `` (headline)`` after a
    workload's headline; engine and TP first where the campaign ran several."""
    where = f"{_setup(c, several)}max_tokens {c['max_tokens']}, conc. {c['concurrency']}"
    head = " (headline)" if c.get("headline") else ""
    return f"{c['method']} on {c['workload']}, {where}: {times(c['speedup'])}{head}"


def interval(c: dict[str, Any]) -> str:
    """``1.49–2.27 (sim.)`` for a headline (the simultaneous interval, where the file has it),
    ``1.72–1.98`` for the rest, ``none`` without an interval."""
    sim = c.get("headline") and not _missing(c.get("sim_ci_low"))
    low, high = ("sim_ci_low", "sim_ci_high") if sim else ("ci_low", "ci_high")
    if _missing(c.get(low)):
        return "none"
    return f"{num(c[low])}\u2013{num(c[high])}" + (" (sim.)" if sim else "")


def family_size(claims: list[dict[str, Any]]) -> int | None:
    """The family's m when every tested claim has the same one (one family per campaign)."""
    ms = {c.get("n_family") for c in claims if not _missing(c.get("p_holm"))}
    m = ms.pop() if len(ms) == 1 else None
    return None if _missing(m) else int(m)


def headers(claims: list[dict[str, Any]]) -> dict[str, str]:
    """:data:`HEADERS`, with the family's m in its header when the claims share one."""
    m = family_size(claims)
    return HEADERS | ({"family": f"family: Holm over m = {m}"} if m is not None else {})


def family(c: dict[str, Any], one_m: bool = False) -> str:
    """``significant (p 0.0052)``; ``(p 0.0052, m = 8)`` where the claims' families differ
    (not ``one_m``); ``not tested`` without a p-value."""
    p = c.get("p_holm")
    if _missing(p):
        return "not tested"
    verdict = "significant" if c.get("significant") else "not significant"
    m = "" if one_m or _missing(c.get("n_family")) else f", m = {c['n_family']}"
    return f"{verdict} (p {fmt_sig(p, 2)}{m})"


def check(c: dict[str, Any]) -> str:
    """:data:`CHECK` of the claim's physics verdict; an en dash for a claim that is not a
    significant gain (nothing to check)."""
    return CHECK.get(c.get("physics"), "\u2013")


def _order(c: dict[str, Any]) -> tuple:
    p = c.get("p_holm")
    return (not c.get("headline"), not c.get("significant"), 2.0 if _missing(p) else p)


def rows(claims: list[dict[str, Any]], limit: int = MAX_ROWS) -> tuple[list[dict[str, str]], int]:
    """Page 1's rows of ``claims`` (Findings.claims), keyed as :data:`HEADERS` (their header
    row: :func:`headers`), in the module docstring's order, and how many claims did not fit
    under ``limit``."""
    several = len({(c.get("engine"), c.get("tp")) for c in claims}) > 1
    one_m = family_size(claims) is not None
    shown = sorted(claims, key=_order)[:limit]  # stable: ties keep the claims' own order
    out = [
        {
            "claim": claim(c, several),
            "interval": interval(c),
            "family": family(c, one_m),
            "check": check(c),
        }
        for c in shown
    ]
    return out, len(claims) - len(shown)
