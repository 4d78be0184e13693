"""Chart functions: one pure function per figure, drawing on a given matplotlib Axes.
Each ``plot_<metric>_by_<axis>(ax, frame, palette)`` reads only its frame (an analysis view as
a DataFrame) and metric labels (metric_catalog's, report.labels), draws, and returns the Axes;
it never saves or shows. One theme (:func:`set_theme`) and one colour per method
(:func:`method_palette`, baseline first, then sorted) keep every figure consistent."""

from __future__ import annotations

import colorsys
from collections.abc import Iterable, Mapping

import matplotlib
import numpy as np
import pandas as pd
from matplotlib import colors as mcolors
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.ticker import NullLocator

from report.labels import Labels, metric_label

matplotlib.use("Agg")  # files only, never a window

BASELINE = "autoregressive"  # only for a file naming none (report.data.read_baseline)
Palette = Mapping[str, tuple[float, float, float]]


# seaborn's "paper" context at font_scale 0.95 and "whitegrid" style (what the report drew
# with before it stopped importing seaborn: 1-2 s of every run, scipy included), plus Type 3
# fonts: DejaVu Sans embedded as glyph outlines, subset, text still extractable; Type 42
# (fontTools subsetting per figure) took a third of the report's drawing time.
THEME = {
    "axes.axisbelow": True, "axes.edgecolor": ".8", "axes.grid": True, "axes.labelcolor": ".15",
    "axes.labelsize": 9.12, "axes.linewidth": 1.0, "axes.titlesize": 9.12, "font.size": 9.12,
    "axes.titleweight": "bold", "figure.dpi": 100, "grid.color": ".8", "pdf.fonttype": 3,
    "font.sans-serif": ["Arial", "DejaVu Sans", "Liberation Sans", "Bitstream Vera Sans",
                        "sans-serif"], "legend.fontsize": 8.36, "legend.title_fontsize": 9.12,
    "lines.linewidth": 1.2, "lines.markersize": 4.8, "lines.solid_capstyle": "round",
    "patch.edgecolor": "w", "patch.force_edgecolor": True, "patch.linewidth": 0.8,
    "text.color": ".15", "xtick.bottom": False, "xtick.color": ".15", "xtick.labelsize": 8.36,
    "xtick.major.size": 4.8, "xtick.major.width": 1.0, "xtick.minor.size": 3.2,
    "xtick.minor.width": 0.8, "ytick.left": False, "ytick.color": ".15", "ytick.minor.size": 3.2,
    "ytick.labelsize": 8.36, "ytick.major.size": 4.8, "ytick.major.width": 1.0,
    "ytick.minor.width": 0.8,
}  # fmt: skip
# seaborn's "colorblind" palette (Okabe-Ito-like, 10 colours)
COLORBLIND = ("#0173b2", "#de8f05", "#029e73", "#d55e00", "#cc78bc", "#ca9161", "#fbafe4",
              "#949494", "#ece133", "#56b4e9")
FILL_SATURATION = 0.75  # bars and boxes are filled a little greyer than lines (as seaborn)


def set_theme() -> None:
    """The report's single theme (call once before drawing)."""
    matplotlib.rcParams.update(THEME)


def method_palette(methods: Iterable[str], baseline: str = BASELINE) -> dict[str, tuple]:
    """Map each method to one colour-blind-safe colour, baseline first then sorted."""
    unique = sorted({str(m) for m in methods if pd.notna(m)})
    ordered = ([baseline] if baseline in unique else []) + [m for m in unique if m != baseline]
    base = [mcolors.to_rgb(c) for c in COLORBLIND]
    return {m: tuple(base[i % len(base)]) for i, m in enumerate(ordered)}


def fill(colour: tuple[float, float, float]) -> tuple[float, float, float]:
    """A method's colour for a filled area: its HLS saturation times FILL_SATURATION."""
    h, lum, sat = colorsys.rgb_to_hls(*colour)
    return colorsys.hls_to_rgb(h, lum, sat * FILL_SATURATION)


def _order(palette: Palette, present: Iterable[str]) -> list[str]:
    seen = set(present)
    return [m for m in palette if m in seen]


def _config_labels(frame: pd.DataFrame) -> pd.Series:
    """A category label per row: workload, engine, TP and max_tokens where they vary, then
    the concurrency (always, so that a panel of one workload still names its points)."""
    parts = []
    for col, tag in (("workload", ""), ("engine", ""), ("tp", "TP"), ("max_tokens", "mt=")):
        if col in frame and frame[col].nunique() > 1:
            parts.append(tag + frame[col].astype(str).map(plain))
    parts.append("c=" + frame["concurrency"].astype(str))
    return parts[0].str.cat(parts[1:], sep="\n") if len(parts) > 1 else parts[0]


def plain(text: object) -> str:
    """A data string as matplotlib prints it literally (a `$` pair would start mathtext)."""
    return str(text).replace("$", r"\$")


def _empty(ax: Axes, message: str) -> Axes:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes)
    ax.set_axis_off()
    return ax


def plot_speedup_by_workload(ax: Axes, frame: pd.DataFrame, palette: Palette) -> Axes:
    """Speedup over the baseline per workload (and config) and method, 95% CI bars, on a
    log-2 ratio axis (:func:`ratio_axis`). Filled markers are significant (Holm), hollow ones
    are not (:func:`ratio_legend`); grey bands: the A/A noise floor (:func:`_aa_band`), the
    control itself not drawn. No legend here: the figure puts one below its panels."""
    if "is_control" in frame:
        frame = frame[~frame["is_control"].fillna(False).astype(bool)]
    if frame.empty:
        return _empty(ax, "no speedup rows")
    frame = frame.assign(label=_config_labels(frame))
    keys = [c for c in ("workload", "engine", "tp", "max_tokens", "concurrency") if c in frame]
    labels = list(dict.fromkeys(frame.sort_values(keys)["label"]))
    methods = _order(palette, frame["method"])
    width = 0.8 / max(len(methods), 1)
    _aa_band(ax, frame, labels)
    for i, method in enumerate(methods):
        sub = frame[frame["method"] == method]
        x = np.array([labels.index(lb) for lb in sub["label"]]) - 0.4 + width * (i + 0.5)
        y = sub["speedup"].to_numpy(float)
        err = np.vstack([y - sub["ci_low"].to_numpy(float), sub["ci_high"].to_numpy(float) - y])
        colour = palette[method]
        ax.errorbar(x, y, yerr=np.abs(err), fmt="none", ecolor=colour, capsize=3, lw=1.2)
        sig = sub["significant"].fillna(False).astype(bool).to_numpy()
        ax.scatter(x[sig], y[sig], color=colour, s=36, zorder=3, label=plain(method))
        ax.scatter(x[~sig], y[~sig], facecolor="white", edgecolor=colour, s=36, zorder=3,
                   label=None if sig.any() else plain(method))
    ax.axhline(1.0, ls="--", color="0.3", lw=1)
    ax.set_xticks(range(len(labels)), labels)
    ax.set_xlim(-0.5, len(labels) - 0.5)
    ratio_axis(ax, frame[["speedup", "ci_low", "ci_high"]].to_numpy(float).ravel())
    ax.set_ylabel("speedup (decode tok/s vs baseline)")
    return ax


def _aa_band(ax: Axes, frame: pd.DataFrame, labels: list[str]) -> None:
    """Each window's A/A noise floor in grey: [1/r, r], r = exp(|ln aa_speedup|)."""
    if "aa_speedup" not in frame:
        return
    for label, aa in frame.groupby("label", sort=False)["aa_speedup"].first().items():
        if np.isfinite(aa) and aa > 0:
            r = float(np.exp(abs(np.log(aa))))
            x = labels.index(label)
            ax.fill_between([x - 0.45, x + 0.45], 1 / r, r, color="0.88", lw=0, zorder=0)


def ratio_axis(ax: Axes, values: Iterable[float]) -> None:
    """A log-2 y axis symmetric around 1, so that a ratio r and 1/r lie equally far from the
    1x line and one wide interval cannot squash the rest; ticks at powers of two labelled
    ``0.5×``, ``1×``, ``2×``, plus 0.667/1.5 (and 0.8/1.25 under 2x) below 3x either way."""
    v = np.asarray(list(values), float)
    v = v[np.isfinite(v) & (v > 0)]
    extent = float(np.abs(np.log2(v)).max()) if v.size else 0.0
    half = max(extent * 1.05 + 0.08, 0.45)  # in doublings; at least 1.37x either way
    ax.set_yscale("log", base=2)
    ax.set_ylim(2 ** -half, 2 ** half)
    step = 2 if half > 5 else 1  # beyond 32x label every other doubling
    ticks = [2.0 ** k for k in range(-int(half), int(half) + 1) if k % step == 0]
    if half < 1.6:  # under 3x either way powers of two alone leave the axis almost bare
        extra = (2 / 3, 0.8, 1.25, 1.5) if half < 1 else (2 / 3, 1.5)
        ticks += [t for t in extra if abs(np.log2(t)) < half]
    ticks = sorted(ticks)
    ax.set_yticks(ticks, [f"{t:.3g}\u00d7" for t in ticks])
    ax.yaxis.set_minor_locator(NullLocator())


def ratio_legend(palette: Palette, methods: Iterable[str]) -> list[tuple[Line2D, str]]:
    """Legend entries for a ratio chart: one dot per method present, in its colour (what
    filled and hollow mean is :func:`significance_legend`)."""
    return [(Line2D([], [], ls="none", marker="o", ms=6, color=palette[m]), plain(m))
            for m in _order(palette, methods)]


def significance_legend() -> list[tuple[Line2D, str]]:
    """Grey proxy markers: filled = 95% CI excludes 1 (significant), hollow = it does not."""
    return [(Line2D([], [], ls="none", marker="o", ms=6, color="0.35"),
             "filled: significant (Holm-adjusted over the campaign)"),
            (Line2D([], [], ls="none", marker="o", ms=6, mfc="white", mec="0.35"),
             "hollow: not significant")]


def plot_energy_ratio_by_workload(ax: Axes, frame: pd.DataFrame, palette: Palette) -> Axes:
    """Energy per output token over the baseline's (energy_ratio table) per workload and
    method, 95% CI bars, drawn as the speedup chart (filled: significant, log-2 ratio
    axis); below 1 = less energy per token."""
    if frame.empty:
        return _empty(ax, "no energy comparison")
    plot_speedup_by_workload(ax, frame.rename(columns={"energy_ratio": "speedup"}), palette)
    ax.set_ylabel("J/token vs baseline")
    return ax


def plot_accept_length_by_workload(ax: Axes, frame: pd.DataFrame, palette: Palette,
                                   labels: Labels = None) -> Axes:
    """Token-weighted acceptance length per workload and method (mean over windows)."""
    data = frame.dropna(subset=["accept_length_tw"])
    if data.empty:
        return _empty(ax, "no acceptance-length data")
    means = data.groupby(["workload", "method"], sort=False)["accept_length_tw"].mean()
    workloads = list(pd.unique(data["workload"]))
    order = _order(palette, data["method"])
    width = 0.8 / len(order)
    for i, method in enumerate(order):
        x = np.arange(len(workloads)) - 0.4 + width * (i + 0.5)
        y = [means.get((w, method), np.nan) for w in workloads]
        ax.bar(x, y, width, color=fill(palette[method]), label=plain(method))
    ax.set_xticks(range(len(workloads)), [plain(w) for w in workloads])
    _categorical(ax, len(workloads), "workload")
    ax.legend(title="method")
    ax.axhline(1.0, ls="--", color="0.3", lw=1)
    ax.set_ylabel(metric_label(labels, "accept_length_tw"))
    _slant_if_crowded(ax, data["workload"].nunique(), room=6)
    return ax


def plot_decode_tps_by_method(ax: Axes, frame: pd.DataFrame, palette: Palette) -> Axes:
    """Per-request decode tok/s per method: request_distribution's boxes, no raw points."""
    return _boxes(ax, frame, "decode_tps", palette)


def plot_ttft_by_method(ax: Axes, frame: pd.DataFrame, palette: Palette) -> Axes:
    """Distribution of time to first token per method (request_distribution's boxes)."""
    return _boxes(ax, frame, "ttft_s", palette)


BOX_EDGE = "0.25"  # outline, whiskers and median of every box


def box_stats(frame: pd.DataFrame, metric: str, palette: Palette) -> list[dict]:
    """``Axes.bxp`` input from request_distribution rows of ``metric``, in palette order
    (box p25..p75, median p50, whiskers whislo..whishi: the 1.5-IQR rule, in DuckDB)."""
    if frame.empty or "metric" not in frame:
        return []
    rows = frame[(frame["metric"] == metric) & frame["p50"].notna()]
    by_method = {str(r.method): r for r in rows.itertuples(index=False)}
    return [{"label": plain(m), "med": float(r.p50), "q1": float(r.p25), "q3": float(r.p75),
             "whislo": float(r.whislo), "whishi": float(r.whishi), "method": m}
            for m in _order(palette, by_method) for r in [by_method[m]]]


def _boxes(ax: Axes, frame: pd.DataFrame, metric: str, palette: Palette) -> Axes:
    stats = box_stats(frame, metric, palette)
    if not stats:
        return _empty(ax, f"no {metric} data")
    line = {"color": BOX_EDGE, "linewidth": 1.0}
    drawn = ax.bxp([{k: v for k, v in s.items() if k != "method"} for s in stats],
                   positions=range(len(stats)), widths=0.6, showfliers=False, patch_artist=True,
                   boxprops={"edgecolor": BOX_EDGE, "linewidth": 1.0}, whiskerprops=line,
                   capprops=line, medianprops=line)
    for box, s in zip(drawn["boxes"], stats):
        box.set_facecolor(fill(palette[s["method"]]))
    _categorical(ax, len(stats), "")
    ax.set_ylabel(metric_label(dict(zip(frame["metric"], frame.get("label", ()))), metric))
    _slant_if_crowded(ax, len(stats))
    return ax


def _categorical(ax: Axes, n: int, label: str) -> None:
    """A categorical x axis of n slots: no grid across it, half a slot of margin."""
    ax.set_xlim(-0.5, n - 0.5)
    ax.grid(axis="x", visible=False)
    ax.set_xlabel(label)


def _slant_if_crowded(ax: Axes, n: int, room: int = 5) -> None:
    """Tilt the x tick labels when more than ``room`` categories share the axis."""
    if n > room:
        ax.tick_params(axis="x", labelrotation=30)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")


def plot_ttft_by_turn(ax: Axes, frame: pd.DataFrame, palette: Palette) -> Axes:
    """Median TTFT per turn of the agentic sessions, one line per method."""
    return _by_turn(ax, frame, "ttft_p50_s", "median TTFT (s)", palette)


def plot_context_by_turn(ax: Axes, frame: pd.DataFrame, palette: Palette) -> Axes:
    """Median prompt (context) length per turn of the agentic sessions."""
    return _by_turn(ax, frame, "prompt_tokens_p50", "median prompt tokens", palette)


LINE_MARKER = {"marker": "o", "markeredgewidth": 0.75, "markeredgecolor": "w"}  # as seaborn


def _by_turn(ax: Axes, frame: pd.DataFrame, y: str, ylabel: str, palette: Palette) -> Axes:
    data = frame.dropna(subset=[y])
    if data.empty:
        return _empty(ax, "no agentic turns")
    for method in _order(palette, data["method"]):
        line = data[data["method"] == method].groupby("turn")[y].mean()
        ax.plot(line.index, line.to_numpy(float), color=palette[method], label=plain(method),
                **LINE_MARKER)
    ax.legend(title="method")
    ax.set_xlabel("turn")
    ax.set_ylabel(ylabel)
    ax.xaxis.get_major_locator().set_params(integer=True)
    return ax


def plot_throughput_by_concurrency(ax: Axes, frame: pd.DataFrame, palette: Palette,
                                   labels: Labels = None) -> Axes:
    """Aggregate output tok/s versus concurrency, one colour per method, style per workload."""
    data = frame.dropna(subset=["throughput_tps"])
    if data.empty:
        return _empty(ax, "no throughput data")
    # lines in row order (max_tokens ascending), not label order ("mt=256" before "mt=64")
    workloads = list(pd.unique(data["workload"])) if data["workload"].nunique() > 1 else []
    data = data.groupby(["method", "workload", "concurrency"], as_index=False).throughput_tps.mean()
    order = _order(palette, data["method"])
    dashes = dict(zip(workloads, DASHES * len(workloads)))
    for (method, workload), line in data.groupby(["method", "workload"], sort=False):
        if method in palette:
            line = line.sort_values("concurrency")
            ax.plot(line["concurrency"], line["throughput_tps"], color=palette[method],
                    dashes=dashes.get(workload, ()), **LINE_MARKER)
    if data["concurrency"].nunique() > 1 and data["concurrency"].min() > 0:
        ax.set_xscale("log", base=2)
    concurrency_ticks(ax, frame.dropna(subset=["throughput_tps"]))
    ax.set_ylabel(metric_label(labels, "throughput_tps"))
    ax.legend(*zip(*_line_legend(palette, order, dashes)), fontsize="small", loc="upper left",
              bbox_to_anchor=(1.01, 1))  # beside the lines
    return ax


# dash patterns per workload of the throughput chart, seaborn's first ten ("" = solid)
DASHES = ((), (4, 1.5), (1, 1), (3, 1.25, 1.5, 1.25), (5, 1, 1, 1),
          (3, 1.25, 1.25, 1.25, 1.25, 1.25), (4, 1, 4, 1, 1, 1), (3, 1.25, 3, 1.25, 1.25, 1.25),
          (4, 1, 1, 1, 1, 1), (3, 1.25, 1.25, 1.25, 1.25, 1.25, 1.25, 1.25))


def _line_legend(palette: Palette, methods: list[str],
                 dashes: Mapping[str, tuple]) -> list[tuple[Line2D, str]]:
    """Legend of the throughput chart: a "method" heading and a line per method in its
    colour, then (when several) a "workload" heading and a grey line per dash pattern."""
    heading = Line2D([], [], alpha=0)
    rows = [(heading, "method")] + [
        (Line2D([], [], color=palette[m], **LINE_MARKER), plain(m)) for m in methods]
    if dashes:
        rows += [(heading, "workload")] + [
            (Line2D([], [], color=".2", dashes=d, **LINE_MARKER), plain(w))
            for w, d in dashes.items()]
    return rows


# One marker shape per method (by palette position) so that eight lines stay apart in grey.
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h")
DODGE = 0.05  # sideways shift between methods, in log2(concurrency) units


def plot_speedup_by_concurrency(ax: Axes, frame: pd.DataFrame, palette: Palette) -> Axes:
    """Speedup versus concurrency for one setting (engine, tp, workload, max_tokens).

    One line per method with its 95% CI as error bars, methods shifted sideways by a few
    percent of a doubling so the bars do not hide each other; log-2 ratio axis
    (:func:`ratio_axis`). Filled markers are significant, hollow ones are not; the crossover
    level (rows with ``is_crossover``) is ringed in black.
    """
    if frame.empty:
        return _empty(ax, "no speedup rows")
    methods = _order(palette, frame["method"])
    shift = {m: DODGE * (i - (len(methods) - 1) / 2) for i, m in enumerate(methods)}
    frame = frame.assign(x=frame["concurrency"] * 2 ** frame["method"].map(shift))
    for method in methods:
        _speedup_line(ax, frame[frame["method"] == method].sort_values("concurrency"),
                      method, palette)
    cross = frame[frame["is_crossover"].fillna(False).astype(bool)]
    if not cross.empty:
        ax.scatter(cross["x"], cross["speedup"], marker="o", s=90, facecolor="none",
                   edgecolor="black", linewidths=1.1, zorder=5, label="crossover")
    ax.axhline(1.0, ls="--", color="0.3", lw=1)
    ratio_axis(ax, frame[["speedup", "ci_low", "ci_high"]].to_numpy(float).ravel())
    levels = sorted(frame["concurrency"].unique())
    ax.set_xscale("log", base=2)
    concurrency_ticks(ax, frame)
    ax.set_xlim(levels[0] / 2 ** 0.5, levels[-1] * 2 ** 0.5)
    ax.set_ylabel("speedup")
    return ax



def _speedup_line(ax: Axes, sub: pd.DataFrame, method: str, palette: Palette) -> None:
    """One method's points and CI bars at their shifted x, non-significant markers hollow."""
    colour = palette[method]
    marker = MARKERS[list(palette).index(method) % len(MARKERS)]
    x, y = sub["x"].to_numpy(float), sub["speedup"].to_numpy(float)
    err = np.vstack([y - sub["ci_low"].to_numpy(float), sub["ci_high"].to_numpy(float) - y])
    ax.errorbar(x, y, yerr=np.abs(err), fmt="none", ecolor=colour, capsize=2, lw=1)
    ax.plot(x, y, color=colour, marker=marker, ms=5, lw=1.2, label=plain(method), zorder=3)
    sig = sub["significant"].fillna(False).astype(bool).to_numpy()
    ax.scatter(x[~sig], y[~sig], marker=marker, s=16, facecolor="white", edgecolor=colour,
               zorder=4)


def concurrency_ticks(ax: Axes, frame: pd.DataFrame) -> None:
    """x ticks at the nominal concurrency levels, each with the mean effective_concurrency
    (config_summary: sum e2e / span) of its rows beneath it, and an axis label saying so."""
    levels = sorted(frame["concurrency"].unique())
    eff = (frame.groupby("concurrency")["effective_concurrency"].mean()
           if "effective_concurrency" in frame else pd.Series(dtype=float))
    known = eff.reindex(levels)
    ax.set_xticks(levels, [f"{c:g}" + ("" if pd.isna(e) else f"\n{e:.1f}")
                           for c, e in zip(levels, known)])
    ax.set_xlabel("concurrency" + ("" if known.isna().all() else " (nominal; effective below)"))
