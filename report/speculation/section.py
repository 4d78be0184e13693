"""The speculation section as the report calls it: :func:`figure_jobs` for
:mod:`report.figures`, :func:`section` for :mod:`report.context` (what
``latex/speculation.tex.j2`` renders) and :func:`summary` for report.findings (what page 1's
summary gains, marked Unicode text that each output renders, report.text).

A campaign whose analysis has none of these tables, or only empty ones, gets no section.
Figures are capped so that the section stays a few pages: a sweep draws at most
:data:`SWEEP_PER_FIGURE` windows a figure and :data:`MAX_FIGURES` figures a parameter, and the
text says how many windows were left out.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
from pylatex.utils import NoEscape

from specsweep.report.data import ReportData
from specsweep.report.speculation import (
    best,
    categories,
    decomposition,
    detail,
    load,
    prediction,
    sweep,
)
from specsweep.report.speculation.panels import parts, windows
from specsweep.report.text import latex

Save = Callable[[plt.Figure, Path], Path]
Job = tuple[str, Callable[[], Path]]
SWEEP_PER_FIGURE = 4  # windows per sweep figure: a row each (acceptance | speedup)
DETAIL_PER_FIGURE = 6  # windows per per-position or histogram figure (3 rows of 2)
MAX_FIGURES = 2  # figures per swept parameter, per decomposition


def _frame(data: ReportData, name: str) -> pd.DataFrame:
    frame = getattr(data, name, None)
    return frame if isinstance(frame, pd.DataFrame) else pd.DataFrame()


def _sweep(ps: pd.DataFrame, family: str, param: str) -> pd.DataFrame:
    return ps[(ps["family"] == family) & (ps["param"] == param)]


def _decomposition_parts(sd: pd.DataFrame) -> tuple[list[list[tuple]], int]:
    per = 3 * decomposition.columns(sd)
    return parts(windows(sd), per, MAX_FIGURES)


def _save(save: Save, path: Path, make: Callable[..., plt.Figure], *args: object) -> Path:
    return save(make(*args), path)


def figure_jobs(data: ReportData, outdir: Path, save: Save) -> list[Job]:
    """Jobs ``spec-sweep:<i>-<part>`` per swept (family, param), ``spec-decomposition:<part>``,
    ``spec-positions:0`` and ``spec-histogram:0`` for the rows there are."""
    pal, jobs = data.palette, []
    ps, sd = _frame(data, "param_sweep"), _frame(data, "speedup_decomposition")
    pa, ah = _frame(data, "position_acceptance"), _frame(data, "accepted_histogram")

    def add(key: str, make: Callable[..., plt.Figure], *args: object) -> None:
        path = outdir / (key.replace(":", "-") + ".pdf")
        jobs.append((key, partial(_save, save, path, make, *args)))

    for i, (family, param) in enumerate(sweep.swept(ps)):
        frame = _sweep(ps, family, param)
        for p, keys in enumerate(parts(windows(frame), SWEEP_PER_FIGURE, MAX_FIGURES)[0]):
            add(f"spec-sweep:{i}-{p}", sweep.figure, frame, keys, pal)
    for p, keys in enumerate(_decomposition_parts(sd)[0] if not sd.empty else []):
        add(f"spec-decomposition:{p}", decomposition.figure, sd, keys, pal)
    abl = _frame(data, "acceptance_by_load")
    for p, keys in enumerate(parts(load.series(abl), load.PER_FIGURE, MAX_FIGURES)[0]):
        add(f"spec-load:{p}", load.figure, abl, keys, pal)
    cp = _frame(data, "category_pooled")
    for i, key in enumerate(categories.groups(cp)):
        add(f"spec-category:{i}", categories.figure, cp, key)
    for key, frame, kind in (
        ("spec-positions:0", pa, "position"),
        ("spec-histogram:0", ah, "histogram"),
    ):
        if not frame.empty:
            keys = parts(windows(frame), DETAIL_PER_FIGURE, 1)[0][0]
            add(key, detail.figure, frame, keys, pal, kind)
    return jobs


def _names(figs: dict[str, Path | None], prefix: str) -> list[str]:
    keys = sorted(
        (k for k in figs if k.startswith(prefix) and figs[k]),
        key=lambda k: [int(x) for x in k.split(":")[1].split("-")],
    )
    return [figs[k].name for k in keys]  # type: ignore[union-attr]


def sweeps(ps: pd.DataFrame, figs: dict[str, Path | None]) -> list[dict[str, Any]]:
    """Per swept (family, param): title, figure names, finding sentence (LaTeX), windows left
    out."""
    out = []
    for i, (family, param) in enumerate(sweep.swept(ps)):
        frame = _sweep(ps, family, param)
        finding = sweep.finding(frame, family, param)
        out.append(
            {
                "family": family,
                "param": param,
                "figures": _names(figs, f"spec-sweep:{i}-"),
                "finding": latex(finding) if finding else None,
                "left_out": parts(windows(frame), SWEEP_PER_FIGURE, MAX_FIGURES)[1],
            }
        )
    return out


def _detail(pa: pd.DataFrame, ah: pd.DataFrame, figs: dict[str, Path | None]) -> dict:
    both = pd.concat([pa, ah])
    if both.empty:
        return {"reported": False}
    shown = min(DETAIL_PER_FIGURE, len(windows(both)))
    return {
        "reported": True,
        "engines": detail.engines(both),
        "sources": detail.sources(pa) if not pa.empty else "",
        "positions": _names(figs, "spec-positions:"),
        "histogram": _names(figs, "spec-histogram:"),
        "left_out": max(len(windows(pa)), len(windows(ah))) - shown,
    }


def _by_load(abl: pd.DataFrame, figs: dict[str, Path | None]) -> dict[str, Any] | None:
    """Acceptance and step cost against load: figure names, the sentence, settings left out."""
    if abl.empty:
        return None
    finding = load.finding(abl)
    return {
        "figures": _names(figs, "spec-load:"),
        "finding": NoEscape(finding) if finding else None,
        "left_out": parts(load.series(abl), load.PER_FIGURE, MAX_FIGURES)[1],
    }


def _categories(cp: pd.DataFrame, figs: dict[str, Path | None]) -> dict[str, Any] | None:
    """The category heatmaps: per figure its name and caption key, and the summary."""
    if categories.shown(cp).empty:
        return None
    names = _names(figs, "spec-category:")
    keys = [categories.caption_key(k, cp) for k in categories.groups(cp)]
    return {
        "figures": [{"name": n, "key": NoEscape(k)} for n, k in zip(names, keys)],
        "summary": NoEscape(categories.summary(cp) or ""),
    }


def _losers(data: ReportData, sd: pd.DataFrame) -> str | None:
    """Who loses on step cost and who on acceptance (report.speculation.decomposition), None
    without decomposition rows."""
    if sd.empty:
        return None
    return decomposition.losers(decomposition.with_significance(sd, data.speedup))


def summary(data: ReportData) -> list[str]:
    """The speculation findings of page 1's summary (marked Unicode): each swept family's
    sentence (report.speculation.sweep.finding), then who loses on step cost or acceptance
    where a method is significantly slower (none when no method does)."""
    ps = _frame(data, "param_sweep")
    found = [sweep.finding(_sweep(ps, f, p), f, p) for f, p in sweep.swept(ps)]
    losers = _losers(data, _frame(data, "speedup_decomposition"))
    return [f for f in found if f] + (
        [losers] if losers not in (None, decomposition.NO_LOSER) else []
    )


def section(data: ReportData, figs: dict[str, Path | None]) -> dict[str, Any]:
    """What the template's speculation section and the threats show."""
    ps, sd = _frame(data, "param_sweep"), _frame(data, "speedup_decomposition")
    bs = _frame(data, "best_setting")
    pa, ah = _frame(data, "position_acceptance"), _frame(data, "accepted_histogram")
    sp, abl = _frame(data, "speedup_prediction"), _frame(data, "acceptance_by_load")
    cp = _frame(data, "category_pooled")
    if ps.empty and sd.empty and bs.empty and sp.empty and abl.empty and cp.empty:
        return {"available": False, "threats": []}
    sw = sweeps(ps, figs)
    losers = _losers(data, sd)
    unknown = decomposition.unknown(sd) if not sd.empty else None
    return {
        "available": True,
        "families": NoEscape(sweep.values_note(ps)),
        "sweeps": sw,
        "decomposition": None
        if sd.empty
        else {
            "figures": _names(figs, "spec-decomposition:"),
            "losers": latex(losers or ""),
            "unknown": latex(unknown) if unknown else None,
            "left_out": _decomposition_parts(sd)[1],
        },
        "by_load": _by_load(abl, figs),
        "categories": _categories(cp, figs),
        "prediction": None
        if sp.empty
        else {"table": prediction.table(sp), "summary": prediction.summary(sp)},
        "best_table": best.table(bs),
        "deploy": [latex(s) for s in best.sentences(bs)],
        "detail": _detail(pa, ah, figs),
        "threats": [],
    }
