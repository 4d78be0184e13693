"""The summary of findings: each workload's headline and the sentences around it.

Each sentence is raw LaTeX (``NoEscape``) assembled from escaped data values.
Claims follow the project rule: a speedup is a win only when the campaign's family-wise test
backs it (speedup.significant: Holm-adjusted p < 0.05). Each workload's headline
(:func:`headline`) is picked after looking at the data, so it quotes the pick's simultaneous
interval (speedup.sim_ci_low / sim_ci_high, Bonferroni over the campaign's claims), which keeps
its 95% whichever comparison is picked; its plain 95% interval would not (winner's curse).
A gain larger than the method's acceptance length is not a speedup speculation can give (a
verify step yields at most accept_length tokens and costs at least one plain step): such a
win is not a headline, and the validity notes name it as an artefact to investigate.
"""

from __future__ import annotations

import pandas as pd
from pylatex.utils import NoEscape

from report import sections
from report.data import ReportData
from report.latex import escape_latex as e
from report.latex import fmt_num


def _x(v: float) -> str:
    return f"{fmt_num(v)}$\\times$"


def _ci(row: pd.Series) -> str:
    if pd.isna(row.get("ci_low")):
        return "no interval: " + e(row.get("ci_reason") or "too few prompts")
    return f"95\\% CI {fmt_num(row['ci_low'])}--{fmt_num(row['ci_high'])}"


def _pick_ci(row: pd.Series) -> str:
    """The simultaneous interval of a row picked after looking (falls back to _ci on a file
    analyzed before simultaneous intervals)."""
    if pd.isna(row.get("sim_ci_low")):
        return _ci(row)
    return (
        f"simultaneous 95\\% CI over the campaign's {int(row['n_family'])} claims "
        f"{fmt_num(row['sim_ci_low'])}--{fmt_num(row['sim_ci_high'])}"
    )


def _where(row: pd.Series, multi_setup: bool) -> str:
    setup = f"{e(row['engine'])} TP{e(row['tp'])}, " if multi_setup else ""
    return f"{setup}max\\_tokens {e(row['max_tokens'])}, concurrency {e(row['concurrency'])}"


SETTING = ["engine", "tp", "workload", "max_tokens"]


def baseline_slows(sp: pd.DataFrame) -> pd.Series:
    """Per speedup row: the baseline's aggregate throughput there is below its throughput at
    the lowest concurrency of the same setting (engine, tp, workload, max_tokens), i.e. the
    baseline slows under load and the ratio partly measures that. False where not known."""
    if "baseline_throughput_tps" not in sp or sp.empty:
        return pd.Series(False, index=sp.index)
    lowest = sp.groupby(SETTING)["concurrency"].transform("min")
    at_lowest = (
        sp[sp["concurrency"] == lowest]
        .groupby(SETTING)["baseline_throughput_tps"]
        .first()
        .rename("lowest_tps")
    )
    ref = sp.join(at_lowest, on=SETTING)["lowest_tps"]
    return (sp["baseline_throughput_tps"] < ref).fillna(False).astype(bool)


def claims(sp: pd.DataFrame) -> pd.DataFrame:
    """The speedup rows that are claims: not the A/A control (a file analyzed before the
    control existed has no is_control column: every row is a claim)."""
    if "is_control" not in sp:
        return sp
    return sp[~sp["is_control"].fillna(False).astype(bool)]


def implausible(sp: pd.DataFrame) -> pd.Series:
    """Per row: a significant gain whose point estimate exceeds the method's token-weighted
    acceptance length (unknown acceptance: False)."""
    if "accept_length_tw" not in sp:
        return pd.Series(False, index=sp.index)
    return (
        (sp["significant"].fillna(False).astype(bool) & (sp["speedup"] > sp["accept_length_tw"]))
        .fillna(False)
        .astype(bool)
    )


def _wins(sub: pd.DataFrame) -> pd.DataFrame:
    return sub[sub["significant"].fillna(False).astype(bool) & (sub["speedup"] > 1)]


def headline(sub: pd.DataFrame) -> tuple[pd.Series | None, pd.Series | None]:
    """The headline win of one workload's speedup rows and the win it set aside, if any.

    Rule: among significant speedups (Holm) no larger than their acceptance length allows,
    the largest simultaneous lower bound (the most certain gain, not the largest point
    estimate: a wide interval can carry a large estimate); ties go to the lower concurrency.
    Load points where the baseline slows under load (:func:`baseline_slows`) are passed over
    while another win exists; the passed-over win with a larger lower bound is returned
    second so the text can name it.
    """
    wins = _wins(sub)
    wins = wins[~implausible(wins)]
    if wins.empty:
        return None, None
    low = "sim_ci_low" if "sim_ci_low" in wins else "ci_low"
    wins = wins.sort_values([low, "concurrency"], ascending=[False, True], kind="stable")
    slows = baseline_slows(sub).reindex(wins.index)
    clean = wins[~slows]
    best = clean.iloc[0] if not clean.empty else wins.iloc[0]
    aside = wins[slows & (wins[low] > best[low])]
    return best, (aside.iloc[0] if not aside.empty else None)


def _set_aside(row: pd.Series, sub: pd.DataFrame) -> str:
    same = sub[(sub[SETTING] == row[SETTING]).all(axis=1)]
    low = same.loc[same["concurrency"].idxmin()]
    return (
        f" {e(row['method'])}'s {_x(row['speedup'])} at concurrency {e(row['concurrency'])} "
        f"(max\\_tokens {e(row['max_tokens'])}, {_pick_ci(row)}) has a larger lower bound "
        f"but is set aside: there the baseline's throughput "
        f"({fmt_num(row['baseline_throughput_tps'], '.0f')} tok/s) is below its "
        f"{fmt_num(low['baseline_throughput_tps'], '.0f')} tok/s at concurrency "
        f"{e(low['concurrency'])}, so the baseline slows under load."
    )


def _workload_sentence(workload: str, sub: pd.DataFrame, multi: bool) -> str:
    best, aside = headline(sub)
    if best is not None:
        n_wins = len(_wins(sub))
        return (
            f"On \\emph{{{e(workload)}}} the most certain gain is "
            f"\\textbf{{{e(best['method'])}}} at {_x(best['speedup'])} ({_pick_ci(best)}; "
            f"{_where(best, multi)}; {n_wins} of {len(sub)} comparisons significantly "
            f"faster after Holm's adjustment)."
        ) + (_set_aside(aside, sub) if aside is not None else "")
    top = sub.loc[sub["speedup"].idxmax()]
    return (
        f"On \\emph{{{e(workload)}}} \\textbf{{no significant speedup}}: the highest point "
        f"estimate is {e(top['method'])} at {_x(top['speedup'])} ({_ci(top)}; "
        f"{_where(top, multi)}), not backed by the campaign's family-wise test."
    )


def noise_floor(sp: pd.DataFrame) -> str:
    """The A/A control's sentence: how far the baseline's second start landed from the first
    across windows, and whether that variance entered the intervals; without a control, that
    service starts are not in them."""
    control = sp[sp["is_control"].fillna(False).astype(bool)] if "is_control" in sp else sp[:0]
    if control.empty:
        return (
            "No A/A control ran (plan option aa\\_control): each method ran on one "
            "service start, and the intervals cover prompts (and runs), not the spread "
            "between service starts, which an A/A campaign found to reach 0.80--1.04x."
        )
    lo, hi = control["speedup"].min(), control["speedup"].max()
    n_sig = int(control["significant_raw"].fillna(False).astype(bool).sum())
    var = sp["service_var"].max() if "service_var" in sp else 0.0
    entered = (
        f"its variance (sd {fmt_num(var**0.5 * 100, '.1f')}\\% in ln speed between two "
        "starts) is added to every one-run interval"
        if var and var > 0
        else "it showed no spread beyond prompt noise, so no variance was added"
    )
    return (
        f"Noise floor: the baseline against its own second start (A/A control) ranged "
        f"{_x(lo)} to {_x(hi)} over {len(control)} window(s), {n_sig} with an unadjusted "
        f"interval excluding 1; {entered}."
    )


def _artefacts(sp: pd.DataFrame) -> list[str]:
    """Significant gains larger than the acceptance length allows."""
    odd = sp[implausible(sp)]
    if odd.empty:
        return []
    top = odd.loc[(odd["speedup"] / odd["accept_length_tw"]).idxmax()]
    return [
        (
            f"{len(odd)} significant gain(s) exceed what their acceptance length allows and "
            f"are not reported as findings, e.g. {e(top['method'])} on "
            f"{e(top['workload'])} at {_x(top['speedup'])} with "
            f"{fmt_num(top['accept_length_tw'])} tokens per verify step: a verify step "
            "cannot yield more tokens than it accepts, so the baseline's window was slowed "
            "by something else (a service start, a neighbour)."
        )
    ]


def _slowdowns(sp: pd.DataFrame) -> list[str]:
    slow = sp[sp["significant"].fillna(False).astype(bool) & (sp["speedup"] < 1)]
    if slow.empty:
        return []
    worst = slow.loc[slow["speedup"].idxmin()]
    return [
        (
            f"{len(slow)} comparison(s) are significantly \\emph{{slower}} than the baseline; "
            f"the worst is {e(worst['method'])} on {e(worst['workload'])} at "
            f"{_x(worst['speedup'])} ({_ci(worst)})."
        )
    ]


def _acceptance(cs: pd.DataFrame) -> list[str]:
    acc = cs.dropna(subset=["accept_length_tw"])
    if acc.empty:
        return ["No acceptance-length data was recorded."]
    means = acc.groupby("method")["accept_length_tw"].mean().sort_values(ascending=False)
    parts = ", ".join(f"{e(m)} {fmt_num(v)}" for m, v in means.items())
    return [f"Mean token-weighted acceptance length (tokens per verify step): {parts}."]


def _throughput(sp: pd.DataFrame) -> list[str]:
    if "throughput_speedup" not in sp or sp["throughput_speedup"].isna().all():
        return []
    top_c = sp["concurrency"].max()
    at = sp[sp["concurrency"] == top_c].dropna(subset=["throughput_speedup"])
    best = at.loc[at["throughput_speedup"].idxmax()]
    return [
        (
            f"At the highest concurrency ({e(top_c)}) the best aggregate throughput ratio is "
            f"{e(best['method'])} on {e(best['workload'])} at "
            f"{_x(best['throughput_speedup'])} (a single window, no CI)."
        )
    ]


MAX_LISTED = 6
OTHER_STATUSES = (
    ("always pays", "always pay{s} up to the highest concurrency measured"),
    (
        "undetermined",
        "pay{s} at the lowest concurrency and then cannot be told "
        "from the baseline (too little data to say where it stops)",
    ),
    ("never pays", "never pay{s}"),
    ("pays only above lowest", "pay{s} only above the lowest concurrency"),
)


def _setting(row: pd.Series, swept: pd.DataFrame) -> str:
    """`method on workload` plus max_tokens, engine and TP where those vary."""
    out = f"{e(row['method'])} on {e(row['workload'])}"
    if swept["max_tokens"].nunique() > 1:
        out += f" max\\_tokens {e(row['max_tokens'])}"
    if len(swept[["engine", "tp"]].drop_duplicates()) > 1:
        out += f" ({e(row['engine'])} TP{e(row['tp'])})"
    return out


def _crossing(row: pd.Series, swept: pd.DataFrame) -> str:
    return f"{_setting(row, swept)} at concurrency {int(row['crossover_concurrency'])}"


def _crossover(cx: pd.DataFrame | None) -> list[str]:
    """One sentence on where speculation stops paying (crossover view): said only where a
    level is significantly slower than the baseline."""
    if cx is None:
        return []
    swept = cx[cx["status"] != "single level"]
    if swept.empty:
        return [
            "No setting was measured at two or more concurrency levels, so the crossover "
            "(where speculation stops paying) cannot be located."
        ]
    crossing = swept[swept["status"] == "stops paying"]
    listed = [_crossing(r, swept) for _, r in crossing.head(MAX_LISTED).iterrows()]
    if len(crossing) > MAX_LISTED:
        listed.append(f"{len(crossing) - MAX_LISTED} more")
    head = (
        f"Speculation stops paying (significantly slower than the baseline after being "
        f"significantly faster at lower concurrency) in {len(crossing)} of {len(swept)} "
        f"swept setting(s)" + (f": {', '.join(listed)}" if listed else "")
    )
    others = [
        f"{n} {verb.format(s='s' if n == 1 else '')}"
        for status, verb in OTHER_STATUSES
        if (n := int((swept["status"] == status).sum()))
    ]
    return [head + (f"; of the others, {', '.join(others)}." if others else ".")]


HEADLINE_RULE = (
    "Each workload's headline is its most certain gain: the largest lower "
    "bound of the simultaneous 95\\% interval among speedups significant after "
    "Holm's adjustment and no larger than their acceptance length (ties: the "
    "lower concurrency), passing over load points where the baseline's own "
    "throughput falls below its throughput at the lowest concurrency."
)


def several_runs(sp: pd.DataFrame) -> bool:
    """Some speedup rests on more than one run of the campaign (speedup.n_runs > 1)."""
    return not sp.empty and "n_runs" in sp and bool((sp["n_runs"].fillna(1) > 1).any())


def runs_sentence(sp: pd.DataFrame) -> str:
    """How much of the speedup intervals' spread is between runs, when the campaign has
    several (speedup.n_runs > 1): the median between_run_share over those comparisons and the
    comparison where it is largest, with its per-run speedups. Empty with one run (or a file
    analyzed before runs existed)."""
    if not several_runs(sp):
        return ""
    multi = sp[(sp["n_runs"] > 1) & sp["between_run_share"].notna()]
    lo, hi = int(sp["n_runs"].fillna(1).min()), int(sp["n_runs"].max())
    runs = f"{hi} runs" if lo == hi else f"runs ({lo} to {hi} per comparison)"
    out = (
        f"Intervals cross the campaign's {runs} with its prompts (a two-way variance: runs "
        "pooled where they differ by no more than noise)."
    )
    if multi.empty:
        return out
    top = multi.loc[multi["between_run_share"].idxmax()]
    several = len(sp[["engine", "tp"]].drop_duplicates()) > 1
    share = 100 * multi["between_run_share"]
    return (
        out + f" Between runs: a median {fmt_num(share.median(), '.0f')}\\% of one run's "
        f"speedup variance over {len(multi)} comparison(s), the most "
        f"{fmt_num(100 * top['between_run_share'], '.0f')}\\% (per-run speedups "
        f"{_x(top['run_speedup_min'])} to {_x(top['run_speedup_max'])}) for "
        f"{e(top['method'])} on \\emph{{{e(top['workload'])}}}, {_where(top, several)}; "
        "0\\% means the runs agree up to prompt noise (with 2 or 3 runs a rough figure)."
    )


def summary(data: ReportData) -> list[NoEscape]:
    """The summary-of-findings bullet points."""
    everything, n_measured = data.speedup, int(data.campaign["n_measured"])
    sp = claims(everything)
    methods = ", ".join(e(m) for m in data.palette) or "none"
    lines = [
        (
            f"{n_measured} measured requests, methods: {methods}; baseline: "
            f"\\emph{{{e(data.baseline)}}}. Speedup is the geometric mean over prompts of "
            "the per-prompt ratio of decode tok/s, with a t interval on the log ratios "
            "(none below the prompts it needs); significance is Holm-adjusted over the "
            "campaign's comparisons. " + HEADLINE_RULE
        )
    ]
    lines += [noise_floor(everything)]
    lines += [runs] if (runs := runs_sentence(sp)) else []
    if sp.empty:
        lines.append(
            "No speedup could be computed: the campaign has no baseline windows "
            "matching the other methods."
        )
    else:
        multi = len(sp[["engine", "tp"]].drop_duplicates()) > 1
        for workload, sub in sp.groupby("workload", sort=True):
            lines.append(_workload_sentence(str(workload), sub, multi))
        lines += _artefacts(sp)
        lines += _slowdowns(sp) + _throughput(sp) + _crossover(data.crossover)
    lines += _acceptance(data.config_summary) + sections.energy_finding(data.energy_ratio)
    return [NoEscape(s) for s in lines]
