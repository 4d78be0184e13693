"""The report's open-loop part: latency, goodput, lag vs offered rate; rate limits; threats.

Reads the analysis tables open_windows, rate_speedup, rate_limits, slo_targets and
cache_hygiene (as :mod:`report.data` loads them). A campaign without open-loop windows gets
no section; cache-hygiene threats are named whenever a window of either kind is flagged.
Charts draw like :mod:`report.charts` (method palette and markers, hollow = saturated, an
x = behind schedule) and return figures for :mod:`report.figures` to save; sentences are
raw LaTeX built from escaped values.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.ticker import NullLocator
from pylatex.utils import NoEscape

from report import charts
from report.data import ReportData
from report.latex import escape_latex as e
from report.latex import fmt_num
from report.tables import Col, fit_table, text

SETTING = ["tp", "workload", "max_tokens"]
LATENCY = (("ttft_p50_s", "TTFT p50 (ms)"), ("ttft_p99_s", "TTFT p99 (ms)"),
           ("tpot_p50_s", "TPOT p50 (ms)"), ("tpot_p99_s", "TPOT p99 (ms)"))
SLO_KEYS = (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("e2e_ms", "E2E"))
MAX_LISTED = 6
Save = Callable[[plt.Figure, Path], Path]


def _flag(frame: pd.DataFrame, col: str) -> np.ndarray:
    return frame[col].astype("boolean").fillna(False).to_numpy(bool)


def windows(ow: pd.DataFrame) -> pd.DataFrame:
    """open_windows with ``x``, the rate a window is drawn at: its offered rate, or for a
    ramp or trace replay (no single rate) its scheduled rate."""
    if ow.empty:
        return ow
    return ow.assign(x=ow["rate"].astype(float).fillna(ow["scheduled_rps"].astype(float)))


def _settings(ow: pd.DataFrame) -> list[tuple[tuple, pd.DataFrame]]:
    return list(ow.groupby(SETTING, sort=True)) if not ow.empty else []


def slo(st: pd.DataFrame) -> dict[str, float] | None:
    """The campaign's SLO (``ttft_ms``, ``tpot_ms``, ``e2e_ms`` given, ``target``), or None
    when the plan gave none."""
    row = st.iloc[0] if not st.empty else {}
    given = {k: float(row[k]) for k, _ in SLO_KEYS if k in row and pd.notna(row[k])}
    target = row.get("target") if given else None
    return given | {"target": 0.99 if pd.isna(target) else float(target)} if given else None


def slo_text(s: dict[str, float]) -> NoEscape:
    """``TTFT $\\le$ 500 ms, TPOT $\\le$ 50 ms; attainment target 99\\%``."""
    limits = ", ".join(f"{n} $\\le$ {e(fmt_num(s[k], 'g'))} ms" for k, n in SLO_KEYS if k in s)
    return NoEscape(f"{limits}; attainment target {e(fmt_num(100 * s['target'], 'g'))}\\%")


def _rate(r: float) -> str:
    return f"{fmt_num(r, 'g')} req/s"


def _marker(palette: charts.Palette, method: str) -> str:
    return charts.MARKERS[list(palette).index(method) % len(charts.MARKERS)]


def _methods(palette: charts.Palette, frame: pd.DataFrame) -> list[str]:
    return [m for m in palette if m in set(frame["method"])]


def rate_axis(ax: Axes, xs: pd.Series) -> None:
    """A rate x axis: log-2 when the rates span 4x or more, ticks at the rates (up to 8)."""
    rates = sorted({float(v) for v in xs if np.isfinite(v) and v > 0})
    if len(rates) > 1 and rates[-1] / rates[0] >= 4:
        ax.set_xscale("log", base=2)
        ax.xaxis.set_minor_locator(NullLocator())
    if 0 < len(rates) <= 8:
        ax.set_xticks(rates, [fmt_num(r, "g") for r in rates])
    ax.set_xlabel("offered rate (req/s)")


def plot_by_rate(ax: Axes, frame: pd.DataFrame, y: str, palette: charts.Palette,
                 scale: float = 1.0, band: tuple[str, str] | None = None) -> Axes:
    """``y`` (times ``scale``) against the rate, a line per method through its fixed-rate
    windows (ramps and trace replays are lone points at their scheduled rate), ``band`` as
    error bars; saturated windows hollow, windows behind schedule crossed (x)."""
    for method in _methods(palette, frame):
        sub = frame[frame["method"] == method].dropna(subset=[y]).sort_values("x")
        colour, marker = palette[method], _marker(palette, method)
        x, v = sub["x"].to_numpy(float), sub[y].to_numpy(float) * scale
        if band:
            lo, hi = (sub[c].to_numpy(float) * scale for c in band)
            ax.errorbar(x, v, yerr=np.abs(np.vstack([v - lo, hi - v])), fmt="none",
                        ecolor=colour, capsize=2, lw=1)
        fixed = sub["rate"].notna().to_numpy(bool)
        ax.plot(x[fixed], v[fixed], color=colour, marker=marker, ms=5, lw=1.2, zorder=3)
        ax.plot(x[~fixed], v[~fixed], ls="none", color=colour, marker=marker, ms=5, zorder=3)
        sat, behind = _flag(sub, "saturated"), _flag(sub, "behind_schedule")
        ax.scatter(x[sat], v[sat], marker=marker, s=16, facecolor="white", edgecolor=colour,
                   zorder=4)
        ax.scatter(x[behind], v[behind], marker="x", s=40, color="black", lw=1, zorder=5)
    rate_axis(ax, frame["x"])
    return ax


def _legend(fig: plt.Figure, palette: charts.Palette, methods: list[str],
            extra: list[tuple[Line2D, str]] | None = None, hollow: bool = True) -> None:
    rows = [(Line2D([], [], color=palette[m], marker=_marker(palette, m), ms=5),
             charts.plain(m)) for m in methods] + (extra or [])
    rows += [(Line2D([], [], ls="none", marker="o", ms=5, mfc="white", mec="0.35"),
              "hollow: saturated")][:int(hollow)]
    rows += [(Line2D([], [], ls="none", marker="x", ms=6, color="black"), "x: behind schedule")]
    fig.legend(*zip(*rows), loc="outside lower center", fontsize="small", frameon=False,
               ncol=min(len(rows), 4))


def _title(key: tuple, ow: pd.DataFrame) -> str:
    """A setting's name: workload, plus max_tokens and TP where those vary."""
    tp, workload, mt = key
    out = str(workload)
    if ow.loc[ow["workload"] == workload, "max_tokens"].nunique() > 1:
        out += f", max_tokens {mt}"
    return out + (f", TP{tp}" if ow["tp"].nunique() > 1 else "")


def latency_figure(frame: pd.DataFrame, palette: charts.Palette) -> plt.Figure:
    """TTFT and TPOT p50/p99 (steady requests, ms) against the rate, one setting."""
    fig, axes = plt.subplots(2, 2, figsize=(6.4, 4.6), layout="constrained")
    for ax, (col, label) in zip(axes.flat, LATENCY):
        plot_by_rate(ax, frame, col, palette, 1000.0)
        ax.set_ylabel(label)
    axes[0, 0].set_xlabel("")
    axes[0, 1].set_xlabel("")
    _legend(fig, palette, _methods(palette, frame))
    return fig


def goodput_figure(frame: pd.DataFrame, palette: charts.Palette,
                   target: float) -> plt.Figure:
    """Goodput (95% interval) against the rate with the y = x line of the offered rate, and
    SLO attainment (%) with the target as a horizontal line, one setting."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(6.4, 3.0), layout="constrained")
    plot_by_rate(left, frame, "goodput_rps", palette, band=("goodput_lo", "goodput_hi"))
    lo, hi = frame["x"].min(), frame["x"].max()
    left.plot([lo, hi], [lo, hi], ls=":", color="0.4", lw=1)
    left.set_ylabel("goodput (req/s)")
    plot_by_rate(right, frame, "attainment", palette, 100.0,
                 band=("attainment_lo", "attainment_hi"))
    right.axhline(100 * target, ls="--", color="0.3", lw=1)
    right.set_ylabel("SLO attainment (%)")
    _legend(fig, palette, _methods(palette, frame),
            [(Line2D([], [], ls=":", color="0.4"), "offered rate (y = x)"),
             (Line2D([], [], ls="--", color="0.3"), f"target {100 * target:g}%")])
    return fig


def speedup_figure(frame: pd.DataFrame, palette: charts.Palette) -> plt.Figure:
    """TPOT speedup over the baseline against the rate (rate_speedup, 95% intervals, log-2
    ratio axis), drawn as the crossover chart; rings mark each method's stops-paying rate."""
    fig, ax = plt.subplots(figsize=(4.8, 3.0), layout="constrained")
    charts.plot_speedup_by_concurrency(ax, frame.rename(columns={
        "rate": "concurrency", "tpot_speedup": "speedup", "tpot_speedup_lo": "ci_low",
        "tpot_speedup_hi": "ci_high"}), palette)
    ax.set_xlabel("offered rate (req/s)")
    ax.set_ylabel("TPOT speedup")
    entries = {lb: h for h, lb in zip(*ax.get_legend_handles_labels())}
    rows = [(h, "ring: stops paying" if lb == "crossover" else lb) for lb, h in entries.items()]
    fig.legend(*zip(*(rows + charts.significance_legend())), loc="outside lower center",
               fontsize="small", frameon=False, ncol=2)
    return fig


def lag_figure(frame: pd.DataFrame, palette: charts.Palette) -> plt.Figure:
    """Schedule lag p50 and p99 per open-loop window (ms, symlog) against the rate; the p99
    panel draws the behind-schedule threshold max(1 ms, 0.1 / rate)."""
    fig, axes = plt.subplots(1, 2, figsize=(6.4, 2.9), layout="constrained", sharey=True)
    for ax, (col, label) in zip(axes, (("lag_p50_s", "p50"), ("lag_p99_s", "p99"))):
        for method in _methods(palette, frame):
            sub = frame[frame["method"] == method]
            ax.scatter(sub["x"], sub[col] * 1000, color=palette[method], s=18,
                       marker=_marker(palette, method), zorder=3)
            behind = _flag(sub, "behind_schedule")
            ax.scatter(sub["x"][behind], sub[col][behind] * 1000, marker="x", s=40,
                       color="black", lw=1, zorder=4)
        ax.set_yscale("symlog", linthresh=0.1)
        rate_axis(ax, frame["x"])
        ax.set_title(f"schedule lag {label}", fontsize="small")
    grid = np.geomspace(max(frame["x"].min(), 1e-3), max(frame["x"].max(), 1e-3), 50)
    axes[1].plot(grid, np.maximum(1.0, 100.0 / grid), ls="--", color="0.3", lw=1)
    axes[0].set_ylabel("lag (ms)")
    _legend(fig, palette, _methods(palette, frame),
            [(Line2D([], [], ls="--", color="0.3"), "threshold max(1 ms, 0.1/rate)")],
            hollow=False)
    return fig


def _save(save: Save, path: Path, make: Callable[..., plt.Figure], *args: object) -> Path:
    return save(make(*args), path)


def figure_jobs(data: ReportData, outdir: Path,
                save: Save) -> list[tuple[str, Callable[[], Path]]]:
    """Jobs for report.figures: per setting (tp, workload, max_tokens) ``openloop-latency:i``,
    ``openloop-goodput:i`` (with an SLO) and ``openloop-speedup:i`` (with rate_speedup
    rows), then ``openloop-lag:0``; none without open-loop windows."""
    ow, pal, jobs = windows(data.open_windows), data.palette, []
    target = (slo(data.slo_targets) or {}).get("target")

    def add(key: str, make: Callable[..., plt.Figure], *args: object) -> None:
        path = outdir / (key.replace(":", "-") + ".pdf")
        jobs.append((key, partial(_save, save, path, make, *args)))

    for i, (key, sub) in enumerate(_settings(ow)):
        add(f"openloop-latency:{i}", latency_figure, sub, pal)
        if target is not None and sub["goodput_rps"].notna().any():
            add(f"openloop-goodput:{i}", goodput_figure, sub, pal, target)
        sp = _speedup_rows(data.rate_speedup, key, data.rate_limits)
        if not sp.empty:
            add(f"openloop-speedup:{i}", speedup_figure, sp, pal)
    if not ow.empty:
        add("openloop-lag:0", lag_figure, ow, pal)
    return jobs


def _of(frame: pd.DataFrame, key: tuple) -> pd.DataFrame:
    return frame[(frame[SETTING] == pd.Series(key, index=SETTING)).all(axis=1)]


def _speedup_rows(rs: pd.DataFrame, key: tuple, limits: pd.DataFrame) -> pd.DataFrame:
    """rate_speedup rows of one setting, ``is_crossover`` at its method's stops-paying rate."""
    if rs.empty:
        return rs
    sub = _of(rs, key).dropna(subset=["rate"])
    stops = _of(limits, key).set_index("method")["stops_paying_rate"] if len(limits) else {}
    return sub.assign(is_crossover=sub["rate"].eq(sub["method"].map(stops)))


KEY = [*SETTING, "method"]


def limits_rows(limits: pd.DataFrame, ow: pd.DataFrame, rs: pd.DataFrame) -> pd.DataFrame:
    """rate_limits with each key's lowest and highest swept rate (``lowest``, ``highest``)
    and ``compared`` (rate_speedup has rows for it: NULL stops_paying_rate means it pays)."""
    fixed = ow[ow["rate"].notna()]
    swept = fixed.groupby(KEY)["rate"].agg(lowest="min", highest="max").reset_index()
    out = limits.merge(swept, on=KEY, how="left")
    seen = set(map(tuple, rs[KEY].itertuples(index=False))) if not rs.empty else set()
    out["compared"] = [tuple(k) in seen for k in out[KEY].itertuples(index=False)]
    return out.sort_values(KEY)


def _under_slo(col: str) -> Callable[[pd.Series], str]:
    def cell(r: pd.Series) -> str:
        if pd.isna(r[col]):
            return "--" if pd.isna(r["lowest"]) else f"< {fmt_num(r['lowest'], 'g')}"
        every = r[col] == r["highest"]
        return fmt_num(r[col], "g") + (" (all)" if every else "")
    return cell


def _stops(r: pd.Series, baseline: str) -> str:
    if r["method"] == baseline or pd.notna(r["stops_paying_rate"]):
        return "baseline" if r["method"] == baseline else fmt_num(r["stops_paying_rate"], "g")
    return "pays at all" if r["compared"] else "--"


def limits_table(rows: pd.DataFrame, has_slo: bool, baseline: str) -> NoEscape:
    """Per setting and method: max rate under the SLO (point estimate and Wilson lower
    bound), the first saturated rate and the rate where speculation stops paying (req/s)."""
    cols = [Col("workload", text("workload")), Col("max_tokens", text("max_tokens"), "r"),
            Col("method", text("method"))]
    if rows["tp"].nunique() > 1:
        cols.insert(1, Col("tp", text("tp"), "r"))
    if has_slo:
        cols += [Col("max rate under SLO", _under_slo("max_rate_under_slo"), "r"),
                 Col("strict (Wilson)", _under_slo("max_rate_under_slo_strict"), "r")]
    cols += [Col("saturates at", lambda r: "none" if pd.isna(r["saturation_rate"])
                 else fmt_num(r["saturation_rate"], "g"), "r"),
             Col("stops paying at", lambda r: _stops(r, baseline), "r")]
    return fit_table(rows, cols)


def _clauses(sub: pd.DataFrame, has_slo: bool, baseline: str) -> list[str]:
    stops, meets, sat = [], [], []
    for _, r in sub.iterrows():
        m = e(r["method"])
        if r["method"] != baseline and pd.notna(r["stops_paying_rate"]):
            later, low = r.get("pays_at_rate"), _rate(r["lowest"])
            stops.append(f"{m} stops paying at {_rate(r['stops_paying_rate'])}"
                         if r["stops_paying_rate"] != r["lowest"]
                         else f"{m} does not pay at {low} but does at {_rate(later)}"
                         if pd.notna(later) else f"{m} does not pay even at the lowest rate, {low}")
        elif r["method"] != baseline and r["compared"] and pd.notna(r["highest"]):
            stops.append(f"{m} pays at every rate up to {_rate(r['highest'])}")
        if has_slo and pd.notna(r["max_rate_under_slo"]):
            every = " (every rate measured)" if r["max_rate_under_slo"] == r["highest"] else ""
            meets.append(f"{m} meets the SLO up to {_rate(r['max_rate_under_slo'])}{every}")
        elif has_slo and pd.notna(r["lowest"]):
            meets.append(f"{m} misses the SLO already at {_rate(r['lowest'])}")
        if pd.notna(r["saturation_rate"]):
            sat.append(f"{m} saturates at {_rate(r['saturation_rate'])}")
    return stops + meets + sat


def findings(rows: pd.DataFrame, ow: pd.DataFrame, has_slo: bool,
             baseline: str) -> list[NoEscape]:
    """One sentence per setting: where each method stops paying, up to which rate it meets
    the SLO, where it saturates (rates are swept rates; TPOT speedup per paired prompts)."""
    return [NoEscape(f"Open loop on {e(_title(key, ow))}: " + "; ".join(c) + ".")
            for key, sub in rows.groupby(SETTING, sort=True)
            if (c := _clauses(sub, has_slo, baseline))]


def _where(r: pd.Series, ow: pd.DataFrame) -> str:
    load = _rate(r["x"]) + (f" ({e(r['ramp'])} ramp)" if pd.notna(r.get("ramp")) else "")
    return f"{e(r['method'])} on {e(_title(tuple(r[SETTING]), ow))} at {load}"


def _listed(items: list[str]) -> str:
    more = [f"{len(items) - MAX_LISTED} more"] if len(items) > MAX_LISTED else []
    return ", ".join(items[:MAX_LISTED] + more)


def lag_notes(ow: pd.DataFrame, figure: bool = True) -> list[str]:
    """A threats sentence on schedule lag: the windows behind schedule, by name."""
    behind = ow[_flag(ow, "behind_schedule")]
    head = ("Open-loop schedule lag is the actual send time minus the time the schedule asked "
            "for" + (" (Figure~\\ref{fig:openloop-lag}). " if figure else ". "))
    if behind.empty:
        top = ow.loc[ow["lag_p99_s"].fillna(0).idxmax()]
        return [head + f"No window fell behind its schedule; the largest p99 lag was "
                f"{fmt_num(1000 * top['lag_p99_s'], '.2f')} ms ({_where(top, ow)})."]
    named = [f"{_where(r, ow)} (p99 lag {fmt_num(1000 * r['lag_p99_s'], '.1f')} ms)"
             for _, r in behind.iterrows()]
    return [head + f"{len(behind)} of {len(ow)} window(s) fell behind their schedule (p99 lag "
            f"above max(1 ms, 0.1 / rate)), so the server saw less than the rate offered: "
            f"{_listed(named)}."]


def _point(r: pd.Series) -> str:
    at = (f"concurrency {fmt_num(r['concurrency'], '.0f')}" if r["load"] == "closed" else
          _rate(r["rate"]) if pd.notna(r["rate"]) else f"its {e(r['load'])} schedule")
    return f"{e(r['method'])} on {e(r['workload'])} at {at}"


def cache_notes(ch: pd.DataFrame) -> list[str]:
    """Threats sentences naming windows whose prefix cache differed from the baseline's, or
    was not reset (the reset failed, or the plan kept it)."""
    if ch.empty:
        return []
    notes = []
    bad = ch[_flag(ch, "cache_mismatch")]
    if not bad.empty:
        named = [f"{_point(r)} (cached share {fmt_num(100 * r['cached_share'], '.0f')}\\% vs "
                 f"the baseline's {fmt_num(100 * r.get('baseline_cached_share', np.nan), '.0f')}"
                 f"\\%, reset {e(r['cache_reset'])})" for _, r in bad.iterrows()]
        notes.append(f"{len(bad)} window(s) met the prefix cache differently from the "
                     "baseline's window at the same load point (cached share differing by more "
                     f"than 0.1, or a different reset): {_listed(named)}.")
    for state, what in (("failed", "the prefix-cache reset failed before"),
                        ("kept", "the plan kept the prefix cache (no reset) for")):
        rows = ch[ch["cache_reset"] == state]
        if not rows.empty:
            notes.append(f"In {len(rows)} window(s) {what} the window: "
                         f"{_listed([_point(r) for _, r in rows.iterrows()])}.")
    return notes


def section(data: ReportData, figs: dict[str, Path | None]) -> dict[str, Any]:
    """What the template's open-loop section, summary and threats show."""
    ow, notes = windows(data.open_windows), cache_notes(data.cache_hygiene)
    if ow.empty:
        return {"available": False, "findings": [], "threats": [NoEscape(n) for n in notes]}
    s = slo(data.slo_targets)

    def name(key: str) -> str | None:
        return figs[key].name if figs.get(key) else None

    parts = [{"title": _title(key, ow), "latency": name(f"openloop-latency:{i}"),
              "goodput": name(f"openloop-goodput:{i}"), "speedup": name(f"openloop-speedup:{i}")}
             for i, (key, _) in enumerate(_settings(ow))]
    rows, lag = data.rate_limits, name("openloop-lag:0")
    rows = limits_rows(rows, ow, data.rate_speedup) if not rows.empty else rows
    return {"available": True, "n_windows": len(ow), "settings": parts,
            "slo": slo_text(s) if s else None, "lag_figure": lag,
            "table": limits_table(rows, s is not None, data.baseline) if len(rows) else None,
            "findings": findings(rows, ow, s is not None, data.baseline) if len(rows) else [],
            "threats": [NoEscape(n) for n in lag_notes(ow, lag is not None) + notes]}
