"""Acceptance length and speedup against a swept parameter (the param_sweep table), and
the finding sentence per family (marked Unicode, report.text): the best value by speedup, and
whether acceptance peaks at a different value.

A panel pair per window (engine, tp, workload, max_tokens, concurrency): acceptance length
on the left, speedup with its 95% interval on the right (log-2 ratio axis). One line per
``held`` (the family's other parameters), drawn in grey with its own dashes; every point is
in its method's colour, so a method looks the same here as in every other chart. The x axis
is numeric when every value is (log-2 when they span 4x or more), else categorical.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.ticker import NullLocator

from specsweep.report import charts
from specsweep.report.latex import escape_latex as e
from specsweep.report.speculation.panels import WINDOW, Entry, grid, legend_below, of
from specsweep.report.speculation.panels import window_name as name
from specsweep.report.text import data as d
from specsweep.report.text import em, num, times

SWEEP = ["family", "param"]
LINE = "0.35"  # the grey of the lines joining a sweep's points


def _flag(frame: pd.DataFrame, col: str) -> np.ndarray:
    return frame[col].astype("boolean").fillna(False).to_numpy(bool)


def positions(frame: pd.DataFrame) -> tuple[dict[str, float], bool]:
    """x per value of one (family, param) sweep, and whether the axis is numeric: the
    numbers when every value_num is set, else 0, 1, ... in the order of value_num, then
    value."""
    values = frame[["value", "value_num"]].drop_duplicates("value")
    if values["value_num"].notna().all():
        return dict(zip(values["value"].astype(str), values["value_num"].astype(float))), True
    ordered = values.sort_values(["value_num", "value"], na_position="last")["value"]
    return {str(v): float(i) for i, v in enumerate(ordered)}, False


def value_axis(ax: Axes, xs: dict[str, float], numeric: bool, param: str) -> None:
    """Ticks at the swept values, labelled as the plan wrote them; log-2 when numeric,
    positive and spanning 4x or more."""
    pos = sorted(xs.values())
    if numeric and pos and pos[0] > 0 and pos[-1] / pos[0] >= 4:
        ax.set_xscale("log", base=2)
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlim(pos[0] / 2**0.3, pos[-1] * 2**0.3)
    elif not numeric:
        ax.set_xlim(-0.5, len(pos) - 0.5)
        ax.grid(axis="x", visible=False)
    by_x = {x: v for v, x in xs.items()}
    ax.set_xticks(pos, [charts.plain(by_x[x]) for x in pos])
    ax.set_xlabel(charts.plain(param))


def dashes(frame: pd.DataFrame) -> dict[str, tuple]:
    """A dash pattern per ``held`` label (solid first)."""
    held = sorted(frame["held"].fillna("").astype(str).unique())
    return {h: charts.DASHES[i % len(charts.DASHES)] for i, h in enumerate(held)}


def _lines(
    ax: Axes,
    frame: pd.DataFrame,
    y: str,
    palette: charts.Palette,
    xs: dict[str, float],
    styles: dict[str, tuple],
) -> None:
    """The grey line per held through ``y``, then each point in its method's colour;
    hollow where ``significant`` is false (speedup panels), black ring where ``best_<y>``."""
    for held, line in frame.dropna(subset=[y]).groupby(frame["held"].fillna("").astype(str)):
        line = line.assign(x=line["value"].astype(str).map(xs)).sort_values("x")
        ax.plot(line["x"], line[y], color=LINE, dashes=styles.get(held, ()), lw=1, zorder=2)
        for _, r in line.iterrows():
            colour = palette.get(r["method"], (0.3, 0.3, 0.3))
            hollow = y == "speedup" and not (pd.notna(r["significant"]) and bool(r["significant"]))
            ax.scatter(
                [r["x"]],
                [r[y]],
                s=30,
                zorder=3,
                color=colour,
                facecolor="white" if hollow else colour,
            )
        best = line[_flag(line, "best_speedup" if y == "speedup" else "best_acceptance")]
        ax.scatter(
            best["x"], best[y], s=95, facecolor="none", edgecolor="black", linewidths=1.0, zorder=4
        )


def plot_accept_length_by_value(
    ax: Axes,
    frame: pd.DataFrame,
    palette: charts.Palette,
    xs: dict[str, float] | None = None,
    numeric: bool = True,
    styles: dict[str, tuple] | None = None,
) -> Axes:
    """Pooled acceptance length (tokens per verify step) against the parameter's value, one
    line per held; an x beside a point is the engine's own figure where it reported one."""
    if frame.empty or frame["accept_length"].notna().sum() == 0:
        return charts._empty(ax, "no acceptance data")
    xs, numeric = (xs, numeric) if xs else positions(frame)
    _lines(ax, frame, "accept_length", palette, xs, styles or dashes(frame))
    own = frame.dropna(subset=["engine_accept_length"])
    ax.scatter(
        own["value"].astype(str).map(xs),
        own["engine_accept_length"],
        marker="x",
        s=22,
        color="black",
        lw=0.9,
        zorder=5,
    )
    ax.axhline(1.0, ls="--", color="0.3", lw=1)
    value_axis(ax, xs, numeric, str(frame["param"].iloc[0]))
    ax.set_ylabel("acceptance length")
    return ax


def plot_speedup_by_value(
    ax: Axes,
    frame: pd.DataFrame,
    palette: charts.Palette,
    xs: dict[str, float] | None = None,
    numeric: bool = True,
    styles: dict[str, tuple] | None = None,
) -> Axes:
    """Speedup over the baseline against the parameter's value with 95% intervals, one line
    per held, log-2 ratio axis; hollow: not significant; ring: the line's best value."""
    data = frame.dropna(subset=["speedup"])
    if data.empty:
        return charts._empty(ax, "no speedup rows")
    xs, numeric = (xs, numeric) if xs else positions(frame)
    for _, r in data.dropna(subset=["ci_low", "ci_high"]).iterrows():
        y = float(r["speedup"])
        err = np.abs([[y - float(r["ci_low"])], [float(r["ci_high"]) - y]])
        ax.errorbar(
            [xs[str(r["value"])]],
            [y],
            yerr=err,
            fmt="none",
            capsize=2,
            lw=1,
            ecolor=palette.get(r["method"], (0.3, 0.3, 0.3)),
            zorder=2,
        )
    _lines(ax, data, "speedup", palette, xs, styles or dashes(frame))
    ax.axhline(1.0, ls="--", color="0.3", lw=1)
    charts.ratio_axis(ax, data[["speedup", "ci_low", "ci_high"]].to_numpy(float).ravel())
    value_axis(ax, xs, numeric, str(frame["param"].iloc[0]))
    ax.set_ylabel("speedup")
    return ax


def legend(frame: pd.DataFrame, palette: charts.Palette, styles: dict[str, tuple]) -> list[Entry]:
    """One entry per method in the order of its value, one per held line (when the family
    has other parameters), then what the markers mean."""
    xs, _ = positions(frame)
    order = frame.assign(_x=frame["value"].astype(str).map(xs)).sort_values(["_x", "held"])
    rows = [
        (
            Line2D([], [], ls="none", marker="o", ms=6, color=palette.get(m, (0.3, 0.3, 0.3))),
            charts.plain(m),
        )
        for m in dict.fromkeys(order["method"])
    ]  # by value: b8 before b16
    if any(styles):
        rows += [
            (Line2D([], [], color=LINE, dashes=d), charts.plain(h) or "(none held)")
            for h, d in styles.items()
        ]
    rows += [
        (
            Line2D([], [], ls="none", marker="o", ms=6, mfc="white", mec="0.35"),
            "hollow: not significant",
        ),
        (
            Line2D([], [], ls="none", marker="o", ms=9, mfc="none", mec="black"),
            "ring: best of its line",
        ),
    ]
    if frame["engine_accept_length"].notna().any():
        rows.append(
            (
                Line2D([], [], ls="none", marker="x", ms=5, color="black"),
                "x: the engine's own figure",
            )
        )
    return rows


def figure(frame: pd.DataFrame, keys: list[tuple], palette: charts.Palette) -> plt.Figure:
    """One (family, param) sweep: a row per window in ``keys``, acceptance left and speedup
    right, every panel on the same x positions; one legend below."""
    xs, numeric = positions(frame)
    styles = dashes(frame)
    fig, axes = grid(2 * len(keys), 2, (3.2, 1.9))
    for i, key in enumerate(keys):
        win = of(frame, key)
        left, right = axes[2 * i], axes[2 * i + 1]
        plot_accept_length_by_value(left, win, palette, xs, numeric, styles)
        plot_speedup_by_value(right, win, palette, xs, numeric, styles)
        left.set_title(charts.plain(name(key, frame)), fontsize="small", loc="left")
        if i + 1 < len(keys):
            left.set_xlabel("")
            right.set_xlabel("")
    legend_below(fig, legend(frame, palette, styles))
    return fig


def _value(r: pd.Series) -> str:
    return f"{d(r['param'])} {d(r['value'])}"


def _speed(r: pd.Series) -> str:
    if pd.isna(r["ci_low"]):  # no interval (one start per side, too few prompts)
        return f"{times(r['speedup'])}, a point estimate without an interval"
    return f"{times(r['speedup'])} [{num(r['ci_low'])}, {num(r['ci_high'])}]"


def clause(line: pd.DataFrame) -> str | None:
    """What one line of a sweep (one window, one held) shows: where speedup peaks and
    whether acceptance peaks elsewhere (marked Unicode), or None without a best speedup."""
    best = line[_flag(line, "best_speedup")]
    acc = line[_flag(line, "best_acceptance")]
    if best.empty:
        return None
    b = best.iloc[0]
    paid = "" if b["ci_low"] > 1 or pd.isna(b["ci_low"]) else ", not above 1"
    if acc.empty or acc.iloc[0]["value"] == b["value"]:
        a = f"{num(b['accept_length'])}; " if pd.notna(b["accept_length"]) else ""
        return (
            f"acceptance and speedup both peak at {_value(b)} ({a}{_speed(b)}{paid})"
            if not acc.empty
            else f"speedup peaks at {_value(b)} ({_speed(b)}{paid})"
        )
    a = acc.iloc[0]
    last = line["value_num"].notna().all() and a["value_num"] == line["value_num"].max()
    verb = "keeps rising to" if last else "peaks at"
    return (
        f"acceptance {verb} {_value(a)} ({num(a['accept_length'])}) while speedup "
        f"peaks at {_value(b)} ({_speed(b)}{paid})"
    )


MAX_CLAUSES = 4  # windows named per family sentence; the rest are counted


def finding(sweep: pd.DataFrame, family: str, param: str) -> str | None:
    """The sentence of one (family, param) sweep, a clause per window and held line (marked
    Unicode, report.text)."""
    clauses = []
    for key, win in sweep.groupby(WINDOW, sort=True):
        for held, line in win.groupby(win["held"].fillna("").astype(str), sort=True):
            c = clause(line)
            if c:
                with_held = f" with {d(held)}" if held else ""
                clauses.append(f"on {d(name(key, sweep))}{with_held}, {c}")
    if not clauses:
        return None
    more = len(clauses) - MAX_CLAUSES
    tail = f"; {more} more window(s)" if more > 0 else ""
    return f"{em(family)} over {d(param)}: " + "; ".join(clauses[:MAX_CLAUSES]) + tail + "."


def swept(ps: pd.DataFrame) -> list[tuple[str, str]]:
    """The (family, param) pairs of param_sweep, sorted."""
    return (
        sorted(ps[SWEEP].drop_duplicates().itertuples(index=False, name=None))
        if not ps.empty
        else []
    )


def values_note(ps: pd.DataFrame) -> str:
    """``ddtree: budget 8, 16, 64; draft-simple: n_max 2, 4`` (raw LaTeX)."""
    out = []
    for family, param in swept(ps):
        sub = ps[(ps["family"] == family) & (ps["param"] == param)]
        xs, _ = positions(sub)
        values = sorted(xs, key=xs.get)
        out.append(f"{e(family)}: {e(param)} {', '.join(e(v) for v in values)}")
    return "; ".join(out)
