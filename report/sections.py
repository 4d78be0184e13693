"""The setup section (host table, one row per service) and the energy section.

Reads the frames of ``report.data`` (views host_summary, service_summary, window_energy and
the energy_ratio table; analyze/VIEWS.md) and returns raw LaTeX built from escaped cells
(``NoEscape``) or plain values the template escapes.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

import pandas as pd
from pylatex.utils import NoEscape

from specsweep.report.commands import flags_cell
from specsweep.report.keys import COMPARISON
from specsweep.report.latex import fmt_num, texttt
from specsweep.report.tables import Col, build_table, ci, fit_table, num, sig, text, yes_no

# --- setup --------------------------------------------------------------------------------


def ragged(width: float) -> str:
    """A wrapping column of `width` times the line width, set ragged right (not justified)."""
    return f">{{\\raggedright\\arraybackslash}}p{{{width}\\linewidth}}"


def _or_dash(v: Any) -> str:
    return "--" if v is None or (not isinstance(v, str) and pd.isna(v)) or v == "" else str(v)


def _cpu(r: pd.Series) -> str:
    count = "" if pd.isna(r["cpu_count"]) else f" ({r['cpu_count']} cores)"
    return _or_dash(r["cpu_model"]) + count


def _gpus(r: pd.Series) -> str:
    if not r["n_gpus"] or pd.isna(r["n_gpus"]):
        return "none"
    models = _or_dash(r["gpu_models"]) if not pd.isna(r["gpu_models"]) else f"{r['n_gpus']}"
    mem = "" if pd.isna(r["gpu_memory_gib"]) else f", {r['gpu_memory_gib']:.0f} GiB each"
    return models + mem


UNKNOWN_BUILDS = {"", "unknown", "b0-unknown"}  # what a build without version metadata reports


def _engine(r: pd.Series) -> str:
    b = r["engine_build"]
    build = "" if pd.isna(b) or str(b).strip() in UNKNOWN_BUILDS else f" {b}"
    return _or_dash(r["engine_kind"]) + (build or " (build not reported)")


def _specsweep(recorded: Any) -> str:
    """The specsweep version the campaign recorded; if none, the version building this
    report, labelled as such (importlib.metadata)."""
    if not pd.isna(recorded) and str(recorded) not in ("", "unknown"):
        return str(recorded)
    try:
        here = version("specsweep")
    except PackageNotFoundError:
        return "not recorded"
    return f"not recorded (this report: {here})"


def host_table(hosts: pd.DataFrame) -> NoEscape | None:
    """One row per host: CPU, memory, GPUs, driver, CUDA, engine build."""
    if hosts.empty:
        return None
    cols = [
        Col("CPU", _cpu, ragged(0.26)),
        Col("memory (GB)", lambda r: _or_dash(r["memory_gb"]), "r"),
        Col("GPUs", _gpus, ragged(0.22)),
        Col("driver", lambda r: _or_dash(r["driver"])),
        Col("CUDA", lambda r: _or_dash(r["cuda"])),
        Col("engine build", _engine, ragged(0.24)),
    ]
    if len(hosts) > 1:
        cols.insert(0, Col("host", text("host")))
    return build_table(hosts, cols)


def host_lines(hosts: pd.DataFrame) -> list[str]:
    """Per host, what the table has no column for: model, OS, versions, price (plain text)."""
    out = []
    for _, r in hosts.iterrows():
        parts = [
            f"model {_or_dash(r['engine_model'])}",
            f"OS {_or_dash(r['os'])}",
            f"Python {_or_dash(r['python'])}",
            f"specsweep {_specsweep(r['specsweep_version'])}",
        ]
        if not pd.isna(r["gpu_hour_usd"]):
            parts.append(f"price {r['gpu_hour_usd']:g} USD per GPU-hour")
        who = f"{r['host']}: " if len(hosts) > 1 else ""
        out.append(who + "; ".join(parts) + ".")
    return out


def services_table(svc: pd.DataFrame) -> NoEscape:
    """One row per service start: method, tp, the round it started in (where the campaign
    ran several), GPUs, its own flags, start-up time, transport."""
    cols = [
        Col("method", text("method")),
        Col("tp", text("tp"), "r"),
        Col("round", text("run"), "r"),
        Col("GPUs", lambda r: r["gpus"] or "--"),
        Col("flags (not shared by all)", flags_cell, ragged(0.36)),
        Col("start-up (s)", num("startup_s", ".1f"), "r"),
    ]
    if "transport" in svc:
        cols.append(Col("transport", text("transport")))
    cols.append(Col("state", text("state")))
    if "run" not in svc or svc["run"].nunique() < 2:
        cols = [c for c in cols if c.header != "round"]
    if svc["engine"].nunique() > 1:
        cols.insert(1, Col("engine", text("engine")))
    return build_table(svc, cols)


def shared_flags_note(svc: pd.DataFrame) -> str:
    """Where the flags every service shares can be read."""
    if "own_flags" not in svc:
        return ""
    return (
        "Flags that every service shares (model, context, threads, ...) are left out of "
        "the table; the full launch commands are in the appendix."
    )


# --- energy -------------------------------------------------------------------------------


def energy_rows(es: pd.DataFrame, er: pd.DataFrame) -> pd.DataFrame:
    """energy_summary rows (J/token, tokens/J, cost per method and load point) with their
    energy_ratio row (empty ratio cells for the baseline)."""
    rows = es.dropna(subset=["j_per_token"])
    if rows.empty:
        return pd.DataFrame()
    if not er.empty:
        rows = rows.merge(
            er[[*COMPARISON, "energy_ratio", "ci_low", "ci_high", "significant"]],
            on=COMPARISON,
            how="left",
        )
    else:
        rows = rows.assign(
            energy_ratio=float("nan"), ci_low=float("nan"), ci_high=float("nan"), significant=None
        )
    return rows.sort_values(["workload", "max_tokens", "concurrency", "method"])


def _ratio_ci(r: pd.Series) -> str:
    return "" if pd.isna(r["energy_ratio"]) else ci()(r)


def energy_table(rows: pd.DataFrame, priced: bool) -> NoEscape:
    cols = [
        Col("workload", text("workload")),
        Col("max_tokens", text("max_tokens"), "r"),
        Col("conc.", text("concurrency"), "r"),
        Col("method", text("method")),
        Col("J/token", sig("j_per_token"), "r"),
        Col("tokens/J", sig("tokens_per_j"), "r"),
        Col(
            "energy ratio",
            lambda r: "" if pd.isna(r["energy_ratio"]) else fmt_num(r["energy_ratio"]),
            "r",
        ),
        Col("95% CI", _ratio_ci, "c"),
        Col("sig.", lambda r: "" if pd.isna(r["energy_ratio"]) else yes_no("significant")(r), "c"),
    ]
    if priced:
        cols.append(Col("USD/Mtok", sig("cost_per_mtok_usd"), "r"))
    if rows[["engine", "tp"]].drop_duplicates().shape[0] > 1:
        cols.insert(3, Col("tp", text("tp"), "r"))
    return fit_table(rows, cols)


def _window_flags(r: pd.Series) -> str:
    flags = []
    if r["sparse"]:
        flags.append(
            f"sparse ({int(r['min_samples_per_gpu'] or 0)} samples/GPU, "
            f"gap {fmt_num(r['max_gap_s'])} s)"
        )
    if r["throttled"]:
        flags.append(f"throttled: {r['throttle_reasons']}")
    if r["clock_drop"]:
        flags.append(
            f"SM clock {fmt_num(r['sm_clock_min_mhz'], '.0f')} MHz, median "
            f"{fmt_num(r['sm_clock_median_mhz'], '.0f')}"
        )
    return "; ".join(flags)


def flagged_table(we: pd.DataFrame) -> NoEscape | None:
    """The windows that were throttled, lost SM clock or were sampled too sparsely."""
    bad = we[
        we["sparse"].astype(bool) | we["throttled"].astype(bool) | we["clock_drop"].astype(bool)
    ]
    if bad.empty:
        return None
    cols = [
        Col("workload", text("workload")),
        Col("max_tokens", text("max_tokens"), "r"),
        Col("conc.", text("concurrency"), "r"),
        Col("method", text("method")),
        Col("tp", text("tp"), "r"),
        Col("flags", _window_flags, ragged(0.45)),
    ]
    return fit_table(bad.sort_values(["workload", "max_tokens", "concurrency", "method"]), cols)


def telemetry_sources(env: pd.DataFrame) -> str:
    """How the GPUs were sampled, as the services recorded it (service.*.telemetry facts)."""
    if env.empty:
        return ""
    values = env.loc[env["key"].str.endswith(".telemetry"), "value"]
    return "; ".join(sorted(set(values)))


SOURCE_NAMES = {
    "counter": "the NVML energy counter",
    "power_trapezoid": "the trapezoid of power samples",
    "mixed": "both (some GPUs each way)",
}


def energy_sources(we: pd.DataFrame) -> str:
    """How many windows each energy source measured (window_energy.energy_source), e.g.
    "10 by the NVML energy counter, 2 by the trapezoid of power samples"; '' for a file
    analysed before the column existed (docs/energy.md)."""
    if "energy_source" not in we:
        return ""
    counts = we["energy_source"].value_counts()
    return ", ".join(f"{counts[k]} by {name}" for k, name in SOURCE_NAMES.items() if k in counts)


def energy_section(
    we: pd.DataFrame, es: pd.DataFrame, er: pd.DataFrame, env: pd.DataFrame | None = None
) -> dict[str, Any]:
    """What the template's energy section shows; ``available`` false without telemetry."""
    if we.empty:
        return {"available": False}
    rows = energy_rows(es, er) if not es.empty else pd.DataFrame()
    priced = bool(we["gpu_hour_usd"].notna().any())
    return {
        "available": True,
        "priced": priced,
        "table": energy_table(rows, priced) if not rows.empty else None,
        "n_windows": len(we),
        "n_sparse": int(we["sparse"].astype(bool).sum()),
        "n_throttled": int(we["throttled"].astype(bool).sum()),
        "n_clock_drop": int(we["clock_drop"].astype(bool).sum()),
        "flagged": flagged_table(we),
        "sampling": telemetry_sources(env if env is not None else pd.DataFrame()),
        "sources": energy_sources(we),
    }


def launch_commands(svc: pd.DataFrame) -> list[dict[str, Any]]:
    """Launch command (and error, if any) per service, typeset literally (the appendix)."""
    out = []
    for _, r in svc.iterrows():
        cmd = texttt(r["launch_command"])
        if isinstance(r.get("error"), str) and r["error"]:
            cmd = NoEscape(f"{cmd}\\\\ \\emph{{error:}} {texttt(r['error'])}")
        out.append({"label": f"{r['method']} ({r['engine']}, TP{r['tp']})", "command": cmd})
    return out
