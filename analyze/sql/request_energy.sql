-- reads: energy_segments, request_metrics, window_energy
-- request_energy: the GPU energy attributed to each ok measured request, for the paired
-- energy comparison (analyze/energy.py -> table energy_ratio).
-- grain: request; key: request_id. Only ok requests of windows in window_energy that are not
--   sparse (a CPU campaign, or a window with too few samples, has no rows).
-- Energy of a piece: energy_segments (energy_segments.sql), cut at every request's start
--   and end. With the counter (energy_source 'counter') a piece's energy_j is the counter's
--   difference between its ends, interpolated linearly in perf_counter time between samples,
--   so a request's energy is the counter read at its own boundaries, not a trailing
--   one-second power average smeared over its neighbours; without it, the trapezoid of power.
-- Processor sharing: at each instant the window's GPU energy is shared equally among the
--   requests in flight, so on every piece each of its n_in_flight requests receives
--   energy_j / n_in_flight:
--   attributed_j   = sum over the pieces the request is in flight on of energy_j / n_in_flight
--   j_per_token    = attributed_j / output_tokens (NULL unless output_tokens > 0, and NULL
--                    where attributed_j is 0: a request the meter did not resolve, shorter
--                    than the counter's step with no step inside the window; a ratio of it
--                    would be infinite)
--   energy_source  = its window's (window_energy.energy_source)
-- In a counter window a request alone in flight gets E(end_s) - E(start_s) summed over the
-- GPUs. With overlap the equal split is a convention, not a measurement: the GPU's meter
-- cannot tell which request drew the power (prefill and decode, long and short contexts get
-- the same share). Kept because energy_ratio compares methods under the same rule.
-- A window's attributed_j sum to its window_energy.energy_j - idle_energy_j (the pieces with
-- no request in flight are nobody's). Board power only, as energy_segments.

CREATE OR REPLACE TABLE request_energy AS

WITH

usable_windows AS (
    SELECT campaign_id, service_id, window_id, energy_source
    FROM window_energy WHERE NOT sparse
),

ok_requests AS (
    SELECT r.campaign_id, r.service_id, r.window_id, r.request_id, r.config_id, r.engine,
           r.tp, r.method, r.workload, r.max_tokens, r.concurrency, r.prompt_id, r.rep,
           r.start_s, r.end_s, r.output_tokens, u.energy_source
    FROM request_metrics AS r
    JOIN usable_windows AS u USING (campaign_id, service_id, window_id)
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
        CASE WHEN r.output_tokens > 0 AND s.attributed_j > 0
             THEN s.attributed_j / r.output_tokens END AS j_per_token
    FROM ok_requests AS r
    LEFT JOIN shares AS s USING (request_id)
)

SELECT * FROM final
