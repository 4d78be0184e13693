-- service_summary: one row per service (one server launch), with what it measured.
-- grain: service; key: service_id. Every `services` row has a row, failed ones included.
-- Columns: every column of `services` except log_tail (campaign_id, config_id, engine,
-- method, tp, gpus, host, launch_command, requested_at, ready_at, stopped_at, startup_s,
-- state, error; the log tail of a failed service stays in `services`), plus
--   n_units            = units rows the service ran; n_units_incomplete = complete = false
--   n_warmup           = its requests rows with is_warmup
--   n_measured         = its request_metrics rows (not warm-up, not in an incomplete unit)
--   n_ok               = those with ok; n_failed = n_measured - n_ok
-- Speeds and latencies are per window (config_summary), not per service.

CREATE OR REPLACE VIEW service_summary AS

WITH

services_raw AS (
    SELECT * EXCLUDE (log_tail) FROM services
),

unit_counts AS (
    SELECT
        service_id,
        count(*) AS n_units,
        count(*) FILTER (WHERE NOT complete) AS n_units_incomplete
    FROM units
    GROUP BY service_id
),

warmup_counts AS (
    SELECT service_id, count(*) AS n_warmup
    FROM requests
    WHERE is_warmup
    GROUP BY service_id
),

measured AS (
    SELECT
        service_id,
        count(*) AS n_measured,
        count(*) FILTER (WHERE ok) AS n_ok
    FROM request_metrics
    GROUP BY service_id
),

final AS (
    SELECT
        s.*,
        coalesce(u.n_units, 0) AS n_units,
        coalesce(u.n_units_incomplete, 0) AS n_units_incomplete,
        coalesce(w.n_warmup, 0) AS n_warmup,
        coalesce(m.n_measured, 0) AS n_measured,
        coalesce(m.n_ok, 0) AS n_ok,
        coalesce(m.n_measured, 0) - coalesce(m.n_ok, 0) AS n_failed
    FROM services_raw AS s
    LEFT JOIN unit_counts AS u USING (service_id)
    LEFT JOIN warmup_counts AS w USING (service_id)
    LEFT JOIN measured AS m USING (service_id)
)

SELECT * FROM final
