-- energy_segments: each measured window's GPU power trace over its busy span, cut at every
-- sample time and every request start and end, with the requests in flight on each piece.
-- The one place energy is integrated: window_energy sums these pieces, request_energy shares
-- them among the requests in flight.
-- grain: (campaign_id, service_id, window_id, seg); key: the same. A window without
--   gpu_samples rows with a power_w (a CPU service, telemetry off) has no rows.
-- Busy span = [busy_start_s, busy_end_s] = [min(start_s), max(end_s)] over the window's ok
--   measured requests (request_metrics), the span config_summary.throughput_tps divides by.
--   gpu_samples.t_s and requests.start_s are offsets on the same perf_counter clock.
-- Power of GPU g at time t, P_g(t): linear interpolation between g's last sample with
--   t_s <= t and its first with t_s >= t (samples without power_w skipped); before g's first
--   or after its last sample, the nearest sample's power. Samples outside the span only
--   serve this interpolation.
-- Breakpoints: the span's two ends, every sample time strictly inside the span (any GPU of
--   the window), every ok request's start_s and end_s. Between consecutive breakpoints
--   t1 < t2 each P_g is linear and the requests in flight do not change, so (trapezoid rule)
--   power_start_w = P(t1) = sum over the window's GPUs of P_g(t1); power_end_w = P(t2)
--   energy_j      = (t2 - t1) * (P(t1) + P(t2)) / 2
--   n_in_flight   = ok requests with start_s <= t1 and end_s >= t2
-- Board power only (NVML / nvidia-smi power.draw): CPU, host memory, network, fans and
-- power-supply losses are not in it.

CREATE OR REPLACE TABLE energy_segments AS

WITH

ok_requests AS (
    SELECT campaign_id, service_id, window_id, request_id, start_s, end_s
    FROM request_metrics
    WHERE ok AND end_s IS NOT NULL
),

spans AS (
    SELECT campaign_id, service_id, window_id,
           min(start_s) AS busy_start_s, max(end_s) AS busy_end_s
    FROM ok_requests
    GROUP BY campaign_id, service_id, window_id
),

samples AS (
    SELECT campaign_id, service_id, window_id, gpu_index, t_s, power_w
    FROM gpu_samples
    WHERE power_w IS NOT NULL
),

gpus AS (
    SELECT DISTINCT campaign_id, service_id, window_id, gpu_index FROM samples
),

breakpoints AS (
    SELECT campaign_id, service_id, window_id, busy_start_s AS t FROM spans
    UNION
    SELECT campaign_id, service_id, window_id, busy_end_s FROM spans
    UNION
    SELECT s.campaign_id, s.service_id, s.window_id, s.t_s
    FROM samples AS s
    JOIN spans AS p USING (campaign_id, service_id, window_id)
    WHERE s.t_s > p.busy_start_s AND s.t_s < p.busy_end_s
    UNION
    SELECT campaign_id, service_id, window_id, start_s FROM ok_requests
    UNION
    SELECT campaign_id, service_id, window_id, end_s FROM ok_requests
),

grid AS (
    SELECT b.campaign_id, b.service_id, b.window_id, b.t, g.gpu_index
    FROM breakpoints AS b
    JOIN gpus AS g USING (campaign_id, service_id, window_id)
),

with_before AS (
    SELECT grid.*, s.t_s AS t_before, s.power_w AS p_before
    FROM grid
    ASOF LEFT JOIN samples AS s
        ON grid.campaign_id = s.campaign_id AND grid.service_id = s.service_id
       AND grid.window_id = s.window_id AND grid.gpu_index = s.gpu_index AND grid.t >= s.t_s
),

with_after AS (
    SELECT w.*, s.t_s AS t_after, s.power_w AS p_after
    FROM with_before AS w
    ASOF LEFT JOIN samples AS s
        ON w.campaign_id = s.campaign_id AND w.service_id = s.service_id
       AND w.window_id = s.window_id AND w.gpu_index = s.gpu_index AND w.t <= s.t_s
),

gpu_power AS (
    SELECT
        campaign_id, service_id, window_id, t, gpu_index,
        CASE
            WHEN t_before IS NULL THEN p_after
            WHEN t_after IS NULL OR t_after = t_before THEN p_before
            ELSE p_before + (p_after - p_before) * (t - t_before) / (t_after - t_before)
        END AS power_w
    FROM with_after
),

total_power AS (
    SELECT campaign_id, service_id, window_id, t,
           sum(power_w) AS power_w, count(*) AS n_gpus
    FROM gpu_power
    GROUP BY campaign_id, service_id, window_id, t
),

pieces AS (
    SELECT
        campaign_id, service_id, window_id, n_gpus,
        t AS t_start_s,
        lead(t) OVER w AS t_end_s,
        power_w AS power_start_w,
        lead(power_w) OVER w AS power_end_w
    FROM total_power
    WINDOW w AS (PARTITION BY campaign_id, service_id, window_id ORDER BY t)
),

in_flight AS (
    SELECT p.campaign_id, p.service_id, p.window_id, p.t_start_s, count(r.request_id) AS n
    FROM pieces AS p
    LEFT JOIN ok_requests AS r
        ON r.campaign_id = p.campaign_id AND r.service_id = p.service_id
       AND r.window_id = p.window_id AND r.start_s <= p.t_start_s AND r.end_s >= p.t_end_s
    WHERE p.t_end_s IS NOT NULL
    GROUP BY p.campaign_id, p.service_id, p.window_id, p.t_start_s
),

final AS (
    SELECT
        p.campaign_id, p.service_id, p.window_id,
        row_number() OVER (PARTITION BY p.campaign_id, p.service_id, p.window_id
                           ORDER BY p.t_start_s) AS seg,
        p.t_start_s, p.t_end_s, p.n_gpus, p.power_start_w, p.power_end_w,
        (p.t_end_s - p.t_start_s) * (p.power_start_w + p.power_end_w) / 2 AS energy_j,
        f.n AS n_in_flight
    FROM pieces AS p
    JOIN in_flight AS f USING (campaign_id, service_id, window_id, t_start_s)
    WHERE p.t_end_s IS NOT NULL
)

SELECT * FROM final
