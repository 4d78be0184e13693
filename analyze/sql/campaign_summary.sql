-- reads: campaign_plan, campaigns, kept_requests, request_metrics, requests, services, units
-- campaign_summary: one row per campaign, what the report says about it as a whole.
-- grain: campaign; key: campaign_id. Every campaign in `campaigns` has a row, measured or not.
-- Columns: every column of `campaigns` (plan_name, plan_sha256, plan_yaml, baseline,
-- started_at, finished_at, status) plus counts over the raw and measured rows:
--   description         = the plan's `description`, folded to one line ('' when none): table
--                         campaign_plan, which analyze fills by parsing plan_yaml
--   duration_s          = epoch(finished_at - started_at); NULL while unfinished
--   n_services          = services rows of the campaign
--   n_services_failed   = those with state = 'failed' (never became ready)
--   n_units             = units rows; n_units_incomplete = those with complete = false
--   n_runs              = the campaign's runs with a unit (max(units.run); 0 when none): a
--                         plan's `repeat` measures every unit once per run
--   n_requests          = every requests row of the campaign (warm-up and interrupted included)
--   n_warmup            = requests rows with is_warmup (left out of every metric)
--   n_measured          = request_metrics rows (not warm-up, not in an incomplete unit) plus
--                         the open-loop requests measured the same way (n_measured_open:
--                         requests with scheduled_s, which open_requests holds)
--   n_in_incomplete     = n_requests - n_warmup - n_measured: measured rows of interrupted
--                         units, kept in `requests` but left out until resume redoes them
--   n_ok                = measured rows with ok; n_failed = n_measured - n_ok

CREATE OR REPLACE TABLE campaign_summary AS

WITH

campaigns_raw AS (
    SELECT * FROM campaigns
),

service_counts AS (
    SELECT
        campaign_id,
        count(*) AS n_services,
        count(*) FILTER (WHERE state = 'failed') AS n_services_failed
    FROM services
    GROUP BY campaign_id
),

unit_counts AS (
    SELECT
        campaign_id,
        count(*) AS n_units,
        count(*) FILTER (WHERE NOT complete) AS n_units_incomplete,
        max(run) AS n_runs
    FROM units
    GROUP BY campaign_id
),

request_counts AS (
    SELECT
        campaign_id,
        count(*) AS n_requests,
        count(*) FILTER (WHERE is_warmup) AS n_warmup
    FROM requests
    GROUP BY campaign_id
),

open_loop AS (
    SELECT campaign_id, ok, true AS is_open FROM kept_requests WHERE scheduled_s IS NOT NULL
),

measured_counts AS (
    SELECT
        campaign_id,
        count(*) AS n_measured,
        count(*) FILTER (WHERE ok) AS n_ok,
        count(*) FILTER (WHERE is_open) AS n_measured_open
    FROM (SELECT campaign_id, ok, false AS is_open FROM request_metrics
          UNION ALL SELECT * FROM open_loop)
    GROUP BY campaign_id
),

final AS (
    SELECT
        c.*,
        coalesce(d.description, '') AS description,
        epoch(c.finished_at - c.started_at) AS duration_s,
        coalesce(s.n_services, 0) AS n_services,
        coalesce(s.n_services_failed, 0) AS n_services_failed,
        coalesce(u.n_units, 0) AS n_units,
        coalesce(u.n_units_incomplete, 0) AS n_units_incomplete,
        coalesce(u.n_runs, 0) AS n_runs,
        coalesce(r.n_requests, 0) AS n_requests,
        coalesce(r.n_warmup, 0) AS n_warmup,
        coalesce(m.n_measured, 0) AS n_measured,
        coalesce(m.n_measured_open, 0) AS n_measured_open,
        coalesce(r.n_requests, 0) - coalesce(r.n_warmup, 0) - coalesce(m.n_measured, 0)
            AS n_in_incomplete,
        coalesce(m.n_ok, 0) AS n_ok,
        coalesce(m.n_measured, 0) - coalesce(m.n_ok, 0) AS n_failed
    FROM campaigns_raw AS c
    LEFT JOIN service_counts AS s USING (campaign_id)
    LEFT JOIN unit_counts AS u USING (campaign_id)
    LEFT JOIN request_counts AS r USING (campaign_id)
    LEFT JOIN measured_counts AS m USING (campaign_id)
    LEFT JOIN campaign_plan AS d USING (campaign_id)
)

SELECT * FROM final
