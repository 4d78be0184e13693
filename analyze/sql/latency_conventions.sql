-- reads: request_metrics, window_itl
-- latency_conventions: per measured window, the latency statistics vLLM `bench serve` and
-- SGLang `bench_serving` print, computed their way, in milliseconds.
-- grain: (campaign_id, engine, tp, method, workload, max_tokens, concurrency); key: the same
-- columns (one measured window each, like config_summary).
-- Reads request_metrics (01), so warm-up requests and incomplete units are already left out.
-- Only ok requests count ("successful" in both tools); failed ones are only in n - n_ok.
--   ttft_ms      = ttft_s * 1000, one value per ok request
--   tpot_ms      = (e2e_s - ttft_s) / (output_tokens - 1) * 1000, ok requests with
--                  output_tokens > 1 only (request_metrics.tpot_s)
--   itl_ms       = every per-chunk gap chunk_times_s[i+1] - chunk_times_s[i] of every ok
--                  request, pooled into one list (not a mean of per-request means)
--   itl_token_ms = each of those gaps divided by the tokens its later chunk carried
--                  (chunk_tokens[i+1]), pooled; only requests whose chunk_tokens is known
--                  and has one entry per chunk. A server that sends k tokens per chunk
--                  (speculative decoding) makes itl_ms ~k times itl_token_ms.
--                  Both pooled lists are window_itl's (analyze/itl/: one numpy pass over
--                  every chunk list; exact quantiles, the same definitions as below).
--   e2el_ms      = e2e_s * 1000
-- For each: _mean, _median (= quantile_cont 0.5, numpy's median), _std (population, numpy's
-- np.std), _p90, _p95, _p99 (quantile_cont = numpy's default linear percentile).
-- A statistic over no values is NULL (the tools print 0 there: np.mean(x or 0)).

CREATE OR REPLACE TABLE latency_conventions AS

WITH

ok_requests AS (
    SELECT * FROM request_metrics WHERE ok
),

per_request AS (
    SELECT
        COLUMNS(comparison_key()), method, window_id,
        ttft_s * 1000 AS ttft_ms,
        tpot_s * 1000 AS tpot_ms,
        e2e_s * 1000 AS e2el_ms
    FROM ok_requests
),

requests_stats AS (
    SELECT
        COLUMNS(comparison_key()), method,
        min(window_id) AS window_id,
        count(*) AS n_ok,
        avg(ttft_ms) AS ttft_ms_mean,
        quantile_cont(ttft_ms, 0.5) AS ttft_ms_median,
        stddev_pop(ttft_ms) AS ttft_ms_std,
        quantile_cont(ttft_ms, 0.9) AS ttft_ms_p90,
        quantile_cont(ttft_ms, 0.95) AS ttft_ms_p95,
        quantile_cont(ttft_ms, 0.99) AS ttft_ms_p99,
        count(tpot_ms) AS n_tpot,
        avg(tpot_ms) AS tpot_ms_mean,
        quantile_cont(tpot_ms, 0.5) AS tpot_ms_median,
        stddev_pop(tpot_ms) AS tpot_ms_std,
        quantile_cont(tpot_ms, 0.9) AS tpot_ms_p90,
        quantile_cont(tpot_ms, 0.95) AS tpot_ms_p95,
        quantile_cont(tpot_ms, 0.99) AS tpot_ms_p99,
        avg(e2el_ms) AS e2el_ms_mean,
        quantile_cont(e2el_ms, 0.5) AS e2el_ms_median,
        stddev_pop(e2el_ms) AS e2el_ms_std,
        quantile_cont(e2el_ms, 0.9) AS e2el_ms_p90,
        quantile_cont(e2el_ms, 0.95) AS e2el_ms_p95,
        quantile_cont(e2el_ms, 0.99) AS e2el_ms_p99
    FROM per_request
    GROUP BY ALL
),

windows AS (
    SELECT
        COLUMNS(comparison_key()), method,
        count(*) AS n
    FROM request_metrics
    GROUP BY ALL
),

final AS (
    SELECT
        -- the window in the table's column order: the comparison key with method after tp
        COLUMNS(comparison_key()[:3]), method, COLUMNS(comparison_key()[4:]),
        r.window_id,
        w.n,
        coalesce(r.n_ok, 0) AS n_ok,
        r.* EXCLUDE (campaign_id, engine, tp, method, workload, max_tokens, concurrency,
                     window_id, n_ok),
        coalesce(i.n_itl, 0) AS n_itl,
        i.* EXCLUDE (campaign_id, engine, tp, method, workload, max_tokens, concurrency, n_itl,
                     n_itl_token, itl_token_ms_mean, itl_token_ms_median, itl_token_ms_std,
                     itl_token_ms_p90, itl_token_ms_p95, itl_token_ms_p99),
        coalesce(i.n_itl_token, 0) AS n_itl_token,
        i.itl_token_ms_mean, i.itl_token_ms_median, i.itl_token_ms_std,
        i.itl_token_ms_p90, i.itl_token_ms_p95, i.itl_token_ms_p99
    FROM windows AS w
    LEFT JOIN requests_stats AS r
        USING (campaign_id, engine, tp, workload, max_tokens, concurrency, method)
    LEFT JOIN window_itl AS i
        USING (campaign_id, engine, tp, workload, max_tokens, concurrency, method)
)

SELECT * FROM final
