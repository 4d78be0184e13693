"""Service starts as the replicate: the start-to-start variance and the drift, pooled.

A campaign runs in rounds (plan `repeat`, 3 by default): each round starts every configuration
of a phase once, in a counterbalanced order (collect.scheduling.order), and measures all its
windows on that start. The start is what varies most (a restart moves speed more than prompts
do), and every window of one start shares its effect. The model of one metric's ln value in a
window, config c, round r, prompt p:

    y[c, r, p] = mu_c + pi_p + (c x p) + rho_r + beta t[c, r] + s[c, r] + e[c, r, p]

rho_r is the round's effect (the same for every configuration, so it cancels in a paired
comparison), t[c, r] the start's position in the campaign's order (0, 1, ...: services by
requested_at), beta the drift per start, s[c, r] the start's own effect (variance sigma_s^2,
shared by every window of the start) and e the cell noise.

Estimator (method of moments, per stratum: one engine, tp and load level, the windows that
share starts). In each window the (C, R, P) table of complete cells gives the config x round
interaction I[c, r] (its double-centred means over prompts) and the three-way residual mean
square MS_e (cell noise, (C-1)(R-1)(P-1) degrees of freedom). Then, over the stratum's windows
w, with T the double-centred start positions:

    beta   = sum_w P_w <I_w, T_w> / sum_w P_w |T_w|^2            (when k >= 3 and T varies)
    A      = sum_w |I_w - beta T_w|^2 / (sum_w k_w - 1{drift})       ~ sigma_s^2 + noise / P
    B      = sum_w k_w MS_e,w / P_w / sum_w k_w                       ~ noise / P
    s2     = A - B, set to 0 when A < B F_0.75(df_A, df_B) (Bancroft's sometimes-pool rule,
             as stats.paired uses for runs: truncation alone over-covers)
    df     = Satterthwaite's (A - B)^2 / (A^2 / df_A + B^2 / df_B)
    df_A   = k - 1{drift}, k = starts - configs - rounds + 1 over the stratum's starts: the
             independent start contrasts. Windows share their starts, so they add no start
             draws: k, not sum_w k_w, even where each window alone has k_w of them.

Drift is a covariate (an ANCOVA in a randomised design): the counterbalanced order cancels it
from the point estimate in pairs of rounds, and estimating it removes it from the variance too
(without it, 3% drift per start made 2-round intervals cover 99.5-100%). Its variance is A over
the stratum's mean |T|^2 (again not divided by the number of windows).

Abstention: with k < 2 (two configurations measured in two rounds leave one contrast) the start
variance rests on one degree of freedom; the t interval built on it covered 90% at a start sd of
0.2 (docs/measurements/2026-12-05-starts-as-replicates.md), so no interval is given.

numpy and scipy only: the statistics room every stage may import (stats/).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specsweep.stats import dist

POOL_ALPHA = 0.25  # Bancroft's preliminary test, as stats.paired's for runs
MIN_CONTRASTS = 2  # independent start contrasts the start variance must rest on
MIN_DRIFT_CONTRASTS = 3  # a drift slope takes one of them


@dataclass(frozen=True)
class StartTable:
    """One window's complete cells: y[c, r, p] (ln values, every config in every round on
    every prompt) and t[c, r] (each start's position in the campaign's order). configs and
    rounds label the rows and columns (used to count the stratum's distinct starts)."""

    y: np.ndarray
    t: np.ndarray
    configs: tuple[str, ...]
    rounds: tuple[int, ...]


@dataclass(frozen=True)
class StartVariance:
    """A stratum's start-to-start variance and drift (module docstring); reason says why
    there is none (then comparisons in the stratum get no interval)."""

    s2: float = 0.0  # sigma_s^2: the variance of one start's effect on the ln value
    df: float = float("inf")  # its degrees of freedom
    drift: float = 0.0  # beta: change of the ln value per start (0: not estimated)
    drift_var: float = 0.0  # the variance of beta
    drift_df: float = float("inf")  # df_A: the degrees of freedom of beta's variance
    contrasts: int = 0  # k: the independent start contrasts
    starts: int = 0
    configs: int = 0
    rounds: int = 0
    windows: int = 0
    ms_start: float | None = None  # A
    ms_noise: float | None = None  # B
    pooled: bool = False  # Bancroft: starts showed no more than the cells' noise (s2 = 0)
    reason: str | None = None

    @property
    def usable(self) -> bool:
        return self.reason is None

    @property
    def has_drift(self) -> bool:
        return self.drift_var > 0


def _double_centred(x: np.ndarray) -> np.ndarray:
    return x - x.mean(axis=1, keepdims=True) - x.mean(axis=0, keepdims=True) + x.mean()


def _window_parts(y: np.ndarray) -> tuple[np.ndarray, float, int]:
    """(I, MS_e, df_e) of one (C, R, P) table: the config x round interaction of the means
    over prompts, and the three-way residual mean square."""
    n_c, n_r, n_p = y.shape
    m_cr, m_cp, m_rp = y.mean(axis=2), y.mean(axis=1), y.mean(axis=0)
    m_c, m_r, m_p, grand = y.mean(axis=(1, 2)), y.mean(axis=(0, 2)), y.mean(axis=(0, 1)), y.mean()
    resid = (y - m_cr[:, :, None] - m_cp[:, None, :] - m_rp[None, :, :] + m_c[:, None, None]
             + m_r[None, :, None] + m_p[None, None, :] - grand)  # fmt: skip
    df_e = (n_c - 1) * (n_r - 1) * (n_p - 1)
    return _double_centred(m_cr), float((resid**2).sum()) / df_e, df_e


def start_variance(tables: Sequence[StartTable]) -> StartVariance:
    """The stratum's StartVariance from its windows' complete tables (module docstring).
    Tables with fewer than 2 configs, rounds or prompts add nothing."""
    tables = [t for t in tables if min(t.y.shape) >= 2]
    starts = {(c, r) for t in tables for c in t.configs for r in t.rounds}
    configs, rounds = {c for c, _ in starts}, {r for _, r in starts}
    k = len(starts) - len(configs) - len(rounds) + 1 if starts else 0
    counts = {"contrasts": k, "starts": len(starts), "configs": len(configs),
              "rounds": len(rounds), "windows": len(tables)}  # fmt: skip
    if k < MIN_CONTRASTS:
        return StartVariance(reason=_too_few(counts), **counts)
    parts = [_window_parts(t.y) for t in tables]
    sizes = np.array([t.y.shape[2] for t in tables], dtype=float)
    ks = np.array([(t.y.shape[0] - 1) * (t.y.shape[1] - 1) for t in tables], dtype=float)
    spread = [_double_centred(t.t.astype(float)) for t in tables]
    # positions are whole numbers: a double-centred one that is not 0 is at least 1 / (C R);
    # below 1e-9 it is rounding (the order added nothing to config + round: no drift to see)
    spread = [np.where(np.abs(s) > 1e-9, s, 0.0) for s in spread]
    span = sum(p * float((s**2).sum()) for p, s in zip(sizes, spread))
    drifts = k >= MIN_DRIFT_CONTRASTS and span > 0
    beta = sum(p * float((i * s).sum()) for p, (i, _, _), s in zip(sizes, parts, spread)) / span \
        if drifts else 0.0  # fmt: skip
    df_a = float(k - drifts)
    ms_start = sum(float(((i - beta * s) ** 2).sum())
                   for (i, _, _), s in zip(parts, spread)) / (ks.sum() - drifts)  # fmt: skip
    ms_noise = float(sum(kw * ms_e / p for kw, (_, ms_e, _), p in zip(ks, parts, sizes)) / ks.sum())
    df_b = float(sum(df_e for _, _, df_e in parts))
    s2, df, pooled = _component(ms_start, df_a, ms_noise, df_b)
    mean_span = span / float(sizes.sum())
    return StartVariance(
        float(s2), float(df), float(beta), float(ms_start / mean_span) if drifts else 0.0,
        df_a if drifts else float("inf"), ms_start=float(ms_start), ms_noise=float(ms_noise),
        pooled=pooled, **counts,
    )  # fmt: skip


def _component(a: float, df_a: float, b: float, df_b: float) -> tuple[float, float, bool]:
    """(s2, df, pooled): A - B with Satterthwaite's df, or 0 when A does not exceed B by
    Bancroft's preliminary F test (then df is df_A's, unused)."""
    if df_b <= 0:
        return a, df_a, False
    if a <= b * float(dist.f_ppf(1 - POOL_ALPHA, df_a, df_b)):
        return 0.0, df_a, True
    s2 = a - b
    return s2, s2**2 / (a**2 / df_a + b**2 / df_b), False


def _too_few(counts: dict[str, int]) -> str:
    if counts["rounds"] < 2:
        return "one service start per configuration: the start-to-start variance was not sampled"
    return (
        f"{counts['starts']} service starts of {counts['configs']} configurations in "
        f"{counts['rounds']} rounds leave {counts['contrasts']} independent start contrast(s); "
        f"the start variance needs {MIN_CONTRASTS}"
    )
