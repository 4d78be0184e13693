"""Does speedup = acceptance length / step cost predict a window it was not fitted on? The
speedup_prediction table (analyze/sql/speedup_prediction.sql) takes a window's step cost
from the other windows of its family with the same draft length, where only the acceptance
differs, and predicts the window's speedup from its own acceptance length. The section shows
every window's measured and predicted speedup with the prediction's 95% interval (from the
scatter of the siblings' step costs; two siblings or more) and says how many fall within
:data:`TOLERANCE` of the measurement and how many inside their interval.

Unlike the decomposition (an identity on the speedup's own requests), this can fail: a large
error says that the step cost changes with the acceptance (longer accepted runs, bigger trees)
or that the windows differ in something else.
"""

from __future__ import annotations

import pandas as pd
from pylatex.utils import NoEscape

from specsweep.report.latex import escape_latex as e
from specsweep.report.speculation.panels import SETTING
from specsweep.report.tables import Col, ci, fit_table, num, text

TOLERANCE = 0.10  # |predicted / measured - 1|, the goal a sweep is judged on


def _error(r: pd.Series) -> str:
    v = r["prediction_error"]
    return "" if pd.isna(v) else f"{100 * float(v):+.1f}%"


def table(sp: pd.DataFrame) -> NoEscape | None:
    """A row per window: acceptance (and where it came from), draft length, measured speedup
    with its interval, step cost and time, the leave-one-out prediction and its error."""
    if sp.empty:
        return None
    rows = sp.sort_values(
        [*SETTING, "concurrency", "family", "draft_tokens_per_step", "accept_length"]
    )
    cols = [
        Col("workload", text("workload")),
        Col("conc.", text("concurrency"), "r"),
        Col("method", text("method")),
        Col("accept. length", num("accept_length"), "r"),
        Col("source", text("acceptance_source")),
        Col("K", num("draft_tokens_per_step", ".1f"), "r"),
        Col("speedup", num("speedup"), "r"),
        Col("95% CI", ci(), "c"),
        Col("step cost", num("step_cost"), "r"),
        Col(
            "step ms",
            lambda r: "" if pd.isna(r["step_time_s"]) else f"{1000 * float(r['step_time_s']):.1f}",
            "r",
        ),
        Col("predicted", num("predicted_speedup"), "r"),
        Col("95% PI", ci("pred_low", "pred_high"), "c"),
        Col("error", _error, "r"),
    ]
    if rows[["engine", "tp"]].drop_duplicates().shape[0] > 1:
        cols.insert(0, Col("engine", lambda r: f"{r['engine']} TP{r['tp']}"))
    return fit_table(rows, cols)


def summary(sp: pd.DataFrame) -> NoEscape | None:
    """One sentence: how many predicted windows fall within the tolerance, the largest miss,
    and how many windows could not be predicted (with the reasons)."""
    if sp.empty:
        return None
    done = sp.dropna(subset=["prediction_error"])
    missing = sp[sp["prediction_error"].isna()]
    out = []
    if not done.empty:
        err = done["prediction_error"].astype(float)
        within = int((err.abs() <= TOLERANCE).sum())
        worst = done.loc[err.abs().idxmax()]
        out.append(
            f"{within} of {len(done)} predicted windows are within "
            f"{100 * TOLERANCE:.0f}\\% of the measured speedup; the largest miss is "
            f"\\emph{{{e(worst['method'])}}} on {e(worst['workload'])} "
            f"({100 * float(worst['prediction_error']):+.1f}\\%)."
        )
        judged = done.dropna(subset=["within_interval"])
        if not judged.empty:
            inside = int(judged["within_interval"].astype(bool).sum())
            out.append(
                f"{inside} of {len(judged)} with two or more siblings lie inside the 95\\% "
                "prediction interval that the siblings' scatter of step costs gives."
            )
    if not missing.empty:
        reasons = missing["reason"].fillna("no speedup").value_counts()
        said = "; ".join(f"{n} {e(why)}" for why, n in reasons.items())
        out.append(f"{len(missing)} window(s) have no prediction ({said}).")
    return NoEscape(" ".join(out))
