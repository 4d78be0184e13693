-- reads: cache_hygiene, incomplete_units, open_requests, services, slo_targets, wilson_hi,
-- reads: wilson_lo, windows
-- open_windows: one row per measured open-loop window (windows.load <> 'closed'; a unit
-- marked incomplete is left out), from its open_requests rows.
-- grain: window; key: (campaign_id, window_id).
-- Percentiles are DuckDB's quantile_cont (linear interpolation), as config_summary's.
-- S = schedule_span_s, trim = slo_targets.trim (0.1 by default); steady: see open_requests.
-- Columns: campaign_id, config_id, service_id, run, window_id, engine, method, tp, workload,
-- max_tokens, load, rate (offered), ramp, ramp_start_rate, ramp_end_rate, burstiness,
-- max_concurrency, n_scheduled, elapsed_s, schedule_span_s, cache_reset (windows; run is the
-- round, one service start of the configuration: the window's figures are that start's), plus
--   n_sent, n_ok, n_steady  = requests sent, ok, steady (ok or not)
--   scheduled_rps  = (n_scheduled - 1) / S                 (NULL when S = 0)
--   achieved_rps   = n_ok / elapsed_s
--   lag_p50_s, lag_p90_s, lag_p99_s, lag_min_s, lag_max_s = of lag_s over every sent request
--                    (lag_min_s < 0 would be a collect fault: the sender never sends early)
--   lag_growth     = regr_slope(lag_s, scheduled_s) over the steady requests (ok or not): the
--                    seconds of lag the client gained per second of schedule, so it sent the
--                    steady part at about 1 / (1 + lag_growth) of the rate asked. NULL with
--                    fewer than 2 distinct steady send times
--   behind_schedule = lag_growth > 0.1: the client fell behind its schedule and the server was
--                    offered less than 1 / 1.1 (91%) of the rate asked (with a max_concurrency
--                    cap: the cap, not the server, bound the load). Why this rule: a lag that
--                    stays level (a queue that neither grows nor drains) delivered the rate, a
--                    fixed delay later, and the from-schedule latencies below already carry
--                    that delay; a lag that keeps growing means the rate was never offered, so
--                    a per-second figure of the window is not one at this rate. The slope uses
--                    every steady send, so one late request at an edge does not decide (the
--                    span overrun would). 10% is the tolerance completion_ratio has (0.9)
--   ttft_p50_s, ttft_p99_s, tpot_p50_s, tpot_p99_s, e2e_p50_s, e2e_p99_s = over steady ok
--                    requests, from the actual send (open_requests.ttft_s, e2e_s)
--   ttft_from_schedule_p50_s, ttft_from_schedule_p99_s, e2e_from_schedule_p50_s,
--   e2e_from_schedule_p99_s = the same over open_requests.ttft_from_schedule_s and
--                    e2e_from_schedule_s: the latency as the user waits for it, the client's
--                    queue included (the primary figures; TPOT has no such pair: a wait before
--                    the send does not move it)
--   output_tps     = sum(output_tokens of ok requests) / elapsed_s
--   effective_concurrency = sum(e2e_s) / (max(end_s) - min(start_s)) over ok requests: the
--                    mean number in flight, as config_summary's
--   completion_ratio = ok requests ending (end_s) in [trim*S + d, (1-trim)*S + d] / requests
--                    scheduled in [trim*S, (1-trim)*S] (the offered load: with a
--                    max_concurrency cap the sends themselves are held back, so counting them
--                    would hide a server that does not keep up), d = e2e_p50_s (the steady
--                    requests' median E2E): completions lag their sends by about d, so a
--                    server that keeps up completes as many in the shifted interval as were
--                    sent in the unshifted one (unshifted, a request longer than trim*S made
--                    the ratio fall below 1 with no queueing at all: the completions that
--                    should open the interval belong to sends before the window); one that
--                    does not keep up completes at its own rate below the offered rate in
--                    any interval while it is busy. NULL when none was sent in it
--   ttft_first_third_s, ttft_last_third_s = median ttft_s of ok requests among the first and
--                    the last floor(n/3) of the window's n steady requests, ordered by
--                    scheduled_s (then request_id); NULL when n < 3
--   saturated      = the server did not keep up: completion_ratio < 0.9 with at least 3
--                    requests short (reason 'completion': one request can fall out at each
--                    edge of the shifted interval by chance, which in a small window alone
--                    moves the ratio by more than 10%)
--                    or ttft_last_third_s > 2 * ttft_first_third_s and the difference > 50 ms
--                    (reason 'ttft_growth'); saturation_reason: NULL | completion |
--                    ttft_growth | both
--   n_good, n_good_steady = requests (steady requests) with meets_slo (latencies from the
--                    scheduled send); n_good_from_send = requests with meets_slo_from_send
--   goodput_rps    = n_good / elapsed_s (vLLM's goodput: every request of the window over its
--                    duration); NULL, with goodput_lo and goodput_hi, when behind_schedule
--   goodput_reason = why goodput_rps is NULL: 'no SLO', or 'behind schedule: lag grew G s per
--                    s of schedule (p90 lag L s)'; NULL when it has a value
--   goodput_from_send_rps = n_good_from_send / elapsed_s, never withheld (what vLLM's
--                    benchmark_serving would print for the window)
--   attainment_from_send = n_good_from_send / n_scheduled; attainment_from_send_lo, _hi: its
--                    95% Wilson interval
--   attainment     = n_good / n_scheduled; attainment_lo, attainment_hi: its 95% Wilson
--                    interval (wilson.sql): the requests of one start as independent
--                    trials, so an interval of this start's attainment, not of the
--                    configuration's (other starts land elsewhere: rate_attainment, over the
--                    rounds' starts, carries that)
--   goodput_lo, goodput_hi = (n_scheduled / elapsed_s) * attainment_lo, attainment_hi
--   attainment_steady = n_good_steady / n_steady, with attainment_steady_lo, _hi (Wilson)
--                    (every n_good .. attainment_steady_hi column NULL without an SLO)
--   has_slo        = the campaign has an SLO (slo_targets.has_slo)
--   cached_share   = cache_hygiene's (sum cached_tokens / sum prompt_tokens, ok requests)
--   invalid_reason = why the window's rows are inconsistent, NULL when they are not. The
--                    invariant every attainment and Wilson interval relies on is
--                    n_sent <= n_scheduled (so n_good <= n_scheduled, and n_scheduled > 0
--                    wherever a request was sent); a merged or hand-edited file can break it:
--                    'requests outnumber the schedule: N sent, M scheduled'. Such a window
--                    stays here, named, with its request figures (counts, lags, latencies,
--                    saturation); scheduled_rps and every attainment and goodput column are
--                    NULL (goodput_reason = invalid_reason): a figure against a schedule the
--                    rows contradict would be made up, and clamping the counts would hide
--                    which rows are wrong. rate_speedup and rate_limits leave its goodput
--                    and attainment out the same way (issue 26)

CREATE OR REPLACE TABLE open_windows AS

WITH

incomplete AS (
    SELECT * FROM incomplete_units()  -- schema/measured.sql: the one incomplete-unit rule
),

targets AS (
    SELECT campaign_id, trim, has_slo FROM slo_targets
),

open_windows_ AS (
    SELECT
        w.*,
        coalesce(t.trim, 0.1) * w.schedule_span_s AS steady_from_s,
        (1 - coalesce(t.trim, 0.1)) * w.schedule_span_s AS steady_to_s,
        coalesce(t.has_slo, false) AS has_slo
    FROM windows AS w
    LEFT JOIN targets AS t USING (campaign_id)
    WHERE w.load <> 'closed'
      AND NOT EXISTS (
          SELECT 1 FROM incomplete AS i
          WHERE i.campaign_id = w.campaign_id AND i.config_id = w.config_id
            AND i.workload = w.workload AND i.run = w.run
      )
),

measured AS (
    SELECT
        r.*,
        w.steady_from_s, w.steady_to_s,
        count(*) FILTER (WHERE r.steady)
            OVER (PARTITION BY r.campaign_id, r.window_id) AS n_steady_all,
        CASE WHEN r.steady THEN row_number() OVER (
            PARTITION BY r.campaign_id, r.window_id, r.steady
            ORDER BY r.scheduled_s, r.request_id) END AS steady_pos
    FROM open_requests AS r
    JOIN open_windows_ AS w USING (campaign_id, window_id)
),

thirds AS (
    SELECT
        *,
        CASE WHEN steady_pos <= n_steady_all // 3 THEN 'first'
             WHEN steady_pos > n_steady_all - n_steady_all // 3 THEN 'last' END AS third
    FROM measured
),

per_window AS (
    SELECT
        campaign_id, window_id,
        any_value(engine) AS engine,
        any_value(method) AS method,
        any_value(tp) AS tp,
        count(*) AS n_sent,
        count(*) FILTER (WHERE ok) AS n_ok,
        count(*) FILTER (WHERE steady) AS n_steady,
        quantile_cont(lag_s, 0.5) AS lag_p50_s,
        quantile_cont(lag_s, 0.9) AS lag_p90_s,
        quantile_cont(lag_s, 0.99) AS lag_p99_s,
        min(lag_s) AS lag_min_s,
        max(lag_s) AS lag_max_s,
        regr_slope(lag_s, scheduled_s) FILTER (WHERE steady) AS lag_growth,
        quantile_cont(ttft_s, 0.5) FILTER (WHERE ok AND steady) AS ttft_p50_s,
        quantile_cont(ttft_s, 0.99) FILTER (WHERE ok AND steady) AS ttft_p99_s,
        quantile_cont(tpot_s, 0.5) FILTER (WHERE ok AND steady) AS tpot_p50_s,
        quantile_cont(tpot_s, 0.99) FILTER (WHERE ok AND steady) AS tpot_p99_s,
        quantile_cont(e2e_s, 0.5) FILTER (WHERE ok AND steady) AS e2e_p50_s,
        quantile_cont(e2e_s, 0.99) FILTER (WHERE ok AND steady) AS e2e_p99_s,
        quantile_cont(ttft_from_schedule_s, 0.5) FILTER (WHERE ok AND steady)
            AS ttft_from_schedule_p50_s,
        quantile_cont(ttft_from_schedule_s, 0.99) FILTER (WHERE ok AND steady)
            AS ttft_from_schedule_p99_s,
        quantile_cont(e2e_from_schedule_s, 0.5) FILTER (WHERE ok AND steady)
            AS e2e_from_schedule_p50_s,
        quantile_cont(e2e_from_schedule_s, 0.99) FILTER (WHERE ok AND steady)
            AS e2e_from_schedule_p99_s,
        coalesce(sum(output_tokens) FILTER (WHERE ok), 0) AS ok_output_tokens,
        sum(e2e_s) FILTER (WHERE ok) / nullif(max(end_s) FILTER (WHERE ok)
            - min(start_s) FILTER (WHERE ok), 0) AS effective_concurrency,
        count(*) FILTER (WHERE scheduled_s BETWEEN steady_from_s AND steady_to_s)
            AS n_sent_steady,
        quantile_cont(ttft_s, 0.5) FILTER (WHERE ok AND third = 'first') AS ttft_first_third_s,
        quantile_cont(ttft_s, 0.5) FILTER (WHERE ok AND third = 'last') AS ttft_last_third_s,
        count(*) FILTER (WHERE meets_slo) AS n_good,
        count(*) FILTER (WHERE meets_slo AND steady) AS n_good_steady,
        count(*) FILTER (WHERE meets_slo_from_send) AS n_good_from_send
    FROM thirds
    GROUP BY campaign_id, window_id
),

completions AS (
    SELECT
        t.campaign_id, t.window_id,
        count(*) FILTER (WHERE t.ok AND t.end_s BETWEEN t.steady_from_s + p.e2e_p50_s
                                                   AND t.steady_to_s + p.e2e_p50_s)
            AS n_completed_steady
    FROM thirds AS t
    JOIN per_window AS p USING (campaign_id, window_id)
    GROUP BY t.campaign_id, t.window_id
),

described AS (
    SELECT
        w.campaign_id, w.config_id, w.service_id, w.run, w.window_id,
        coalesce(p.engine, s.engine) AS engine,
        coalesce(p.method, s.method) AS method,
        coalesce(p.tp, s.tp) AS tp,
        w.workload, w.max_tokens, w.load, w.rate, w.ramp, w.ramp_start_rate, w.ramp_end_rate,
        w.burstiness, w.max_concurrency, w.n_scheduled, w.schedule_span_s, w.elapsed_s,
        w.cache_reset, w.has_slo,
        coalesce(p.n_sent, 0) AS n_sent,
        coalesce(p.n_ok, 0) AS n_ok,
        coalesce(p.n_steady, 0) AS n_steady,
        p.* EXCLUDE (campaign_id, window_id, engine, method, tp, n_sent, n_ok, n_steady,
                     n_good, n_good_steady, n_good_from_send),
        c.n_completed_steady,
        CASE WHEN w.has_slo THEN coalesce(p.n_good, 0) END AS n_good,
        CASE WHEN w.has_slo THEN coalesce(p.n_good_steady, 0) END AS n_good_steady,
        CASE WHEN w.has_slo THEN coalesce(p.n_good_from_send, 0) END AS n_good_from_send
    FROM open_windows_ AS w
    LEFT JOIN per_window AS p USING (campaign_id, window_id)
    LEFT JOIN completions AS c USING (campaign_id, window_id)
    LEFT JOIN services AS s USING (service_id)
),

rates AS (
    SELECT
        *,
        (n_scheduled - 1) / nullif(schedule_span_s, 0) AS scheduled_rps,
        n_ok / nullif(elapsed_s, 0) AS achieved_rps,
        coalesce(ok_output_tokens, 0) / nullif(elapsed_s, 0) AS output_tps,
        n_completed_steady / nullif(n_sent_steady, 0) AS completion_ratio,
        coalesce(n_completed_steady / nullif(n_sent_steady, 0) < 0.9
                 AND n_sent_steady - n_completed_steady >= 3, false) AS by_completion,
        coalesce(ttft_last_third_s > 2 * ttft_first_third_s
                 AND ttft_last_third_s - ttft_first_third_s > 0.05, false) AS by_ttft_growth,
        coalesce(lag_growth > 0.1, false) AS behind_schedule
    FROM described
),

-- goodput counts only where the window offered its rate (behind_schedule: see the header)
withheld AS (
    SELECT
        *,
        CASE WHEN n_sent > n_scheduled THEN printf(
                 'requests outnumber the schedule: %d sent, %d scheduled',
                 n_sent, n_scheduled) END AS invalid_reason,
        CASE WHEN invalid_reason IS NOT NULL THEN invalid_reason
             WHEN NOT has_slo THEN 'no SLO'
             WHEN behind_schedule THEN printf(
                 'behind schedule: lag grew %.2f s per s of schedule (p90 lag %.2f s)',
                 lag_growth, lag_p90_s) END AS goodput_reason
    FROM rates
),

computed AS (
    SELECT
        r.* EXCLUDE (ok_output_tokens, n_completed_steady, n_sent_steady, by_completion,
                     by_ttft_growth),
        by_completion OR by_ttft_growth AS saturated,
        CASE WHEN by_completion AND by_ttft_growth THEN 'both'
             WHEN by_completion THEN 'completion'
             WHEN by_ttft_growth THEN 'ttft_growth' END AS saturation_reason,
        CASE WHEN NOT behind_schedule THEN n_good / nullif(elapsed_s, 0) END AS goodput_rps,
        CASE WHEN NOT behind_schedule THEN
            n_scheduled / nullif(elapsed_s, 0) * wilson_lo(n_good, n_scheduled) END AS goodput_lo,
        CASE WHEN NOT behind_schedule THEN
            n_scheduled / nullif(elapsed_s, 0) * wilson_hi(n_good, n_scheduled) END AS goodput_hi,
        n_good_from_send / nullif(elapsed_s, 0) AS goodput_from_send_rps,
        n_good / nullif(n_scheduled, 0) AS attainment,
        wilson_lo(n_good, n_scheduled) AS attainment_lo,
        wilson_hi(n_good, n_scheduled) AS attainment_hi,
        n_good_steady / nullif(n_steady, 0) AS attainment_steady,
        wilson_lo(n_good_steady, n_steady) AS attainment_steady_lo,
        wilson_hi(n_good_steady, n_steady) AS attainment_steady_hi,
        n_good_from_send / nullif(n_scheduled, 0) AS attainment_from_send,
        wilson_lo(n_good_from_send, n_scheduled) AS attainment_from_send_lo,
        wilson_hi(n_good_from_send, n_scheduled) AS attainment_from_send_hi,
        c.cached_share,
        r.invalid_reason IS NULL AS consistent
    FROM withheld AS r
    LEFT JOIN cache_hygiene AS c USING (campaign_id, window_id)
),

-- nothing against the schedule of a window whose rows contradict it (invalid_reason: header)
final AS (
    SELECT * EXCLUDE (consistent) REPLACE (
        CASE WHEN consistent THEN scheduled_rps END AS scheduled_rps,
        CASE WHEN consistent THEN goodput_rps END AS goodput_rps,
        CASE WHEN consistent THEN goodput_lo END AS goodput_lo,
        CASE WHEN consistent THEN goodput_hi END AS goodput_hi,
        CASE WHEN consistent THEN goodput_from_send_rps END AS goodput_from_send_rps,
        CASE WHEN consistent THEN attainment END AS attainment,
        CASE WHEN consistent THEN attainment_lo END AS attainment_lo,
        CASE WHEN consistent THEN attainment_hi END AS attainment_hi,
        CASE WHEN consistent THEN attainment_steady END AS attainment_steady,
        CASE WHEN consistent THEN attainment_steady_lo END AS attainment_steady_lo,
        CASE WHEN consistent THEN attainment_steady_hi END AS attainment_steady_hi,
        CASE WHEN consistent THEN attainment_from_send END AS attainment_from_send,
        CASE WHEN consistent THEN attainment_from_send_lo END AS attainment_from_send_lo,
        CASE WHEN consistent THEN attainment_from_send_hi END AS attainment_from_send_hi
    )
    FROM computed
)

SELECT * FROM final
