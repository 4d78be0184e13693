"""The physics check: no claimed speedup larger than speculation can give.

A verify step yields at most its acceptance length of tokens and costs at least one plain
step of the target, so on every prompt speedup <= acceptance length. The check holds ONE
average on both sides: the speedup is the geometric mean over the comparison's (run, prompt)
cells of the paired ratio, so it is held against the geometric mean over the same cells of
the acceptance length (speedup_decomposition.acceptance_gain): mean ln ratio <= mean ln
acceptance whenever every cell's ratio is within its own acceptance. The token-pooled
acceptance (config_summary.accept_length_tw) is never the bound: pooled over prompts it is in
effect their harmonic mean, below the geometric one, and would call real gains artefacts.

Each comparison's bound (column physics_bound) and where it comes from (physics_basis), the
first rule that applies:

1. 'same launch': the method's services ran with exactly the baseline's launch flags
   (service_summary.own_flags, same engine and tp; imported rows have no command and never
   match): the baseline under another name, which can give no gain. Bound 1.
2. 'self-draft': the draft model is the target itself (environment:
   ``service.<method>.tp<tp>.draft_model`` equals the host's ``engine.model``). Its
   acceptance is K + 1 by construction and binds nothing; its step cost does: a step runs K
   draft passes and one verify pass of the target, at least K + 1 plain steps for at most
   K + 1 tokens. Bound 1.
3. 'per-prompt acceptance': speedup_decomposition.acceptance_gain, the geometric mean above
   (engines that count verify steps per request).
4. 'window counters' (or 'pooled requests'): speedup_prediction.accept_length H, pooled over
   the workload (vLLM without per-request counts reads it from its /metrics counters), with
   the draft length K the counters show (draft_tokens_per_step, rounded up). Per prompt the
   acceptance lies in [1, U], U = K + 1, and -ln a is convex in 1/a, so the largest geometric
   mean whose pooled (token-weighted harmonic) mean is H puts every prompt at an end:
   :func:`pooled_bound` = U^q, q = (1 - 1/H) / (1 - 1/U). This assumes replies of like length
   (max_tokens caps them); without K there is no bound. vLLM's counters count drafting steps
   only (1 + accepted / drafts), which can only raise H above tokens per step and loosen the
   bound: a gain it rejects is rejected with room to spare.
5. none of these: physics_bound NaN. A significant gain there is *unchecked*: it may still
   head its workload, but only with the words that it was not checked (report.findings).
"""

from __future__ import annotations

import posixpath

import numpy as np
import pandas as pd

from specsweep.report.data import ReportData
from specsweep.report.keys import COMPARISON

SAME_LAUNCH, SELF_DRAFT = "same launch", "self-draft"
PER_PROMPT = "per-prompt acceptance"
SOURCES = {"window counters": "window counters", "requests": "pooled requests"}


def pooled_bound(pooled: float, drafted: float) -> float:
    """The largest geometric mean of per-prompt acceptance in [1, U], U = ceil(drafted) + 1,
    whose token-weighted harmonic mean is ``pooled`` (module docstring, rule 4); NaN
    without both."""
    if not (np.isfinite(pooled) and np.isfinite(drafted)) or pooled < 1:
        return float("nan")
    top = float(np.ceil(drafted - 1e-6)) + 1
    if top <= 1:
        return 1.0
    share = min(max((1 - 1 / pooled) / (1 - 1 / top), 0.0), 1.0)
    return float(top**share)


def _same_launch(services: pd.DataFrame, baseline: str) -> set[tuple]:
    """(method, engine, tp) whose services all ran with the baseline's own flags there."""
    need = {"method", "engine", "tp", "own_flags", "launch_command"}
    if services.empty or not need <= set(services.columns):
        return set()
    ran = services[services["launch_command"].fillna("") != ""]
    flags = ran.groupby(["method", "engine", "tp"])["own_flags"].agg(
        lambda f: frozenset(f.fillna(""))
    )
    out = set()
    for (method, engine, tp), own in flags.items():
        base = flags.get((baseline, engine, tp))
        if method != baseline and base is not None and len(base) == 1 and own == base:
            out.add((method, engine, tp))
    return out


def _path(value: object) -> str:
    return posixpath.normpath(str(value).strip().rstrip("/")) if value else ""


def _self_drafts(env: pd.DataFrame, methods: pd.DataFrame) -> set[tuple]:
    """(method, tp) whose draft model is the target (environment facts, rule 2)."""
    if env.empty or not {"key", "value"} <= set(env.columns):
        return set()
    facts = dict(zip(env["key"], env["value"]))
    targets = {_path(v) for v in env.loc[env["key"] == "engine.model", "value"]} - {""}
    out = set()
    for method, tp in methods[["method", "tp"]].drop_duplicates().itertuples(index=False):
        draft = _path(facts.get(f"service.{method}.tp{int(tp)}.draft_model"))
        if draft and draft in targets:
            out.add((method, int(tp)))
    return out


def _merge(sp: pd.DataFrame, frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """sp with ``columns`` of ``frame`` (NaN where it has no row or lacks them)."""
    if frame.empty or not {*COMPARISON, *columns} <= set(frame.columns):
        return sp.assign(**{c: np.nan for c in columns})
    rows = frame[[*COMPARISON, *columns]].drop_duplicates(COMPARISON)
    return sp.merge(rows, on=COMPARISON, how="left")


def _rule(r: pd.Series, same: set, own: set, pooled: float) -> tuple[float, str | None]:
    """(bound, basis) of one row, the first rule of the module docstring that applies."""
    if (r["method"], r["engine"], r["tp"]) in same:
        return 1.0, SAME_LAUNCH
    if (r["method"], int(r["tp"])) in own:
        return 1.0, SELF_DRAFT
    if pd.notna(r["acceptance_gain"]):
        return float(r["acceptance_gain"]), PER_PROMPT
    if np.isfinite(pooled):
        return pooled, SOURCES.get(r["acceptance_source"], "pooled")
    return float("nan"), None


def bounds(data: ReportData, sp: pd.DataFrame) -> pd.DataFrame:
    """``sp`` (speedup rows) with physics_bound, physics_basis and acceptance (the best
    known acceptance figure, for the text) by the module docstring's rules."""
    if sp.empty:
        return sp.assign(physics_bound=np.nan, physics_basis=None, acceptance=np.nan)
    out = _merge(sp.reset_index(drop=True), data.speedup_decomposition, ["acceptance_gain"])
    pred = ["accept_length", "acceptance_source", "draft_tokens_per_step"]
    out = _merge(out, data.speedup_prediction, pred)
    same = _same_launch(data.services, data.baseline)
    own = _self_drafts(data.environment, out)
    pooled = [
        pooled_bound(float(h), float(k))
        for h, k in zip(out["accept_length"].astype(float), out["draft_tokens_per_step"])
    ]
    rules = [_rule(r, same, own, p) for (_, r), p in zip(out.iterrows(), pooled)]
    bound, basis = [b for b, _ in rules], [w for _, w in rules]
    known = out["acceptance_gain"].fillna(out["accept_length"])
    if "accept_length_tw" in out:
        known = known.fillna(out["accept_length_tw"])
    out = out.drop(columns=["acceptance_gain", *pred]).assign(
        physics_bound=bound, physics_basis=basis, acceptance=known.astype(float)
    )
    return out.set_axis(sp.index)


def _significant_gain(sp: pd.DataFrame) -> pd.Series:
    return sp["significant"].fillna(False).astype(bool) & (sp["speedup"] > 1)


def implausible(sp: pd.DataFrame) -> pd.Series:
    """Per row: a significant gain whose point estimate exceeds its physics_bound (False
    where the bound is unknown, or the rows carry none: :func:`bounds` not applied)."""
    if "physics_bound" not in sp:
        return pd.Series(False, index=sp.index)
    return (_significant_gain(sp) & (sp["speedup"] > sp["physics_bound"])).fillna(False)


def unchecked(sp: pd.DataFrame) -> pd.Series:
    """Per row: a significant gain with no physics bound (rule 5): it cannot be checked."""
    if "physics_bound" not in sp:
        return _significant_gain(sp)
    return _significant_gain(sp) & sp["physics_bound"].isna()
