"""The charts per workload, per method and per agentic turn: speedup and energy ratio by
workload (log-2 ratio axis, the start-spread band), acceptance length bars,
request_distribution's boxes (decode tok/s, TTFT) and the median TTFT and context length per
turn."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from specsweep.report.charts.axes import _categorical, _empty, _slant_if_crowded, ratio_axis
from specsweep.report.charts.theme import LINE_MARKER, Palette, _order, fill, plain
from specsweep.report.keys import WINDOW
from specsweep.report.labels import Labels, metric_label


def _config_labels(frame: pd.DataFrame) -> pd.Series:
    """A category label per row: workload, engine, TP and max_tokens where they vary, then
    the concurrency (always, so that a panel of one workload still names its points)."""
    parts = []
    for col, tag in (("workload", ""), ("engine", ""), ("tp", "TP"), ("max_tokens", "mt=")):
        if col in frame and frame[col].nunique() > 1:
            parts.append(tag + frame[col].astype(str).map(plain))
    parts.append("c=" + frame["concurrency"].astype(str))
    return parts[0].str.cat(parts[1:], sep="\n") if len(parts) > 1 else parts[0]


def plot_speedup_by_workload(ax: Axes, frame: pd.DataFrame, palette: Palette) -> Axes:
    """Speedup over the baseline per workload (and config) and method, 95% CI bars, on a
    log-2 ratio axis (:func:`ratio_axis`). Filled markers are significant (Holm), hollow ones
    are not (:func:`ratio_legend`); grey bands: the noise floor of a service start
    (:func:`_start_band`); the A/A control, where the plan ran one, a grey x with its
    interval (a check, not a claim). No legend here: the figure puts one below its panels."""
    control = frame["is_control"].fillna(False).astype(bool) if "is_control" in frame else None
    controls = frame[control] if control is not None else frame[:0]
    frame = frame[~control] if control is not None else frame
    if frame.empty:
        return _empty(ax, "no speedup rows")
    frame = frame.assign(label=_config_labels(frame))
    # labels by workload first, then the rest of the key
    keys = [c for c in dict.fromkeys(["workload", *WINDOW]) if c in frame]
    labels = list(dict.fromkeys(frame.sort_values(keys)["label"]))
    methods = _order(palette, frame["method"])
    width = 0.8 / max(len(methods), 1)
    _start_band(ax, frame, labels)
    for i, method in enumerate(methods):
        sub = frame[frame["method"] == method]
        x = np.array([labels.index(lb) for lb in sub["label"]]) - 0.4 + width * (i + 0.5)
        y = sub["speedup"].to_numpy(float)
        err = np.vstack([y - sub["ci_low"].to_numpy(float), sub["ci_high"].to_numpy(float) - y])
        colour = palette[method]
        ax.errorbar(x, y, yerr=np.abs(err), fmt="none", ecolor=colour, capsize=3, lw=1.2)
        sig = sub["significant"].fillna(False).astype(bool).to_numpy()
        ax.scatter(x[sig], y[sig], color=colour, s=36, zorder=3, label=plain(method))
        ax.scatter(
            x[~sig],
            y[~sig],
            facecolor="white",
            edgecolor=colour,
            s=36,
            zorder=3,
            label=None if sig.any() else plain(method),
        )
    _control(ax, controls, frame, labels)
    ax.axhline(1.0, ls="--", color="0.3", lw=1)
    ax.set_xticks(range(len(labels)), labels)
    ax.set_xlim(-0.5, len(labels) - 0.5)
    ratio_axis(ax, frame[["speedup", "ci_low", "ci_high"]].to_numpy(float).ravel())
    ax.set_ylabel("speedup (decode tok/s vs baseline)")
    return ax


BAND = "0.88"  # the start-spread band's grey
CONTROL = "0.45"  # the A/A control's grey


def _start_band(ax: Axes, frame: pd.DataFrame, labels: list[str]) -> None:
    """Each load point's noise floor in grey: [1/x, x], x = start_spread (two starts of one
    service land within it of each other 95% of the time: analyze.starts); none where the
    stratum has no estimate or the file predates it."""
    if "start_spread" not in frame:
        return
    for label, x in frame.groupby("label", sort=False)["start_spread"].max().items():
        if np.isfinite(x) and x > 0:
            at = labels.index(label)
            ax.fill_between([at - 0.45, at + 0.45], 1 / x, x, color=BAND, lw=0, zorder=0)


def _control(ax: Axes, controls: pd.DataFrame, frame: pd.DataFrame, labels: list[str]) -> None:
    """The A/A control's own speedup and interval at each load point (grey x), if any."""
    if controls.empty:
        return
    every = _config_labels(pd.concat([frame.drop(columns="label"), controls]))
    at = controls.assign(label=every.to_numpy()[len(frame) :])
    at = at[at["label"].isin(labels)]
    x = np.array([labels.index(lb) for lb in at["label"]], dtype=float) + 0.42
    y = at["speedup"].to_numpy(float)
    err = np.vstack([y - at["ci_low"].to_numpy(float), at["ci_high"].to_numpy(float) - y])
    ax.errorbar(x, y, yerr=np.abs(err), fmt="x", color=CONTROL, ms=5, capsize=2, lw=0.8)


def plot_energy_ratio_by_workload(ax: Axes, frame: pd.DataFrame, palette: Palette) -> Axes:
    """Energy per output token over the baseline's (energy_ratio table) per workload and
    method, 95% CI bars, drawn as the speedup chart (filled: significant, log-2 ratio
    axis); below 1 = less energy per token."""
    if frame.empty:
        return _empty(ax, "no energy comparison")
    plot_speedup_by_workload(ax, frame.rename(columns={"energy_ratio": "speedup"}), palette)
    ax.set_ylabel("J/token vs baseline")
    return ax


def plot_accept_length_by_workload(
    ax: Axes, frame: pd.DataFrame, palette: Palette, labels: Labels = None
) -> Axes:
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
    return [
        {
            "label": plain(m),
            "med": float(r.p50),
            "q1": float(r.p25),
            "q3": float(r.p75),
            "whislo": float(r.whislo),
            "whishi": float(r.whishi),
            "method": m,
        }
        for m in _order(palette, by_method)
        for r in [by_method[m]]
    ]


def _boxes(ax: Axes, frame: pd.DataFrame, metric: str, palette: Palette) -> Axes:
    stats = box_stats(frame, metric, palette)
    if not stats:
        return _empty(ax, f"no {metric} data")
    line = {"color": BOX_EDGE, "linewidth": 1.0}
    drawn = ax.bxp(
        [{k: v for k, v in s.items() if k != "method"} for s in stats],
        positions=range(len(stats)),
        widths=0.6,
        showfliers=False,
        patch_artist=True,
        boxprops={"edgecolor": BOX_EDGE, "linewidth": 1.0},
        whiskerprops=line,
        capprops=line,
        medianprops=line,
    )
    for box, s in zip(drawn["boxes"], stats):
        box.set_facecolor(fill(palette[s["method"]]))
    _categorical(ax, len(stats), "")
    ax.set_ylabel(metric_label(dict(zip(frame["metric"], frame.get("label", ()))), metric))
    _slant_if_crowded(ax, len(stats))
    return ax


def plot_ttft_by_turn(ax: Axes, frame: pd.DataFrame, palette: Palette) -> Axes:
    """Median TTFT per turn of the agentic sessions, one line per method."""
    return _by_turn(ax, frame, "ttft_p50_s", "median TTFT (s)", palette)


def plot_context_by_turn(ax: Axes, frame: pd.DataFrame, palette: Palette) -> Axes:
    """Median prompt (context) length per turn of the agentic sessions."""
    return _by_turn(ax, frame, "prompt_tokens_p50", "median prompt tokens", palette)


def _by_turn(ax: Axes, frame: pd.DataFrame, y: str, ylabel: str, palette: Palette) -> Axes:
    data = frame.dropna(subset=[y])
    if data.empty:
        return _empty(ax, "no agentic turns")
    for method in _order(palette, data["method"]):
        line = data[data["method"] == method].groupby("turn")[y].mean()
        ax.plot(
            line.index,
            line.to_numpy(float),
            color=palette[method],
            label=plain(method),
            **LINE_MARKER,
        )
    ax.legend(title="method")
    ax.set_xlabel("turn")
    ax.set_ylabel(ylabel)
    ax.xaxis.get_major_locator().set_params(integer=True)
    return ax
