"""Page 1's sentences: the method (:func:`method`: what a speedup is, the headline rule, the
design) and the summary of findings (:func:`summary`: each workload's headline and the
sentences around it).

Each sentence is marked Unicode text (report.text) built from data values.
Claims follow the project rule: a speedup is a win only when the campaign's family-wise test
backs it (speedup.significant: Holm-adjusted p < 0.05). Each workload's headline
(:func:`headline`) is picked after looking at the data, so it quotes the pick's simultaneous
interval (speedup.sim_ci_low / sim_ci_high, Bonferroni over the campaign's claims), which keeps
its 95% whichever comparison is picked; its plain 95% interval would not (winner's curse).
A gain larger than speculation can give (report.findings.physics: a verify step yields at
most its acceptance length and costs at least one plain step; the bound is the geometric mean
of per-prompt acceptance against the geometric-mean speedup, the window counters where the
engine counts nothing per request, 1 for the baseline under another name and for a target
drafting for itself) is not a headline: the summary names it as an artefact to investigate. A
gain whose acceptance is not known at all heads its workload only where no checked gain does,
and then says that it was not checked. Every claim belongs to the campaign's one Holm family
(report.findings.design says which and its m).
"""

from __future__ import annotations

import pandas as pd

from specsweep.report.data import ReportData
from specsweep.report.findings import design, energy, physics
from specsweep.report.text import data as d
from specsweep.report.text import em, num, strong, times


def _ci(row: pd.Series) -> str:
    if pd.isna(row.get("ci_low")):
        why = row.get("ci_reason")
        return "no interval: " + d(why if isinstance(why, str) and why else "too few prompts")
    return f"95% CI {num(row['ci_low'])}\u2013{num(row['ci_high'])}"


def _pick_ci(row: pd.Series) -> str:
    """The simultaneous interval of a row picked after looking (falls back to _ci on a file
    analyzed before simultaneous intervals)."""
    if pd.isna(row.get("sim_ci_low")):
        return _ci(row)
    return (
        f"simultaneous 95% CI over the campaign’s {int(row['n_family'])} claims "
        f"{num(row['sim_ci_low'])}\u2013{num(row['sim_ci_high'])}"
    )


def _where(row: pd.Series, multi_setup: bool) -> str:
    setup = f"{d(row['engine'])} TP{d(row['tp'])}, " if multi_setup else ""
    return f"{setup}max_tokens {d(row['max_tokens'])}, concurrency {d(row['concurrency'])}"


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


def _wins(sub: pd.DataFrame) -> pd.DataFrame:
    return sub[sub["significant"].fillna(False).astype(bool) & (sub["speedup"] > 1)]


def headline(sub: pd.DataFrame) -> tuple[pd.Series | None, pd.Series | None]:
    """The headline win of one workload's speedup rows and the win it set aside, if any.

    Rule: among significant speedups (Holm) no larger than speculation can give
    (:func:`report.findings.physics.implausible`; rows without physics columns count as
    unchecked), the checked ones first: an unchecked gain heads only where no checked gain
    exists. Among those, the largest simultaneous lower bound (the most certain gain, not the
    largest point estimate: a wide interval can carry a large estimate); ties go to the lower
    concurrency. Load points where the baseline slows under load (:func:`baseline_slows`) are
    passed over while another win exists; the passed-over win with a larger lower bound is
    returned second so the text can name it.
    """
    wins = _wins(sub)
    wins = wins[~physics.implausible(wins)]
    checked = wins[~physics.unchecked(wins)]
    wins = checked if not checked.empty else wins
    if wins.empty:
        return None, None
    low = "sim_ci_low" if "sim_ci_low" in wins else "ci_low"
    wins = wins.sort_values([low, "concurrency"], ascending=[False, True], kind="stable")
    slows = baseline_slows(sub).reindex(wins.index)
    clean = wins[~slows]
    best = clean.iloc[0] if not clean.empty else wins.iloc[0]
    aside = wins[slows & (wins[low] > best[low])]
    return best, (aside.iloc[0] if not aside.empty else None)


UNCHECKED = (
    " Its acceptance was not recorded (no per-request verify counts, no window counters), so it "
    "is not checked against acceptance: whether speculation can give this much is not known."
)


def _set_aside(row: pd.Series, sub: pd.DataFrame) -> str:
    same = sub[(sub[SETTING] == row[SETTING]).all(axis=1)]
    low = same.loc[same["concurrency"].idxmin()]
    return (
        f" {d(row['method'])}’s {times(row['speedup'])} at concurrency {d(row['concurrency'])} "
        f"(max_tokens {d(row['max_tokens'])}, {_pick_ci(row)}) has a larger lower bound "
        f"but is set aside: there the baseline’s throughput "
        f"({num(row['baseline_throughput_tps'], '.0f')} tok/s) is below its "
        f"{num(low['baseline_throughput_tps'], '.0f')} tok/s at concurrency "
        f"{d(low['concurrency'])}, so the baseline slows under load."
    )


def _workload_sentence(workload: str, sub: pd.DataFrame, multi: bool) -> str:
    best, aside = headline(sub)
    if best is not None:
        n_wins = len(_wins(sub))
        return (
            (
                f"On {em(workload)} the most certain gain is "
                f"{strong(best['method'])} at {times(best['speedup'])} ({_pick_ci(best)}; "
                f"{_where(best, multi)}; {n_wins} of {len(sub)} comparisons significantly "
                f"faster after Holm’s adjustment)."
            )
            + (UNCHECKED if physics.unchecked(best.to_frame().T).iloc[0] else "")
            + (_set_aside(aside, sub) if aside is not None else "")
        )
    top = sub.loc[sub["speedup"].idxmax()]
    return (
        f"On {em(workload)} {strong('no significant speedup')}: the highest point "
        f"estimate is {d(top['method'])} at {times(top['speedup'])} ({_ci(top)}; "
        f"{_where(top, multi)}), not backed by the campaign’s family-wise test."
    )


def _why(r: pd.Series) -> str:
    """Why one gain is not physics, by the basis of its bound (report.findings.physics)."""
    who, x = f"{d(r['method'])} on {d(r['workload'])} at {times(r['speedup'])}", r["speedup"]
    if r["physics_basis"] == physics.SAME_LAUNCH:
        return f"{who} was launched exactly as the baseline (the same flags): it can give no gain"
    if r["physics_basis"] == physics.SELF_DRAFT:
        cost = (
            f"; its {times(x)} with {num(r['acceptance'])} tokens a step implies a step cost "
            f"of {num(r['acceptance'] / x)} plain steps"
            if pd.notna(r.get("acceptance"))
            else ""
        )
        return (
            f"{who} drafts for itself (its draft model is the target): it accepts K + 1 "
            "tokens a step by construction, so its step cost binds, and a step runs K draft "
            "passes and a verify pass of the target, at least K + 1 plain steps: it cannot beat "
            "the baseline" + cost
        )
    source = (
        "the geometric mean of its per-prompt acceptance on the same prompts"
        if r["physics_basis"] == physics.PER_PROMPT
        else f"the most its {d(r['physics_basis'])} (pooled acceptance "
        f"{num(r['acceptance'])}) allow as a geometric mean over prompts"
    )
    return f"{who} exceeds {num(r['physics_bound'])} tokens per verify step, {source}"


def _artefacts(sp: pd.DataFrame) -> list[str]:
    """Significant gains larger than speculation can give (report.findings.physics)."""
    odd = sp[physics.implausible(sp)]
    if odd.empty:
        return []
    ratio = odd["speedup"] / odd["physics_bound"]
    tops = odd.loc[ratio.groupby(odd["physics_basis"], sort=False).idxmax()]  # one per basis
    return [
        (
            f"{len(odd)} significant gain(s) exceed what speculation can give and are not "
            f"reported as findings: {'; '.join(_why(r) for _, r in tops.iterrows())}. A "
            "verify step cannot yield more tokens than it accepts, so the baseline’s window "
            "was slowed by something else (a service start, a neighbour)."
        )
    ]


def _unchecked(sp: pd.DataFrame) -> list[str]:
    """Significant gains no acceptance figure can check (physics rule 5)."""
    odd = sp[physics.unchecked(sp)]
    if odd.empty:
        return []
    top = odd.loc[odd["speedup"].idxmax()]
    return [
        (
            f"{len(odd)} significant gain(s) could not be checked against acceptance (none was "
            f"recorded for them), e.g. {d(top['method'])} on {d(top['workload'])} at "
            f"{times(top['speedup'])}: none heads a workload where a checked gain exists, and one "
            "that heads says so."
        )
    ]


def _slowdowns(sp: pd.DataFrame) -> list[str]:
    slow = sp[sp["significant"].fillna(False).astype(bool) & (sp["speedup"] < 1)]
    if slow.empty:
        return []
    worst = slow.loc[slow["speedup"].idxmin()]
    return [
        (
            f"{len(slow)} comparison(s) are significantly {em('slower')} than the baseline; "
            f"the worst is {d(worst['method'])} on {d(worst['workload'])} at "
            f"{times(worst['speedup'])} ({_ci(worst)})."
        )
    ]


def _acceptance(cs: pd.DataFrame, prediction: pd.DataFrame) -> list[str]:
    """Each method's mean acceptance length: per request (config_summary), else from the
    servers' window counters (speedup_prediction: vLLM without per-request counts)."""
    acc = cs.dropna(subset=["accept_length_tw"]) if "accept_length_tw" in cs else cs[:0]
    lead = "Mean token-weighted acceptance length (tokens per verify step)"
    if acc.empty and "acceptance_source" in prediction:
        acc = prediction[prediction["acceptance_source"] == "window counters"]
        acc = acc.rename(columns={"accept_length": "accept_length_tw"})
        lead = "Mean acceptance length from the servers’ window counters (tokens per drafting step)"
    if acc.empty:
        return ["No acceptance-length data was recorded."]
    means = acc.groupby("method")["accept_length_tw"].mean().sort_values(ascending=False)
    parts = ", ".join(f"{d(m)} {num(v)}" for m, v in means.items())
    return [f"{lead}: {parts}."]


MAX_LISTED = 6
# crossover statuses besides 'stops paying' (crossover.sql), as the summary words them;
# 'undetermined' has two readings: it paid at the lowest level (paid_up_to set) or never did
OTHER_STATUSES = (
    ("always pays", "always pay{s} up to the highest concurrency measured"),
    (
        "undetermined",
        "pay{s} at the lowest concurrency and then cannot be told "
        "from the baseline (too little data to say where it stops)",
    ),
    (
        "undetermined, never faster",
        "{is_} significantly faster at no level and significantly slower at not every level: "
        "whether {it} pay{s} is undetermined",
    ),
    ("never pays", "never pay{s} (significantly slower at every level)"),
    ("pays only above lowest", "pay{s} only above the lowest concurrency"),
)


ONE, MANY = {"s": "s", "is_": "is", "it": "it"}, {"s": "", "is_": "are", "it": "they"}


def _kind(row: pd.Series) -> str:
    """The crossover status, 'undetermined' split by whether the lowest level paid."""
    if row["status"] == "undetermined" and pd.isna(row.get("paid_up_to")):
        return "undetermined, never faster"
    return str(row["status"])


def _setting(row: pd.Series, swept: pd.DataFrame) -> str:
    """`method on workload` plus max_tokens, engine and TP where those vary."""
    out = f"{d(row['method'])} on {d(row['workload'])}"
    if swept["max_tokens"].nunique() > 1:
        out += f" max_tokens {d(row['max_tokens'])}"
    if len(swept[["engine", "tp"]].drop_duplicates()) > 1:
        out += f" ({d(row['engine'])} TP{d(row['tp'])})"
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
    kinds = swept.apply(_kind, axis=1)
    others = [
        f"{n} {verb.format(**(ONE if n == 1 else MANY))}"
        for status, verb in OTHER_STATUSES
        if (n := int((kinds == status).sum()))
    ]
    return [head + (f"; of the others, {', '.join(others)}." if others else ".")]


HEADLINE_RULE = (
    "Each workload’s headline is its most certain gain: the largest lower "
    "bound of the simultaneous 95% interval among speedups significant after "
    "Holm’s adjustment and no larger than speculation can give (a verify step yields no "
    "more tokens than it accepts: the geometric-mean speedup against the geometric mean "
    "of per-prompt acceptance, or what the window counters allow; 1 for the baseline under "
    "another name and for a target drafting for itself), gains checked against acceptance "
    "before unchecked ones (ties: the lower concurrency), passing over load points where "
    "the baseline’s own throughput falls below its throughput at the lowest concurrency."
)


def method(data: ReportData) -> list[str]:
    """How page 1's claims are to be read, before the findings: what was measured and what a
    speedup is with the headline rule, the family the claims are adjusted in, the noise floor
    of a service start and the rounds (report.findings.design)."""
    n_measured = int(data.campaign["n_measured"])
    methods = ", ".join(d(m) for m in data.palette) or "none"
    lines = [
        (
            f"{n_measured} measured requests, methods: {methods}; baseline: "
            f"{em(data.baseline)}. Speedup is the geometric mean over prompts of "
            "the per-prompt ratio of decode tok/s, with a t interval on the log ratios that "
            "carries the spread between service starts (none below the prompts or the starts "
            "it needs). " + HEADLINE_RULE
        ),
        design.family_sentence(data),
        design.noise_floor(data),
    ]
    return lines + ([runs] if (runs := design.runs_sentence(claims(data.speedup))) else [])


def summary(data: ReportData) -> list[str]:
    """The summary of findings, after the method (:func:`method`): each workload's headline,
    the gains not reported (beyond physics, unchecked), slowdowns, crossover, acceptance and
    energy."""
    sp = physics.bounds(data, claims(data.speedup))
    lines = []
    if sp.empty:
        lines.append(
            "No speedup could be computed: the campaign has no baseline windows "
            "matching the other methods."
        )
    else:
        multi = len(sp[["engine", "tp"]].drop_duplicates()) > 1
        for workload, sub in sp.groupby("workload", sort=True):
            lines.append(_workload_sentence(str(workload), sub, multi))
        lines += _artefacts(sp) + _unchecked(sp)
        lines += _slowdowns(sp) + _crossover(data.crossover)
    lines += _acceptance(data.config_summary, data.speedup_prediction)
    return lines + energy.energy_finding(data.energy_ratio)
