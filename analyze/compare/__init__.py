"""Compare two campaigns of one results file, and gate a candidate on a baseline
(`python -m analyze compare A B`, `python -m analyze gate --baseline A --candidate B
--max-regression 5%`). Run `python -m analyze` first: it reads the analysis layer.

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
        schema.paired (the geometric mean over prompts of the per-prompt ratio), its t
        interval and p-value, drift between campaigns entered as compare_stats says
    ttft_s_p90, tpot_s_p90: kind 'point', quantile(B, 0.9) / quantile(A, 0.9): a point
        estimate with no interval (no test has checked one's coverage), outside the family
    attainment: kind 'difference', share(B) - share(A) with Newcombe's interval
    value_a, value_b = the median (p90, share) of each side's values on those prompts
    p_holm          = Holm over every tested change of the comparison (one family)
    significant     = p_holm < 0.05 and, where drift is not measured, the change exceeds
                      compare_stats' default floor (docs/compare.md)
    significant_raw = the unadjusted interval excludes no change
    worse           = ratio < 1 where higher is better (decode_tps, accept_length,
                      attainment), > 1 where lower is better (TTFT, TPOT): the direction
                      of schema.metrics.CATALOG, the one place a metric's direction lives
    effect          = |ln(value ratio)|, the order of the list (significant changes first)

`speedup_ratio` puts each campaign's own speedup over its own baseline side by side (a
point estimate each). Windows present in one campaign only are listed, not dropped; the
environment diff lists every `environment` key whose value differs or exists on one side.

Stored: `store` writes the comparison into the tables of OBJECTS (the report reads them):
every row of the pair (a, b) is deleted and written anew in one transaction; other pairs'
rows stay. A table whose columns are not this module's (an older specsweep's) is dropped
and made anew. compare_changes' rank is the order of Comparison.changes.

Gate: a change fails when it is significant (Holm, drift rule) and worse, and its ratio is
worse than the threshold (decode_tps ratio < 1 - t, ttft_s ratio > 1 + t): significance and
size together, as asv's `compare` does. Exit codes: 0 pass, 1 a regression, 2 bad input.

Modules: match (windows, prompts, the changes), change (METRICS, Change and its verdict,
Comparison, the gate), stats (intervals, drift, the Newcombe difference, the floor rule),
prompts (same text and chat template?), store (the compare_* tables), text (what the command
prints). docs/compare.md is the user's page.
"""

from analyze.compare.change import HIGHER_IS_BETTER, METRICS, Change, Comparison, gate
from analyze.compare.match import COLUMNS, KEY, compare, load_label, resolve, window_text
from analyze.compare.store import OBJECTS, STORE_DDL, store
from analyze.compare.text import describe, drift_line, lines

__all__ = [
    "COLUMNS",
    "HIGHER_IS_BETTER",
    "KEY",
    "METRICS",
    "OBJECTS",
    "STORE_DDL",
    "Change",
    "Comparison",
    "compare",
    "describe",
    "drift_line",
    "gate",
    "lines",
    "load_label",
    "resolve",
    "store",
    "window_text",
]
