"""The report's figures as PNG data URIs, so the HTML file carries them (no external files).

The figures are the PDF's own (report.figures draws each once, as a vector PDF); poppler's
``pdftocairo`` rasterises each at :data:`DPI` (poppler-utils is in the Makefile's DEBS: the
tests read PDFs back with it). Without it the page says the figures are missing instead of
failing: the PDF stays the primary output. The per-workload speedup figures
(``speedup:<workload>``) are left out: the all-workloads figure shows the same panels.
"""

from __future__ import annotations

import base64
import logging
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

DPI = 144  # a 6.4 in figure -> 922 px, sharp on a laptop screen, ~100 kB
TIMEOUT_S = 60
TITLES = {
    "speedup": "Speedup over the baseline, all workloads (95% intervals; filled: significant)",
    "concurrency": "Speedup versus concurrency: where speculation stops paying",
    "decode_tps": "Per-request decode tok/s per method, all workloads pooled",
    "ttft": "Time to first token per method, all workloads pooled",
    "accept": "Token-weighted acceptance length by workload and method",
    "throughput": "Aggregate output throughput versus concurrency",
    "agentic": "Agentic sessions: TTFT and context length per turn",
    "energy": "GPU energy per output token relative to the baseline",
    "race": "The race: each arm's decode tok/s over the leader's by round (grey: kept)",
}
SKIP_PREFIXES = ("speedup:",)
HEADLINE = "speedup"  # the chart the page shows with the findings, as the PDF's page 1 does


@dataclass
class Figure:
    """One embedded figure."""

    key: str  # report.figures' key ('speedup', 'concurrency:2', ...)
    title: str
    uri: str  # data:image/png;base64,...

    @property
    def anchor(self) -> str:
        """The element id of the figure on the page (``fig-`` + key, ``:`` as ``-``)."""
        return anchor(self.key)


def anchor(key: str) -> str:
    """The element id of figure `key` on the page (``fig-`` + key, ``:`` as ``-``)."""
    return "fig-" + "".join(ch if ch.isalnum() else "-" for ch in key)


def title(key: str) -> str:
    """A figure's heading: :data:`TITLES`, else its key made readable ('concurrency:2' ->
    'Speedup versus concurrency ... (part 2)')."""
    name, _, part = key.partition(":")
    head = TITLES.get(name, name.replace("-", " ").replace("_", " ").capitalize())
    if name == "race":  # race:<raced phase>-<part>, both from 0 (report.race.section)
        phase, _, sub = part.partition("-")
        return f"{head}, raced phase {int(phase) + 1}" + (
            f" (part {int(sub) + 1})" if int(sub or 0) else ""
        )
    return (
        f"{head} (part {part})"
        if part and name in TITLES
        else (f"{head}: {part}" if part else head)
    )


def png_uri(pdf: Path, exe: str) -> str:
    """``pdf`` (one page) rasterised at :data:`DPI`, as a base64 PNG data URI."""
    stem = pdf.with_suffix("")  # pdftocairo -singlefile writes <stem>.png
    subprocess.run(
        [exe, "-png", "-singlefile", "-r", str(DPI), str(pdf), str(stem)],
        check=True,
        capture_output=True,
        timeout=TIMEOUT_S,
        stdin=subprocess.DEVNULL,
    )
    data = stem.with_suffix(".png").read_bytes()
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


def embed(figs: dict[str, Path | None]) -> tuple[list[Figure], str | None]:
    """The drawn figures as :class:`Figure` in report.figures' order, and a note when some
    could not be embedded (None when all were)."""
    drawn = [(k, p) for k, p in figs.items() if p and not k.startswith(SKIP_PREFIXES)]
    exe = shutil.which("pdftocairo")
    if exe is None:
        log.warning("pdftocairo not found: the HTML report has no figures")
        return [], (
            "The figures are in the PDF: pdftocairo (Debian: poppler-utils) was not "
            "found to embed them here."
        ) if drawn else None
    out, failed = [], []
    for key, pdf in drawn:
        try:
            out.append(Figure(key, title(key), png_uri(pdf, exe)))
        except (subprocess.SubprocessError, OSError) as exc:
            log.warning("figure %s not embedded: %s", key, exc)
            failed.append(key)
    note = f"Not embedded (see the PDF): {', '.join(failed)}." if failed else None
    return out, note
