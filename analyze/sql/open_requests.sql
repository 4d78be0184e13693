-- reads: kept_requests, slo_targets, windows
-- open_requests: one row per measured open-loop request: requests with scheduled_s set,
-- not warm-up, not in a unit marked incomplete (kept_requests, measured_requests.sql),
-- joined with their window (windows, on campaign_id and window_id) and the campaign's
-- slo_targets. A TABLE, rebuilt by every `specsweep analyze`.
-- grain: request; key: request_id.
-- Columns: campaign_id, config_id, service_id, window_id, request_id, engine, method, tp,
-- workload, max_tokens, load, rate, ramp, max_concurrency, prompt_id, rep, run, scheduled_s,
-- start_s, ttft_s, e2e_s, output_tokens, prompt_tokens, cached_tokens, ok, error_kind as in
-- requests / windows, plus
--   lag_s     = start_s - scheduled_s (schedule lag: how late the actual send was; with a
--               max_concurrency cap it includes the wait for a free slot)
--   tpot_s    = (e2e_s - ttft_s) / (output_tokens - 1) when ok and output_tokens >= 2, else
--               NULL (vLLM's TPOT; schema/metrics.sql's tpot_s macro)
--   end_s     = start_s + e2e_s (offset of the last token from the window start)
--   ttft_from_schedule_s = ttft_s + lag_s = (start_s + ttft_s) - scheduled_s: the TTFT as the
--               user waits for it, from the send time the schedule asked for (NULL where
--               ttft_s is). Both offsets are perf_counter offsets from the same window start,
--               so the sum is exact. ttft_s (from the actual send) leaves out the wait in the
--               client's own queue: behind a max_concurrency cap that is coordinated omission
--               (the cap hides the queue from the server, and the from-send latency with it)
--   e2e_from_schedule_s  = e2e_s + lag_s = end_s - scheduled_s, likewise
--               lag_s is used raw, never clamped at 0: the sender does not send early, so a
--               negative lag would be a collect fault to see (open_windows.lag_min_s), not to
--               hide; a negative lag makes the from-schedule figure that much below ttft_s
--   steady    = scheduled_s in [trim * S, (1 - trim) * S], S = windows.schedule_span_s,
--               trim = slo_targets.trim (0.1 by default). A rule on the send time, not on
--               the whole life: requiring the whole life inside the centre would drop exactly
--               the requests queueing made slow, and hide saturation. Requests are followed
--               to completion.
--   meets_slo = the request meets every objective given, latencies from the scheduled send:
--               ok, and ttft_from_schedule_s * 1000 <= ttft_ms, tpot_s * 1000 <= tpot_ms (a
--               request without a TPOT, fewer than 2 tokens, meets it; TPOT is not moved by a
--               wait before the send), e2e_from_schedule_s * 1000 <= e2e_ms; failed requests
--               never do. NULL when the campaign has no SLO (slo_targets.has_slo false or no
--               row). Every attainment and goodput of the open-loop objects counts this one
--   meets_slo_from_send = the same rule on ttft_s and e2e_s (from the actual send): vLLM's
--               goodput rule as benchmark_serving applies it, and collect's Slo.met
--               (collect/plan/load.py, the max-rate search's rule); kept to show beside it

CREATE OR REPLACE TABLE open_requests AS

WITH

sent AS (
    SELECT * FROM kept_requests WHERE scheduled_s IS NOT NULL
),

schedules AS (
    SELECT campaign_id, window_id, load, rate, ramp, max_concurrency, schedule_span_s
    FROM windows
),

targets AS (
    SELECT * FROM slo_targets
),

measured AS (
    SELECT
        s.campaign_id, s.config_id, s.service_id, s.window_id, s.request_id, s.engine,
        s.method, s.tp, s.workload, s.max_tokens, w.load, w.rate, w.ramp, w.max_concurrency,
        s.prompt_id, s.rep, s.run, s.scheduled_s, s.start_s,
        s.start_s - s.scheduled_s AS lag_s,
        s.ttft_s,
        CASE WHEN s.ok THEN tpot_s(s.output_tokens, s.e2e_s, s.ttft_s) END AS tpot_s,
        s.e2e_s,
        s.start_s + s.e2e_s AS end_s,
        s.ttft_s + (s.start_s - s.scheduled_s) AS ttft_from_schedule_s,
        s.e2e_s + (s.start_s - s.scheduled_s) AS e2e_from_schedule_s,
        s.output_tokens, s.prompt_tokens, s.cached_tokens, s.ok, s.error_kind,
        s.scheduled_s BETWEEN coalesce(t.trim, 0.1) * w.schedule_span_s
                          AND (1 - coalesce(t.trim, 0.1)) * w.schedule_span_s AS steady,
        t.has_slo, t.ttft_ms, t.tpot_ms, t.e2e_ms
    FROM sent AS s
    JOIN schedules AS w USING (campaign_id, window_id)
    LEFT JOIN targets AS t USING (campaign_id)
),

final AS (
    SELECT
        * EXCLUDE (has_slo, ttft_ms, tpot_ms, e2e_ms),
        -- schema/metrics.sql's meets_slo, on either clock (start_s and scheduled_s are
        -- never NULL here: a from-schedule latency is NULL exactly where its from-send one is)
        CASE WHEN has_slo THEN meets_slo(
            ok, ttft_from_schedule_s, tpot_s, e2e_from_schedule_s, ttft_ms, tpot_ms, e2e_ms
        ) END AS meets_slo,
        CASE WHEN has_slo THEN meets_slo(
            ok, ttft_s, tpot_s, e2e_s, ttft_ms, tpot_ms, e2e_ms
        ) END AS meets_slo_from_send
    FROM measured
)

SELECT * FROM final
