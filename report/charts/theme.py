"""The look every chart shares: the theme (:func:`set_theme`), one colour per method
(:func:`method_palette`, baseline first, then sorted) and its fill shade (:func:`fill`), the
line markers, marker shapes and dash patterns, and :func:`plain` for data strings."""

from __future__ import annotations

import colorsys
from collections.abc import Iterable, Mapping

import matplotlib
import pandas as pd
from matplotlib import colors as mcolors

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
COLORBLIND = (
    "#0173b2",
    "#de8f05",
    "#029e73",
    "#d55e00",
    "#cc78bc",
    "#ca9161",
    "#fbafe4",
    "#949494",
    "#ece133",
    "#56b4e9",
)
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


def plain(text: object) -> str:
    """A data string as matplotlib prints it literally (a `$` pair would start mathtext)."""
    return str(text).replace("$", r"\$")


LINE_MARKER = {"marker": "o", "markeredgewidth": 0.75, "markeredgecolor": "w"}  # as seaborn

# dash patterns per workload of the throughput chart, seaborn's first ten ("" = solid)
DASHES = (
    (),
    (4, 1.5),
    (1, 1),
    (3, 1.25, 1.5, 1.25),
    (5, 1, 1, 1),
    (3, 1.25, 1.25, 1.25, 1.25, 1.25),
    (4, 1, 4, 1, 1, 1),
    (3, 1.25, 3, 1.25, 1.25, 1.25),
    (4, 1, 1, 1, 1, 1),
    (3, 1.25, 1.25, 1.25, 1.25, 1.25, 1.25, 1.25),
)

# One marker shape per method (by palette position) so that eight lines stay apart in grey.
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "h")
