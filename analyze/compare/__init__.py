"""Compare two campaigns of one results file, and gate a candidate on a baseline
(`specsweep compare A B`, `specsweep gate --baseline A --candidate B
--max-regression 5%`). Run `specsweep analyze` first: it reads the analysis layer.

Windows are matched on (engine, tp, method, workload, max_tokens, concurrency, load), and
within a window on prompt_id and run:

- closed-loop windows: load 'closed', the measured requests of request_metrics;
- open-loop windows: load the arrival process as load_label writes it ('poisson 4 rps',
  'gamma(0.5) 4 rps', 'poisson linear ramp 1-8 rps', 'trace'), concurrency the window's
  max_concurrency cap (NULL: none), the steady ok requests of open_requests; and
  `attainment`, the share of the steady requests (failed ones included) that meet the
  campaign's SLO, only when both campaigns have the same objectives and trim (slo_targets;
  otherwise the environment diff shows the slo.* keys that differ).

A prompt pairs only when it is the same text under the same chat template in both
campaigns (prompts.PromptCheck, from each plan and the recorded request bodies);
one that differs is left out and listed (compare_prompts), as is a workload whose prompts
cannot be checked (a plan without its definition: an import).

Per matched window and metric, on the prompts both campaigns measured (positive values):

    decode_tps, ttft_s, tpot_s, accept_length: kind 'ratio', the paired ratio B/A of
        stats.paired (the geometric mean over prompts of the per-prompt ratio), round k of
        A paired with round k of B, its t interval and p-value with the start variance
        pooled from every configuration's starts of both campaigns (analyze.compare.variance,
        analyze.compare.stats); no interval with fewer than 2 paired rounds
    ttft_s_p90, tpot_s_p90: kind 'point', quantile(B, 0.9) / quantile(A, 0.9): a point
        estimate with no interval (no test has checked one's coverage), outside the family
    attainment: kind 'difference', share(B) - share(A) with Newcombe's interval and the
        start variance of a share
    value_a, value_b = the median (p90, share) of each side's values on those prompts
    n_runs          = the rounds paired (attainment: the fewer rounds of the two sides)
    start_source    = where the interval's start variance came from: 'pooled' (both
                      campaigns' starts of the engine, tp and load), 'own rounds' (the paired
                      rounds' own spread, where no pooled estimate exists), NULL (no interval)
    start_sd, start_df = the pooled sd of one start's effect (ln value; a share for
                      attainment) and its degrees of freedom; NULL where none was pooled
    p_holm          = Holm over every tested change of the comparison (one family)
    significant     = p_holm < 0.05
    significant_raw = the unadjusted interval excludes no change
    worse           = ratio < 1 where higher is better (decode_tps, accept_length,
                      attainment), > 1 where lower is better (TTFT, TPOT): the direction
                      of schema.metrics.CATALOG, the one place a metric's direction lives
    effect          = |ln(value ratio)|, the order of the list (significant changes first)

These columns replace issue 24's `drift` ('runs' | 'aa' | 'none') and `service_var` (the A/A
control's variance): the A/A control and the drift floor are gone, every interval carries
the start variance of both campaigns' starts, and a comparison without one has none.

`speedup_ratio` puts each campaign's own speedup over its own baseline side by side (a
point estimate each). Windows present in one campaign only are listed, not dropped; the
environment diff lists every `environment` key whose value differs or exists on one side.

Stored: `store` writes the comparison into the tables of OBJECTS (the report reads them):
every row of the pair (a, b) is deleted and written anew in one transaction; other pairs'
rows stay. A table whose columns are not this module's (an older specsweep's) is dropped
and made anew. compare_changes' rank is the order of Comparison.changes.

Campaign-wide shift (analyze.compare.stats.shift): kind 'shift', window SHIFT_WINDOW (every
column NULL but load 'all windows'), decode_tps over all matched windows: the mean over
paired rounds of the windows' mean per-round log ratio, its t interval from the rounds'
spread on R - 1 df; n_windows the windows averaged. Holm is weighted: the shift holds half
the family's level until it is rejected.

Gate: a change (the shift included) fails when it is significant (Holm) and worse, and its
ratio is worse than the threshold (decode_tps ratio < 1 - t, ttft_s ratio > 1 + t):
significance and size together, as asv's `compare` does. A change worse than the threshold
in its point estimate but without an interval (one start per side) cannot be decided. Exit
codes: 0 pass, 1 a regression, 2 bad input, 3 undecided (no regression, but a change the
gate cannot decide).

Modules: match (windows, prompts, the changes), change (METRICS, Change and its verdict,
Comparison, the gate and its exit codes), variance (the start variance pooled from both
campaigns), stats (intervals, the Newcombe difference), prompts (same text and chat
template?), store (the compare_* tables), text (what the command and the gate print).
docs/compare.md is the user's page.
"""

from specsweep.analyze.compare.change import (
    HIGHER_IS_BETTER,
    METRICS,
    PASS,
    REGRESSION,
    UNDECIDED,
    Change,
    Comparison,
    exit_code,
    gate,
    undecided,
)
from specsweep.analyze.compare.match import COLUMNS, KEY, compare, load_label, resolve, window_text
from specsweep.analyze.compare.store import OBJECTS, STORE_DDL, store
from specsweep.analyze.compare.text import describe, gate_lines, lines, start_line

__all__ = [
    "COLUMNS",
    "HIGHER_IS_BETTER",
    "KEY",
    "METRICS",
    "OBJECTS",
    "PASS",
    "REGRESSION",
    "STORE_DDL",
    "UNDECIDED",
    "Change",
    "Comparison",
    "compare",
    "describe",
    "exit_code",
    "gate",
    "gate_lines",
    "lines",
    "load_label",
    "resolve",
    "start_line",
    "store",
    "undecided",
    "window_text",
]
