-- reads: measured_requests
-- accepted_histogram: how many draft tokens a verify step accepts, per window.
-- grain: (campaign_id, engine, tp, method, workload, max_tokens, concurrency, accepted);
-- key: the same columns; accepted j >= 0. Ok rows of measured_requests (closed loop,
-- warm-ups and incomplete units left out; request_metrics has no step_accepted), each read from
--   'histogram' accept_histogram ([j] = verify steps that accepted exactly j) when it holds
--               at least one step, else
--   'steps'     step_accepted (accepted count of each verify step): steps(j) = its entries
--               equal to j
--   steps  = sum over the window's requests of steps(j)
--   share  = steps / the window's steps over every j (the shares of a window sum to 1)
--   source = the requests' sources, distinct, sorted, joined by ',' (one in practice)
-- A histogram's zero entries stay (j = 0..K); from step_accepted only the counts seen appear.
-- A window without a histogram or per-step list has no rows (accepted_per_pos alone cannot
-- give one).

CREATE OR REPLACE TABLE accepted_histogram AS

WITH

detailed AS (
    SELECT
        COLUMNS(comparison_key()), method,
        accept_histogram, step_accepted,
        CASE
            WHEN len(accept_histogram) > 0 AND list_sum(accept_histogram) > 0 THEN 'histogram'
            WHEN len(step_accepted) > 0 THEN 'steps'
        END AS source
    FROM measured_requests
    WHERE ok
),

from_histogram AS (
    SELECT
        COLUMNS(comparison_key()), method, source,
        unnest(range(0, len(accept_histogram))) AS accepted,
        unnest(accept_histogram) AS steps
    FROM detailed
    WHERE source = 'histogram'
),

from_steps AS (
    SELECT
        COLUMNS(comparison_key()), method, source,
        unnest(step_accepted) AS accepted,
        1 AS steps
    FROM detailed
    WHERE source = 'steps'
),

counted AS (
    SELECT * FROM from_histogram
    UNION ALL
    SELECT * FROM from_steps
),

windows AS (
    SELECT
        COLUMNS(comparison_key()), method,
        sum(steps)::BIGINT AS total_steps,
        string_agg(DISTINCT source, ',' ORDER BY source) AS source
    FROM counted
    GROUP BY ALL
),

summed AS (
    SELECT
        COLUMNS(comparison_key()), method, accepted,
        sum(steps)::BIGINT AS steps
    FROM counted
    GROUP BY ALL
),

final AS (
    SELECT
        -- the window in the table's column order: the comparison key with method after tp
        COLUMNS(comparison_key()[:3]), method, COLUMNS(comparison_key()[4:]),
        s.accepted, s.steps, s.steps / nullif(w.total_steps, 0) AS share, w.source
    FROM summed AS s
    JOIN windows AS w
        USING (campaign_id, engine, tp, workload, max_tokens, concurrency, method)
)

SELECT * FROM final
