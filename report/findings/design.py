"""What the experiment's design lets page 1 say: the family its claims are adjusted in, the
noise floor of a service start, and the rounds behind every interval (marked Unicode
sentences, report.text).

The design (issue 36): each configuration is started once per round, the rounds in a
counterbalanced order; a start is a random effect shared by all of its windows. analyze
estimates the start variance of every stratum (engine, tp, load level) from all of its
configurations' starts together (table start_variance: start_sd, df, start_spread, the drift
per start with its interval) and puts it, and the drift correction, into every interval.
With one start per configuration nothing was sampled: no interval, no "significant"
(speedup.ci_reason says why). Decode speedups, energy ratios and open-loop TPOT ratios are
adjusted together, one Holm family per campaign (speedup.n_family is its m); the prompt
categories are a breakdown with a family of their own.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from specsweep.report.data import ReportData
from specsweep.report.text import code, em, num, times
from specsweep.report.text import data as d

MAX_STRATA = 4  # strata listed one by one in the threats; more are summarised


def _tested(frame: pd.DataFrame) -> int:
    """The frame's claims with a test: not the A/A control, a p-value (a frame without one:
    a significance verdict)."""
    tested = "p_value" if "p_value" in frame else "significant"
    if frame.empty or tested not in frame:
        return 0
    claims = ~frame["is_control"].fillna(False).astype(bool) if "is_control" in frame else True
    return int((claims & frame[tested].notna()).sum())


def _m(frame: pd.DataFrame) -> int | None:
    if frame.empty or "n_family" not in frame or frame["n_family"].isna().all():
        return None
    return int(frame["n_family"].max())


def family_sentence(data: ReportData) -> str:
    """Which family page 1's claims belong to and its m (module docstring)."""
    parts = [
        (_tested(data.speedup), "decode speedup(s)", _m(data.speedup)),
        (_tested(data.energy_ratio), "energy ratio(s)", _m(data.energy_ratio)),
        (_tested(data.rate_speedup), "open-loop TPOT ratio(s)", _m(data.rate_speedup)),
    ]
    total = sum(n for n, _, _ in parts)
    kinds = ", ".join(f"{n} {what}" for n, what, _ in parts)
    breakdown = (
        " Prompt-category cells, where the report shows them, are a breakdown with a Holm "
        "family of their own, not claims of this page."
    )
    if total == 0:
        return (
            "No claim of this campaign has an interval, so none is tested and none is called "
            "significant (the noise floor below says why)." + breakdown
        )
    ms = {m for n, _, m in parts if n and m is not None}
    if len(ms) == 1:
        m = ms.pop()
        return (
            f"The claims on this page are one family: Holm’s adjustment runs over the "
            f"campaign’s m = {m} tested claims together ({kinds}), so {em('significant')} "
            f"anywhere on this page means a Holm-adjusted p below 0.05 among those {m}, "
            f"and a result picked after looking quotes the simultaneous interval over "
            f"them." + breakdown
        )
    if not ms:
        return (
            f"Significance is Holm-adjusted over the campaign’s comparisons ({kinds}); the file "
            "does not record the family’s size (analysed before it was kept)." + breakdown
        )
    sizes = "; ".join(f"{what} over {m}" for n, what, m in parts if n and m is not None)
    return (
        f"The claims on this page were adjusted in separate Holm families ({sizes}), "
        f"as analyzed before one family per campaign existed: run {code('specsweep analyze')} "
        "again to adjust them together." + breakdown
    )


def _strata(sv: pd.DataFrame, metric: str = "decode_tps") -> pd.DataFrame:
    """start_variance rows of one metric under closed-loop load (empty without the table)."""
    if sv.empty or not {"metric", "load"} <= set(sv.columns):
        return sv.iloc[0:0]
    return sv[(sv["metric"] == metric) & (sv["load"] == "concurrency")]


def _pct(v: float) -> str:
    return f"{num(100 * v, '.1f')}%"


def _range(values: pd.Series, show: Callable[[float], str]) -> str:
    """``show(lo) to show(hi)``, or one value when they are equal."""
    lo, hi = values.min(), values.max()
    return show(lo) if lo == hi else f"{show(lo)} to {show(hi)}"


def _control(sp: pd.DataFrame) -> str:
    control = sp[sp["is_control"].fillna(False).astype(bool)] if "is_control" in sp else sp[:0]
    if control.empty:
        return ""
    raw = control["significant_raw"] if "significant_raw" in control else control["significant"]
    n_sig = int(raw.fillna(False).astype(bool).sum())
    return (
        f" The A/A control (the baseline started again, plan option {code('aa_control')}) is "
        f"a check, not a claim: it ranged {times(control['speedup'].min())} to "
        f"{times(control['speedup'].max())} over {len(control)} window(s), {n_sig} with an "
        "unadjusted interval excluding 1."
    )


def noise_floor(data: ReportData) -> str:
    """The noise floor of a service start (start_variance, decode speed, closed loop): how far
    two starts of one service land apart, the sd behind it, and which strata have none."""
    rows = _strata(data.start_variance)
    control = _control(data.speedup)
    if rows.empty:
        return (
            "This file was analysed before service starts were modelled: its intervals cover "
            "prompts (and runs), not the spread between service starts; run "
            + code("specsweep analyze")
            + " again."
            + control
        )
    usable = rows[rows["start_sd"].notna()]
    out = []
    if not usable.empty:
        spread = usable[~_pooled(usable)]
        sd = (
            f"the sd of one start’s effect on ln decode speed is "
            f"{_range(spread['start_sd'], _pct)}, pooled over every configuration’s starts "
            f"({_range(spread['df'], lambda v: num(v, '.0f'))} degrees of freedom)"
            if not spread.empty
            else "the starts spread no more than the prompts’ noise"
        )
        flat = len(usable) - len(spread)
        out.append(
            "Noise floor (the grey bands of the speedup charts): two starts of one service land "
            f"within [1/x, x] of each other 95% of the time, x = "
            f"{_range(usable['start_spread'], num)} over {len(usable)} stratum(s) "
            f"(engine, TP, concurrency); {sd}"
            + (
                f" (in {flat} stratum(s) no more than the prompts’ noise: sd 0)"
                if flat and not spread.empty
                else ""
            )
            + "; every interval carries it and the drift along the start order."
        )
    missing = rows[rows["start_sd"].isna()]
    if not missing.empty:
        why = missing["reason"].fillna("no estimate").value_counts()
        said = "; ".join(f"{d(reason)} ({n})" for reason, n in why.items())
        out.append(
            f"In {len(missing)} of {len(rows)} stratum(s) no start variance was estimated "
            f"({said}): their comparisons have no interval and none is called significant."
        )
    return " ".join(out) + control


def _pooled(rows: pd.DataFrame) -> pd.Series:
    """start_variance rows whose starts showed no more spread than the cells' noise."""
    if "pooled" not in rows:
        return pd.Series(False, index=rows.index)
    return rows["pooled"].astype("boolean").fillna(False).astype(bool)


def several_runs(sp: pd.DataFrame) -> bool:
    """Some speedup rests on more than one round of service starts (speedup.n_runs > 1)."""
    return not sp.empty and "n_runs" in sp and bool((sp["n_runs"].fillna(1) > 1).any())


def runs_sentence(sp: pd.DataFrame) -> str:
    """How far one round's speedup strays from another's, when the campaign has several
    (speedup.n_runs > 1): the median between_run_share over those comparisons and the
    comparison where it is largest, with its per-round speedups. Empty with one round (or a
    file analysed before runs existed)."""
    if not several_runs(sp):
        return ""
    multi = sp[(sp["n_runs"] > 1) & sp["between_run_share"].notna()]
    lo, hi = int(sp["n_runs"].fillna(1).min()), int(sp["n_runs"].max())
    runs = f"{hi} rounds" if lo == hi else f"rounds ({lo} to {hi} per comparison)"
    out = (
        f"Each comparison rests on the campaign’s {runs} of service starts crossed with its "
        "prompts; its interval adds the stratum’s start variance to the prompts’ spread."
    )
    if multi.empty:
        return out
    top = multi.loc[multi["between_run_share"].idxmax()]
    several = len(sp[["engine", "tp"]].drop_duplicates()) > 1
    share = 100 * multi["between_run_share"]
    setup = f"{d(top['engine'])} TP{d(top['tp'])}, " if several else ""
    return (
        out + f" Between rounds: a median {num(share.median(), '.0f')}% of one round’s "
        f"speedup variance over {len(multi)} comparison(s), the most "
        f"{num(100 * top['between_run_share'], '.0f')}% (per-round speedups "
        f"{times(top['run_speedup_min'])} to {times(top['run_speedup_max'])}) for "
        f"{d(top['method'])} on {em(top['workload'])}, {setup}max_tokens "
        f"{d(top['max_tokens'])}, concurrency {d(top['concurrency'])}; 0% means the rounds "
        "agree up to prompt noise (with 2 or 3 rounds a rough figure)."
    )


def _rounds(svc: pd.DataFrame) -> str | None:
    """'3 rounds' (or '1 to 3 rounds') of starts per configuration, from service_summary."""
    if svc.empty or not {"config_id", "run"} <= set(svc.columns):
        return None
    per = svc.groupby("config_id")["run"].nunique()
    return _range(per, lambda v: str(int(v))) + (" round(s)" if per.max() > 1 else " round")


def _drift(r: pd.Series) -> str:
    if pd.isna(r.get("drift_per_start")):
        return "no drift estimated (fewer than 3 contrasts)"
    return (
        f"drift {100 * r['drift_per_start']:+.1f}% per start "
        f"[{100 * r['drift_low']:+.1f}%, {100 * r['drift_high']:+.1f}%]"
    )


def _stratum(r: pd.Series) -> str:
    where = f"{d(r['engine'])} TP{int(r['tp'])} concurrency {num(r['level'], 'g')}"
    if pd.isna(r["start_sd"]):
        return f"{where}: none ({d(r['reason'] or 'no estimate')})"
    sd = (
        "start sd 0 (no more spread than the prompts’ noise)"
        if _pooled(r.to_frame().T).iloc[0]
        else f"start sd {_pct(r['start_sd'])}"
    )
    return (
        f"{where}: {sd} ({num(r['df'], '.0f')} df, "
        f"{int(r['starts'])} starts of {int(r['configs'])} configurations), {_drift(r)}"
    )


def _one_start(sp: pd.DataFrame) -> str | None:
    """The abstention sentence when comparisons lack an interval for want of starts."""
    if sp.empty or "ci_reason" not in sp:
        return None
    reasons = sp["ci_reason"].astype("string").fillna("")  # all NULL: any dtype
    starts = reasons.str.contains("start")
    if not starts.any():
        return None
    reason = reasons[starts].value_counts().index[0]
    return (
        f"{int(starts.sum())} of {len(sp)} speedup comparison(s) print no interval and are "
        f"called neither significant nor not: {d(reason)}. A single start of each side "
        "measures that start, not the service: the spread between starts, which the interval "
        "must carry, was never sampled."
    )


def start_notes(data: ReportData) -> list[str]:
    """The threats' notes on the design: rounds per configuration, start sd and drift per
    stratum (start_variance), and the comparisons left without an interval for want of
    starts (speedup.ci_reason)."""
    notes = []
    rounds = _rounds(data.services)
    rows = _strata(data.start_variance)
    rows = rows.sort_values(["engine", "tp", "level"]) if not rows.empty else rows
    if rounds:
        head = (
            f"Each configuration was started in {rounds}, every round starting each "
            "configuration once in a counterbalanced order (the baseline in every round)"
            if not rounds.endswith(" round")
            else "Each configuration was started once (one round)"
        )
        if rows.empty:
            notes.append(head + ".")
        elif len(rows) <= MAX_STRATA:
            notes.append(head + "; " + "; ".join(_stratum(r) for _, r in rows.iterrows()) + ".")
        else:
            usable = rows.dropna(subset=["start_sd"])
            worst = (
                rows.loc[rows["drift_per_start"].abs().idxmax()]
                if rows["drift_per_start"].notna().any()
                else None
            )
            notes.append(
                head + f"; over {len(rows)} strata the start sd is "
                f"{_range(usable['start_sd'], _pct) if not usable.empty else 'not estimated'}"
                + (f", the largest drift {_stratum(worst)}" if worst is not None else "")
                + "."
            )
    one = _one_start(data.speedup)
    return notes + ([one] if one else [])
