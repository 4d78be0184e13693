"""The best setting per load (best_setting table): a table a user can paste into a
deployment and, per family and workload, a sentence such as "draft-simple: n_max=4 up to
concurrency 1, off from 4".

A family's best at a load is its member with the highest speedup among those significantly
above 1 (Holm, the campaign's one family of claims), or speculation off when none is; its
interval is the simultaneous one over that family (best_setting.ci_low / ci_high); family
``(any)`` is every non-baseline method together. Loads are concurrency levels (closed loop)
or request rates (open loop, TPOT speedup).
"""

from __future__ import annotations

import pandas as pd
from pylatex.utils import NoEscape

from specsweep.report.latex import fmt_num
from specsweep.report.speculation.panels import SETTING
from specsweep.report.speculation.panels import window_name as name
from specsweep.report.tables import Col, ci, fit_table, num, text
from specsweep.report.text import data as d
from specsweep.report.text import em

ANY = "(any)"
GROUP = [*SETTING, "family", "load_kind"]


def choice(r: pd.Series) -> str:
    """What to run (plain text): the family's parameters (``n_max=4``), ``on`` for a method
    without parameters (its own family), the method's name for family (any); ``off`` when
    speculation does not pay."""
    if r["decision"] != "method" or pd.isna(r["method"]):
        return "off"
    if r["family"] == ANY:
        return str(r["method"])
    label = "" if pd.isna(r["params_label"]) else str(r["params_label"])
    return label or "on"  # a family of one method without parameters: the method itself


def _load(r: pd.Series) -> str:
    unit = "req/s" if r["load_kind"] == "rate" else "conc."
    return f"{fmt_num(r['load'], 'g')} {unit}"


def ordered(bs: pd.DataFrame) -> pd.DataFrame:
    """best_setting rows by setting, family ((any) last), closed loop first, then load."""
    return (
        bs.assign(_any=bs["family"] == ANY)
        .sort_values([*SETTING, "_any", "family", "load_kind", "load"])
        .drop(columns="_any")
    )


def table(bs: pd.DataFrame) -> NoEscape | None:
    """One row per family and load: the choice, its speedup and interval, candidates."""
    if bs.empty:
        return None
    rows = ordered(bs)
    cols = [
        Col("workload", text("workload")),
        Col("max_tokens", text("max_tokens"), "r"),
        Col("load", _load, "r"),
        Col("family", text("family")),
        Col("best setting", choice),
        Col("speedup", lambda r: "" if r["decision"] != "method" else num("speedup")(r), "r"),
        Col("simultaneous 95% CI", lambda r: "" if r["decision"] != "method" else ci()(r), "c"),
        Col("candidates", text("n_candidates"), "r"),
    ]
    if rows[["engine", "tp"]].drop_duplicates().shape[0] > 1:
        cols.insert(2, Col("engine", lambda r: f"{r['engine']} TP{r['tp']}"))
    return fit_table(rows, cols)


def runs(group: pd.DataFrame) -> list[tuple[str, list[float]]]:
    """Consecutive loads (ascending) with the same choice: [(choice, [loads])]."""
    out: list[tuple[str, list[float]]] = []
    for _, r in group.sort_values("load").iterrows():
        c = choice(r)
        if out and out[-1][0] == c:
            out[-1][1].append(float(r["load"]))
        else:
            out.append((c, [float(r["load"])]))
    return out


def plan(group: pd.DataFrame) -> str:
    """``n_max=4 up to concurrency 8, n_max=2 at 16, off from 32`` (plain text) for one
    family, setting and load kind."""
    rate = group["load_kind"].iloc[0] == "rate"
    unit = (lambda x: f"{fmt_num(x, 'g')} req/s") if rate else (lambda x: fmt_num(x, "g"))
    first = "" if rate else "concurrency "
    chunks = runs(group)
    if len(chunks) == 1:
        c, loads = chunks[0]
        if len(loads) == 1:
            return f"{c} at {first}{unit(loads[0])}"
        return (
            f"{c} at every {'rate' if rate else 'concurrency'} measured "
            f"({unit(loads[0])} to {unit(loads[-1])})"
        )
    out = []
    for i, (c, loads) in enumerate(chunks):
        lead = first if i == 0 else ""
        if i == 0:
            out.append(f"{c} up to {lead}{unit(loads[-1])}")
        elif i == len(chunks) - 1:
            out.append(f"{c} from {unit(loads[0])}")
        elif len(loads) == 1:
            out.append(f"{c} at {unit(loads[0])}")
        else:
            out.append(f"{c} from {unit(loads[0])} to {unit(loads[-1])}")
    return ", ".join(out)


def sentences(bs: pd.DataFrame) -> list[str]:
    """One deployment sentence per family and setting (and load kind), marked Unicode
    (report.text); family (any) only where the setting measured several families."""
    if bs.empty:
        return []
    out = []
    rows = ordered(bs)
    families = rows[rows["family"] != ANY].groupby(SETTING)["family"].nunique()
    for key, group in rows.groupby(GROUP, sort=False):
        family, kind = key[-2], key[-1]
        if family == ANY and families.get(tuple(key[:4]), 0) == 1:
            continue  # one family only: (any) would say the same again
        who = "Any method" if family == ANY else em(family)
        where = name(tuple(key[:4]), rows, load=None)
        loop = " (open loop)" if kind == "rate" else ""
        out.append(f"{who} on {d(where)}{loop}: {d(plan(group))}.")
    return out
