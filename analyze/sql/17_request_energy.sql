-- request_energy: the GPU energy attributed to each ok measured request, for the paired
-- energy comparison (analyze/energy.py -> table energy_ratio).
-- grain: request; key: request_id. Only ok requests of windows in window_energy that are not
--   sparse (a CPU campaign, or a window with too few samples, has no rows).
-- Processor sharing: at each instant the window's GPU power is shared equally among the
--   requests in flight, so on every piece of energy_segments
--   (15_energy_segments.sql) each of its n_in_flight requests receives energy_j / n_in_flight:
--   attributed_j   = sum over the pieces the request is in flight on of energy_j / n_in_flight
--   j_per_token    = attributed_j / output_tokens (NULL unless output_tokens > 0)
-- A window's attributed_j sum to its window_energy.energy_j - idle_energy_j (the pieces with
-- no request in flight are nobody's). Board power only, as energy_segments.

CREATE OR REPLACE TABLE request_energy AS

WITH

usable_windows AS (
    SELECT campaign_id, service_id, window_id FROM window_energy WHERE NOT sparse
),

ok_requests AS (
    SELECT r.campaign_id, r.service_id, r.window_id, r.request_id, r.config_id, r.engine,
           r.tp, r.method, r.workload, r.max_tokens, r.concurrency, r.prompt_id, r.rep,
           r.start_s, r.end_s, r.output_tokens
    FROM request_metrics AS r
    SEMI JOIN usable_windows AS u USING (campaign_id, service_id, window_id)
    WHERE r.ok AND r.end_s IS NOT NULL
),

shares AS (
    SELECT r.request_id, sum(s.energy_j / s.n_in_flight) AS attributed_j
    FROM ok_requests AS r
    JOIN energy_segments AS s
        ON s.campaign_id = r.campaign_id AND s.service_id = r.service_id
       AND s.window_id = r.window_id AND r.start_s <= s.t_start_s AND r.end_s >= s.t_end_s
    GROUP BY r.request_id
),

final AS (
    SELECT
        r.*,
        coalesce(s.attributed_j, 0) AS attributed_j,
        CASE WHEN r.output_tokens > 0
             THEN coalesce(s.attributed_j, 0) / r.output_tokens END AS j_per_token
    FROM ok_requests AS r
    LEFT JOIN shares AS s USING (request_id)
)

SELECT * FROM final
