-- reads: speedup, crossover, config_summary
-- speedup_sweep: the speedup rows of every setting measured at two or more concurrency levels,
-- each with its crossover mark and the load it held: what the speedup-versus-concurrency
-- figure draws (report/figures.py reads it as it is).
-- grain: (campaign_id, engine, tp, workload, max_tokens, concurrency, method); key: the same
-- columns. One row per `speedup` row whose setting (campaign_id, engine, tp, workload,
-- max_tokens, method) has a `crossover` row with status <> 'single level'; the A/A control
-- has no crossover row, so no row here; a setting measured at one level has none either.
-- Columns: every column of `speedup`, then
--   crossover_concurrency = crossover.crossover_concurrency of the setting (NULL unless its
--                           status is 'stops paying')
--   is_crossover          = concurrency = crossover_concurrency; false (never NULL) where
--                           crossover_concurrency is NULL
--   effective_concurrency = avg(config_summary.effective_concurrency) over the windows of the
--                           row's load point (campaign_id, engine, tp, workload, max_tokens,
--                           concurrency), every method's, the baseline's included: a speedup
--                           compares two windows, and the figure's ticks show the load the
--                           level held (mean requests in flight). NULL when no window of the
--                           load point has one.

CREATE OR REPLACE TABLE speedup_sweep AS

WITH

speedups AS (
    SELECT * FROM speedup
),

settings AS (
    SELECT campaign_id, engine, tp, workload, max_tokens, method, crossover_concurrency
    FROM crossover
    WHERE status <> 'single level'
),

windows AS (
    SELECT COLUMNS(comparison_key()), effective_concurrency
    FROM config_summary
),

load_points AS (
    SELECT
        COLUMNS(comparison_key()),
        avg(effective_concurrency) AS effective_concurrency
    FROM windows
    GROUP BY ALL
),

final AS (
    SELECT
        s.*,
        x.crossover_concurrency,
        coalesce(s.concurrency = x.crossover_concurrency, false) AS is_crossover,
        e.effective_concurrency
    FROM speedups AS s
    JOIN settings AS x USING (campaign_id, engine, tp, workload, max_tokens, method)
    LEFT JOIN load_points AS e
        USING (campaign_id, engine, tp, workload, max_tokens, concurrency)
)

SELECT * FROM final
