-- reads: rate_speedup, rate_limits
-- rate_sweep: the rate_speedup rows with each method's stops-paying rate marked: what the
-- open-loop TPOT-speedup-versus-rate figure draws (report/openloop reads it as it is), the
-- open-loop twin of speedup_sweep.
-- grain: (campaign_id, tp, workload, max_tokens, rate, method); key: the same columns. One row
-- per rate_speedup row (the A/A control's included; rates only: ramps and trace replays have
-- none there).
-- Columns: every column of rate_speedup, then
--   stops_paying_rate = rate_limits.stops_paying_rate of the row's (campaign_id, tp, method,
--                       workload, max_tokens) (NULL for the control, and where no rate is
--                       significantly slower)
--   is_crossover      = rate = stops_paying_rate; false (never NULL) where stops_paying_rate
--                       is NULL (the figure rings the true rows)

CREATE OR REPLACE TABLE rate_sweep AS

WITH

speedups AS (
    SELECT * FROM rate_speedup
),

limits AS (
    SELECT campaign_id, tp, method, workload, max_tokens, stops_paying_rate
    FROM rate_limits
),

final AS (
    SELECT
        s.*,
        l.stops_paying_rate,
        coalesce(s.rate = l.stops_paying_rate, false) AS is_crossover
    FROM speedups AS s
    LEFT JOIN limits AS l USING (campaign_id, tp, method, workload, max_tokens)
)

SELECT * FROM final
