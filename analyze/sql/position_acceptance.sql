-- reads: measured_requests
-- position_acceptance: how often the draft token at position k is accepted, per window.
-- grain: (campaign_id, engine, tp, method, workload, max_tokens, concurrency, position);
-- key: the same columns; position k >= 1. Ok rows of measured_requests (closed loop,
-- warm-ups and incomplete units left out; request_metrics has no step_accepted), each read
-- from the first of its acceptance details the engine reported:
--   'per_pos'   accepted_per_pos ([k-1] = steps whose position-k token was accepted) with
--               spec_verify_ct > 0: accepted(k) = accepted_per_pos[k], steps = spec_verify_ct
--   'histogram' accept_histogram ([j] = steps that accepted exactly j, j = 0..K) with at least
--               one step: accepted(k) = sum over j >= k of hist[j], steps = sum(hist)
--   'steps'     step_accepted (accepted count of each verify step): accepted(k) = steps with
--               an accepted count >= k, steps = len(step_accepted); positions run up to the
--               largest count seen (a position no step reached has no row)
-- Summed over the window's requests:
--   steps    = sum of the requests' steps (the same for every position: a request whose list
--              is shorter than k counts its steps with 0 accepted at k)
--   accepted = sum of accepted(k);  rate = accepted / steps (per verify step, not conditional
--              on position k - 1 being accepted)
--   source   = the requests' sources, distinct, sorted, joined by ',' (one in practice)
-- A window without any detail has no rows.

CREATE OR REPLACE TABLE position_acceptance AS

WITH

detailed AS (
    SELECT
        COLUMNS(comparison_key()), method,
        accepted_per_pos, accept_histogram, step_accepted, spec_verify_ct,
        CASE
            WHEN len(accepted_per_pos) > 0 AND spec_verify_ct > 0 THEN 'per_pos'
            WHEN len(accept_histogram) > 0 AND list_sum(accept_histogram) > 0 THEN 'histogram'
            WHEN len(step_accepted) > 0 THEN 'steps'
        END AS source
    FROM measured_requests
    WHERE ok
),

per_request AS (
    SELECT
        COLUMNS(comparison_key()), method, source,
        CASE source
            WHEN 'per_pos' THEN accepted_per_pos
            WHEN 'histogram' THEN list_transform(
                range(1, len(accept_histogram)),
                lambda k: coalesce(list_sum(accept_histogram[k + 1:]), 0))
            ELSE list_transform(
                range(1, coalesce(list_max(step_accepted), 0) + 1),
                lambda k: len(list_filter(step_accepted, lambda x: x >= k)))
        END AS accepted,
        CASE source
            WHEN 'per_pos' THEN spec_verify_ct
            WHEN 'histogram' THEN list_sum(accept_histogram)
            ELSE len(step_accepted)
        END AS steps
    FROM detailed
    WHERE source IS NOT NULL
),

windows AS (
    SELECT
        COLUMNS(comparison_key()), method,
        sum(steps)::BIGINT AS steps,
        string_agg(DISTINCT source, ',' ORDER BY source) AS source
    FROM per_request
    GROUP BY ALL
),

positions AS (
    SELECT
        COLUMNS(comparison_key()), method,
        unnest(range(1, len(accepted) + 1)) AS position,
        unnest(accepted) AS accepted
    FROM per_request
),

summed AS (
    SELECT
        COLUMNS(comparison_key()), method, position,
        sum(accepted)::BIGINT AS accepted
    FROM positions
    GROUP BY ALL
),

final AS (
    SELECT
        -- the window in the table's column order: the comparison key with method after tp
        COLUMNS(comparison_key()[:3]), method, COLUMNS(comparison_key()[4:]),
        s.position, w.steps, s.accepted, s.accepted / nullif(w.steps, 0) AS rate, w.source
    FROM summed AS s
    JOIN windows AS w
        USING (campaign_id, engine, tp, workload, max_tokens, concurrency, method)
)

SELECT * FROM final
