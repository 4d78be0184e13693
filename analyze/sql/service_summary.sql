-- reads: request_metrics, requests, services
-- service_summary: one row per service (one server launch), with what it measured.
-- grain: service; key: service_id. Every `services` row has a row, failed ones included.
-- Columns: every column of `services` except log_tail (campaign_id, config_id, engine,
-- method, tp, gpus, host, launch_command, requested_at, ready_at, stopped_at, startup_s,
-- state, error; the log tail of a failed service stays in `services`), plus
--   n_units            = units rows the service ran; n_units_incomplete = complete = false
--   n_warmup           = its requests rows with is_warmup
--   n_measured         = its request_metrics rows (not warm-up, not in an incomplete unit)
--   n_ok               = those with ok; n_failed = n_measured - n_ok
--   n_gpus             = GPUs in `gpus` (0 on CPU)
--   transport          = services.transport: direct | paramiko-tunnel | ssh-tunnel | unknown
--   own_flags          = the launch command's flags that not every service of the campaign
--                        shares, in command order, ' '-separated ('' when none). The command
--                        is split on blanks; a token starting with '-' (and not a negative
--                        number) opens a flag, the tokens after it up to the next flag are its
--                        value; an environment assignment (NAME=value) before the first flag
--                        is a unit of its own; the other tokens before the first flag (the
--                        binary) are left out, and so are --port, --host and
--                        CUDA_VISIBLE_DEVICES (they differ between services by design; the
--                        GPUs have their own column).
--                        A flag counts as shared when the same flag with the same value is in
--                        every service's command of the campaign.
-- Speeds and latencies are per window (config_summary), not per service.

CREATE OR REPLACE TABLE service_summary AS

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

tokens AS (
    SELECT service_id, campaign_id, t.tok, t.pos
    FROM services_raw,
         LATERAL (SELECT unnest(regexp_split_to_array(trim(launch_command), '\s+')) AS tok,
                         generate_subscripts(regexp_split_to_array(trim(launch_command), '\s+'), 1)
                             AS pos) AS t
),

kinds AS (
    SELECT *, tok LIKE '-%' AND NOT regexp_matches(tok, '^-[0-9.]') AS is_flag
    FROM tokens
),

kinds_env AS (
    SELECT *,
           regexp_matches(tok, '^[A-Za-z_][A-Za-z0-9_]*=')
               AND pos < coalesce(min(pos) FILTER (WHERE is_flag)
                                      OVER (PARTITION BY service_id), 1e9) AS is_env
    FROM kinds
),

flag_ids AS (
    SELECT *,
           sum(CASE WHEN is_flag OR is_env THEN 1 ELSE 0 END)
               OVER (PARTITION BY service_id ORDER BY pos) AS flag_no
    FROM kinds_env
),

units AS (
    SELECT *,
           first_value(is_env) OVER (PARTITION BY service_id, flag_no ORDER BY pos) AS env_unit
    FROM flag_ids
),

flags AS (
    -- an env assignment is a unit of its own: the binary after it is not its value
    SELECT service_id, campaign_id, flag_no, min(pos) AS pos,
           string_agg(tok, ' ' ORDER BY pos) AS flag,
           split_part(arg_min(tok, pos), '=', 1) AS name
    FROM units
    WHERE flag_no > 0 AND (NOT env_unit OR is_env)
    GROUP BY service_id, campaign_id, flag_no
),

shared AS (
    SELECT f.campaign_id, f.flag
    FROM flags AS f
    GROUP BY f.campaign_id, f.flag
    HAVING count(DISTINCT f.service_id) = (
        SELECT count(*) FROM services_raw AS s WHERE s.campaign_id = f.campaign_id)
),

own AS (
    SELECT f.service_id, string_agg(f.flag, ' ' ORDER BY f.pos) AS own_flags
    FROM flags AS f
    ANTI JOIN shared AS h USING (campaign_id, flag)
    WHERE f.name NOT IN ('--port', '--host', 'CUDA_VISIBLE_DEVICES')
    GROUP BY f.service_id
),

final AS (
    SELECT
        s.*,
        CASE WHEN s.gpus = '' THEN 0 ELSE len(string_split(s.gpus, ',')) END AS n_gpus,
        coalesce(o.own_flags, '') AS own_flags,
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
    LEFT JOIN own AS o USING (service_id)
)

SELECT * FROM final
