-- reads: window_energy
-- energy_summary: GPU energy per method and load point, over the windows whose sampling was
-- not sparse (window_energy, window_energy.sql).
-- grain: (campaign_id, engine, tp, workload, max_tokens, concurrency, method), like
--   config_summary; only settings with at least one window in window_energy.
--   n_windows          = its windows in window_energy; n_sparse = those left out as sparse
--   energy_j, output_tokens_sum, busy_s = sums over the usable (not sparse) windows
--   j_per_token        = energy_j / output_tokens_sum; tokens_per_j = its inverse
--   mean_power_w       = energy_j / busy_s
--   energy_source      = the usable windows' window_energy.energy_source when they all agree
--                        ('counter' | 'power_trapezoid'), else 'mixed' (NULL: none usable);
--                        n_windows_counter = usable windows measured by the counter alone
--   cost_per_mtok_usd  = sum(cost_per_mtok_usd * output_tokens_sum) / output_tokens_sum: the
--                        windows' costs weighted by their tokens (NULL without a price)
--   n_throttled, n_clock_drop = windows (all of them) flagged throttled / clock_drop
-- analyze/energy.py reads j_per_token and cost_per_mtok_usd from here for energy_ratio's
-- window_energy_ratio and cost_ratio; the report's energy table reads it.

CREATE OR REPLACE TABLE energy_summary AS

WITH

windows AS (
    SELECT * FROM window_energy
),

final AS (
    SELECT
        COLUMNS(comparison_key()), method,
        count(*) AS n_windows,
        count(*) FILTER (WHERE sparse) AS n_sparse,
        sum(energy_j) FILTER (WHERE NOT sparse) AS energy_j,
        sum(output_tokens_sum) FILTER (WHERE NOT sparse) AS output_tokens_sum,
        sum(busy_s) FILTER (WHERE NOT sparse) AS busy_s,
        sum(energy_j) FILTER (WHERE NOT sparse)
            / nullif(sum(output_tokens_sum) FILTER (WHERE NOT sparse), 0) AS j_per_token,
        sum(output_tokens_sum) FILTER (WHERE NOT sparse)
            / nullif(sum(energy_j) FILTER (WHERE NOT sparse), 0) AS tokens_per_j,
        sum(energy_j) FILTER (WHERE NOT sparse)
            / nullif(sum(busy_s) FILTER (WHERE NOT sparse), 0) AS mean_power_w,
        CASE count(DISTINCT energy_source) FILTER (WHERE NOT sparse)
            WHEN 0 THEN NULL
            WHEN 1 THEN any_value(energy_source) FILTER (WHERE NOT sparse)
            ELSE 'mixed' END AS energy_source,
        count(*) FILTER (WHERE NOT sparse AND energy_source = 'counter') AS n_windows_counter,
        sum(cost_per_mtok_usd * output_tokens_sum) FILTER (WHERE NOT sparse)
            / nullif(sum(output_tokens_sum)
                     FILTER (WHERE NOT sparse AND cost_per_mtok_usd IS NOT NULL), 0)
            AS cost_per_mtok_usd,
        count(*) FILTER (WHERE throttled) AS n_throttled,
        count(*) FILTER (WHERE clock_drop) AS n_clock_drop
    FROM windows
    GROUP BY ALL
)

SELECT * FROM final
