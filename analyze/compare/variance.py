"""The start variance a change between two campaigns carries (docs/compare.md).

Two campaigns are two sets of service starts. A start moves speed more than prompts do, and
B/A of one window carries B's starts' effects against A's. Each campaign measured every
configuration in rounds, one start each, so its starts show how far another start would
land. This module pools them, per metric and stratum: one engine, tp and load level (the
window key's engine, tp, concurrency and load), the windows that share starts.

Ratio metrics (decode_tps, ttft_s, tpot_s, accept_length). Per campaign, every window of the
stratum gives its complete (configuration x round x prompt) table of mean ln values
(analyze.starts.window_table, every method of the window, the campaign's baseline as the
table's baseline; for acceptance length, which the baseline lacks, the method of the most
rounds), and stats.starts.start_variance turns the stratum's tables into sigma_s^2
on its degrees of freedom. The two campaigns' estimates become one (combine):

    s2 = (df_A s2_A + df_B s2_B) / (df_A + df_B),   df = df_A + df_B,   drift 0

the one usable estimate where only one campaign's is (a campaign of one configuration, or of
two configurations in two rounds, leaves too few start contrasts). Drift is 0: the start
positions of two campaigns lie on two different axes, so no drift term can be carried from
one to the other (each campaign's own drift is removed before its s2 is estimated).

SLO attainment (a share). Per campaign and stratum, every configuration's starts give one
share each (its steady requests of that round in one window, n >= 2). Within a configuration
the shares of its R_c starts vary by the start and by the binomial draw:

    A_w = sum_c sum_r (p_cr - mean_r p_cr)^2 / sum_c (R_c - 1)
    B_w = sum_c (R_c - 1) mean_r p_cr (1 - p_cr) / (n_cr - 1) / sum_c (R_c - 1)
    s2  = max(0, mean_w A_w - mean_w B_w),   df = sum_c (R_c - 1) over the stratum

Windows of one stratum share their starts, so df counts each start once (starts minus
configurations), however many windows measured it. Below MIN_CONTRASTS degrees of freedom
there is no estimate. The two campaigns' shares combine as the ratios' do.

Round effects (the host's load during one round, shared by every configuration of it) cancel
within a campaign and not between two; nor does a shift of the whole campaign (another day,
another host). The first is not in the interval; the second is what a comparison exists to
find, and the environment diff names its likely cause.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

import numpy as np

from specsweep.analyze.starts import Side, window_table
from specsweep.stats.starts import MIN_CONTRASTS, StartTable, StartVariance, start_variance

# one side of one window and metric: (run, prompt_id) -> values
Cells = dict[tuple[int, str], list[float]]
# campaign -> window key -> column -> Cells
Values = Mapping[str, Mapping[tuple, Mapping[str, Cells]]]
# campaign -> window key -> run -> the start positions of its requests' services
Starts = Mapping[str, Mapping[tuple, Mapping[int, list[float]]]]
NO_TABLE = (
    "no window of this engine, tp and load has 2 configurations measured in 2 rounds in "
    "either campaign: the start variance was not sampled"
)


def stratum(key: tuple) -> tuple:
    """A window key's stratum: engine, tp, concurrency, load (analyze.compare.KEY's order)."""
    return key[0], key[1], key[5], key[6]


def combine(*found: StartVariance | None) -> StartVariance:
    """The campaigns' start variances of a stratum as one (module docstring; None: the
    campaign has no window table there); unusable with their reasons where none is usable."""
    usable = [v for v in found if v is not None and v.usable]
    if not usable:
        reasons = dict.fromkeys(v.reason for v in found if v is not None and v.reason)
        return StartVariance(reason="; ".join(reasons) or NO_TABLE)
    df = sum(v.df for v in usable)
    return StartVariance(
        sum(v.df * v.s2 for v in usable) / df, df,
        contrasts=sum(v.contrasts for v in usable), starts=sum(v.starts for v in usable),
        configs=max(v.configs for v in usable), rounds=max(v.rounds for v in usable),
        windows=sum(v.windows for v in usable), pooled=all(v.pooled for v in usable),
    )  # fmt: skip


def _side(cells: Cells, at: Mapping[int, list[float]], prompts: dict[str, int]) -> Side:
    """analyze.starts' Side of one configuration's cells (prompt ordinals of the window)."""
    flat = [(r, prompts[p], v) for (r, p), vs in sorted(cells.items()) for v in vs]
    run, prompt, values = (np.asarray(c) for c in zip(*flat))
    means = {r: float(np.mean(v)) for r, v in at.items() if v}
    start = np.array([means.get(r, np.nan) for r in run.tolist()])
    return Side(values.astype(float), run.astype(np.int64), prompt.astype(np.int64), start)


def _tables(
    campaign: Mapping[tuple, Mapping[str, Cells]],
    starts: Mapping[tuple, Mapping[int, list[float]]],
    column: str,
    baseline: str | None,
) -> dict[tuple, list[StartTable]]:
    """stratum -> the campaign's complete window tables of one column."""
    windows: dict[tuple, dict[str, tuple]] = defaultdict(dict)
    for key, columns in campaign.items():
        if columns.get(column):
            windows[(stratum(key), key[3], key[4])][key[2]] = (columns[column], starts.get(key, {}))
    tables: dict[tuple, list[StartTable]] = defaultdict(list)
    for window, methods in windows.items():
        names = {p for cells, _ in methods.values() for _, p in cells}
        prompts = {p: i for i, p in enumerate(sorted(names))}
        sides = {m: _side(cells, at, prompts) for m, (cells, at) in methods.items()}
        if (table := window_table(sides, _table_baseline(sides, baseline))) is not None:
            tables[window[0]].append(table)
    return tables


def _table_baseline(sides: Mapping[str, Side], baseline: str | None) -> str:
    """The campaign's baseline where it measured the metric; else (acceptance length, which
    plain decoding has none of) the configuration of the most rounds, first by name. The
    table's baseline only picks the rounds: the estimator treats configurations alike."""
    if baseline in sides:
        return baseline
    return min(sides, key=lambda m: (-len(np.unique(sides[m].run)), m))


def ratio_variances(
    values: Values, starts: Starts, baselines: Mapping[str, str], column: str
) -> dict[tuple, StartVariance]:
    """stratum -> both campaigns' start variance of one ratio metric, combined."""
    per = [
        {s: start_variance(t) for s, t in _tables(windows, starts[cid], column,
                                                  baselines.get(cid)).items()}
        for cid, windows in values.items()
    ]  # fmt: skip
    return _combined(per)


def _combined(per: list[dict[tuple, StartVariance]]) -> dict[tuple, StartVariance]:
    """stratum -> the campaigns' estimates (per: one stratum -> StartVariance per campaign)
    combined."""
    return {s: combine(*(p.get(s) for p in per)) for s in set().union(*per)}


def _shares(cells: Cells) -> tuple[np.ndarray, np.ndarray, set[int]]:
    """(share, requests, runs) of each run of one configuration's met flags with n >= 2."""
    by_run: dict[int, list[float]] = defaultdict(list)
    for (run, _), flags in cells.items():
        by_run[run] += flags
    kept = {r: f for r, f in by_run.items() if len(f) >= 2}
    return (np.array([np.mean(f) for f in kept.values()]),
            np.array([len(f) for f in kept.values()], dtype=float), set(kept))  # fmt: skip


def _window_share(methods: Mapping[str, Cells]) -> tuple[float, float, dict[str, set[int]]]:
    """(A_w, B_w, configuration -> its runs) of one window (module docstring); A_w is NaN
    where no configuration has 2 starts."""
    ss = binomial = dof = 0.0
    runs: dict[str, set[int]] = {}
    for name, cells in methods.items():
        p, n, found = _shares(cells)
        if len(p) < 2:
            continue
        ss += float(((p - p.mean()) ** 2).sum())
        binomial += (len(p) - 1) * float(np.mean(p * (1 - p) / (n - 1)))
        dof += len(p) - 1
        runs[name] = found
    return (ss / dof, binomial / dof, runs) if dof else (np.nan, np.nan, runs)


def share_variance(windows: list[Mapping[str, Cells]]) -> StartVariance:
    """One campaign's start variance of an SLO share in one stratum: windows are each
    window's configuration -> met-flag cells (module docstring)."""
    parts = [_window_share(methods) for methods in windows]
    parts = [p for p in parts if not np.isnan(p[0])]
    runs: dict[str, set[int]] = defaultdict(set)
    for _, _, found in parts:
        for name, rs in found.items():
            runs[name] |= rs
    df = sum(len(rs) - 1 for rs in runs.values())
    if df < MIN_CONTRASTS:
        return StartVariance(reason=_too_few_shares(df), contrasts=df)
    a, b = (float(np.mean([p[i] for p in parts])) for i in (0, 1))
    return StartVariance(max(0.0, a - b), float(df), contrasts=df, configs=len(runs),
                         windows=len(parts), ms_start=a, ms_noise=b, pooled=a <= b)  # fmt: skip


def _too_few_shares(df: int) -> str:
    if df == 0:
        return "one service start per configuration: the start variance of a share was not sampled"
    return (
        f"the starts leave {df} degree(s) of freedom for a share's start variance (starts "
        f"minus configurations); it needs {MIN_CONTRASTS}"
    )


def share_variances(met: Values) -> dict[tuple, StartVariance]:
    """stratum -> both campaigns' start variance of an SLO share, combined."""
    per = []
    for windows in met.values():
        grouped: dict[tuple, dict[tuple, dict[str, Cells]]] = defaultdict(lambda: defaultdict(dict))
        for key, columns in windows.items():
            grouped[stratum(key)][(key[3], key[4])][key[2]] = columns.get("met", {})
        per.append({s: share_variance(list(w.values())) for s, w in grouped.items()})
    return _combined(per)
