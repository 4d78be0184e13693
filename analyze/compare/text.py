"""What `python -m analyze compare` and `gate` print: a change, the drift summary, the
whole comparison."""

from __future__ import annotations

import math

from analyze.compare import stats as cs
from analyze.compare.change import DRIFT, Change, Comparison
from analyze.compare.match import window_text
from analyze.environment_diff import argument_diff


def _pct(x: float | None) -> str:
    return "--" if x is None or not math.isfinite(x) else f"{(x - 1) * 100:+.1f}%"


def _pts(x: float | None) -> str:
    return "--" if x is None else f"{x * 100:+.1f} points"


def describe(c: Change) -> str:
    """One change in words: values, the figure and its interval, the tests, the verdict."""
    head = f"{window_text(c.window)} {c.metric}: {c.a:.4g} -> {c.b:.4g}"
    if c.kind == "point":
        return f"{head} ({_pct(c.ratio)}, point estimate, no interval): {c.verdict}"
    fmt, what = (_pts, c.difference) if c.kind == "difference" else (_pct, c.ratio)
    interval = (
        f"95% CI [{fmt(c.ci_low)}, {fmt(c.ci_high)}]"
        if c.ci_low is not None
        else f"no interval: {c.reason}"
    )
    tests = "" if c.p_value is None else f", p {c.p_value:.2g}, Holm p {c.p_holm:.2g}"
    return (
        f"{head} ({fmt(what)}, {interval}{tests}, {c.n_prompts} prompts, drift "
        f"{DRIFT[c.drift or 'none']}): {c.verdict}"
    )


def drift_line(changes: list[Change]) -> str:
    """How drift between the campaigns entered the tested changes."""
    count = {k: sum(c.drift == k for c in changes if c.kind != "point") for k in DRIFT}
    line = (
        f"drift between campaigns: measured by paired runs for {count['runs']}, by an A/A "
        f"control for {count['aa']}, not measured for {count['none']} change(s)"
    )
    if count["none"]:
        line += (
            f" (their intervals cover prompts only: a change within "
            f"x{1 / cs.DRIFT_FLOOR:.2f}-x{cs.DRIFT_FLOOR:.2f}, or "
            f"{cs.ATTAINMENT_FLOOR * 100:.0f} attainment points, is not separable from "
            "drift)"
        )
    return line


def lines(comp: Comparison) -> list[str]:
    """What `python -m analyze compare` prints."""
    tested = [c for c in comp.changes if c.p_holm is not None]
    out = [
        f"compare {comp.a} (A) -> {comp.b} (B): {len(comp.changes)} matched metric(s), "
        f"{sum(c.significant for c in comp.changes)} significant (Holm over "
        f"{len(tested)} tests; {sum(c.significant_raw for c in comp.changes)} unadjusted), "
        f"{sum(c.drift_bound for c in comp.changes)} not separable from drift, "
        f"{sum(c.kind == 'point' for c in comp.changes)} point estimates (p90)",
        "  " + drift_line(comp.changes),
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
