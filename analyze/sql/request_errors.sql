-- reads: request_metrics
-- request_errors: why measured requests failed, one row per closed-loop window and kind of
-- error, so that a window's error_rate (config_summary) reads as its causes.
-- grain: (campaign_id, engine, tp, method, workload, max_tokens, concurrency, error_kind);
-- key: the same columns. Failed measured requests only (request_metrics with ok = false:
-- warm-ups, rows of incomplete units and open-loop requests are not in it; open_requests
-- keeps the open-loop ones' error_kind); a window without a failure has no row.
--   error_kind    = requests.error_kind (http | timeout | connect | protocol | empty |
--                   server_died | cancelled), 'unknown' where a failed row has none
--   n_failed      = the window's failed requests of that kind
--   n             = the window's measured requests, failed or not (config_summary.n)
--   share         = n_failed / n: a window's kinds sum to its config_summary.error_rate
--   n_runs        = the runs (rounds) in which the kind occurred
--   n_messages    = distinct error_message texts of those requests
--   first_message = the error_message of the kind's earliest failure (lowest run, then
--                   start_s, then request_id); NULL when that request recorded none

CREATE OR REPLACE TABLE request_errors AS

WITH

measured AS (
    SELECT
        COLUMNS(comparison_key()[:3]), method, COLUMNS(comparison_key()[4:]), run, start_s,
        request_id, ok, coalesce(error_kind, 'unknown') AS error_kind, error_message
    FROM request_metrics
),

windows AS (
    SELECT COLUMNS(comparison_key()), method, count(*) AS n
    FROM measured
    GROUP BY ALL
),

failed AS (
    SELECT
        COLUMNS(comparison_key()), method, error_kind,
        count(*) AS n_failed,
        count(DISTINCT run) AS n_runs,
        count(DISTINCT error_message) AS n_messages,
        -- arg_min skips a NULL argument; the earliest failure's message may be NULL
        (list(error_message ORDER BY run, start_s, request_id))[1] AS first_message
    FROM measured
    WHERE NOT ok
    GROUP BY ALL
),

final AS (
    SELECT
        COLUMNS(comparison_key()[:3]), method, COLUMNS(comparison_key()[4:]),
        error_kind, n_failed, n, n_failed / n AS share, n_runs, n_messages, first_message
    FROM failed AS f
    JOIN windows AS w
        USING (campaign_id, engine, tp, method, workload, max_tokens, concurrency)
)

SELECT * FROM final
ORDER BY ALL  -- the key, method and error_kind first: one row each
