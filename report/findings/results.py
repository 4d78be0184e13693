"""The findings as one object, built once from the report's data and rendered by every output.

:func:`build` reads a campaign's :class:`~report.data.ReportData` once into :class:`Findings`:
page 1's claims as data, one per speedup row that is a claim (not the A/A control), with its
numbers and the physics check's verdict; the method sentences (how to read the claims); the
summary of findings, the open-loop, speculation and race sections' findings included; and the
validity notes (all marked Unicode text, report.text). The PDF renders the sentences with
:func:`report.text.latex` (report.context), the HTML report with :func:`report.text.html`
(report.html.build), and :func:`document` is the JSON export (`specsweep export --findings
PATH`): the claims and each sentence's plain and marked text. Page 1's table of claims is
:func:`report.findings.table.rows` of the claims.
"""

from __future__ import annotations

import json
import math
import numbers
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from specsweep.report.data import ReportData, load
from specsweep.report.findings import headlines, physics, validity
from specsweep.report.keys import COMPARISON
from specsweep.report.openloop import section as openloop
from specsweep.report.race import section as race
from specsweep.report.speculation import section as speculation
from specsweep.report.text import plain
from specsweep.writing import publish

# changes when a key of document() is removed or changes meaning; 2: the method's sentences
# left `summary` for `method`, and `summary` gained the open-loop and speculation findings
FINDINGS_VERSION = 2
# speedup columns a claim carries, where the file has them (analyze/VIEWS.md, speedup)
CLAIM_COLUMNS = [
    *COMPARISON,
    "baseline",
    "speedup",
    "ci_low",
    "ci_high",
    "ci_reason",
    "sim_ci_low",
    "sim_ci_high",
    "p_value",
    "p_holm",
    "n_family",
    "significant",
    "n_prompts",
    "n_runs",
    "throughput_speedup",
    "physics_bound",
    "physics_basis",
]
EXCEEDS, UNCHECKED, WITHIN = "exceeds bound", "unchecked", "within bound"


@dataclass(frozen=True)
class Findings:
    """What page 1 says about one campaign: sentences as marked text, claims as data."""

    campaign_id: str
    baseline: str
    method: list[str] = field(default_factory=list)
    summary: list[str] = field(default_factory=list)
    validity: list[str] = field(default_factory=list)
    claims: list[dict[str, Any]] = field(default_factory=list)


def build(data: ReportData) -> Findings:
    """The findings of ``data``: every sentence built once (report.findings.headlines' method
    and summary, then the open-loop and speculation sections' summaries, and
    report.findings.validity.validity_notes) and the claims (:func:`claims`)."""
    return Findings(
        campaign_id=str(data.campaign["campaign_id"]),
        baseline=str(data.baseline),
        method=headlines.method(data),
        summary=headlines.summary(data)
        + openloop.summary(data)
        + speculation.summary(data)
        + race.summary(data),
        validity=validity.validity_notes(data),
        claims=claims(data),
    )


def _verdict(sp: pd.DataFrame) -> pd.Series:
    """The physics check of each row (report.findings.physics): a significant gain exceeds
    its bound, is unchecked (no bound) or is within it; None for the rest (not a gain)."""
    out = pd.Series(None, index=sp.index, dtype=object)
    gain = sp["significant"].fillna(False).astype(bool) & (sp["speedup"] > 1)
    out[gain] = WITHIN
    out[physics.unchecked(sp)] = UNCHECKED
    out[physics.implausible(sp)] = EXCEEDS
    return out


def claims(data: ReportData) -> list[dict[str, Any]]:
    """Page 1's claims (speedup rows but the A/A control), in the summary's order, each with
    its numbers, its physics check (``physics``: :data:`EXCEEDS`, :data:`UNCHECKED`,
    :data:`WITHIN` or None) and whether it heads its workload (``headline``)."""
    sp = physics.bounds(data, headlines.claims(data.speedup))
    if sp.empty:
        return []
    heads = {  # before sorting: headline() breaks exact ties by the rows' order, as summary()
        best.name
        for _, sub in sp.groupby("workload", sort=True)
        if (best := headlines.headline(sub)[0]) is not None
    }
    sp = sp.sort_values(["workload", *(c for c in COMPARISON if c != "workload")])
    verdict = _verdict(sp)
    columns = [c for c in CLAIM_COLUMNS if c in sp]
    return [
        {c: _value(r[c]) for c in columns} | {"physics": _value(verdict[i]), "headline": i in heads}
        for i, r in sp.iterrows()
    ]


def _value(v: Any) -> Any:
    """A JSON value: numbers as int or float, NaN and NA as None."""
    if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, (bool, str)):
        return v
    if hasattr(v, "item"):  # numpy scalars
        return _value(v.item())
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        return None if not math.isfinite(v) else float(v)
    return str(v)


def _sentences(items: list[str]) -> list[dict[str, str]]:
    return [{"text": plain(s), "marked": s} for s in items]


def document(f: Findings) -> dict[str, Any]:
    """The JSON document of ``f``: its claims, and each sentence's plain text (``text``) and
    marked form (``marked``: spans between U+E000..U+E005, report.text), in the order page 1
    prints them: the method, the summary, then the validity notes (the threats)."""
    return {
        "findings_version": FINDINGS_VERSION,
        "generator": "specsweep",
        "campaign_id": f.campaign_id,
        "baseline": f.baseline,
        "method": _sentences(f.method),
        "summary": _sentences(f.summary),
        "validity": _sentences(f.validity),
        "claims": f.claims,
    }


def write_json(f: Findings, path: Path | str) -> Path:
    """Write :func:`document` of ``f`` to ``path`` (UTF-8, no NaN); return the path."""
    text = json.dumps(document(f), indent=1, ensure_ascii=False, allow_nan=False)
    return publish(Path(path), text + "\n")


def export(db_path: Path | str, out: Path | str, campaign: str | None = None) -> Path:
    """Write the findings of ``campaign`` (default: the latest) of the results file at
    ``db_path`` as JSON to ``out`` (`specsweep export --findings PATH`)."""
    return write_json(build(load(db_path, campaign)), out)
