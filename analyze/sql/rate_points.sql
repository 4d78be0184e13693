-- reads: open_windows, rate_attainment
-- rate_points: the points of the open-loop goodput and attainment figure, one per method and
-- swept rate over the rounds' starts, and one per window without a single rate (a ramp or a
-- trace replay: its own start's figures). report/openloop reads it as it is.
-- grain: (campaign_id, tp, method, workload, max_tokens, rate) for a swept rate, a window for
-- the rest; key: (campaign_id, tp, method, workload, max_tokens, rate, window_id), window_id
-- NULL on a swept rate's row and rate NULL on a window's.
-- Columns:
--   window_id, ramp   = the window's (NULL on a swept rate's row)
--   n_windows         = the windows pooled: the rounds' starts at the rate (1 for a window)
--   scheduled_rps     = avg(open_windows.scheduled_rps) over them (where a ramp or a trace
--                       replay is drawn: it has no single rate)
--   n_scheduled, n_good_from_send, elapsed_s = their sums
--   saturated, behind_schedule = any of the windows was
--   attainment_from_send  = sum(n_good_from_send) / sum(n_scheduled) (a point: the from-send
--                           figure is drawn beside the from-schedule one, without interval)
--   goodput_from_send_rps = sum(n_good_from_send) / sum(elapsed_s)
--   attainment, attainment_lo, attainment_hi, goodput_rps, goodput_lo, goodput_hi = a swept
--                       rate's from rate_attainment (over the rounds' starts, the interval
--                       carrying the start-to-start variance; NULL where it has no row); a
--                       window's are open_windows' (its own start's Wilson interval)

CREATE OR REPLACE TABLE rate_points AS

WITH

swept AS (
    SELECT
        campaign_id, tp, method, workload, max_tokens, rate,
        count(*) AS n_windows,
        avg(scheduled_rps) AS scheduled_rps,
        sum(n_scheduled) AS n_scheduled,
        sum(n_good_from_send) AS n_good_from_send,
        sum(elapsed_s) AS elapsed_s,
        bool_or(saturated) AS saturated,
        bool_or(behind_schedule) AS behind_schedule
    FROM open_windows
    WHERE rate IS NOT NULL
    GROUP BY ALL
),

over_starts AS (
    SELECT
        s.campaign_id, s.tp, s.method, s.workload, s.max_tokens, s.rate,
        NULL::VARCHAR AS window_id,
        NULL::VARCHAR AS ramp,
        s.n_windows, s.scheduled_rps, s.n_scheduled, s.n_good_from_send, s.elapsed_s,
        s.saturated, s.behind_schedule,
        s.n_good_from_send / nullif(s.n_scheduled, 0) AS attainment_from_send,
        s.n_good_from_send / nullif(s.elapsed_s, 0) AS goodput_from_send_rps,
        a.attainment, a.attainment_lo, a.attainment_hi,
        a.goodput_rps, a.goodput_lo, a.goodput_hi
    FROM swept AS s
    LEFT JOIN rate_attainment AS a USING (campaign_id, tp, method, workload, max_tokens, rate)
),

unswept AS (
    SELECT
        campaign_id, tp, method, workload, max_tokens, rate, window_id, ramp,
        1 AS n_windows, scheduled_rps, n_scheduled, n_good_from_send, elapsed_s,
        saturated, behind_schedule, attainment_from_send, goodput_from_send_rps,
        attainment, attainment_lo, attainment_hi, goodput_rps, goodput_lo, goodput_hi
    FROM open_windows
    WHERE rate IS NULL
),

final AS (
    SELECT * FROM over_starts
    UNION ALL BY NAME
    SELECT * FROM unswept
)

SELECT * FROM final
