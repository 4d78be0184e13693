-- reads: analysis_params, config_summary, open_requests, rate_speedup, requests,
-- reads: speedup_decomposition
-- acceptance_by_load: acceptance length and the speedup's two factors against load, per
-- method, so that a reader sees which factor moves as the batch grows: a verify step costs
-- more in a fuller batch (step cost rises), while the drafts the target accepts should not
-- depend on who else is in the batch (acceptance stays flat).
-- grain: (campaign_id, engine, tp, workload, max_tokens, method, load_kind, load); key: the
-- same columns. load_kind 'concurrency' (closed loop: load = concurrency) or 'rate' (open loop:
-- load = the offered rate in req/s; ramps and trace replays have none and no row).
-- Rows: closed loop, one per speedup_decomposition row (30: every comparison whose method
--   has verify counts; no row for the baseline); open loop, one per rate_speedup comparison
--   (26) whose method has verify counts on a paired request.
-- Factors (the decomposition's; an identity, not a model: acceptance_gain / step_cost is the
-- speedup to rounding):
--   closed loop: speedup_decomposition's acceptance_gain, step_time_s, baseline_token_time_s,
--     step_cost (geometric means over the `speedup` table's own (run, prompt) cells) and the
--     `speedup` table's speedup, ci_low, ci_high (the paired t interval of stats/paired.py,
--     coverage checked by tests/unit/stats/test_paired_coverage.py)
--   open loop: over rate_speedup's request set (open_requests rows with steady, ok, tpot_s
--     and rate set; the prompts both M and the baseline measured at that rate; several
--     windows at a key pooled, runs not separated, as 26), per prompt c, means over its
--     requests, tokens = output_tokens - 1, steps = spec_verify_ct, decode_s = e2e_s - ttft_s:
--       g_c = mean over M's of ln(tokens / steps), s_c = mean over M's of ln(decode_s / steps),
--       b_c = mean over the baseline's of ln(tpot_s) = ln(decode_s / tokens)
--     acceptance_gain = exp(mean_c g_c), step_time_s = exp(mean_c s_c),
--     baseline_token_time_s = exp(mean_c b_c), step_cost = exp(mean_c (s_c - b_c));
--     speedup, ci_low, ci_high = rate_speedup's tpot_speedup, tpot_speedup_lo, _hi (the same
--     paired t interval on per-prompt ln TPOT ratios)
--   both: NULL when n_verified < n (a request without a verify count: the factors of a
--   subset would not be the speedup's)
-- Other columns:
--   accept_length      = the pooled acceptance length of M's ok requests at that load
--                        (schema/metrics.sql's accept_length_tw, sum(output_tokens - 1) /
--                        sum(spec_verify_ct)): closed loop config_summary.accept_length_tw of
--                        the window, open loop over every ok open_requests row of M at the
--                        rate (steady or not)
--   effective_concurrency = config_summary's for M's window (mean requests in flight); NULL
--                        for open loop
--   n_prompts, n, n_verified = prompts, M's requests, M's requests with spec_verify_ct > 0
--   lowest_load        = the lowest load of the row's series (campaign_id, engine, tp,
--                        workload, max_tokens, method, load_kind) at which both factors are
--                        known
--   acceptance_vs_lowest = acceptance_gain / acceptance_gain at lowest_load
--   step_cost_vs_lowest  = step_cost / step_cost at lowest_load (both NULL where a factor is)
-- The factors carry no interval of their own (no coverage test checks one): only the speedup
-- is printed with an interval. docs/decomposition-and-concurrency.md explains the split.

CREATE OR REPLACE TABLE acceptance_by_load AS

WITH

params AS (
    SELECT baseline FROM analysis_params
),

closed AS (
    SELECT
        d.campaign_id, d.engine, d.tp, d.workload, d.max_tokens, d.method,
        'concurrency' AS load_kind, d.concurrency::DOUBLE AS load,
        c.effective_concurrency, c.accept_length_tw AS accept_length,
        d.n_prompts, d.n, d.n_verified,
        d.acceptance_gain, d.step_time_s, d.baseline_token_time_s, d.step_cost,
        d.speedup, d.ci_low, d.ci_high
    FROM speedup_decomposition AS d
    LEFT JOIN config_summary AS c
        USING (campaign_id, engine, tp, workload, max_tokens, concurrency, method)
),

open_rows AS (
    SELECT
        o.campaign_id, o.engine, o.tp, o.workload, o.max_tokens, o.rate, o.method,
        o.prompt_id, o.ok, o.steady, o.tpot_s, o.output_tokens,
        o.output_tokens - 1 AS tokens,
        r.spec_verify_ct AS steps,
        o.e2e_s - o.ttft_s AS decode_s
    FROM open_requests AS o
    JOIN requests AS r USING (request_id)
    WHERE o.rate IS NOT NULL
),

-- rate_speedup's request set (26 via analyze/openloop.py's PAIRS_SQL)
usable AS (
    SELECT * FROM open_rows WHERE steady AND ok AND tpot_s IS NOT NULL
),

baseline_cells AS (
    SELECT u.campaign_id, u.tp, u.workload, u.max_tokens, u.rate, u.prompt_id,
           avg(ln(u.tpot_s)) AS b
    FROM usable AS u
    JOIN params AS p ON u.method = p.baseline
    GROUP BY ALL
),

method_cells AS (
    SELECT
        u.campaign_id, u.engine, u.tp, u.workload, u.max_tokens, u.rate, u.method, u.prompt_id,
        count(*) AS n,
        count(*) FILTER (WHERE u.steps > 0) AS n_verified,
        avg(ln(u.tokens / u.steps)) FILTER (WHERE u.steps > 0) AS g,
        avg(ln(u.decode_s / u.steps)) FILTER (WHERE u.steps > 0) AS s
    FROM usable AS u
    JOIN params AS p ON u.method <> p.baseline
    GROUP BY ALL
),

open_factors AS (
    SELECT
        m.campaign_id, m.engine, m.tp, m.workload, m.max_tokens, m.rate, m.method,
        count(*) AS n_prompts,
        sum(m.n)::BIGINT AS n,
        sum(m.n_verified)::BIGINT AS n_verified,
        exp(avg(m.g)) AS acceptance_gain,
        exp(avg(m.s)) AS step_time_s,
        exp(avg(b.b)) AS baseline_token_time_s,
        exp(avg(m.s - b.b)) AS step_cost
    FROM method_cells AS m
    JOIN baseline_cells AS b USING (campaign_id, tp, workload, max_tokens, rate, prompt_id)
    GROUP BY ALL
    HAVING sum(m.n_verified) > 0
),

open_pooled AS (
    SELECT campaign_id, engine, tp, workload, max_tokens, rate, method,
           accept_length_tw(ok, output_tokens, steps) AS accept_length
    FROM open_rows
    GROUP BY ALL
),

open_loop AS (
    SELECT
        f.campaign_id, f.engine, f.tp, f.workload, f.max_tokens, f.method,
        'rate' AS load_kind, f.rate AS load,
        NULL::DOUBLE AS effective_concurrency, a.accept_length,
        f.n_prompts, f.n, f.n_verified,
        CASE WHEN f.n_verified = f.n THEN f.acceptance_gain END AS acceptance_gain,
        CASE WHEN f.n_verified = f.n THEN f.step_time_s END AS step_time_s,
        CASE WHEN f.n_verified = f.n THEN f.baseline_token_time_s END AS baseline_token_time_s,
        CASE WHEN f.n_verified = f.n THEN f.step_cost END AS step_cost,
        s.tpot_speedup AS speedup, s.tpot_speedup_lo AS ci_low, s.tpot_speedup_hi AS ci_high
    FROM open_factors AS f
    LEFT JOIN open_pooled AS a USING (campaign_id, engine, tp, workload, max_tokens, rate, method)
    LEFT JOIN rate_speedup AS s USING (campaign_id, tp, workload, max_tokens, rate, method)
),

both_loops AS (
    SELECT * FROM closed
    UNION ALL BY NAME
    SELECT * FROM open_loop
),

anchored AS (
    SELECT
        *,
        min(load) FILTER (WHERE acceptance_gain IS NOT NULL AND step_cost IS NOT NULL) OVER (
            PARTITION BY campaign_id, engine, tp, workload, max_tokens, method, load_kind
        ) AS lowest_load
    FROM both_loops
),

final AS (
    SELECT
        a.campaign_id, a.engine, a.tp, a.workload, a.max_tokens, a.method, a.load_kind,
        a.load, a.effective_concurrency, a.n_prompts, a.n, a.n_verified, a.accept_length,
        a.acceptance_gain, a.step_time_s, a.baseline_token_time_s, a.step_cost,
        a.speedup, a.ci_low, a.ci_high, a.lowest_load,
        a.acceptance_gain / l.acceptance_gain AS acceptance_vs_lowest,
        a.step_cost / l.step_cost AS step_cost_vs_lowest
    FROM anchored AS a
    LEFT JOIN anchored AS l
        ON l.campaign_id = a.campaign_id AND l.engine = a.engine AND l.tp = a.tp
        AND l.workload = a.workload AND l.max_tokens = a.max_tokens
        AND l.method = a.method AND l.load_kind = a.load_kind AND l.load = a.lowest_load
)

SELECT * FROM final
