"""The race section as the report calls it: :func:`figure_jobs` for :mod:`report.figures`,
:func:`latex_section` for :mod:`report.context` (what ``latex/race.tex.j2`` renders),
:func:`html_section` for the HTML page, and :func:`summary` for report.findings (page 1's
sentence per raced phase).

Everything is read from race_rounds, race_decisions and race_cost (analyze.race) as they are:
the decisions are the analysis' replay of the race collect ran, never re-decided here. The
content is built once (:func:`phases`: marked sentences, report.text, and the decision table's
cells as plain text) and each output renders it; data strings are escaped by the renderer.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd

from specsweep.report.data import ReportData
from specsweep.report.race import figure
from specsweep.report.tables import Col, build_table, text
from specsweep.report.text import data as d
from specsweep.report.text import em, html, latex, num

Save = Callable[[plt.Figure, Path], Path]
Job = tuple[str, Callable[[], Path]]
MAX_FIGURES = 2  # race figures a phase; the text says how many levels are not drawn
HEADERS = {
    "level": "level",
    "decision": "decision",
    "picked": "winner / survivors",
    "tps": "best decode tok/s",
    "rounds": "rounds",
    "dropped": "dropped",
}


def _of(frame: pd.DataFrame, phase: str) -> pd.DataFrame:
    return frame[frame["phase"] == phase] if not frame.empty else frame


def pct(share: float) -> str:
    """A share as the section prints it: 17.0%."""
    return num(100 * share, ".1f") + "%"


def share(x: float) -> str:
    """A rule's share as written in a plan: 10%, 95%, 2.5%."""
    return num(100 * x, ".3g") + "%"


def rule(c: pd.Series) -> str:
    """The phase's rule in words (marked text)."""
    arms = ", ".join(em(a) for a in str(c["methods"]).split(","))
    return (
        f"Phase {em(c['phase'])} (TP {d(c['tp'])}) raced {arms} on decode tok/s: every arm "
        f"runs the first {d(c['first_rounds'])} rounds; after each later round an arm is "
        f"dropped at a level when it is more than {share(c['within'])} behind another survivor "
        f"at {share(c['confidence'])} confidence (Kim and Nelson's fully sequential procedure, "
        f"one pooled start variance per level), for at most {d(c['max_rounds'])} rounds."
    )


def decisions(dec: pd.DataFrame) -> list[dict[str, str]]:
    """The decision table's rows as plain text, keyed as :data:`HEADERS`."""
    rows = []
    for _, r in dec.iterrows():
        best = "" if pd.isna(r["best_decode_tps"]) else num(r["best_decode_tps"], ".1f")
        picked = (
            r["winner"] if r["decision"] == "winner" else str(r["survivors"]).replace(",", ", ")
        )
        rows.append({
            "level": str(r["level"]), "decision": str(r["decision"]), "picked": str(picked),
            "tps": best + (f" ({r['best']})" if best and r["decision"] != "winner" else ""),
            "rounds": str(int(r["rounds"])), "dropped": str(int(r["dropped"])),
        })  # fmt: skip
    return rows


def drops(rounds: pd.DataFrame) -> list[str]:
    """Who was dropped where, in which round and why (marked text)."""
    out = []
    gone = rounds[rounds["status"].isin(["dropped", "missing"])] if not rounds.empty else rounds
    for _, r in gone.sort_values(["round", "level", "method"]).iterrows():
        where = f"{em(r['method'])} was dropped at {em(r['level'])} after round {d(r['round'])}"
        if r["status"] == "missing":
            out.append(f"{where}: it has no value there in that round (its start failed or "
                       "measured nothing).")  # fmt: skip
        elif r["margin"] > 0:
            out.append(f"{where}: {pct(r['gap'])} behind {em(r['leader'])}, beyond the margin "
                       f"of {pct(r['margin'])} at that round.")  # fmt: skip
        else:  # KN's region has closed: the start variance is small against the zone
            out.append(
                f"{where}: {pct(r['gap'])} behind {em(r['leader'])}; the continuation region "
                "had closed (margin 0: the starts varied so little against the zone that the "
                "best mean is within it at the stated confidence)."
            )
    return out


def guarantees(dec: pd.DataFrame) -> list[str]:
    """Each level's guarantee, in words (race_decisions.guarantee)."""
    return [f"At {em(r['level'])}: {d(r['guarantee'])}." for _, r in dec.iterrows()]


def duration(seconds: float) -> str:
    """Device time as read: 46 s, 12.5 min, 3.2 h."""
    if seconds < 120:
        return f"{num(seconds, '.0f')} s"
    if seconds < 7200:
        return f"{num(seconds / 60, '.1f')} min"
    return f"{num(seconds / 3600, '.1f')} h"


def cost(c: pd.Series) -> str:
    """What the race cost against the grid (marked text)."""
    starts = (
        f"The race made {d(c['starts'])} of the grid's {d(c['grid_starts'])} service starts "
        f"({pct(c['starts_share'])})"
    )
    if pd.isna(c["device_s"]) or pd.isna(c["grid_device_s"]):
        return starts + "; no start recorded its stop, so no device time is known."
    return (
        f"{starts} and spent {duration(c['device_s'])} of device time against the grid's "
        f"estimated {duration(c['grid_device_s'])} ({pct(c['device_share'])}); the grid "
        f"starts every arm in each of the {d(c['max_rounds'])} rounds."
    )


def summary(data: ReportData) -> list[str]:
    """Page 1's sentence per raced phase: levels decided, rounds, the grid's starts spent."""
    out = []
    for _, c in data.race_cost.iterrows() if not data.race_cost.empty else []:
        noun = "level" if c["levels"] == 1 else "levels"
        device = (
            "" if pd.isna(c["device_share"]) else f" ({pct(c['device_share'])} of its device time)"
        )
        out.append(
            f"The race of phase {em(c['phase'])} decided {d(c['decided'])} of {d(c['levels'])} "
            f"{noun} in {d(c['rounds'])} rounds and spent {pct(c['starts_share'])} of the "
            f"grid's starts{device}."
        )
    return out


def _parts(rounds: pd.DataFrame) -> tuple[list[list[str]], int]:
    keys = figure.levels(rounds)
    per = figure.PER_FIGURE
    parts = [keys[i : i + per] for i in range(0, len(keys), per)][:MAX_FIGURES]
    return parts, len(keys) - sum(len(p) for p in parts)


def _save(save: Save, path: Path, rounds: pd.DataFrame, keys: list[str], pal: Any) -> Path:
    return save(figure.figure(rounds, keys, pal), path)


def figure_jobs(data: ReportData, outdir: Path, save: Save) -> list[Job]:
    """Jobs ``race:<phase index>-<part>``: a figure per phase (and part) with closed rounds."""
    jobs: list[Job] = []
    cost_rows = data.race_cost
    for i, phase in enumerate(cost_rows["phase"] if not cost_rows.empty else []):
        rounds = _of(data.race_rounds, phase)
        for p, keys in enumerate(_parts(rounds)[0]):
            path = outdir / f"race-{i}-{p}.pdf"
            jobs.append((f"race:{i}-{p}", partial(_save, save, path, rounds, keys, data.palette)))
    return jobs


def phases(data: ReportData, figs: dict[str, Path | None]) -> list[dict[str, Any]]:
    """Per raced phase: its rule, decision rows, drops, guarantees and cost (marked text), the
    figure keys drawn and the levels not drawn."""
    out = []
    for i, (_, c) in enumerate(data.race_cost.iterrows() if not data.race_cost.empty else []):
        rounds, dec = _of(data.race_rounds, c["phase"]), _of(data.race_decisions, c["phase"])
        keys = [k for k in figs if k.startswith(f"race:{i}-") and figs[k]]
        out.append({
            "phase": str(c["phase"]), "rule": rule(c), "decisions": decisions(dec),
            "drops": drops(rounds), "guarantees": guarantees(dec), "cost": cost(c),
            "figures": keys, "left_out": _parts(rounds)[1], "rounds": int(c["rounds"]),
        })  # fmt: skip
    return out


def _rendered(found: list[dict[str, Any]], render: Callable[[str], Any]) -> list[dict]:
    keys = ("rule", "cost")
    return [
        p
        | {k: render(p[k]) for k in keys}
        | {k: [render(s) for s in p[k]] for k in ("drops", "guarantees")}
        for p in found
    ]


def latex_section(data: ReportData, figs: dict[str, Path | None]) -> dict[str, Any]:
    """What ``latex/race.tex.j2`` renders; ``available`` false without a raced phase."""
    found = phases(data, figs)
    cols = [Col(h, text(k), "r" if k in ("rounds", "dropped") else "l") for k, h in HEADERS.items()]
    out = _rendered(found, latex)
    for p in out:
        rows = pd.DataFrame(p["decisions"], columns=list(HEADERS))
        p["table"] = build_table(rows, cols) if not rows.empty else None
        p["figures"] = [figs[k].name for k in p["figures"]]  # type: ignore[union-attr]
    return {"available": bool(found), "phases": out}


def html_section(data: ReportData, figs: dict[str, Path | None]) -> dict[str, Any]:
    """What the HTML page's race section renders (figures by their keys: the page links
    each to its embedded copy)."""
    found = _rendered(phases(data, figs), html)
    return {"available": bool(found), "phases": found, "headers": HEADERS}
