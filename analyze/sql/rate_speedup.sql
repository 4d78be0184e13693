-- reads: analysis_params, cache_hygiene, open_windows, rate_tpot
-- rate_speedup: speculation against the baseline in rate space, one row per method M that is
-- not the baseline (analysis_params.baseline) and swept rate at which both M and the baseline
-- ran open-loop windows.
-- grain: (campaign_id, tp, workload, max_tokens, rate, method); key: the same columns. Windows
-- without a single rate (ramps, trace replays) have none. The windows at a key are the
-- rounds' starts (one per round); their goodput is pooled over them.
-- Columns:
--   baseline          = the baseline method's name
--   n_pairs           = prompts both sides measured with a steady ok TPOT (open_requests:
--                       steady, ok, tpot_s not NULL); n_method, n_baseline = their requests
--   tpot_speedup      = the geometric mean over (run, prompt) of the baseline's steady TPOT
--                       over M's (> 1: M's tokens come faster), drift-corrected
--   tpot_speedup_lo, tpot_speedup_hi = its 95% interval with the start variance of ln TPOT
--                       pooled over the stratum's starts (stats/paired.py's interval, the
--                       one the closed-loop speedup uses; NULL with one start per side or
--                       below 3 prompts; computed by analyze/openloop.py into the TEMP table
--                       rate_tpot)
--   is_control        = M is the baseline's A/A control (analysis_params.aa_method)
--   tpot_ci_reason    = why there is no interval (one start, too few prompts, no spread)
--   p_value, p_holm   = the t test of no change, and Holm's adjustment over the campaign's
--                       claims (speedups, these ratios, energy ratios: one family,
--                       analyze.stats.adjust_family)
--   significant       = p_holm < 0.05 (NULL for the control and without pairs)
--   sim_ci_low, sim_ci_high = the simultaneous interval over the campaign's claims
--                       (level 1 - 0.05 / their count): what a pick among them quotes
--   method_goodput_rps, baseline_goodput_rps = sum(n_good) / sum(elapsed_s) of the key's
--                       windows, the rounds' starts (rate_attainment.goodput_rps; one window:
--                       its goodput_rps); NULL when a window of that side
--                       at the key fell behind its schedule (open_windows.goodput_rps withheld:
--                       that side was not offered the rate) or has an invalid_reason (its rows
--                       contradict its schedule: open_windows' header)
--   goodput_ratio     = method_goodput_rps / baseline_goodput_rps (NULL without an SLO, when
--                       either side fell behind, or when the baseline's goodput is 0). A POINT
--                       ESTIMATE: it has no interval and no test, and carries no start
--                       variance (each side's goodput over its rounds' starts has one:
--                       rate_attainment.goodput_lo, _hi); never a claim beside `significant`
--   baseline_saturated, method_saturated = a window of that side at the key is saturated
--   cache_mismatch    = a window of M at the key has cache_hygiene.cache_mismatch

CREATE OR REPLACE TABLE rate_speedup AS

WITH

params AS (
    SELECT baseline FROM analysis_params
),

per_key AS (
    SELECT
        campaign_id, tp, workload, max_tokens, rate, method,
        bool_or(saturated) AS saturated,
        bool_and(has_slo) AS has_slo,
        CASE WHEN NOT bool_or(behind_schedule OR invalid_reason IS NOT NULL) THEN
            sum(n_good) / nullif(sum(elapsed_s), 0) END AS goodput_rps
    FROM open_windows
    WHERE rate IS NOT NULL
    GROUP BY ALL
),

cache AS (
    SELECT campaign_id, tp, workload, max_tokens, rate, method,
           bool_or(cache_mismatch) AS cache_mismatch
    FROM cache_hygiene
    WHERE load <> 'closed' AND rate IS NOT NULL
    GROUP BY ALL
),

compared AS (
    SELECT
        m.campaign_id, m.tp, m.workload, m.max_tokens, m.rate, m.method, p.baseline,
        m.saturated AS method_saturated,
        b.saturated AS baseline_saturated,
        CASE WHEN m.has_slo THEN m.goodput_rps END AS method_goodput_rps,
        CASE WHEN b.has_slo THEN b.goodput_rps END AS baseline_goodput_rps
    FROM per_key AS m
    JOIN params AS p ON m.method <> p.baseline
    JOIN per_key AS b
        ON b.method = p.baseline
       AND b.campaign_id = m.campaign_id AND b.tp = m.tp AND b.workload = m.workload
       AND b.max_tokens = m.max_tokens AND b.rate = m.rate
),

final AS (
    SELECT
        c.campaign_id, c.tp, c.workload, c.max_tokens, c.rate, c.method, c.baseline,
        coalesce(t.n_pairs, 0) AS n_pairs,
        coalesce(t.n_method, 0) AS n_method,
        coalesce(t.n_baseline, 0) AS n_baseline,
        c.method = (SELECT aa_method FROM analysis_params) AS is_control,
        t.tpot_speedup, t.tpot_speedup_lo, t.tpot_speedup_hi, t.tpot_ci_reason,
        t.p_value, t.p_holm, t.significant, t.sim_ci_low, t.sim_ci_high,
        c.method_goodput_rps, c.baseline_goodput_rps,
        c.method_goodput_rps / nullif(c.baseline_goodput_rps, 0) AS goodput_ratio,
        c.baseline_saturated, c.method_saturated,
        k.cache_mismatch
    FROM compared AS c
    LEFT JOIN rate_tpot AS t USING (campaign_id, tp, workload, max_tokens, rate, method)
    LEFT JOIN cache AS k USING (campaign_id, tp, workload, max_tokens, rate, method)
)

SELECT * FROM final
