-- reads: analysis_params, incomplete_units, measured_requests, open_requests, services, windows
-- cache_hygiene: one row per measured window of either kind (closed- and open-loop): what was
-- done to the server's prefix cache before it and how much of the prompts a cache served.
-- Windows of a unit marked incomplete are left out (as their requests are).
-- grain: window; key: (campaign_id, window_id).
-- Columns: campaign_id, window_id, config_id, run, method, tp, workload, max_tokens, load,
-- rate, ramp, ramp_start_rate, ramp_end_rate, burstiness, cache_reset (windows), plus
--   concurrency   = windows.max_concurrency, 0 when NULL (closed loop: the requests in
--                   flight; open loop: the cap, 0 = uncapped, as requests.concurrency)
--   cached_share  = sum(cached_tokens) / sum(prompt_tokens) over the window's ok measured
--                   requests that report cached_tokens (measured_requests for closed-loop,
--                   open_requests for open-loop windows); NULL when none reports it
--   baseline_window_id, baseline_cached_share, baseline_cache_reset = the baseline method's
--                   window at the same key in the same round: (campaign_id, run, tp,
--                   workload, max_tokens, load, concurrency, rate, ramp, ramp_start_rate,
--                   ramp_end_rate, burstiness); baseline = analysis_params.baseline. A round
--                   starts every configuration once, so this is the window the method's is
--                   paired with in that round
--   cache_mismatch = |cached_share - baseline_cached_share| > 0.1 (a NULL share compares as
--                   no difference) or cache_reset <> baseline_cache_reset: a cache served the
--                   baseline and the method differently; NULL for the baseline's own windows
--                   and where the baseline has no window at the key (with several, true if
--                   any of them differs)

CREATE OR REPLACE TABLE cache_hygiene AS

WITH

params AS (
    SELECT baseline FROM analysis_params
),

incomplete AS (
    SELECT * FROM incomplete_units()  -- schema/measured.sql: the one incomplete-unit rule
),

measured_windows AS (
    SELECT w.*, coalesce(w.max_concurrency, 0) AS concurrency
    FROM windows AS w
    WHERE NOT EXISTS (
        SELECT 1 FROM incomplete AS i
        WHERE i.campaign_id = w.campaign_id AND i.config_id = w.config_id
          AND i.workload = w.workload AND i.run = w.run
    )
),

answered AS (
    SELECT campaign_id, window_id, method, tp, ok, prompt_tokens, cached_tokens
    FROM measured_requests
    UNION ALL
    SELECT campaign_id, window_id, method, tp, ok, prompt_tokens, cached_tokens
    FROM open_requests
),

per_window AS (
    SELECT
        campaign_id, window_id,
        any_value(method) AS method,
        any_value(tp) AS tp,
        sum(cached_tokens) FILTER (WHERE ok AND cached_tokens IS NOT NULL)
            / nullif(sum(prompt_tokens) FILTER (WHERE ok AND cached_tokens IS NOT NULL), 0)
            AS cached_share
    FROM answered
    GROUP BY campaign_id, window_id
),

described AS (
    SELECT
        w.campaign_id, w.window_id, w.config_id, w.run,
        coalesce(r.method, s.method) AS method,
        coalesce(r.tp, s.tp) AS tp,
        w.workload, w.max_tokens, w.load, w.concurrency, w.rate, w.ramp, w.ramp_start_rate,
        w.ramp_end_rate, w.burstiness, w.cache_reset, r.cached_share
    FROM measured_windows AS w
    LEFT JOIN per_window AS r USING (campaign_id, window_id)
    LEFT JOIN services AS s USING (service_id)
),

compared AS (
    SELECT
        m.campaign_id, m.window_id,
        min(b.window_id) AS baseline_window_id,
        any_value(b.cached_share) AS baseline_cached_share,
        any_value(b.cache_reset) AS baseline_cache_reset,
        bool_or(coalesce(abs(m.cached_share - b.cached_share) > 0.1, false)
                OR m.cache_reset <> b.cache_reset) AS cache_mismatch
    FROM described AS m
    JOIN params AS p ON m.method <> p.baseline
    JOIN described AS b
        ON b.method = p.baseline
       AND b.campaign_id = m.campaign_id AND b.run = m.run AND b.tp = m.tp
       AND b.workload = m.workload
       AND b.max_tokens = m.max_tokens AND b.load = m.load
       AND b.concurrency = m.concurrency
       AND b.rate IS NOT DISTINCT FROM m.rate
       AND b.ramp IS NOT DISTINCT FROM m.ramp
       AND b.ramp_start_rate IS NOT DISTINCT FROM m.ramp_start_rate
       AND b.ramp_end_rate IS NOT DISTINCT FROM m.ramp_end_rate
       AND b.burstiness IS NOT DISTINCT FROM m.burstiness
    GROUP BY m.campaign_id, m.window_id
),

final AS (
    SELECT d.*, c.baseline_window_id, c.baseline_cached_share, c.baseline_cache_reset,
           c.cache_mismatch
    FROM described AS d
    LEFT JOIN compared AS c USING (campaign_id, window_id)
)

SELECT * FROM final
