"""The start variance of every stratum, for each metric a paired ratio is taken of, and the
`start_variance` table that shows it (the model and estimator: stats/starts.py).

A stratum is the windows that share service starts and a load level: (campaign_id, engine,
tp, concurrency) for closed-loop windows, (campaign_id, engine, tp, rate) for open-loop ones.
Each configuration's requests in a window become cells (run, prompt): the mean ln value and the
mean start position of the requests' services (table service_starts). A window's complete
table keeps the rounds the baseline measured, the configurations measured in every one of
them, and the prompts in every such cell; a stratum's tables give one StartVariance.

start_variance, one row per (campaign_id, metric, engine, tp, load, level):

    start_sd         = sqrt(s2): the sd of one start's effect on ln value (0.05: a start moves
                       the metric by about 5%); NULL where there is none (reason)
    df               = its degrees of freedom (stats.starts)
    start_spread     = exp(t_{df, 0.975} sqrt(2 s2)): two starts of one service land within
                       [1 / start_spread, start_spread] of each other 95% of the time (the
                       noise floor the report draws)
    drift_per_start  = exp(beta) - 1: the metric's change per start along the campaign's
                       order; drift_low, drift_high its 95% t interval on df_A (NULL: no drift
                       estimated, fewer than 3 contrasts)
    contrasts, starts, configs, rounds, windows = what it rests on; pooled = the starts showed
                       no more spread than the cells' noise (s2 set to 0); reason = why no
                       estimate (comparisons in the stratum then have no interval)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from specsweep.stats import dist
from specsweep.stats.paired import LEVEL, RunSpread, Speedup, cell_log_ratios, interval, run_spread
from specsweep.stats.starts import StartTable, StartVariance, start_variance

CLOSED_STRATUM = ["campaign_id", "engine", "tp", "concurrency"]


@dataclass(frozen=True)
class Side:
    """One configuration's values in one window: value j is of run[j], prompt[j] (an ordinal
    shared by every configuration of the window) and the start at position start[j]."""

    values: np.ndarray
    run: np.ndarray
    prompt: np.ndarray
    start: np.ndarray

    def cells(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, float]]:
        """(runs, prompts, mean ln value) of each (run, prompt) cell, and run -> the mean start
        position of the run's values (computed once: a side is read by its window's table and
        by each comparison)."""
        return self._cells

    @cached_property
    def _cells(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, float]]:
        code = self.run.astype(np.int64) * (int(self.prompt.max(initial=0)) + 1) + self.prompt
        keys, inverse = np.unique(code, return_inverse=True)
        count = np.bincount(inverse)
        mean = np.bincount(inverse, np.log(self.values)) / count
        width = int(self.prompt.max(initial=0)) + 1
        runs, where = np.unique(self.run, return_inverse=True)
        position = np.bincount(where, self.start) / np.bincount(where)
        return keys // width, keys % width, mean, dict(zip(runs.tolist(), position.tolist()))


def window_table(sides: dict[str, Side], baseline: str) -> StartTable | None:
    """The window's complete (config x round x prompt) table (module docstring); None when
    the baseline is missing or fewer than 2 configurations remain."""
    if baseline not in sides:
        return None
    cells = {name: side.cells() for name, side in sides.items()}
    rounds = sorted(cells[baseline][3])
    grids = {}
    for name, (run, prompt, mean, _) in cells.items():
        if set(cells[name][3]) >= set(rounds):
            grids[name] = {(r, p): m for r, p, m in zip(run.tolist(), prompt.tolist(), mean)}
    if len(grids) < 2 or len(rounds) < 2:
        return None
    prompts = sorted(set.intersection(*({p for r, p in g if r in rounds} for g in grids.values())))
    prompts = [p for p in prompts if all((r, p) in g for g in grids.values() for r in rounds)]
    if len(prompts) < 2:
        return None
    names = sorted(grids)
    y = np.array([[[grids[n][(r, p)] for p in prompts] for r in rounds] for n in names])
    t = np.array([[cells[n][3][r] for r in rounds] for n in names])
    if np.isnan(t).any():  # imported rows have no service start: no drift to estimate
        t = np.zeros_like(t)
    return StartTable(y, t, tuple(names), tuple(rounds))


def stratum_variances(
    tables: Iterable[tuple[tuple, StartTable | None]],
) -> dict[tuple, StartVariance]:
    """stratum key -> its StartVariance, from (stratum key, window table) pairs."""
    grouped: dict[tuple, list[StartTable]] = {}
    for key, table in tables:
        grouped.setdefault(key, [])
        if table is not None:
            grouped[key].append(table)
    return {key: start_variance(found) for key, found in grouped.items()}


def dt(m: Side, b: Side, runs: list[int]) -> np.ndarray:
    """M's mean start position minus the baseline's, per run of `runs` (0 where unknown)."""
    m_at, b_at = m.cells()[3], b.cells()[3]
    return np.nan_to_num(np.array([m_at[r] - b_at[r] for r in runs], dtype=float))


@dataclass(frozen=True)
class Compared:
    """One comparison's figures: its interval (stats.paired.interval with the stratum's
    start variance), the spread of its runs, the stratum's StartVariance and the factor the
    drift correction multiplied the speedup by."""

    result: Speedup
    spread: RunSpread
    start: StartVariance
    drift_correction: float
    n: int  # M's values used
    n_baseline: int  # the baseline's


def complete(m: Side, b: Side) -> tuple[Side, Side] | None:
    """The two sides restricted to a full run x prompt crossing: the runs both measured, and
    the prompts both measured in every one of them; None when nothing is left."""
    runs = np.intersect1d(m.run, b.run)
    m_cells, b_cells = set(zip(m.run.tolist(), m.prompt.tolist())), set(
        zip(b.run.tolist(), b.prompt.tolist()))  # fmt: skip
    prompts = [p for p in np.intersect1d(m.prompt, b.prompt).tolist()
               if all((r, p) in m_cells and (r, p) in b_cells for r in runs.tolist())]  # fmt: skip
    if not prompts:
        return None
    kept = [np.isin(s.run, runs) & np.isin(s.prompt, prompts) for s in (m, b)]
    return tuple(Side(s.values[k], s.run[k], s.prompt[k], s.start[k]) for s, k in zip((m, b), kept))


def log_ratios(m: Side, b: Side) -> tuple[np.ndarray, list[int]]:
    """The (R, P) matrix d = mean ln M - mean ln B over the comparison's runs and prompts
    (both numbered 0.. here in order), and the runs as stored."""
    runs, run = np.unique(np.concatenate([m.run, b.run]), return_inverse=True)
    prompt = np.unique(np.concatenate([m.prompt, b.prompt]), return_inverse=True)[1]
    n = len(m.run)
    d = cell_log_ratios(m.values, run[:n], prompt[:n], b.values, run[n:], prompt[n:])
    return d, runs.tolist()


def compare_all(
    comparisons: list[tuple[tuple, tuple, str, str, Side, Side]],
    level: float = LEVEL,
    invert: bool = False,
) -> tuple[list[Compared | None], dict[tuple, StartVariance]]:
    """Every comparison with its stratum's start variance (None: no prompt crossed with every
    run on both sides, complete()). A comparison is (window key,
    stratum key, method, baseline, M's side, the baseline's side); the windows' configurations
    are the methods compared in them and their baseline. invert: the ratio is the baseline's
    value over M's (a time, TPOT, whose ratio is a speedup the other way round)."""
    windows: dict[tuple, tuple[tuple, dict[str, Side], str]] = {}
    for window, stratum, method, baseline, m, b in comparisons:
        entry = windows.setdefault(window, (stratum, {}, baseline))[1]
        entry[method], entry[baseline] = m, b
    variances = stratum_variances(
        (stratum, window_table(sides, baseline)) for stratum, sides, baseline in windows.values()
    )
    out: list[Compared | None] = []
    for _, stratum, _, _, m, b in comparisons:
        both = complete(m, b)
        if both is None:
            out.append(None)
            continue
        top, bottom = both[::-1] if invert else both
        d, runs = log_ratios(top, bottom)
        start, delta = variances[stratum], dt(top, bottom, runs)
        correction = float(np.exp(-start.drift * delta.mean())) if start.usable else 1.0
        out.append(Compared(interval(d, level, start, delta), run_spread(d), start, correction,
                            len(both[0].values), len(both[1].values)))  # fmt: skip
    return out, variances


START_VARIANCE_DDL = """
CREATE OR REPLACE TABLE start_variance (
    campaign_id      VARCHAR NOT NULL,
    metric           VARCHAR NOT NULL,   -- decode_tps | tpot_s | j_per_token
    engine           VARCHAR NOT NULL,
    tp               INTEGER NOT NULL,
    load             VARCHAR NOT NULL,   -- 'concurrency' (closed loop) or 'rate' (open loop)
    level            DOUBLE NOT NULL,    -- the concurrency or the rate
    start_sd         DOUBLE,             -- sd of one start's effect on ln value (NULL: reason)
    df               DOUBLE,
    start_spread     DOUBLE,             -- two starts land within [1/x, x] 95% of the time
    drift_per_start  DOUBLE,             -- exp(beta) - 1 along the campaign's start order
    drift_low        DOUBLE,
    drift_high       DOUBLE,
    contrasts        INTEGER NOT NULL,   -- independent start contrasts: starts-configs-rounds+1
    starts           INTEGER NOT NULL,
    configs          INTEGER NOT NULL,
    rounds           INTEGER NOT NULL,
    windows          INTEGER NOT NULL,
    pooled           BOOLEAN NOT NULL,   -- starts no more spread than cell noise: start_sd 0
    reason           VARCHAR,            -- why there is no estimate
    PRIMARY KEY (campaign_id, metric, engine, tp, load, level)
)
"""


def start_spread(start: StartVariance, level: float = LEVEL) -> float | None:
    """exp(t_{df, (1 + level) / 2} sqrt(2 s2)): two starts of one service land within
    [1 / x, x] of each other with probability `level` (None without an estimate)."""
    if not start.usable:
        return None
    return float(np.exp(dist.t_ppf((1 + level) / 2, start.df) * (2 * start.s2) ** 0.5))


def variance_rows(
    found: dict[tuple, StartVariance], metric: str, load: str, level: float = LEVEL
) -> pd.DataFrame:
    """start_variance rows of one metric: found's keys are (campaign_id, engine, tp, level)."""
    records = []
    for (campaign_id, engine, tp, value), v in found.items():
        q_drift = float(dist.t_ppf((1 + level) / 2, v.drift_df)) if v.has_drift else None
        half = q_drift * v.drift_var**0.5 if q_drift is not None else None
        records.append({
            "campaign_id": campaign_id, "metric": metric, "engine": engine, "tp": int(tp),
            "load": load, "level": float(value),
            "start_sd": v.s2**0.5 if v.usable else None, "df": v.df if v.usable else None,
            "start_spread": start_spread(v, level),
            "drift_per_start": float(np.expm1(v.drift)) if v.has_drift else None,
            "drift_low": float(np.expm1(v.drift - half)) if half is not None else None,
            "drift_high": float(np.expm1(v.drift + half)) if half is not None else None,
            "contrasts": v.contrasts, "starts": v.starts, "configs": v.configs,
            "rounds": v.rounds, "windows": v.windows, "pooled": v.pooled, "reason": v.reason,
        })  # fmt: skip
    return pd.DataFrame.from_records(records)
