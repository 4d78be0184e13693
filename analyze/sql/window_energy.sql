-- reads: energy_segments, environment, gpu_samples, request_metrics, services
-- window_energy: GPU energy, joules per output token, cost and the sampling's health per
-- measured window that has GPU telemetry.
-- grain: window; key: (campaign_id, service_id, window_id). Only windows with gpu_samples rows
--   and at least one ok request; a CPU campaign has none.
-- Busy span, sources and integration: energy_segments (energy_segments.sql), docs/energy.md.
--   busy_s          = busy_end_s - busy_start_s (the throughput span of config_summary)
--   energy_j        = sum of energy_segments.energy_j = sum over the service's GPUs of
--                     E_g(busy_end_s) - E_g(busy_start_s) (NVML's energy counter, interpolated
--                     linearly at the span's ends) for a GPU with the counter, else the
--                     trapezoid integral of its power_w over the span (board power only)
--   energy_source   = 'counter' | 'power_trapezoid' | 'mixed' (some GPUs each way);
--                     n_gpus_counter = GPUs measured by their counter
--   idle_energy_j   = the part of energy_j when no request was in flight (n_in_flight = 0)
--   mean_power_w    = energy_j / busy_s
--   trapezoid_energy_j = sum of energy_segments.trapezoid_energy_j: every GPU's power_w by the
--                     trapezoid rule, whatever the source; the cross-check of a counter window
--   counter_energy_j = energy_j when energy_source = 'counter', else NULL (kept for readers of
--                     the earlier cross-check column)
--   output_tokens_sum = sum(output_tokens) of the window's ok requests
--   j_per_token     = energy_j / output_tokens_sum; tokens_per_j = output_tokens_sum / energy_j
--                     (both NULL for a sparse window)
--   gpu_hour_usd    = environment 'price.gpu_hour_usd' of the campaign (NULL: no price)
--   n_gpus          = GPUs the service holds (services.gpus), else GPUs sampled
--   cost_per_mtok_usd = gpu_hour_usd * n_gpus * busy_s / 3600 / output_tokens_sum * 1e6: the
--                     cost per million output tokens if the service ran continuously at this
--                     window's throughput (NULL without a price)
-- Sampling health, per GPU over the busy span [busy_start_s, busy_end_s] (ends included):
--   n_samples       = samples in the span (all GPUs); min_samples_per_gpu = fewest of one GPU
--   max_gap_s       = largest gap between consecutive points of (span start, the GPU's samples
--                     in the span, span end), over the GPUs
--   period_s        = median gap between consecutive samples of a GPU over the whole window
--                     (largest over the GPUs): the sampling period actually achieved
--   sparse          = min_samples_per_gpu < 2 or max_gap_s > 3 * period_s: left out of every
--                     energy figure (j_per_token, request_energy, energy_ratio). Kept with the
--                     counter too: its window total survives gaps, but the pieces that share
--                     energy among requests would be interpolated over them.
-- Flags over the busy span's samples:
--   throttled        = any sample with a non-empty throttle_reasons; throttle_reasons = the
--                      distinct reasons, sorted, comma-separated ('' none)
--   sm_clock_min_mhz, sm_clock_median_mhz = min and median sm_clock_mhz of the samples with
--                      util_gpu_pct > 0 (an idle GPU lowers its clock by design: not a drop)
--   clock_drop       = sm_clock_min_mhz < 0.9 * sm_clock_median_mhz

CREATE OR REPLACE TABLE window_energy AS

WITH

ok_requests AS (
    SELECT * FROM request_metrics WHERE ok AND end_s IS NOT NULL
),

windows AS (
    SELECT
        campaign_id, service_id, window_id,
        any_value(config_id) AS config_id, any_value(engine) AS engine, any_value(tp) AS tp,
        any_value(method) AS method, any_value(workload) AS workload,
        any_value(max_tokens) AS max_tokens, any_value(concurrency) AS concurrency,
        count(*) AS n_ok, sum(output_tokens) AS output_tokens_sum,
        min(start_s) AS busy_start_s, max(end_s) AS busy_end_s
    FROM ok_requests
    GROUP BY campaign_id, service_id, window_id
),

energy AS (
    SELECT
        campaign_id, service_id, window_id,
        sum(energy_j) AS energy_j,
        coalesce(sum(energy_j) FILTER (WHERE n_in_flight = 0), 0) AS idle_energy_j,
        sum(trapezoid_energy_j) AS trapezoid_energy_j,
        any_value(energy_source) AS energy_source,
        any_value(n_gpus_counter) AS n_gpus_counter
    FROM energy_segments
    GROUP BY campaign_id, service_id, window_id
),

samples AS (
    SELECT s.*, w.busy_start_s, w.busy_end_s
    FROM gpu_samples AS s
    JOIN windows AS w USING (campaign_id, service_id, window_id)
),

periods AS (
    SELECT campaign_id, service_id, window_id, gpu_index, median(gap) AS period_s
    FROM (
        SELECT campaign_id, service_id, window_id, gpu_index,
               t_s - lag(t_s) OVER (PARTITION BY campaign_id, service_id, window_id, gpu_index
                                    ORDER BY t_s) AS gap
        FROM samples
    )
    WHERE gap IS NOT NULL
    GROUP BY ALL
),

in_span AS (
    SELECT * FROM samples WHERE t_s >= busy_start_s AND t_s <= busy_end_s
),

span_points AS (
    SELECT campaign_id, service_id, window_id, gpu_index, t_s AS t, 1 AS is_sample
    FROM in_span
    UNION ALL
    SELECT s.campaign_id, s.service_id, s.window_id, s.gpu_index, e.t, 0
    FROM (SELECT DISTINCT campaign_id, service_id, window_id, gpu_index,
                          busy_start_s, busy_end_s FROM samples) AS s,
         LATERAL (SELECT unnest([s.busy_start_s, s.busy_end_s]) AS t) AS e
),

per_gpu AS (
    SELECT campaign_id, service_id, window_id, gpu_index,
           sum(is_sample) AS n_samples, max(gap) AS max_gap_s
    FROM (
        SELECT *, t - lag(t) OVER (PARTITION BY campaign_id, service_id, window_id, gpu_index
                                   ORDER BY t) AS gap
        FROM span_points
    )
    GROUP BY ALL
),

coverage AS (
    SELECT g.campaign_id, g.service_id, g.window_id,
           sum(g.n_samples) AS n_samples, min(g.n_samples) AS min_samples_per_gpu,
           max(g.max_gap_s) AS max_gap_s, max(p.period_s) AS period_s,
           count(*) AS n_gpus_sampled,
           string_agg(g.gpu_index::VARCHAR, ',' ORDER BY g.gpu_index) AS gpus_sampled
    FROM per_gpu AS g
    LEFT JOIN periods AS p USING (campaign_id, service_id, window_id, gpu_index)
    GROUP BY g.campaign_id, g.service_id, g.window_id
),

reasons AS (
    SELECT campaign_id, service_id, window_id,
           string_agg(DISTINCT reason, ',' ORDER BY reason) AS throttle_reasons
    FROM (SELECT campaign_id, service_id, window_id,
                 trim(unnest(string_split(throttle_reasons, ','))) AS reason
          FROM in_span WHERE throttle_reasons <> '')
    WHERE reason <> ''
    GROUP BY ALL
),

clocks AS (
    SELECT campaign_id, service_id, window_id,
           min(sm_clock_mhz) AS sm_clock_min_mhz,
           median(sm_clock_mhz) AS sm_clock_median_mhz
    FROM in_span
    WHERE util_gpu_pct > 0 AND sm_clock_mhz IS NOT NULL
    GROUP BY ALL
),

price AS (
    SELECT campaign_id, max(try_cast(value AS DOUBLE)) AS gpu_hour_usd
    FROM environment
    WHERE key = 'price.gpu_hour_usd'
    GROUP BY campaign_id
),

service_gpus AS (
    SELECT service_id, CASE WHEN gpus = '' THEN NULL
                            ELSE len(string_split(gpus, ',')) END AS n_gpus_held
    FROM services
),

joined AS (
    SELECT
        w.*, w.busy_end_s - w.busy_start_s AS busy_s,
        e.energy_j, e.idle_energy_j, e.trapezoid_energy_j, e.energy_source, e.n_gpus_counter,
        CASE WHEN e.energy_source = 'counter' THEN e.energy_j END AS counter_energy_j,
        coalesce(sg.n_gpus_held, c.n_gpus_sampled) AS n_gpus,
        c.gpus_sampled, c.n_samples, c.min_samples_per_gpu, c.max_gap_s, c.period_s,
        coalesce(r.throttle_reasons, '') AS throttle_reasons,
        k.sm_clock_min_mhz, k.sm_clock_median_mhz, pr.gpu_hour_usd,
        coalesce(c.min_samples_per_gpu, 0) < 2
            OR c.period_s IS NULL OR c.max_gap_s > 3 * c.period_s AS sparse
    FROM windows AS w
    JOIN coverage AS c USING (campaign_id, service_id, window_id)
    LEFT JOIN energy AS e USING (campaign_id, service_id, window_id)
    LEFT JOIN reasons AS r USING (campaign_id, service_id, window_id)
    LEFT JOIN clocks AS k USING (campaign_id, service_id, window_id)
    LEFT JOIN price AS pr USING (campaign_id)
    LEFT JOIN service_gpus AS sg USING (service_id)
),

final AS (
    SELECT
        campaign_id, service_id, window_id, config_id, engine, tp, method, workload,
        max_tokens, concurrency, n_ok, output_tokens_sum, busy_start_s, busy_end_s, busy_s,
        n_gpus, gpus_sampled, energy_j, energy_source, n_gpus_counter, idle_energy_j,
        energy_j / nullif(busy_s, 0) AS mean_power_w, trapezoid_energy_j, counter_energy_j,
        CASE WHEN NOT sparse THEN energy_j / nullif(output_tokens_sum, 0) END AS j_per_token,
        CASE WHEN NOT sparse THEN output_tokens_sum / nullif(energy_j, 0) END AS tokens_per_j,
        gpu_hour_usd,
        gpu_hour_usd * n_gpus * busy_s / 3600 / nullif(output_tokens_sum, 0) * 1e6
            AS cost_per_mtok_usd,
        n_samples, min_samples_per_gpu, max_gap_s, period_s, sparse,
        throttle_reasons <> '' AS throttled, throttle_reasons,
        sm_clock_min_mhz, sm_clock_median_mhz,
        coalesce(sm_clock_min_mhz < 0.9 * sm_clock_median_mhz, false) AS clock_drop
    FROM joined
)

SELECT * FROM final
