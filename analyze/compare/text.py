"""What `specsweep compare` and `gate` print: a change, how the start variance
entered the intervals, the whole comparison, and the gate's verdict with its exit code."""

from __future__ import annotations

import math
from collections import Counter

from specsweep.analyze.compare.change import Change, Comparison, exit_code, gate, undecided
from specsweep.analyze.compare.match import window_text
from specsweep.analyze.environment_diff import argument_diff


def _pct(x: float | None) -> str:
    return "--" if x is None or not math.isfinite(x) else f"{(x - 1) * 100:+.1f}%"


def _pts(x: float | None) -> str:
    return "--" if x is None else f"{x * 100:+.1f} points"


def _starts(c: Change) -> str:
    """Where the change's start variance came from, in words."""
    if c.start_source == "own rounds":
        return f"{c.n_runs} paired rounds, start variance from their own spread"
    if c.kind == "shift":
        sd = "--" if c.start_sd is None else f"{c.start_sd:.3f} ln"
        return f"{c.n_runs} paired rounds, sd of a round's mean {sd} on {c.n_runs - 1} df"
    if c.start_sd is None:
        return f"{c.n_runs} paired round(s)"
    sd = f"{c.start_sd * 100:.1f} points" if c.kind == "difference" else f"{c.start_sd:.3f} ln"
    return f"{c.n_runs} paired round(s), start sd {sd} on {c.start_df:.3g} df"


def describe(c: Change) -> str:
    """One change in words: values, the figure and its interval, the tests, the verdict."""
    shift = c.kind == "shift"
    where = "campaign-wide shift" if shift else window_text(c.window)
    head = f"{where} {c.metric}: {c.a:.4g} -> {c.b:.4g}"
    if c.kind == "point":
        return f"{head} ({_pct(c.ratio)}, point estimate, no interval): {c.verdict}"
    fmt, what = (_pts, c.difference) if c.kind == "difference" else (_pct, c.ratio)
    interval = (
        f"95% CI [{fmt(c.ci_low)}, {fmt(c.ci_high)}]"
        if c.ci_low is not None
        else f"no interval: {c.reason}"
    )
    tests = "" if c.p_value is None else f", p {c.p_value:.2g}, Holm p {c.p_holm:.2g}"
    count = f"{c.n_windows} windows" if shift else f"{c.n_prompts} prompts"
    return f"{head} ({fmt(what)}, {interval}{tests}, {count}, {_starts(c)}): {c.verdict}"


def start_line(changes: list[Change]) -> str:
    """How the start variance entered the tested changes, and why the others have none."""
    tested = [c for c in changes if c.kind not in ("point", "shift")]
    source = Counter(c.start_source for c in tested)
    why = Counter(c.reason for c in tested if c.ci_low is None)
    line = (
        f"service starts: the start variance pooled from both campaigns entered "
        f"{source['pooled']} interval(s), the paired rounds' own spread {source['own rounds']}; "
        f"{sum(why.values())} change(s) have no interval"
    )
    return line + "".join(f"; {n}: {reason}" for reason, n in why.most_common())


def lines(comp: Comparison) -> list[str]:
    """What `specsweep compare` prints."""
    tested = [c for c in comp.changes if c.p_holm is not None]
    out = [
        f"compare {comp.a} (A) -> {comp.b} (B): {len(comp.changes)} matched metric(s), "
        f"{sum(c.significant for c in comp.changes)} significant (Holm over "
        f"{len(tested)} tests; {sum(c.significant_raw for c in comp.changes)} unadjusted), "
        f"{sum(c.verdict == 'no interval' for c in comp.changes)} without an interval, "
        f"{sum(c.kind == 'point' for c in comp.changes)} point estimates (p90)",
        "  " + start_line(comp.changes),
    ]
    out += ["  " + describe(c) for c in comp.changes]
    for key, (sa, sb) in sorted(comp.speedup_ratio.items(), key=str):
        out.append(f"  {window_text(key)} speedup over own baseline: {sa:.3g}x -> {sb:.3g}x")
    out += [f"  only in A: {window_text(k)}" for k in comp.only_a]
    out += [f"  only in B: {window_text(k)}" for k in comp.only_b]
    out += [f"  prompts {prompt_text(p)}" for p in comp.prompts]
    out += [
        f"  environment {host} {key}: {argument_diff(va, vb)}"
        for host, key, va, vb in comp.environment
    ]
    return out


def gate_lines(comp: Comparison, threshold: float) -> tuple[list[str], int]:
    """What `specsweep gate` prints after the comparison, and its exit code
    (analyze.compare.change.exit_code)."""
    failed, open_ = gate(comp, threshold), undecided(comp, threshold)
    tested = sum(c.p_holm is not None for c in comp.changes)
    untested = sum(c.kind != "point" and c.ci_low is None for c in comp.changes)
    out = [
        f"gate: {len(failed)} regression(s) beyond {threshold:.1%} (significant after "
        f"Holm over {tested} tests; docs/compare.md)"
    ]
    out += [f"  FAIL {describe(c)}" for c in failed]
    if open_:
        out.append(
            f"gate: cannot decide {len(open_)} change(s): worse than {threshold:.1%} in their "
            "point estimate, with no interval to tell a regression from a service start's "
            "spread (repeat: 2 or more rounds in both campaigns)"
        )
        out += [f"  UNDECIDED {describe(c)}" for c in open_]
    elif untested:
        out.append(
            f"gate: {untested} change(s) have no interval; each lies within {threshold:.1%} "
            "in its point estimate, which no interval could turn into a failure"
        )
    return out, exit_code(comp, threshold)


def prompt_text(row: tuple) -> str:
    """A compare_prompts row in words."""
    workload, method, tp, prompt, status, detail = row
    where = (
        f"{workload} {prompt}"
        if prompt
        else (f"{workload} {method} tp{tp}" if method else workload)
    )
    refused = "" if status == "not checked" else ", not paired"
    return f"{where}: {status} ({detail}){refused}"
