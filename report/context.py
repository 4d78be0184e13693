"""Assemble the template context: tables, figure paths, sentences, the plan listing.

Everything returned is either a plain data value (escaped by the template) or raw
LaTeX built from escaped parts (``NoEscape``); the findings are one
:class:`report.findings.Findings`, its sentences rendered by ``report.text.latex``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
from pylatex.utils import NoEscape

from specsweep.report import findings, sections
from specsweep.report.data import ReportData
from specsweep.report.findings import table
from specsweep.report.latex import literal_block
from specsweep.report.openloop import section as openloop
from specsweep.report.race import section as race
from specsweep.report.speculation import section as speculation
from specsweep.report.tables import (
    Col,
    build_table,
    ci,
    fit_table,
    num,
    sig,
    speedup_table,
    text,
    yes_no,
)
from specsweep.report.text import latex


def _kv_table(pairs: list[tuple[str, object]]) -> NoEscape:
    frame = pd.DataFrame(pairs, columns=["key", "value"])
    return build_table(frame, [Col("key", text("key")), Col("value", text("value"))])


def campaign_table(c: dict[str, Any]) -> NoEscape:
    """Key/value table of the campaign row (without the plan text)."""
    keys = ["campaign_id", "plan_name", "plan_sha256", "status", "started_at", "finished_at"]
    return _kv_table([(k, c.get(k)) for k in keys])


def env_table(env: pd.DataFrame) -> NoEscape | None:
    """Every recorded fact as a long key/value table (the appendix), host column only if
    several hosts; launch commands have their own appendix and are left out here."""
    env = env[~env["key"].str.endswith(".launch_command")] if not env.empty else env
    if env.empty:
        return None
    cols = [Col("key", text("key")), Col("value", text("value"), "p{0.55\\linewidth}")]
    if env["host"].nunique() > 1:
        cols.insert(0, Col("host", text("host")))
    return build_table(env, cols, long=True)


POINT = " (point estimate)"  # a ratio without an interval, beside a significance column


def workload_columns() -> list[Col]:
    """Columns of the per-workload result tables; the throughput and TTFT ratios have no
    interval, so their headers say they are point estimates (significance is the speedup's)."""
    return [
        Col("max_tokens", text("max_tokens"), "r"),
        Col("conc.", text("concurrency"), "r"),
        Col("method", text("method")),
        Col("speedup", num("speedup"), "r"),
        Col("95% CI", ci(), "c"),
        Col("Holm p", sig("p_holm", 2), "r", optional=True),
        Col("sig.", yes_no("significant"), "c"),
        Col("prompts", text("n_prompts"), "r", optional=True),
        Col("tput ratio" + POINT, num("throughput_speedup"), "r", optional=True),
        Col("TTFT ratio" + POINT, num("ttft_ratio"), "r", optional=True),
        Col("accept len", num("accept_length_tw"), "r", optional=True),
    ]


def _present(frame: pd.DataFrame, cols: list[Col]) -> list[Col]:
    """Drop columns whose source field is absent (optional view columns)."""
    keep = []
    for c in cols:
        try:
            frame.head(1).apply(c.cell, axis=1)
        except KeyError:
            continue
        keep.append(c)
    return keep


def workloads(data: ReportData, figs: dict[str, Path | None]) -> list[dict[str, Any]]:
    """Per workload: its speedup table and figure file name."""
    out = []
    sp = data.speedup
    for workload, sub in sp.groupby("workload", sort=True) if not sp.empty else []:
        sub = sub.sort_values(["max_tokens", "concurrency", "method"])
        fig = figs.get(f"speedup:{workload}")
        out.append(
            {
                "name": str(workload),
                "figure": fig.name if fig else None,
                "table": fit_table(sub, _present(sub, workload_columns())),
            }
        )
    return out


def best_table(best: pd.DataFrame) -> NoEscape | None:
    """The fastest method per window (best_config view), its speedup with the simultaneous
    interval a pick made after looking needs (pick_ci_low, pick_ci_high); a file without one
    labels the speedup a point estimate."""
    if best.empty:
        return None
    cols = _present(
        best,
        [
            Col("workload", text("workload")),
            Col("max_tokens", text("max_tokens"), "r"),
            Col("conc.", text("concurrency"), "r"),
            Col("method", text("method")),
            Col("decode tok/s", num("decode_tps_p50", ".1f"), "r"),
            Col("speedup", num("speedup"), "r"),
            Col("simultaneous 95% CI", ci("pick_ci_low", "pick_ci_high"), "c"),
            Col("sig.", yes_no("significant"), "c"),
        ],
    )
    if not any(c.header.endswith("CI") for c in cols):
        cols = [
            Col(c.header + POINT, c.cell, c.align) if c.header == "speedup" else c for c in cols
        ]
    return fit_table(best, cols)


def accept_table(cs: pd.DataFrame) -> NoEscape:
    """Acceptance statistics per window with speculative counters."""
    acc = cs.dropna(subset=["accept_length_tw"])
    cols = [
        Col("workload", text("workload")),
        Col("method", text("method")),
        Col("max_tokens", text("max_tokens"), "r"),
        Col("conc.", text("concurrency"), "r"),
        Col("accept len (tw)", num("accept_length_tw"), "r"),
        Col("accept len (rw)", num("accept_length_rw"), "r"),
        Col("accept rate", num("accept_rate"), "r", optional=True),
    ]
    return fit_table(acc, _present(acc, cols))


def throughput_table(cs: pd.DataFrame) -> NoEscape:
    """Throughput, effective concurrency, TTFT and errors per measured window."""
    cols = [
        Col("workload", text("workload")),
        Col("method", text("method")),
        Col("max_tokens", text("max_tokens"), "r"),
        Col("conc.", text("concurrency"), "r"),
        Col("eff. conc.", num("effective_concurrency", ".1f"), "r"),
        Col("n", text("n"), "r"),
        Col("tok/s", num("throughput_tps", ".1f"), "r"),
        Col("TTFT p50 (s)", num("ttft_p50_s", ".3f"), "r"),
        Col("TTFT p99 (s)", num("ttft_p99_s", ".3f"), "r"),
        Col("errors", num("error_rate", ".1%"), "r"),
    ]
    return fit_table(cs, _present(cs, cols))


# agentic_turns.pairing -> the table's cell: whether the turn compares across methods, and why
PAIRING = {
    "first_turn": "yes (turn 0)",
    "replay": "yes (replay)",
    "script": "yes (script)",
    "own_history": "no (own history)",
}
UNPAIRED_NOTE = (
    "\\par\\smallskip\\noindent Turns marked \\emph{no (own history)} hold each method's "
    "own earlier replies, so their prompts differ between methods: they are not compared "
    "with the baseline (the speedup table leaves them out). A workload with "
    "\\texttt{history: replay} replays the baseline's replies and compares every turn."
)


def agentic_table(ag: pd.DataFrame) -> NoEscape | None:
    """Per-turn medians of the agentic sessions, and whether each turn pairs with the
    baseline's (agentic_turns.pairing); a note when some turns do not."""
    if ag.empty:
        return None
    cols = [
        Col("workload", text("workload")),
        Col("method", text("method")),
        Col("turn", text("turn"), "r"),
        Col("n", text("n"), "r"),
        Col("prompt tok", num("prompt_tokens_p50", ".0f"), "r"),
        Col("cached tok", num("cached_tokens_p50", ".0f"), "r", optional=True),
        Col("TTFT p50 (s)", num("ttft_p50_s", ".3f"), "r"),
        Col("decode tok/s", num("decode_tps_p50", ".1f"), "r"),
        Col("paired", lambda r: PAIRING.get(r["pairing"], str(r["pairing"]))),
    ]
    table = fit_table(ag, _present(ag, cols))
    unpaired = "pairing" in ag and bool((ag["pairing"] == "own_history").any())
    return NoEscape(table + UNPAIRED_NOTE) if unpaired else table


def lossless_table(ll: pd.DataFrame) -> NoEscape | None:
    """Share of outputs identical to the baseline's, next to the baseline's own repeatability."""
    if ll.empty:
        return None
    cols = [
        Col("workload", text("workload")),
        Col("method", text("method")),
        Col("max_tokens", text("max_tokens"), "r"),
        Col("conc.", text("concurrency"), "r"),
        Col("pairs", text("n_pairs"), "r"),
        Col("identical", num("share_identical", ".0%"), "r"),
        Col("baseline vs itself", num("baseline_self_identical", ".0%"), "r"),
    ]
    return fit_table(ll, _present(ll, cols))


def colocation_section(co: pd.DataFrame) -> dict[str, Any]:
    """How many measured requests ran beside other services (GPU packing), and per window
    that did, its decode speed beside others against alone where both were measured."""
    if co.empty or not co["n_colocated"].sum():
        return {
            "n_colocated": 0,
            "n": int(co["n_alone"].sum()) if not co.empty else 0,
            "table": None,
        }
    shared = co[co["n_colocated"] > 0]
    cols = [
        Col("workload", text("workload")),
        Col("tp", text("tp"), "r"),
        Col("method", text("method")),
        Col("max_tokens", text("max_tokens"), "r"),
        Col("conc.", text("concurrency"), "r"),
        Col("alone", text("n_alone"), "r"),
        Col("beside others", text("n_colocated"), "r"),
        Col("neighbours", text("neighbours_max"), "r"),
        Col("decode tok/s beside / alone", num("colocated_over_alone"), "r"),
    ]
    return {
        "n_colocated": int(co["n_colocated"].sum()),
        "n": int(co["n_alone"].sum() + co["n_colocated"].sum()),
        "table": build_table(shared, cols),
    }


def _crossover_cell(r: pd.Series) -> str:
    """The crossover concurrency as the table shows it, by status (analyze/VIEWS.md)."""
    if r["status"] == "always pays":
        return f"> {_int(r['highest_concurrency'])}"
    if r["status"] == "undetermined" and pd.isna(r["paid_up_to"]):
        return "--"  # faster at no level, slower at not every level: nothing to locate
    if r["status"] == "undetermined":
        return f"not measured (> {_int(r['paid_up_to'])})"
    if pd.isna(r["crossover_concurrency"]):
        return "--"
    again = " (pays again above)" if bool(r["pays_again_above"]) else ""
    return f"{_int(r['crossover_concurrency'])}{again}"


def _if_crossing(cell: Callable[[pd.Series], str]) -> Callable[[pd.Series], str]:
    """A cell that stays empty for settings without a crossover level."""
    return lambda r: "" if pd.isna(r["crossover_concurrency"]) else cell(r)


def _int(v: Any) -> str:
    return str(int(v))


def _levels(r: pd.Series) -> str:
    return ", ".join(_int(c) for c in r["concurrencies"])


def crossover_section(cx: pd.DataFrame | None) -> dict[str, Any]:
    """The crossover table over swept settings (2+ concurrency levels); ``available`` is
    false when the database predates the crossover view."""
    if cx is None:
        return {"available": False, "table": None, "n_single": 0}
    swept = cx[cx["status"] != "single level"]
    n_single = len(cx) - len(swept)
    if swept.empty:
        return {"available": True, "table": None, "n_single": n_single}
    cols = [
        Col("workload", text("workload")),
        Col("max_tokens", text("max_tokens"), "r"),
        Col("tp", text("tp"), "r"),
        Col("method", text("method")),
        Col("levels", _levels),
        Col("status", text("status")),
        Col("crossover", _crossover_cell, "r"),
        Col("speedup there", _if_crossing(num("crossover_speedup")), "r"),
        Col("95% CI", _if_crossing(ci("crossover_ci_low", "crossover_ci_high")), "c"),
        Col("paid up to", text("paid_up_to"), "r"),
        Col("estimate < 1 from", text("point_crossover_concurrency"), "r", optional=True),
    ]
    if swept["engine"].nunique() > 1:
        cols.insert(2, Col("engine", text("engine")))
    swept = swept.sort_values(["workload", "max_tokens", "engine", "tp", "method"])
    return {
        "available": True,
        "table": fit_table(swept, _present(swept, cols)),
        "n_single": n_single,
    }


def crossover_figures(figs: dict[str, Path | None]) -> list[str]:
    """File names of the crossover figure and its continuations, in order."""
    keys = ["concurrency"] + sorted(
        (k for k in figs if k.startswith("concurrency:")), key=lambda k: int(k.split(":")[1])
    )
    return [figs[k].name for k in keys if figs.get(k)]


def claims_section(claims: list[dict[str, Any]]) -> dict[str, Any]:
    """Page 1's table of claims (report.findings.table), how many it shows and of how many."""
    rows, left_out = table.rows(claims)
    h = table.headers(claims)
    cols = [
        Col(h["claim"], text("claim"), "p{0.5\\linewidth}"),
        Col(h["interval"], text("interval")),
        Col(h["family"], text("family")),
        Col(h["check"], text("check")),
    ]
    frame = pd.DataFrame(rows, columns=list(h))
    tex = fit_table(frame, cols) if rows else None
    return {"table": tex, "shown": len(rows), "left_out": left_out, "total": len(claims)}


def speedup_tables(sp: pd.DataFrame) -> list[dict[str, Any]]:
    """The machine-readable speedup table, one per (engine, tp) when there are several."""
    if sp.empty:
        return []
    groups = list(sp.groupby(["engine", "tp"], sort=True))
    if len(groups) == 1:
        return [{"label": None, "table": speedup_table(sp)}]
    return [
        {"label": f"{eng}, TP{tp}", "table": speedup_table(sub, f"engine={eng} tp={tp}")}
        for (eng, tp), sub in groups
    ]


def build_context(
    data: ReportData, figs: dict[str, Path | None], found: findings.Findings | None = None
) -> dict[str, Any]:
    """Everything ``latex/report.tex.j2`` renders; ``found``: the findings of ``data`` when
    the caller built them already (the HTML report renders the same object)."""
    c = data.campaign
    found = found if found is not None else findings.build(data)
    return {
        "campaign": c,
        "baseline": data.baseline,
        "claims": claims_section(found.claims),
        "method": [latex(s) for s in found.method],
        "findings": [latex(s) for s in found.summary],
        "validity": [latex(s) for s in found.validity],
        "several_runs": findings.several_runs(data.speedup),
        "campaign_table": campaign_table(c),
        "env_table": env_table(data.environment),
        "host_table": sections.host_table(data.hosts),
        "host_lines": sections.host_lines(data.hosts) if not data.hosts.empty else [],
        "services_table": sections.services_table(data.services),
        "shared_flags_note": sections.shared_flags_note(data.services),
        "commands": sections.launch_commands(data.services),
        "energy": sections.energy_section(
            data.window_energy, data.energy_summary, data.energy_ratio, data.environment
        ),
        "figures": {k: (v.name if v else None) for k, v in figs.items() if ":" not in k},
        "workloads": workloads(data, figs),
        "best_table": best_table(data.best_config),
        "accept_table": accept_table(data.config_summary),
        "throughput_table": throughput_table(data.config_summary),
        "agentic_table": agentic_table(data.agentic),
        "lossless_table": lossless_table(data.lossless),
        "crossover": crossover_section(data.crossover) | {"figures": crossover_figures(figs)},
        "colocation": colocation_section(data.colocation),
        "speedup_tables": speedup_tables(data.speedup),
        "openloop": openloop.section(data, figs),
        "speculation": speculation.section(data, figs),
        "race": race.latex_section(data, figs),
        "plan": literal_block(str(c.get("plan_yaml") or "")),
    }
