"""Fixtures for report tests: a real DuckDB file with raw tables and analysis objects.

The raw tables come from schema/ddl.sql. The analysis objects are built here as
plain tables with the columns of analyze/VIEWS.md, computed in pandas, so these
tests do not depend on analyze/ code (tests/report/test_reads_only_views.py checks the
report against the real views). Data strings are deliberately hostile.

The campaign runs as collect runs it (issue 36): ROUNDS rounds, each starting every method's
service once in a counterbalanced order (ORDER in odd rounds, reversed in even ones), each
start moving its method's speed by a factor of its own (sd START_SD in ln); run r > 1's
service, window and request ids end in /run<r>. A speedup's interval treats the rounds as the
replicate (t on the per-round means, ROUNDS - 1 df), significance is Holm over the campaign's
claims. With one round (the ``report_db_one_round`` fixture) nothing has an interval.
"""

from __future__ import annotations

import shutil
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from matplotlib import cbook
from scipy import stats as sps

ROOT = Path(__file__).resolve().parents[2]
DDL = ROOT / "schema" / "ddl.sql"
CAMPAIGN = "local-abc123def456"
OLD_CAMPAIGN = "local-000000000000"
HOSTILE = [
    r"\input{/etc/passwd}",
    r"\write18{rm -rf ~}",
    r"\def\x{}",
    "unbalanced {{ }",
    "100% # $x$ & y_z ^ ~",
    "\\end{verbatim}",
    "line\nbreak",
    "--flag -- ,, `` ''",
    '[opt] *star <a|b> "q"',
    "naïve café — ✓ 你好 😀",
]
PLAN_YAML = (
    "name: local   # the embedded default\n"
    "workloads:\n"
    "  - chat      % not a comment in YAML\n"
    "\\end{verbatim}\n"
    '  prompt: "\\input{/etc/passwd} \\write18{touch pwned} {unbalanced"\n'
    "  deep:\n"
    "      indented: true"
)
# method -> (decode speed factor per workload, accept length); baseline first.
METHODS = {
    "autoregressive": ({"chat": 1.0, "code_gen": 1.0, "summ": 1.0, "agentic": 1.0}, None),
    "dflash": ({"chat": 1.02, "code_gen": 1.8, "summ": 1.0, "agentic": 1.4}, 2.6),
    "ddtree_b8": ({"chat": 1.3, "code_gen": 1.5, "summ": 0.99, "agentic": 1.2}, 2.1),
}
# (method, workload, concurrency) -> speed factor replacing METHODS' there: ddtree_b8 pays
# on chat at concurrency 1 and is as fast as the baseline at 4 (its crossover).
AT_LOAD = {("ddtree_b8", "chat", 4): 1.0}
WINDOWS = [("chat", 64, 1), ("chat", 64, 4), ("code_gen", 128, 1), ("summ", 32, 1)]
N_PROMPTS, REPS, N_TURNS = 6, 2, 3
T0 = datetime(2026, 1, 2, 12, 0, 0)
ROUNDS, START_SD = 3, 0.03
ORDER = ["dflash", "autoregressive", "ddtree_b8"]  # round 1's start order; even rounds reverse
_START_RNG = np.random.default_rng(11)
# (method, run) -> that start's factor on its method's speed (every run up to 5 drawn)
START = {(m, r): float(_START_RNG.lognormal(0, START_SD)) for r in range(1, 6) for m in METHODS}
ONE_START = (
    "one service start per side: how far another start would land was not sampled "
    "(plan repeat: 2 or more)"
)  # schema.paired.ONE_START
ONE_ROUND = "one service start per configuration: the start-to-start variance was not sampled"
# how the client reached each service (services.transport); the rest: direct
TRANSPORT = {"dflash": "paramiko-tunnel"}
DESCRIPTION = "A hostile description: 100% # $x$ \\input{/etc/passwd} {unbalanced"


def _request(
    rng: np.random.Generator,
    method: str,
    workload: str,
    mt: int,
    conc: int,
    prompt: int,
    rep: int,
    turn: int | None = None,
    warm: bool = False,
    run: int = 1,
) -> dict:
    factor, accept = METHODS[method]
    base = 20.0 * (1 + 0.1 * prompt) / (1 + 0.15 * (conc - 1)) * START[(method, run)]
    tps = base * AT_LOAD.get((method, workload, conc), factor[workload]) * rng.lognormal(0, 0.05)
    out = mt - (prompt % 3)
    prompt_tokens = 40 + 10 * prompt + (0 if turn is None else 300 * turn)
    ttft = 0.02 + prompt_tokens / 4000 * rng.lognormal(0, 0.1)
    e2e = ttft + (out - 1) / tps
    chunks = list(np.linspace(ttft, e2e, 8))
    window = f"{method}-{workload}-{mt}-{conc}"
    ok = not (method == "ddtree_b8" and prompt == 0 and rep == 1 and workload == "chat")
    suffix = "" if run == 1 else f"/run{run}"  # as collect names run r > 1's windows
    return {
        "request_id": f"{window}-{prompt}-{rep}-{turn}-{warm}{suffix}",
        "campaign_id": CAMPAIGN,
        "config_id": f"cfg-{method}",
        "service_id": f"svc-{method}{suffix}",
        "engine": "llama.cpp",
        "method": method,
        "tp": 1,
        "workload": workload,
        "window_id": window + suffix,
        "prompt_id": f"p{prompt}",
        "max_tokens": mt,
        "rep": rep,
        "concurrency": conc,
        "session_id": None if turn is None else f"s{prompt}-{rep}",
        "turn": turn,
        "is_warmup": warm,
        "sent_at": T0 + timedelta(seconds=prompt),
        "start_s": 0.5 * prompt,
        "ttft_s": ttft if ok else None,
        "e2e_s": e2e if ok else None,
        "chunk_times_s": chunks if ok else None,
        "chunk_tokens": None,
        "prompt_tokens": prompt_tokens,
        "cached_tokens": 0 if turn in (None, 0) else 280 * turn,
        "output_tokens": out if ok else None,
        "finish_reason": "length",
        "spec_verify_ct": None if accept is None else int(out / accept),
        "draft_tokens": None if accept is None else 4 * int(out / accept),
        "accepted_tokens": None if accept is None else out - int(out / accept),
        "accept_length": None if accept is None else out / int(out / accept),
        "output_text": HOSTILE[prompt % len(HOSTILE)],
        "server_stats": "{}",
        "ok": ok,
        "error_kind": None if ok else "http",
        "error_message": None if ok else r"500 \oops{",
        "run": run,
    }


def raw_requests(
    agentic: bool = True, windows: list = WINDOWS, rounds: int = ROUNDS
) -> pd.DataFrame:
    """Deterministic raw requests for every round, method and window (plus warm-ups)."""
    rng = np.random.default_rng(7)
    rows = []
    for run in range(1, rounds + 1):
        for method in METHODS:
            for wl, mt, conc in windows:
                rows.append(_request(rng, method, wl, mt, conc, 0, 0, warm=True, run=run))
                rows += [
                    _request(rng, method, wl, mt, conc, p, r, run=run)
                    for p in range(N_PROMPTS)
                    for r in range(REPS)
                ]
            if agentic:
                rows += [
                    _request(rng, method, "agentic", 32, 1, p, 0, turn=t, run=run)
                    for p in range(3)
                    for t in range(N_TURNS)
                ]
    return pd.DataFrame(rows)


def request_metrics(req: pd.DataFrame) -> pd.DataFrame:
    """The request_metrics view, computed in pandas (VIEWS.md formulas)."""
    rm = req[~req["is_warmup"]].drop(columns=["output_text", "server_stats"]).copy()
    dt = rm["e2e_s"] - rm["ttft_s"]
    multi = (rm["output_tokens"] > 1) & rm["ok"]
    rm["tpot_s"] = (dt / (rm["output_tokens"] - 1)).where(multi)
    rm["decode_tps"] = ((rm["output_tokens"] - 1) / dt).where(multi & (dt > 0))
    rm["e2e_tps"] = rm["output_tokens"] / rm["e2e_s"]
    rm["n_chunks"] = rm["chunk_times_s"].map(lambda c: 0 if c is None else len(c))
    rm["end_s"] = rm["start_s"] + rm["e2e_s"]
    return rm


def request_distribution(rm: pd.DataFrame) -> pd.DataFrame:
    """The request_distribution table (VIEWS.md): matplotlib's box statistics of each
    method's non-NULL decode_tps and ttft_s."""
    rows = []
    for (cid, method), g in rm.groupby(["campaign_id", "method"]):
        for metric in ("decode_tps", "ttft_s"):
            values = g[metric].dropna().to_numpy(float)
            if len(values):
                st = cbook.boxplot_stats(values)[0]
                rows.append(
                    {
                        "campaign_id": cid,
                        "method": method,
                        "metric": metric,
                        "n": len(values),
                        "mean": st["mean"],
                        "p25": st["q1"],
                        "p50": st["med"],
                        "p75": st["q3"],
                        "iqr": st["iqr"],
                        "whislo": st["whislo"],
                        "whishi": st["whishi"],
                        "min": values.min(),
                        "max": values.max(),
                    }
                )
    return pd.DataFrame(rows)


KEYS = ["campaign_id", "engine", "tp", "method", "workload", "max_tokens", "concurrency"]


def _spans(ok: pd.DataFrame) -> float:
    """The summed spans (last end - first start) of the rows' windows."""
    by = ok.groupby("window_id")
    return float((by["end_s"].max() - by["start_s"].min()).sum())


def _summary(g: pd.DataFrame) -> pd.Series:
    ok = g[g["ok"]]
    acc = ok.dropna(subset=["accept_length"])
    tw = (
        acc["output_tokens"].sum() / (acc["output_tokens"] / acc["accept_length"]).sum()
        if len(acc)
        else np.nan
    )
    return pd.Series(
        {
            "n": len(g),
            "n_ok": len(ok),
            "error_rate": 1 - len(ok) / len(g),
            "ttft_p50_s": ok["ttft_s"].median(),
            "ttft_p90_s": ok["ttft_s"].quantile(0.9),
            "ttft_p99_s": ok["ttft_s"].quantile(0.99),
            "tpot_p50_s": ok["tpot_s"].median(),
            "e2e_p50_s": ok["e2e_s"].median(),
            "decode_tps_p50": ok["decode_tps"].median(),
            "decode_tps_mean": ok["decode_tps"].mean(),
            "output_tokens_sum": ok["output_tokens"].sum(),
            # several windows (one a round): summed tokens over summed window spans
            "throughput_tps": ok["output_tokens"].sum() / _spans(ok),
            "accept_length_tw": tw,
            "accept_length_rw": acc["accept_length"].mean(),
            "accept_rate": (
                acc["accepted_tokens"].sum() / acc["draft_tokens"].sum() if len(acc) else np.nan
            ),
        }
    )


def config_summary(rm: pd.DataFrame) -> pd.DataFrame:
    """The config_summary view (one row per measured window)."""
    plain = rm[rm["session_id"].isna()]
    return plain.groupby(KEYS).apply(_summary, include_groups=False).reset_index()


CELL = ["run", "prompt_id"]


def _cells(m: pd.DataFrame, b: pd.DataFrame) -> pd.Series:
    """Per (run, prompt) cell both measured: mean ln decode tok/s of M - of the baseline."""
    m, b = m.dropna(subset=["decode_tps"]), b.dropna(subset=["decode_tps"])
    lm = np.log(m["decode_tps"]).groupby([m[c] for c in CELL]).mean()
    lb = np.log(b["decode_tps"]).groupby([b[c] for c in CELL]).mean()
    return (lm - lb).dropna()


def decode_speedup(m: pd.DataFrame, b: pd.DataFrame) -> float:
    """The geometric mean over the (run, prompt) cells both measured of M's decode speed over
    the baseline's (the speedup table's point estimate, schema/paired.py)."""
    return float(np.exp(_cells(m, b).mean()))


def _interval(m: pd.DataFrame, b: pd.DataFrame) -> dict:
    """The interval of one comparison, the rounds as the replicate: t on the per-round means
    of the cells' log ratios with rounds - 1 df; none below 3 prompts or with one round
    (ci_reason says why, as the analysis does)."""
    d = _cells(m, b)
    per_run = d.groupby(level=0).mean()
    n_prompts, n_runs = d.index.get_level_values(1).nunique(), len(per_run)
    out = {"n_runs": n_runs, "n_prompts": n_prompts, "ci_low": np.nan, "ci_high": np.nan,
           "p_value": np.nan, "df": np.nan, "log_se": np.nan, "ci_reason": None,
           "run_speedup_min": np.nan, "run_speedup_max": np.nan}  # fmt: skip
    if n_runs > 1:
        out |= {"run_speedup_min": float(np.exp(per_run.min())),
                "run_speedup_max": float(np.exp(per_run.max()))}  # fmt: skip
    if n_prompts < 3:
        return out | {"ci_reason": f"{n_prompts} prompts: an interval needs at least 3"}
    if n_runs < 2:
        return out | {"ci_reason": ONE_START}
    se, df = float(per_run.std(ddof=1) / np.sqrt(n_runs)), n_runs - 1
    half = sps.t.ppf(0.975, df) * se
    return out | {
        "ci_low": float(np.exp(d.mean() - half)), "ci_high": float(np.exp(d.mean() + half)),
        "p_value": float(2 * sps.t.sf(abs(d.mean()) / se, df)), "df": float(df), "log_se": se,
    }  # fmt: skip


def holm(p_values: list[float]) -> list[float]:
    """Holm's step-down adjustment (NaN: no test, left out of the family)."""
    present = sorted((p, i) for i, p in enumerate(p_values) if not np.isnan(p))
    out, running = [np.nan] * len(p_values), 0.0
    for rank, (p, i) in enumerate(present):
        running = max(running, min(1.0, (len(present) - rank) * p))
        out[i] = running
    return out


def adjust_family(frames: list[tuple[pd.DataFrame, str]]) -> None:
    """Holm over every frame's claims together (the campaign's one family), in place:
    p_holm, significant (NULL untested), n_family, sim_ci_low / sim_ci_high (Bonferroni)."""
    tested = [(f, i) for f, (frame, _) in enumerate(frames) for i in frame.index
              if not np.isnan(frame.at[i, "p_value"])]  # fmt: skip
    adjusted = holm([frames[f][0].at[i, "p_value"] for f, i in tested])
    for frame, _ in frames:
        frame["p_holm"], frame["n_family"] = np.nan, len(tested) or np.nan
        frame["sim_ci_low"], frame["sim_ci_high"] = np.nan, np.nan
        frame["significant"] = pd.Series(pd.NA, dtype="boolean", index=frame.index)
    level = 1 - 0.05 / max(len(tested), 1)
    for (f, i), p in zip(tested, adjusted):
        frame, point = frames[f]
        half = sps.t.ppf((1 + level) / 2, frame.at[i, "df"]) * frame.at[i, "log_se"]
        centre = np.log(frame.at[i, point])
        frame.at[i, "p_holm"], frame.at[i, "significant"] = p, bool(p < 0.05)
        frame.at[i, "sim_ci_low"], frame.at[i, "sim_ci_high"] = (
            float(np.exp(centre - half)), float(np.exp(centre + half)))  # fmt: skip


STRATUM = ["campaign_id", "engine", "tp", "concurrency"]


def _start_positions(services: pd.DataFrame) -> dict[tuple[str, int], int]:
    """(method, run) -> the start's position in the campaign's order."""
    order = services.sort_values("requested_at").reset_index(drop=True)
    return {(r.method, int(r.run)): i for i, r in order.iterrows()}


def start_variance(rm: pd.DataFrame, services: pd.DataFrame) -> pd.DataFrame:
    """The start_variance table (decode_tps, closed loop): per stratum, the method x round
    interaction of each window's mean ln decode speed (over prompts), pooled over the
    stratum's windows: s2 its mean square, drift its regression on the double-centred start
    positions (a fixture's estimate: no prompt noise subtracted)."""
    plain = rm[rm["session_id"].isna() & rm["ok"]].dropna(subset=["decode_tps"])
    at = _start_positions(services)
    rows = []
    for key, stratum in plain.groupby(STRATUM):
        inter, spread = [], []
        for _, win in stratum.groupby(["workload", "max_tokens"]):
            y = np.log(win["decode_tps"]).groupby([win["method"], win["run"]]).mean().unstack()
            t = np.array([[at[(m, r)] for r in y.columns] for m in y.index], dtype=float)
            for grid, out in ((y.to_numpy(), inter), (t, spread)):
                out.append(grid - grid.mean(0) - grid.mean(1)[:, None] + grid.mean())
        rows.append(dict(zip(STRATUM, key)) | _component(inter, spread, stratum))
    return pd.DataFrame(rows).rename(columns={"concurrency": "level"})


def _component(inter: list, spread: list, stratum: pd.DataFrame) -> dict:
    """One stratum's start_variance columns from its windows' double-centred grids."""
    configs, rounds = stratum["method"].nunique(), stratum["run"].nunique()
    base = {"metric": "decode_tps", "load": "concurrency", "starts": configs * rounds,
            "configs": configs, "rounds": rounds, "windows": len(inter),
            "contrasts": (configs - 1) * (rounds - 1), "pooled": False}  # fmt: skip
    df = sum((i.shape[0] - 1) * (i.shape[1] - 1) for i in inter)
    none = {"start_sd": np.nan, "df": np.nan, "start_spread": np.nan, "drift_per_start": np.nan,
            "drift_low": np.nan, "drift_high": np.nan}  # fmt: skip
    if df < 2:
        return base | none | {"reason": ONE_ROUND if rounds < 2 else "too few contrasts"}
    span = sum(float((s**2).sum()) for s in spread)
    beta = sum(float((i * s).sum()) for i, s in zip(inter, spread)) / span
    s2 = sum(float(((i - beta * s) ** 2).sum()) for i, s in zip(inter, spread)) / (df - 1)
    half = sps.t.ppf(0.975, df - 1) * (s2 / span) ** 0.5
    return base | {
        "start_sd": s2**0.5, "df": float(df - 1),
        "start_spread": float(np.exp(sps.t.ppf(0.975, df - 1) * (2 * s2) ** 0.5)),
        "drift_per_start": float(np.expm1(beta)), "drift_low": float(np.expm1(beta - half)),
        "drift_high": float(np.expm1(beta + half)), "reason": None,
    }  # fmt: skip


def speedup(rm: pd.DataFrame, cs: pd.DataFrame, sv: pd.DataFrame) -> pd.DataFrame:
    """The speedup table: per window and non-baseline method, the paired point estimate over
    (run, prompt) cells, the rounds' interval (:func:`_interval`) and the stratum's start sd
    and spread (``sv``: start_variance); Holm is applied by :func:`populate` (the family)."""
    plain = rm[rm["session_id"].isna() & rm["ok"]]
    rows = []
    wkeys = ["campaign_id", "engine", "tp", "workload", "max_tokens", "concurrency"]
    strata = sv.set_index(["campaign_id", "engine", "tp", "level"])
    c = cs.set_index(KEYS)
    for key, win in plain.groupby(wkeys):
        base = win[win["method"] == "autoregressive"]
        stratum = strata.loc[(key[0], key[1], key[2], key[5])]
        for method, m in win[win["method"] != "autoregressive"].groupby("method"):
            tput = (
                c.loc[(*key[:3], method, *key[3:]), "throughput_tps"]
                / c.loc[(*key[:3], "autoregressive", *key[3:]), "throughput_tps"]
            )
            rows.append(
                dict(zip(wkeys, key))
                | _interval(m, base)
                | dict(
                    method=method,
                    baseline="autoregressive",
                    speedup=decode_speedup(m, base),
                    n=len(m),
                    n_baseline=len(base),
                    is_control=False,
                    significant_raw=None,
                    start_sd=stratum["start_sd"],
                    start_spread=stratum["start_spread"],
                    drift_correction=1.0,
                    between_run_share=np.nan,
                    throughput_speedup=tput,
                    method_throughput_tps=c.loc[(*key[:3], method, *key[3:]), "throughput_tps"],
                    baseline_throughput_tps=c.loc[
                        (*key[:3], "autoregressive", *key[3:]), "throughput_tps"
                    ],
                    ttft_ratio=m["ttft_s"].median() / base["ttft_s"].median(),
                    accept_length_tw=m["accept_length"].mean(),
                    baseline_decode_tps_p50=base["decode_tps"].median(),
                    method_decode_tps_p50=m["decode_tps"].median(),
                )
            )
    frame = pd.DataFrame(rows)
    frame["significant_raw"] = (frame["ci_low"] > 1) | (frame["ci_high"] < 1)
    frame["ci_reason"] = frame["ci_reason"].astype("string")  # a VARCHAR though all NULL
    return frame


def best_config(cs: pd.DataFrame, sp: pd.DataFrame) -> pd.DataFrame:
    """The best_config view: the largest paired speedup per window (the baseline at 1), with
    its interval and the pick's simultaneous one (pick_ci_low, pick_ci_high)."""
    wkeys = ["campaign_id", "engine", "tp", "workload", "max_tokens", "concurrency"]
    base = cs[cs["method"] == "autoregressive"][wkeys].assign(
        method="autoregressive", speedup=1.0, significant=False
    )
    picked = sp[[*wkeys, "method", "speedup", "significant", "ci_low", "ci_high"]].assign(
        pick_ci_low=sp["sim_ci_low"], pick_ci_high=sp["sim_ci_high"]
    )
    cands = pd.concat([picked, base])
    cands = cands.sort_values([*wkeys, "speedup", "method"], ascending=[True] * 6 + [False, True])
    best = cands.groupby(wkeys, as_index=False).first()
    best = best.merge(cs[wkeys + ["method", "decode_tps_p50"]], how="left")
    best["significant"] = best["significant"].fillna(False).astype(bool)
    return best


def _crossover_row(g: pd.DataFrame) -> dict:
    """VIEWS.md crossover rule on one setting's levels, written as a loop over them."""
    g = g.sort_values("concurrency")
    levels = list(g["concurrency"])
    sig = list(g["significant"].fillna(False).astype(bool))
    pays = [s and lo > 1 for s, lo in zip(sig, g["ci_low"])]
    slower = [s and hi < 1 for s, hi in zip(sig, g["ci_high"])]
    unpaid = next((i for i, p in enumerate(pays) if not p), None)
    stop = next((i for i, s in enumerate(slower) if s), None) if pays[0] else None
    if len(levels) < 2:
        status = "single level"
    elif all(pays):
        status = "always pays"
    elif all(slower):
        status = "never pays"
    elif not any(pays):
        status = "undetermined"
    elif not pays[0]:
        status = "pays only above lowest"
    else:
        status = "stops paying" if stop is not None else "undetermined"
    at = g.iloc[stop] if stop is not None and len(levels) > 1 else {}
    point = list(g["speedup"])
    cross_point = next(
        (levels[i] for i in range(1, len(levels)) if point[i] < 1 and max(point[:i]) >= 1), None
    )
    above = stop if stop is not None else unpaid
    return {
        "status": status,
        "crossover_concurrency": at.get("concurrency"),
        "crossover_speedup": at.get("speedup"),
        "crossover_ci_low": at.get("ci_low"),
        "crossover_ci_high": at.get("ci_high"),
        "paid_up_to": (levels[unpaid - 1] if unpaid else levels[-1]) if pays[0] else None,
        "first_unpaid_concurrency": levels[unpaid] if unpaid is not None else None,
        "point_crossover_concurrency": cross_point,
        "pays_again_above": bool(
            status in ("stops paying", "undetermined") and any(pays[above + 1 :])
        ),
        "first_slower_concurrency": next((c for c, s in zip(levels, slower) if s), None),
        "n_levels": len(levels),
        "concurrencies": levels,
        "lowest_concurrency": levels[0],
        "highest_concurrency": levels[-1],
    }


def crossover(sp: pd.DataFrame) -> pd.DataFrame:
    """The crossover view: per setting, where speculation stops paying."""
    keys = ["campaign_id", "engine", "tp", "workload", "max_tokens", "method"]
    rows = [{**dict(zip(keys, key)), **_crossover_row(g)} for key, g in sp.groupby(keys)]
    return pd.DataFrame(rows)


def speedup_sweep(sp: pd.DataFrame, cx: pd.DataFrame, cs: pd.DataFrame) -> pd.DataFrame:
    """The speedup_sweep view: speedup rows of the settings crossover calls swept, with
    crossover_concurrency, is_crossover and the mean effective_concurrency of the load point's
    windows (NaN: this fixture's config_summary has none)."""
    keys = ["campaign_id", "engine", "tp", "workload", "max_tokens", "method"]
    swept = cx.loc[cx["status"] != "single level", [*keys, "crossover_concurrency"]]
    out = sp.merge(swept, on=keys, how="inner")
    out["is_crossover"] = (out["concurrency"] == out["crossover_concurrency"]).fillna(False)
    wkeys = ["campaign_id", "engine", "tp", "workload", "max_tokens", "concurrency"]
    eff = cs.reindex(columns=[*wkeys, "effective_concurrency"]).astype(
        {"effective_concurrency": float}
    )
    return out.merge(eff.groupby(wkeys, as_index=False).mean(), on=wkeys, how="left")


def agentic_turns(rm: pd.DataFrame) -> pd.DataFrame:
    """The agentic_turns view: per-turn medians over session requests."""
    ag = rm[rm["session_id"].notna() & rm["ok"]]
    keys = ["campaign_id", "engine", "tp", "method", "workload", "turn"]
    return (
        ag.groupby(keys)
        .agg(
            n=("request_id", "size"),
            ttft_p50_s=("ttft_s", "median"),
            e2e_p50_s=("e2e_s", "median"),
            decode_tps_p50=("decode_tps", "median"),
            prompt_tokens_p50=("prompt_tokens", "median"),
            cached_tokens_p50=("cached_tokens", "median"),
            output_tokens_p50=("output_tokens", "median"),
        )
        .reset_index()
    )


def _meta(con: duckdb.DuckDBPyConnection, rounds: int = ROUNDS) -> None:
    """The raw campaigns, environment and services rows (a service per method and round)."""
    con.execute(
        "INSERT INTO campaigns VALUES (?, 'local', 'ab12', 'name: old', 'autoregressive',"
        " ?, ?, 'complete')",
        [OLD_CAMPAIGN, T0 - timedelta(days=3), T0 - timedelta(days=2)],
    )
    con.execute(
        "INSERT INTO campaigns VALUES (?, 'local', ?, ?, 'autoregressive', ?, NULL, 'interrupted')",
        [CAMPAIGN, "abc123def456" * 5, PLAN_YAML, T0],
    )
    env = [
        ("cpu.model", "AMD EPYC # 64-core"),
        ("engine.version", "b4500 (commit 1a2b_3c)"),
        ("server.prompt_cache", "enabled, 50% of RAM"),
        ("note", HOSTILE[0]),
        ("env.FLAGS", HOSTILE[4]),
    ]
    con.executemany(
        "INSERT INTO environment VALUES (?, 'localhost', ?, ?)", [[CAMPAIGN, k, v] for k, v in env]
    )
    for n, (run, method) in enumerate(start_order(rounds)):
        cmd = (
            f"llama-server --model /models/SmolLM2_135M.gguf --port 0 --spec {method} "
            + HOSTILE[1]
            + " "
            + HOSTILE[2]
        )
        at = T0 + timedelta(minutes=n)
        con.execute(
            "INSERT INTO services VALUES (?, ?, ?, 'llama.cpp', ?, 1, '', 'localhost', ?,"
            " ?, ?, ?, ?, 'stopped', NULL, ?, ?, ?, 1)",  # run, replica
            [
                f"svc-{method}" + ("" if run == 1 else f"/run{run}"),
                CAMPAIGN,
                f"cfg-{method}",
                method,
                cmd,
                at,
                at,
                at,
                1.5 + list(METHODS).index(method),
                "log: " + HOSTILE[3],
                TRANSPORT.get(method, "direct"),
                run,
            ],
        )


def start_order(rounds: int = ROUNDS) -> list[tuple[int, str]]:
    """(run, method) of every service start in the campaign's order: each round starts every
    method once, ORDER in odd rounds and its reverse in even ones (collect/scheduling/order.py)."""
    return [(r, m) for r in range(1, rounds + 1) for m in (ORDER if r % 2 else ORDER[::-1])]


def summaries(
    con: duckdb.DuckDBPyConnection, req: pd.DataFrame, rm: pd.DataFrame
) -> dict[str, pd.DataFrame]:
    """campaign_summary, environment_summary and service_summary (VIEWS.md), from the raw
    rows _meta wrote (the fixture has no units rows: every unit count is 0)."""
    camp = con.execute("SELECT * FROM campaigns").df()
    svc = con.execute("SELECT * FROM services").df()
    env = con.execute("SELECT * FROM environment").df()
    by_req, by_rm = req.groupby("campaign_id"), rm.groupby("campaign_id")
    camp["duration_s"] = (camp["finished_at"] - camp["started_at"]).dt.total_seconds()
    camp["n_services"] = camp["campaign_id"].map(svc.groupby("campaign_id").size())
    camp["n_services_failed"] = camp["campaign_id"].map(
        svc[svc["state"] == "failed"].groupby("campaign_id").size()
    )
    camp["n_units"] = camp["n_units_incomplete"] = 0
    camp["n_requests"] = camp["campaign_id"].map(by_req.size())
    camp["n_warmup"] = camp["campaign_id"].map(by_req["is_warmup"].sum())
    camp["n_measured"] = camp["campaign_id"].map(by_rm.size())
    camp = camp.fillna({c: 0 for c in camp.columns if c.startswith("n_")})
    camp["n_in_incomplete"] = camp["n_requests"] - camp["n_warmup"] - camp["n_measured"]
    camp["n_ok"] = camp["campaign_id"].map(by_rm["ok"].sum()).fillna(0)
    camp["n_failed"] = camp["n_measured"] - camp["n_ok"]
    camp["description"] = camp["campaign_id"].map({CAMPAIGN: DESCRIPTION}).fillna("")
    env["topic"] = env["key"].str.split(".").str[0]
    env["n_hosts"] = env.groupby("campaign_id")["host"].transform("nunique")
    svc = svc.drop(columns=["log_tail"])
    for col, rows in (
        ("n_warmup", req[req["is_warmup"]]),
        ("n_measured", rm),
        ("n_ok", rm[rm["ok"]]),
    ):
        svc[col] = svc["service_id"].map(rows.groupby("service_id").size()).fillna(0)
    svc["n_units"] = svc["n_units_incomplete"] = 0
    svc["n_failed"] = svc["n_measured"] - svc["n_ok"]
    svc["n_gpus"] = 0
    svc["own_flags"] = "--spec " + svc["method"] + " " + HOSTILE[4]
    return {
        "campaign_summary": camp,
        "environment_summary": env,
        "service_summary": svc,
        "host_summary": host_summary(),
    }


def host_summary() -> pd.DataFrame:
    """The host_summary view of _meta's facts (a CPU host, no GPUs)."""
    return pd.DataFrame(
        [
            {
                "campaign_id": CAMPAIGN,
                "host": "localhost",
                "os": "Linux 6.1",
                "cpu_model": "AMD EPYC # 64-core",
                "cpu_count": "2",
                "memory_gb": "7.8",
                "n_gpus": 0,
                "gpu_models": None,
                "gpu_memory_gib": None,
                "driver": None,
                "cuda": None,
                "engine_kind": "llamacpp",
                "engine_model": "/models/SmolLM2_135M.gguf",
                "engine_build": "b4500 (commit 1a2b_3c)",
                "python": "3.11.2",
                "specsweep_version": "0.1",
                "gpu_hour_usd": None,
                "n_services": len(METHODS) * ROUNDS,
            }
        ]
    )


ENERGY_KEY = ["campaign_id", "engine", "tp", "workload", "max_tokens", "concurrency", "method"]


def energy_objects(cs: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """window_energy and energy_ratio (VIEWS.md columns) for every config_summary window:
    J/token 2.0 for the baseline, 1.5 for dflash, 2.5 for ddtree_b8; dflash's chat window at
    concurrency 4 throttled (sw_power_cap) and its code_gen window sparse; price 3 USD per
    GPU-hour."""
    jpt = {"autoregressive": 2.0, "dflash": 1.5, "ddtree_b8": 2.5}
    we = cs[ENERGY_KEY + ["output_tokens_sum"]].copy()
    we["service_id"] = "svc-" + we["method"]
    we["window_id"] = we["method"] + "-" + we["workload"] + "-" + we["max_tokens"].astype(str)
    we["energy_j"] = we["method"].map(jpt) * we["output_tokens_sum"]
    we["busy_s"] = 10.0
    we["gpu_hour_usd"], we["n_gpus"] = 3.0, 1
    we["cost_per_mtok_usd"] = 3.0 * 10.0 / 3600 / we["output_tokens_sum"] * 1e6
    throttled = (we["method"] == "dflash") & (we["workload"] == "chat") & (we["concurrency"] == 4)
    sparse = (we["method"] == "dflash") & (we["workload"] == "code_gen")
    we["throttled"], we["sparse"] = throttled, sparse
    we["throttle_reasons"] = np.where(throttled, "sw_power_cap", "")
    we["clock_drop"] = False
    we["sm_clock_min_mhz"], we["sm_clock_median_mhz"] = 1980.0, 1980.0
    we["min_samples_per_gpu"] = np.where(sparse, 1, 50)
    we["max_gap_s"] = np.where(sparse, 5.0, 0.1)
    we["j_per_token"] = (we["energy_j"] / we["output_tokens_sum"]).where(~sparse)
    we["tokens_per_j"] = 1 / we["j_per_token"]
    rows = []
    for _, r in we[(we["method"] != "autoregressive") & ~sparse].iterrows():
        ratio = jpt[r["method"]] / 2.0
        rows.append(
            {
                **{k: r[k] for k in ENERGY_KEY},
                "baseline": "autoregressive",
                "is_control": False,
                "energy_ratio": ratio,
                "ci_low": ratio - 0.05,
                "ci_high": ratio + 0.05,
                "ci_reason": None,
                "p_value": 0.001,  # adjusted with the speedups (populate: one family)
                "df": 2.0,
                "log_se": 0.01,
                "n": 12,
                "n_prompts": 6,
            }
        )
    usable = we[~sparse]
    es = usable.groupby(ENERGY_KEY, as_index=False).agg(
        energy_j=("energy_j", "sum"),
        output_tokens_sum=("output_tokens_sum", "sum"),
        cost_per_mtok_usd=("cost_per_mtok_usd", "mean"),
    )
    es["j_per_token"] = es["energy_j"] / es["output_tokens_sum"]
    es["tokens_per_j"] = 1 / es["j_per_token"]
    ratio = pd.DataFrame(rows).astype({"ci_reason": "string"})
    return {"window_energy": we, "energy_summary": es, "energy_ratio": ratio}


def gpu_samples(req: pd.DataFrame, watts: float = 250.0) -> pd.DataFrame:
    """Raw gpu_samples for every window of `req`: GPU 0 at a constant power, every 0.1 s
    from 0 to past the window's last response."""
    rows = []
    keys = ["campaign_id", "service_id", "config_id", "workload", "window_id"]
    for key, win in req.groupby(keys):
        end = float((win["start_s"] + win["e2e_s"]).max())
        for i in range(int(end * 10) + 2):
            rows.append(
                {
                    **dict(zip(keys, key)),
                    "gpu_index": 0,
                    "t_s": i / 10,
                    "power_w": watts,
                    "energy_j": None,
                    "sm_clock_mhz": 1980.0,
                    "mem_clock_mhz": 2619.0,
                    "util_gpu_pct": 90.0,
                    "util_mem_pct": 30.0,
                    "memory_used_mib": 1000.0,
                    "temperature_c": 50.0,
                    "throttle_reasons": "",
                }
            )
    return pd.DataFrame(rows)


def populate(
    path: Path,
    agentic: bool = True,
    windows: list = WINDOWS,
    energy: bool = False,
    rounds: int = ROUNDS,
) -> Path:
    """Create the DuckDB file: raw tables from the DDL plus analysis tables (with GPU energy
    objects when `energy`), the campaign run in `rounds` rounds of service starts."""
    req = raw_requests(agentic, windows, rounds)
    rm = request_metrics(req)
    cs = config_summary(rm)
    with duckdb.connect(str(path)) as con:
        con.execute(DDL.read_text())
        _meta(con, rounds)
        con.register("req_df", req)
        con.execute("INSERT INTO requests BY NAME SELECT * FROM req_df")
        objects = summaries(con, req, rm)
        sv = start_variance(rm, con.execute("SELECT * FROM services").df())
        sp = speedup(rm, cs, sv)
        energy_frames = energy_objects(cs) if energy else {}
        adjust_family([(sp, "speedup")] + [(f, "energy_ratio") for f in
                      energy_frames.values() if "energy_ratio" in f])  # fmt: skip
        objects |= energy_frames | {
            "request_metrics": rm,
            "request_distribution": request_distribution(rm),
            "config_summary": cs,
            "speedup": sp,
            "start_variance": sv,
            "best_config": best_config(cs, sp),
            "agentic_turns": agentic_turns(rm),
            "crossover": crossover(sp),
        }
        objects["speedup_sweep"] = speedup_sweep(sp, objects["crossover"], cs)
        for name, frame in objects.items():
            con.register("obj_df", frame)
            con.execute(f"CREATE TABLE {name} AS SELECT * FROM obj_df")
            con.unregister("obj_df")
    return path


@pytest.fixture(scope="session")
def report_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A populated results file with agentic sessions."""
    return populate(tmp_path_factory.mktemp("db") / "specsweep.duckdb")


@pytest.fixture(scope="session")
def report_db_no_agentic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A populated results file without agentic sessions."""
    return populate(tmp_path_factory.mktemp("db2") / "specsweep.duckdb", agentic=False)


@pytest.fixture(scope="session")
def report_db_no_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A populated results file where every workload ran at a single concurrency."""
    windows = [w for w in WINDOWS if w[2] == 1]
    return populate(tmp_path_factory.mktemp("db3") / "specsweep.duckdb", False, windows)


@pytest.fixture(scope="session")
def report_db_energy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A populated results file with GPU energy objects."""
    return populate(tmp_path_factory.mktemp("db4") / "specsweep.duckdb", False, energy=True)


@pytest.fixture(scope="session")
def report_db_one_round(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A populated results file of one round: one start per configuration, no interval."""
    return populate(tmp_path_factory.mktemp("db5") / "specsweep.duckdb", False, rounds=1)


needs_latex = pytest.mark.skipif(shutil.which("latexmk") is None, reason="latexmk not installed")
