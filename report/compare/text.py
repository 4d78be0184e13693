"""The words and tables of the compare report, from one stored comparison: the verdict
sentence (:func:`summary`), how the service starts' variance entered the intervals
(:func:`start_sentence`), the likely cause (:func:`causes`: the environment keys that
differ, grouped by what changed), the changes sorted by effect (raw p and Holm's adjusted p
side by side; p90s as point estimates; attainment as a difference in points), each
campaign's own speedup side by side, the prompts not paired, and the windows measured in
one campaign only. What counts as significant is analyze.compare's (docs/compare.md).

Sentences are plain text (what ``specsweep report --compare`` prints); :func:`tex` escapes
one for LaTeX and draws its ``->`` as an arrow. Table cells are escaped by
:func:`report.tables.build_table`.
"""

from __future__ import annotations

import math
from collections import defaultdict

import pandas as pd
from pylatex.utils import NoEscape

from specsweep.report.labels import metric_label as catalogue_label
from specsweep.report.latex import escape_latex, fmt_sig, texttt
from specsweep.report.tables import Col, fit_table, num, text

MAX_CHANGES = 40  # rows of the changes table; the rest are counted
MAX_SPEEDUPS = 60
MAX_VALUE = 120  # characters of an environment value in the cause list
ARROW = r"~$\rightarrow$~"


def tex(sentence: str) -> NoEscape:
    """A plain sentence as LaTeX: escaped, every ``->`` an arrow."""
    return NoEscape(escape_latex(sentence).replace(r" -\textgreater{} ", ARROW))


def window(r: pd.Series, frame: pd.DataFrame) -> str:
    """``draft-simple-n3 rewrite 256 c=4``: method, workload, max_tokens, then the load
    (``c=4`` closed loop; ``poisson 4 rps``, ``+ cap 8`` with a cap, open loop), with the
    engine and TP first where they vary across the comparison. Rows stored before open-loop
    windows were compared have no load: closed loop. A campaign-wide shift is ``all 30
    windows``."""
    if r.get("kind") == "shift":
        return f"all {int(r['n_windows'])} windows"
    load = r.get("load", "closed")
    if load == "closed":
        tail = f"c={r['concurrency']}"
    else:
        cap = r["concurrency"]
        tail = str(load) + (f" cap {int(cap)}" if pd.notna(cap) else "")
    parts = [
        f"{r['engine']}" if frame["engine"].nunique() > 1 else "",
        f"TP{r['tp']}" if frame["tp"].nunique() > 1 else "",
        str(r["method"]),
        str(r["workload"]),
        str(r["max_tokens"]),
        tail,
    ]
    return " ".join(p for p in parts if p)


def _missing(x: object) -> bool:
    return x is None or (isinstance(x, float) and not math.isfinite(x)) or bool(pd.isna(x))


def metric_label(r: pd.Series) -> str:
    """The change's metric as tables print it: the row's ``label`` (metric_catalog's, joined
    by :func:`report.compare.data.load`), else the metric's name."""
    found = r.get("label")
    return catalogue_label(
        {r["metric"]: found} if isinstance(found, str) else None, str(r["metric"])
    )


def pct(ratio: float) -> str:
    return "--" if _missing(ratio) else f"{(ratio - 1) * 100:+.0f}%"


def pts(difference: float) -> str:
    """A difference of two shares in percentage points: ``-12 pts``."""
    return "--" if _missing(difference) else f"{difference * 100:+.0f} pts"


def figure(r: pd.Series) -> str:
    """The change: ``-20%`` (a ratio), ``-12 pts`` (attainment's difference)."""
    return pts(r["difference"]) if r["kind"] == "difference" else pct(r["ratio"])


def interval(r: pd.Series) -> str:
    """``[-24%, -15%]``; ``--`` where there is none (a point estimate, an abstention)."""
    if r["kind"] == "point" or _missing(r["ci_low"]):
        return "--"
    fmt = pts if r["kind"] == "difference" else pct
    return f"[{fmt(r['ci_low'])}, {fmt(r['ci_high'])}]"


def change_text(r: pd.Series, frame: pd.DataFrame) -> str:
    """``<window> decode tok/s 19.0 -> 5.19 (-73%, 95% CI [-76%, -65%])``; a p90 says it is a
    point estimate."""
    what = "point estimate" if r["kind"] == "point" else f"95% CI {interval(r)}"
    return (
        f"{window(r, frame)} {metric_label(r)} "
        f"{fmt_sig(r['value_a'])} -> {fmt_sig(r['value_b'])} ({figure(r)}, {what})"
    )


def _count(n: int) -> str:
    return "none" if n == 0 else str(n)


def summary(changes: pd.DataFrame) -> str:
    """The verdict: slower, faster or mixed by decode speed (worse or better by the count of
    significant changes when decode speed changed nowhere: a TTFT regression under load is
    not "neither"), how many matched metrics are significantly worse and better, and the
    largest change in the verdict's direction (a decode-speed change where there is one)."""
    is_shift = changes["kind"] == "shift"
    shift, changes = changes[is_shift], changes[~is_shift]
    n = len(changes)
    if n == 0:
        return "The two campaigns have no matched window and prompt: nothing to compare."
    return _by_window(changes) + _shift_clause(shift)


def _shift_clause(shift: pd.DataFrame) -> str:
    """The campaign-wide shift of decode speed after the verdict: significant or not."""
    if shift.empty:
        return ""
    r = shift.iloc[0]
    if _missing(r["ci_low"]):
        return f" Campaign-wide, decode speed {pct(r['ratio'])} (no interval)."
    if not bool(r["significant"]):
        return (
            f" Campaign-wide, decode speed {pct(r['ratio'])} (95% CI {interval(r)}) over "
            f"{int(r['n_windows'])} windows: not significant."
        )
    side = "slower" if bool(r["worse"]) else "faster"
    return (
        f" Campaign-wide, B is significantly {side}: decode speed {pct(r['ratio'])} (95% CI "
        f"{interval(r)}, Holm p {_p(r['p_holm'])}) over {int(r['n_windows'])} windows."
    )


def _by_window(changes: pd.DataFrame) -> str:
    """The verdict from the window changes (the shift aside)."""
    n = len(changes)
    sig = changes[changes["significant"].astype(bool)]
    worse, better = sig[sig["worse"].astype(bool)], sig[~sig["worse"].astype(bool)]
    if sig.empty:
        return _no_change(changes)
    decode = sig[sig["metric"] == "decode_tps"]
    flags = decode["worse"].astype(bool)
    slower, faster = int(flags.sum()), int((~flags).sum())
    verdict = (
        "B is slower"
        if slower > faster
        else "B is faster"
        if faster > slower
        else "B is neither faster nor slower overall"
    )
    if decode.empty:
        verdict = (
            "B is worse"
            if len(worse) > len(better)
            else "B is better"
            if len(better) > len(worse)
            else "B is neither better nor worse overall"
        )
    pool = decode[decode["worse"].astype(bool) == (slower > faster)] if slower != faster else sig
    if pool.empty:
        pool = worse if len(worse) >= len(better) else better
    top = pool.sort_values("effect", ascending=False).iloc[0]
    what = "decode-speed change" if top["metric"] == "decode_tps" else "change"
    return (
        f"{verdict}: {_count(len(worse))} of {n} matched metrics are significantly "
        f"worse, {_count(len(better))} better (Holm-adjusted); the largest {what} is "
        f"{change_text(top, changes)}."
    )


def _no_change(changes: pd.DataFrame) -> str:
    """The verdict when nothing is significant: a change without an interval (one start per
    side) is not "no change", so those are counted, and a comparison of none says so."""
    tested = changes[changes["kind"] != "point"]
    blind = int(tested["ci_low"].isna().sum())
    if blind and blind == len(tested):
        return (
            f"No change can be told from a service start's spread: none of the {len(changes)} "
            "matched metrics has an interval (one start per side: a plan's repeat of 2 or "
            "more gives them one)."
        )
    return (
        f"No significant change: none of the {len(changes)} matched metrics moved beyond "
        "its 95% interval after Holm's adjustment"
        + (f"; {blind} have no interval and count neither way." if blind else ".")
    )


def _pattern(keys: list[str]) -> str:
    """Keys that differ in one dot-separated part only, as one pattern with the parts
    listed (``service.*.tp1.launch_command (autoregressive, ngram)``); else the keys."""
    split = [k.split(".") for k in keys]
    if len(keys) > 1 and len({len(s) for s in split}) == 1:
        varying = [i for i in range(len(split[0])) if len({s[i] for s in split}) > 1]
        if len(varying) == 1:
            i = varying[0]
            star = ".".join("*" if j == i else p for j, p in enumerate(split[0]))
            return f"{star} ({', '.join(s[i] for s in split)})"
    return ", ".join(keys)


def _value(value: object) -> str:
    """A value as the cause list shows it: one line, at most MAX_VALUE characters."""
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return "(absent)"
    text = " ".join(str(value).split())
    return text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 3] + "..."


def causes(environment: pd.DataFrame) -> list[tuple[str, str, str]]:
    """(host, keys, change) per distinct change of the environment, keys grouped; the
    change is the differing arguments of a command line, else the two values."""
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    for _, r in environment.iterrows():
        change = (
            r["change"]
            if isinstance(r["change"], str)
            else f"{_value(r['value_a'])} -> {_value(r['value_b'])}"
        )
        groups[(str(r["host"]), change)].append(str(r["key"]))
    return [(host, _pattern(keys), change) for (host, change), keys in groups.items()]


def cause_sentence(environment: pd.DataFrame) -> str:
    if environment.empty:
        return (
            "Every environment fact recorded for the two campaigns is the same (ports "
            "and start-up times aside): the record names no cause; suspect the host's "
            "load or run-to-run noise."
        )
    n = len(causes(environment))
    return (
        f"Likely cause: {len(environment)} recorded environment fact(s) differ, in "
        f"{n} distinct change(s):"
    )


def cause_items(environment: pd.DataFrame) -> list[NoEscape]:
    """One LaTeX line per distinct change: the change in bold, then where (host, keys)."""
    return [
        NoEscape(r"\textbf{" + tex(change) + "} on " + escape_latex(host) + ": " + texttt(keys))
        for host, keys, change in causes(environment)
    ]


def _p(x: object) -> str:
    return "--" if _missing(x) else f"{x:.2g}"


def changes_table(changes: pd.DataFrame) -> tuple[NoEscape, int]:
    """The first :data:`MAX_CHANGES` changes (rank order) and how many are left out: the
    raw interval and p-value beside Holm's adjusted p and the verdict it gives."""
    shown = changes.head(MAX_CHANGES).assign(
        window=lambda f: [window(r, changes) for _, r in f.iterrows()],
        label=lambda f: [metric_label(r) for _, r in f.iterrows()],
        change=lambda f: [figure(r) for _, r in f.iterrows()],
        interval=lambda f: [interval(r) for _, r in f.iterrows()],
        start=lambda f: [start_sd(r) for _, r in f.iterrows()],
    )
    cols = [
        Col("#", text("rank"), "r"),
        Col("window", text("window")),
        Col("metric", text("label")),
        Col("A", lambda r: fmt_sig(r["value_a"]), "r"),
        Col("B", lambda r: fmt_sig(r["value_b"]), "r"),
        Col("B/A", text("change"), "r"),
        Col("95% CI", text("interval"), "c"),
        Col("p", lambda r: _p(r["p_value"]), "r"),
        Col("p Holm", lambda r: _p(r["p_holm"]), "r"),
        Col("start sd", text("start"), "r"),
        Col("n", text("n_prompts"), "r"),
        Col("R", text("n_runs"), "r"),
        Col("verdict", text("verdict"), "c"),
    ]
    return fit_table(shown, cols), max(0, len(changes) - MAX_CHANGES)


def start_sd(r: pd.Series) -> str:
    """The pooled sd of one start's effect: ``5.0%`` (a ratio: 100 sd of ln), ``2.0 pts`` (a
    share); ``own`` where the paired rounds' own spread entered; ``--`` where none did."""
    if r.get("start_source") == "own rounds":
        return "own"
    if r.get("kind") == "shift" and not _missing(r.get("start_sd")):
        return f"{r['start_sd'] * 100:.1f}% R"
    if _missing(r.get("start_sd")) or r["kind"] == "point":
        return "--"
    return f"{r['start_sd'] * 100:.1f}" + (" pts" if r["kind"] == "difference" else "%")


def start_sentence(changes: pd.DataFrame) -> str:
    """How the service starts' variance entered the tested changes' intervals."""
    tested = changes[~changes["kind"].isin(["point", "shift"])] if not changes.empty else changes
    source = tested["start_source"] if not tested.empty else pd.Series(dtype=object)
    pooled, own = int((source == "pooled").sum()), int((source == "own rounds").sum())
    none = int(tested["ci_low"].isna().sum()) if not tested.empty else 0
    out = (
        f"Every interval carries how far another service start would land: for {pooled} "
        f"tested change(s) the start variance is pooled from every configuration's starts of "
        f"both campaigns at the same engine, TP and load (start sd), for {own} from the paired "
        f"rounds' own spread (where no configuration of the load gave start contrasts)."
    )
    if none:
        one = int((tested["ci_reason"].fillna("").str.startswith("one service start")).sum())
        out += (
            f" {none} change(s) have no interval, {_count(one)} of them because a side has one "
            "start only (a plan's repeat of 2 or more gives them one); they count neither way."
        )
    if not changes.empty and (changes["kind"] == "shift").any():
        out += (
            " The campaign-wide shift's interval comes from the spread of the paired rounds' "
            "means over every window (start sd column: the sd of one round's mean, R), on "
            "rounds - 1 degrees of freedom; it holds half of Holm's level until it is rejected."
        )
    return out


def prompt_lines(prompts: pd.DataFrame) -> list[str]:
    """One line per prompt not paired (or workload not checked)."""
    out = []
    for _, r in prompts.iterrows():
        if isinstance(r["prompt_id"], str):
            where = f"{r['workload']} {r['prompt_id']}"
        elif isinstance(r["method"], str):
            where = f"{r['workload']} {r['method']} TP{int(r['tp'])}"
        else:
            where = str(r["workload"])
        tail = "" if r["status"] == "not checked" else ": not paired"
        out.append(f"{where}: {r['status']} ({r['detail']}){tail}")
    return out


def speedups_table(speedups: pd.DataFrame) -> tuple[NoEscape, int]:
    """Each campaign's speedup over its own baseline, side by side (window order)."""
    frame = speedups.sort_values(["method", "workload", "max_tokens", "concurrency"])
    frame = frame.head(MAX_SPEEDUPS).assign(
        window=lambda f: [window(r, speedups) for _, r in f.iterrows()],
        ratio=lambda f: f["speedup_b"] / f["speedup_a"],
    )
    cols = [
        Col("window", text("window")),
        Col("speedup in A", num("speedup_a"), "r"),
        Col("speedup in B", num("speedup_b"), "r"),
        Col("B / A", num("ratio"), "r"),
    ]
    return fit_table(frame, cols), max(0, len(speedups) - MAX_SPEEDUPS)


def only(frame: pd.DataFrame, side: str) -> list[str]:
    """The windows measured in one campaign only (side 'A' or 'B')."""
    rows = frame[frame["side"] == side]
    every = frame if not frame.empty else rows
    return [window(r, every) for _, r in rows.iterrows()]
