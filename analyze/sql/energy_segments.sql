-- reads: gpu_samples, request_metrics
-- energy_segments: each measured window's GPU energy over its busy span, cut at every sample
-- time and every request start and end, with the requests in flight on each piece.
-- The one place energy is measured: window_energy sums these pieces, request_energy shares
-- them among the requests in flight. docs/energy.md tells the whole story.
-- grain: (campaign_id, service_id, window_id, seg); key: the same. A window without
--   gpu_samples rows with a power_w or an energy_j (a CPU service, telemetry off) has no rows.
-- Busy span = [busy_start_s, busy_end_s] = [min(start_s), max(end_s)] over the window's ok
--   measured requests (request_metrics), the span config_summary.throughput_tps divides by.
--   gpu_samples.t_s and requests.start_s are offsets on the same perf_counter clock.
-- Why the counter comes first: NVML documents nvmlDeviceGetPowerUsage (power_w, and
--   nvidia-smi's power.draw) as "On Ampere (except GA100) or newer GPUs, the API returns power
--   averaged over 1 sec interval". A trapezoid over a trailing one-second mean smears energy
--   over a second: right over long spans, wrong over pieces shorter than that, where each
--   request would get a share of time rather than of energy. nvmlDeviceGetTotalEnergyConsumption
--   (energy_j: J since the driver loaded, Volta and newer) is the integral itself.
-- Source of GPU g, one per (window, GPU):
--   'counter'         when g has counter samples (energy_j) at or before busy_start_s and at or
--                     after busy_end_s (the sampler keeps one sample each side of a window), or
--                     has no power_w at all
--   'power_trapezoid' otherwise: the nvidia-smi source (no counter), a GPU before Volta
-- Values at time t, each interpolated linearly (macro energy_lerp) between g's last sample
--   with t_s <= t and its first with t_s >= t, NULL values skipped; beyond g's first or last
--   sample, the nearest sample's value. Samples outside the span only serve this.
--   E_g(t) = g's counter, less g's smallest counter reading in the window (precision only)
--   P_g(t) = g's power_w
-- Breakpoints: the span's two ends, every sample time strictly inside the span (any GPU, power
--   or counter), every ok request's start_s and end_s. Between consecutive breakpoints
--   t1 < t2 each E_g and P_g is linear and the requests in flight do not change, so
--   energy_j       = sum over counter GPUs of E_g(t2) - E_g(t1)
--                  + (t2 - t1) * (Q(t1) + Q(t2)) / 2, Q = sum of P_g over trapezoid GPUs
--   power_start_w  = P(t1) = sum over the GPUs with power_w of P_g(t1); power_end_w = P(t2)
--   trapezoid_energy_j = (t2 - t1) * (P(t1) + P(t2)) / 2: every GPU's power by the trapezoid
--                    rule, whatever the source; a cross-check (NULL when no GPU has power)
--   n_gpus, n_gpus_counter = the window's GPUs, those measured by their counter
--   energy_source  = 'counter' (every GPU), 'power_trapezoid' (none) or 'mixed'
--   n_in_flight    = ok requests with start_s <= t1 and end_s >= t2
-- Board power only (NVML / nvidia-smi): CPU, host memory, network, fans and power-supply
-- losses are not in it.

-- v at t on the line through (t0, v0) and (t1, v1); the known side when the other is missing
CREATE OR REPLACE TEMP MACRO energy_lerp(t, t0, v0, t1, v1) AS
    CASE WHEN t0 IS NULL THEN v1
         WHEN t1 IS NULL OR t1 = t0 THEN v0
         ELSE v0 + (v1 - v0) * (t - t0) / (t1 - t0) END;

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
    SELECT s.campaign_id, s.service_id, s.window_id, s.gpu_index, s.t_s, s.power_w, s.energy_j
    FROM gpu_samples AS s
    SEMI JOIN spans USING (campaign_id, service_id, window_id)
    WHERE s.power_w IS NOT NULL OR s.energy_j IS NOT NULL
),

power_samples AS (
    SELECT campaign_id, service_id, window_id, gpu_index, t_s, power_w
    FROM samples WHERE power_w IS NOT NULL
),

-- The counter moves in steps: NVML updates it more slowly than the sampler may read it (every
-- ~0.1 s on an H100 read every 0.05 s, 2026-12-05: half the reads repeat the one before). A
-- read that repeats the previous value says nothing new and is dropped, else a request of
-- 20 ms between two equal reads would get no energy at all; each new value stays at the time
-- it was read. Past the last new value the counter goes on at its last step's rate up to the
-- last read (not flat: that would be zero power).
counter_reads AS (
    SELECT campaign_id, service_id, window_id, gpu_index, t_s,
           energy_j - min(energy_j) OVER g AS counter_j,
           energy_j IS DISTINCT FROM lag(energy_j) OVER (g ORDER BY t_s) AS is_new,
           max(t_s) OVER g AS last_read_s
    FROM samples
    WHERE energy_j IS NOT NULL
    WINDOW g AS (PARTITION BY campaign_id, service_id, window_id, gpu_index)
),

counter_steps AS (
    SELECT campaign_id, service_id, window_id, gpu_index, t_s, counter_j, last_read_s,
           lag(t_s) OVER g AS prev_t_s, lag(counter_j) OVER g AS prev_j,
           row_number() OVER (PARTITION BY campaign_id, service_id, window_id, gpu_index
                              ORDER BY t_s DESC) AS from_last
    FROM counter_reads
    WHERE is_new
    WINDOW g AS (PARTITION BY campaign_id, service_id, window_id, gpu_index ORDER BY t_s)
),

counter_samples AS (
    SELECT campaign_id, service_id, window_id, gpu_index, t_s, counter_j FROM counter_steps
    UNION ALL
    SELECT campaign_id, service_id, window_id, gpu_index, last_read_s,
           counter_j + (counter_j - prev_j) / (t_s - prev_t_s) * (last_read_s - t_s)
    FROM counter_steps
    WHERE from_last = 1 AND last_read_s > t_s AND prev_t_s IS NOT NULL
),

gpus AS (
    SELECT
        s.campaign_id, s.service_id, s.window_id, s.gpu_index,
        coalesce(min(s.t_s) FILTER (WHERE s.energy_j IS NOT NULL) <= any_value(p.busy_start_s)
                 AND max(s.t_s) FILTER (WHERE s.energy_j IS NOT NULL) >= any_value(p.busy_end_s),
                 false)
            OR count(s.power_w) = 0 AS uses_counter
    FROM samples AS s
    JOIN spans AS p USING (campaign_id, service_id, window_id)
    GROUP BY s.campaign_id, s.service_id, s.window_id, s.gpu_index
),

sources AS (
    SELECT
        campaign_id, service_id, window_id,
        count(*) AS n_gpus,
        count(*) FILTER (WHERE uses_counter) AS n_gpus_counter,
        CASE WHEN bool_and(uses_counter) THEN 'counter'
             WHEN NOT bool_or(uses_counter) THEN 'power_trapezoid'
             ELSE 'mixed' END AS energy_source
    FROM gpus
    GROUP BY campaign_id, service_id, window_id
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
    SELECT b.campaign_id, b.service_id, b.window_id, b.t, g.gpu_index, g.uses_counter
    FROM breakpoints AS b
    JOIN gpus AS g USING (campaign_id, service_id, window_id)
),

with_power AS (
    SELECT grid.*,
           energy_lerp(grid.t, b.t_s, b.power_w, a.t_s, a.power_w) AS power_w
    FROM grid
    ASOF LEFT JOIN power_samples AS b
        ON grid.campaign_id = b.campaign_id AND grid.service_id = b.service_id
       AND grid.window_id = b.window_id AND grid.gpu_index = b.gpu_index AND grid.t >= b.t_s
    ASOF LEFT JOIN power_samples AS a
        ON grid.campaign_id = a.campaign_id AND grid.service_id = a.service_id
       AND grid.window_id = a.window_id AND grid.gpu_index = a.gpu_index AND grid.t <= a.t_s
),

gpu_values AS (
    SELECT w.*,
           energy_lerp(w.t, b.t_s, b.counter_j, a.t_s, a.counter_j) AS counter_j
    FROM with_power AS w
    ASOF LEFT JOIN counter_samples AS b
        ON w.campaign_id = b.campaign_id AND w.service_id = b.service_id
       AND w.window_id = b.window_id AND w.gpu_index = b.gpu_index AND w.t >= b.t_s
    ASOF LEFT JOIN counter_samples AS a
        ON w.campaign_id = a.campaign_id AND w.service_id = a.service_id
       AND w.window_id = a.window_id AND w.gpu_index = a.gpu_index AND w.t <= a.t_s
),

totals AS (
    SELECT
        campaign_id, service_id, window_id, t,
        sum(power_w) AS power_w,
        coalesce(sum(power_w) FILTER (WHERE NOT uses_counter), 0) AS trapezoid_power_w,
        coalesce(sum(counter_j) FILTER (WHERE uses_counter), 0) AS counter_j
    FROM gpu_values
    GROUP BY campaign_id, service_id, window_id, t
),

pieces AS (
    SELECT
        campaign_id, service_id, window_id,
        t AS t_start_s, lead(t) OVER w AS t_end_s,
        power_w AS power_start_w, lead(power_w) OVER w AS power_end_w,
        trapezoid_power_w AS q_start_w, lead(trapezoid_power_w) OVER w AS q_end_w,
        counter_j AS counter_start_j, lead(counter_j) OVER w AS counter_end_j
    FROM totals
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
        p.t_start_s, p.t_end_s, s.n_gpus, s.n_gpus_counter, s.energy_source,
        p.power_start_w, p.power_end_w,
        p.counter_end_j - p.counter_start_j
            + (p.t_end_s - p.t_start_s) * (p.q_start_w + p.q_end_w) / 2 AS energy_j,
        (p.t_end_s - p.t_start_s) * (p.power_start_w + p.power_end_w) / 2
            AS trapezoid_energy_j,
        f.n AS n_in_flight
    FROM pieces AS p
    JOIN in_flight AS f USING (campaign_id, service_id, window_id, t_start_s)
    JOIN sources AS s USING (campaign_id, service_id, window_id)
    WHERE p.t_end_s IS NOT NULL
)

SELECT * FROM final
