"""The report's open-loop section: latency, goodput, lag vs offered rate; rate limits; threats.

Reads the analysis tables open_windows, rate_limits, rate_sweep, rate_points, slo_targets and
cache_hygiene (as :mod:`report.data` loads them) as they are: analyze joins and pools them. A
campaign without open-loop windows gets no section; cache-hygiene threats are named whenever a
window of either kind is flagged. The charts are :mod:`report.openloop.figures`'; here are
their jobs for :mod:`report.figures`, the rate-limits table and the sentences: the findings per
setting (:func:`summary`, which page 1's summary gains through report.findings) and the SLO as
marked Unicode text (report.text), the threats still as raw LaTeX built from escaped values.
Latency, SLO attainment and goodput are read from the scheduled send first, the actual send
beside it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from pylatex.utils import NoEscape

from specsweep.report.data import ReportData
from specsweep.report.latex import escape_latex as e
from specsweep.report.latex import fmt_num
from specsweep.report.openloop.figures import (
    SETTING,
    flag,
    goodput_figure,
    lag_figure,
    latency_figure,
    settings,
    speedup_figure,
    title,
    windows,
)
from specsweep.report.tables import Col, fit_table, text
from specsweep.report.text import data as d
from specsweep.report.text import latex

SLO_KEYS = (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("e2e_ms", "E2E"))
MAX_LISTED = 6
Save = Callable[[plt.Figure, Path], Path]


def slo(st: pd.DataFrame) -> dict[str, float] | None:
    """The campaign's SLO (``ttft_ms``, ``tpot_ms``, ``e2e_ms`` given, ``target``), or None
    when the plan gave none."""
    row = st.iloc[0] if not st.empty else {}
    given = {k: float(row[k]) for k, _ in SLO_KEYS if k in row and pd.notna(row[k])}
    target = row.get("target") if given else None
    return given | {"target": 0.99 if pd.isna(target) else float(target)} if given else None


def slo_text(s: dict[str, float]) -> str:
    """``TTFT ≤ 500 ms, TPOT ≤ 50 ms; attainment target 99%`` (marked Unicode, report.text)."""
    limits = ", ".join(f"{n} \u2264 {fmt_num(s[k], 'g')} ms" for k, n in SLO_KEYS if k in s)
    return f"{limits}; attainment target {fmt_num(100 * s['target'], 'g')}%"


def _rate(r: float) -> str:
    return f"{fmt_num(r, 'g')} req/s"


def _save(save: Save, path: Path, make: Callable[..., plt.Figure], *args: object) -> Path:
    return save(make(*args), path)


def figure_jobs(data: ReportData, outdir: Path, save: Save) -> list[tuple[str, Callable[[], Path]]]:
    """Jobs for report.figures: per setting (tp, workload, max_tokens) ``openloop-latency:i``,
    ``openloop-goodput:i`` (with an SLO and rate_points with attainment) and
    ``openloop-speedup:i`` (with rate_sweep rows), then ``openloop-lag:0``; none without
    open-loop windows."""
    ow, pal, jobs = windows(data.open_windows), data.palette, []
    points = windows(data.rate_points)
    target = (slo(data.slo_targets) or {}).get("target")

    def add(key: str, make: Callable[..., plt.Figure], *args: object) -> None:
        path = outdir / (key.replace(":", "-") + ".pdf")
        jobs.append((key, partial(_save, save, path, make, *args)))

    for i, (key, sub) in enumerate(settings(ow)):
        add(f"openloop-latency:{i}", latency_figure, sub, pal)
        at = _of(points, key)
        if target is not None and not at.empty and at["attainment"].notna().any():
            add(f"openloop-goodput:{i}", goodput_figure, at, pal, target)
        sp = _of(data.rate_sweep, key)
        if not sp.empty:
            add(f"openloop-speedup:{i}", speedup_figure, sp, pal)
    if not ow.empty:
        add("openloop-lag:0", lag_figure, ow, pal)
    return jobs


def _of(frame: pd.DataFrame, key: tuple) -> pd.DataFrame:
    if frame.empty:
        return frame
    return frame[(frame[SETTING] == pd.Series(key, index=SETTING)).all(axis=1)]


def _under_slo(col: str, reason: str | None = None) -> Callable[[pd.Series], str]:
    """A max-rate cell: the rate, ``(all)`` when every rate passed, ``< lowest`` when the
    lowest missed, ``--`` when nothing was judged (no single rate, or the column's ``reason``:
    the lowest rate had no interval, e.g. one start per configuration)."""

    def cell(r: pd.Series) -> str:
        if pd.isna(r[col]):
            unjudged = pd.isna(r["lowest_rate"]) or (reason is not None and pd.notna(r.get(reason)))
            return "--" if unjudged else f"< {fmt_num(r['lowest_rate'], 'g')}"
        every = r[col] == r["highest_rate"]
        return fmt_num(r[col], "g") + (" (all)" if every else "")

    return cell


def _stops(r: pd.Series, baseline: str) -> str:
    if r["method"] == baseline or pd.notna(r["stops_paying_rate"]):
        return "baseline" if r["method"] == baseline else fmt_num(r["stops_paying_rate"], "g")
    return "none slower" if r["compared"] else "--"


def limits_table(rows: pd.DataFrame, has_slo: bool, baseline: str) -> NoEscape:
    """Per setting and method: max rate under the SLO (point estimate, and strict: on the
    lower end of attainment's interval over the rounds' starts, rate_attainment's), the first
    saturated rate and the rate where speculation stops paying (req/s)."""
    cols = [
        Col("workload", text("workload")),
        Col("max_tokens", text("max_tokens"), "r"),
        Col("method", text("method")),
    ]
    if rows["tp"].nunique() > 1:
        cols.insert(1, Col("tp", text("tp"), "r"))
    if has_slo:
        cols += [
            Col("max rate under SLO (point)", _under_slo("max_rate_under_slo"), "r"),
            Col(
                "strict (over starts)",
                _under_slo("max_rate_under_slo_strict", "strict_reason"),
                "r",
            ),
        ]
    cols += [
        Col(
            "saturates at",
            lambda r: (
                "none" if pd.isna(r["saturation_rate"]) else fmt_num(r["saturation_rate"], "g")
            ),
            "r",
        ),
        Col("stops paying at", lambda r: _stops(r, baseline), "r"),
    ]
    return fit_table(rows, cols)


def _clauses(sub: pd.DataFrame, has_slo: bool, baseline: str) -> list[str]:
    stops, meets, sat = [], [], []
    for _, r in sub.iterrows():
        m = d(r["method"])
        later = r.get("pays_at_rate")
        if r["method"] != baseline and pd.notna(r["stops_paying_rate"]):
            low = _rate(r["lowest_rate"])
            stops.append(
                f"{m} stops paying (significantly slower) at {_rate(r['stops_paying_rate'])}"
                if r["stops_paying_rate"] != r["lowest_rate"]
                else f"{m} is slower at {low} but faster at {_rate(later)}"
                if pd.notna(later)
                else f"{m} is slower even at the lowest rate, {low}"
            )
        elif r["method"] != baseline and r["compared"] and pd.notna(r["highest_rate"]):
            up_to = _rate(r["highest_rate"])
            stops.append(
                f"{m} is faster from {_rate(later)} and significantly slower at no "
                f"rate up to {up_to}"
                if pd.notna(later)
                else f"{m} is neither significantly faster nor slower at any rate up to {up_to}"
            )
        if has_slo and pd.notna(r["max_rate_under_slo"]):
            every = " (every rate measured)" if r["max_rate_under_slo"] == r["highest_rate"] else ""
            meets.append(
                f"{m} meets the SLO up to {_rate(r['max_rate_under_slo'])}{every}{_strict(r)}"
            )
        elif has_slo and pd.notna(r["lowest_rate"]):
            meets.append(f"{m} misses the SLO already at {_rate(r['lowest_rate'])}")
        if pd.notna(r["saturation_rate"]):
            sat.append(f"{m} saturates at {_rate(r['saturation_rate'])}")
    return stops + meets + sat


def _strict(r: pd.Series) -> str:
    """What the interval over the starts says of a point max rate under the SLO: nothing when
    it agrees, else that the rate is a point estimate and how far the interval goes."""
    strict, point = r.get("max_rate_under_slo_strict"), r["max_rate_under_slo"]
    if pd.notna(strict) and strict >= point:
        return ""
    if pd.notna(strict):
        return f" (point estimate; up to {_rate(strict)} on its interval over starts)"
    if pd.notna(r.get("strict_reason")):
        return " (point estimate; no interval over starts)"
    return " (point estimate; at no rate on its interval over starts)"


def findings(rows: pd.DataFrame, ow: pd.DataFrame, has_slo: bool, baseline: str) -> list[str]:
    """One sentence per setting (marked Unicode, report.text): where each method stops paying,
    up to which rate it meets the SLO (the point estimate, qualified where the interval over
    starts says less), where it saturates (rates are swept rates; TPOT speedup per paired
    prompts)."""
    return [
        f"Open loop on {d(title(key, ow))}: " + "; ".join(c) + "."
        for key, sub in rows.groupby(SETTING, sort=True)
        if (c := _clauses(sub, has_slo, baseline))
    ]


def summary(data: ReportData) -> list[str]:
    """The open-loop findings of page 1's summary and of the rate-limits subsection
    (:func:`findings` over rate_limits); none without open-loop windows or rate limits."""
    ow = windows(data.open_windows)
    if ow.empty or data.rate_limits.empty:
        return []
    return findings(data.rate_limits, ow, slo(data.slo_targets) is not None, data.baseline)


def _where(r: pd.Series, ow: pd.DataFrame) -> str:
    load = _rate(r["x"]) + (f" ({e(r['ramp'])} ramp)" if pd.notna(r.get("ramp")) else "")
    return f"{e(r['method'])} on {e(title(tuple(r[SETTING]), ow))} at {load}"


def _listed(items: list[str]) -> str:
    more = [f"{len(items) - MAX_LISTED} more"] if len(items) > MAX_LISTED else []
    return ", ".join(items[:MAX_LISTED] + more)


def _duration(seconds: float) -> str:
    return (
        f"{fmt_num(seconds, '.2f')} s"
        if abs(seconds) >= 1
        else f"{fmt_num(1000 * seconds, '.1f')} ms"
    )


def lag_notes(ow: pd.DataFrame, figure: bool = True) -> list[str]:
    """A threats sentence on schedule lag: the windows behind schedule (lag growing by more
    than 0.1 s per s of schedule), by name, or the largest p90 lag when none is."""
    behind = ow[flag(ow, "behind_schedule")]
    head = (
        "Open-loop schedule lag is the actual send time minus the time the schedule asked "
        "for"
        + (" (Figure~\\ref{fig:openloop-lag}); " if figure else "; ")
        + "latency, SLO attainment and goodput count it, from the scheduled send. "
    )
    if behind.empty:
        top = ow.loc[ow["lag_p90_s"].fillna(0).idxmax()]
        return [
            head + "No window fell behind its schedule (lag growing by more than 0.1 s "
            f"per second of schedule); the largest p90 lag was "
            f"{_duration(top['lag_p90_s'])} ({_where(top, ow)})."
        ]
    named = [
        f"{_where(r, ow)} (lag grew {fmt_num(r['lag_growth'], '.2f')} s per s, p90 lag "
        f"{_duration(r['lag_p90_s'])})"
        for _, r in behind.iterrows()
    ]
    return [
        head + f"{len(behind)} of {len(ow)} window(s) fell behind their schedule (lag "
        "growing by more than 0.1 s per second of schedule: the server was offered less "
        "than 91\\% of the rate), so their goodput is not reported: "
        f"{_listed(named)}."
    ]


def send_notes(ow: pd.DataFrame, gap: float = 0.05) -> list[str]:
    """A threats sentence naming the windows whose SLO attainment from the actual send (as
    vLLM's benchmark_serving and AIPerf count it) exceeds the one from the scheduled send by
    more than ``gap``: there the client's queue hid latency from a from-send count."""
    if "attainment_from_send" not in ow or ow["attainment"].isna().all():
        return []
    diff = ow["attainment_from_send"].astype(float) - ow["attainment"].astype(float)
    hid = ow[diff.fillna(0).to_numpy() > gap]
    if hid.empty:
        return []
    named = [
        f"{_where(r, ow)} ({fmt_num(100 * r['attainment'], '.0f')}\\% from the scheduled "
        f"send, {fmt_num(100 * r['attainment_from_send'], '.0f')}\\% from the actual send)"
        for _, r in hid.iterrows()
    ]
    return [
        f"Counted from the actual send, as vLLM's benchmark\\_serving and AIPerf count it, "
        f"SLO attainment would read more than {fmt_num(100 * gap, 'g')} points higher in "
        f"{len(hid)} window(s), the wait in the client's own queue left out: "
        f"{_listed(named)}."
    ]


def _point(r: pd.Series) -> str:
    at = (
        f"concurrency {fmt_num(r['concurrency'], '.0f')}"
        if r["load"] == "closed"
        else _rate(r["rate"])
        if pd.notna(r["rate"])
        else f"its {e(r['load'])} schedule"
    )
    return f"{e(r['method'])} on {e(r['workload'])} at {at}"


def cache_notes(ch: pd.DataFrame) -> list[str]:
    """Threats sentences naming windows whose prefix cache differed from the baseline's, or
    was not reset (the reset failed, or the plan kept it)."""
    if ch.empty:
        return []
    notes = []
    bad = ch[flag(ch, "cache_mismatch")]
    if not bad.empty:
        named = [
            f"{_point(r)} (cached share {fmt_num(100 * r['cached_share'], '.0f')}\\% vs "
            f"the baseline's {fmt_num(100 * r.get('baseline_cached_share', np.nan), '.0f')}"
            f"\\%, reset {e(r['cache_reset'])})"
            for _, r in bad.iterrows()
        ]
        notes.append(
            f"{len(bad)} window(s) met the prefix cache differently from the "
            "baseline's window at the same load point (cached share differing by more "
            f"than 0.1, or a different reset): {_listed(named)}."
        )
    for state, what in (
        ("failed", "the prefix-cache reset failed before"),
        ("kept", "the plan kept the prefix cache (no reset) for"),
    ):
        rows = ch[ch["cache_reset"] == state]
        if not rows.empty:
            notes.append(
                f"In {len(rows)} window(s) {what} the window: "
                f"{_listed([_point(r) for _, r in rows.iterrows()])}."
            )
    return notes


def section(data: ReportData, figs: dict[str, Path | None]) -> dict[str, Any]:
    """What the template's open-loop section, summary and threats show."""
    ow, notes = windows(data.open_windows), cache_notes(data.cache_hygiene)
    if ow.empty:
        return {"available": False, "findings": [], "threats": [NoEscape(n) for n in notes]}
    s = slo(data.slo_targets)

    def name(key: str) -> str | None:
        return figs[key].name if figs.get(key) else None

    parts = [
        {
            "title": title(key, ow),
            "latency": name(f"openloop-latency:{i}"),
            "goodput": name(f"openloop-goodput:{i}"),
            "speedup": name(f"openloop-speedup:{i}"),
        }
        for i, (key, _) in enumerate(settings(ow))
    ]
    rows, lag = data.rate_limits, name("openloop-lag:0")
    return {
        "available": True,
        "n_windows": len(ow),
        "settings": parts,
        "slo": latex(slo_text(s)) if s else None,
        "lag_figure": lag,
        "table": limits_table(rows, s is not None, data.baseline) if len(rows) else None,
        "findings": [latex(f) for f in summary(data)],
        "threats": [NoEscape(n) for n in lag_notes(ow, lag is not None) + send_notes(ow) + notes],
    }
