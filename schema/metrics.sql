-- Metric definitions, written once. Installed as persistent DuckDB macros in every results
-- file by schema.metrics.install (called whenever schema.store.connect opens a file for
-- writing), so the analysis views, collect's best-of ranking and its time estimates compute
-- the same numbers, and a read-only reader (report, `make sql`) can use them as well.
-- Each macro takes the columns it needs and returns NULL where the metric is undefined;
-- callers add the `ok` condition (a failed request has no latency metrics).
-- Beside them: which rows are measured (schema/measured.sql), the Python twins collect uses
-- per request (schema.metrics.tpot_s, accept_length: parity-tested against these macros),
-- and each metric's unit, direction and label (schema.metrics.CATALOG, written into every
-- analysed file as the metric_catalog table; docs/metrics.md).

-- tpot_s: time per output token after the first, seconds.
--   (e2e_s - ttft_s) / (output_tokens - 1)                       when output_tokens > 1
--   Convention: the first token's time is TTFT, so it is left out of both terms
--   (vLLM's and SGLang's benchmark convention).
CREATE OR REPLACE MACRO tpot_s(output_tokens, e2e_s, ttft_s) AS
    CASE WHEN output_tokens > 1 THEN (e2e_s - ttft_s) / (output_tokens - 1) END;

-- decode_tps: decode speed, tokens per second after the first token.
--   (output_tokens - 1) / (e2e_s - ttft_s)                       when output_tokens > 1
--                                                                 and e2e_s > ttft_s
--   Convention: the reciprocal of tpot_s; undefined (not infinite) when the whole reply
--   arrived with the first token.
CREATE OR REPLACE MACRO decode_tps(output_tokens, e2e_s, ttft_s) AS
    CASE WHEN output_tokens > 1 AND e2e_s > ttft_s
        THEN (output_tokens - 1) / (e2e_s - ttft_s) END;

-- e2e_tps: whole-request speed, output_tokens / e2e_s            when e2e_s > 0
--   Convention: includes the prefill (TTFT); compare decode_tps, which does not.
CREATE OR REPLACE MACRO e2e_tps(output_tokens, e2e_s) AS
    CASE WHEN e2e_s > 0 THEN output_tokens / e2e_s END;

-- accept_length: tokens made by decode steps per verify step, specsweep's one definition for
--   every engine (vLLM's mean_acceptance_length, the DFlash paper's tau; 1 for plain decoding)
--   (output_tokens - 1) / spec_verify_ct                        when output_tokens > 1
--                                                                 and spec_verify_ct > 0
--   Convention: the token sampled at prefill is not made by a verify step, so it is left out
--   of the numerator, as spec_verify_ct (verify steps after the prefill) leaves it out.
CREATE OR REPLACE MACRO accept_length_of(output_tokens, spec_verify_ct) AS
    CASE WHEN output_tokens > 1 AND spec_verify_ct > 0
        THEN (output_tokens - 1) / spec_verify_ct END;

-- accept_length_tw (aggregate): the same, pooled over rows (token-weighted),
--   sum(output_tokens - 1) / sum(spec_verify_ct)                 over rows with ok,
--                                                                 output_tokens > 1 and
--                                                                 spec_verify_ct > 0
--   Convention: total decode tokens / total verify steps (what a server's own counters give,
--   less the prefill tokens), not the request-weighted avg(accept_length_of).
CREATE OR REPLACE MACRO accept_length_tw(ok, output_tokens, spec_verify_ct) AS
    sum(output_tokens - 1) FILTER (WHERE ok AND output_tokens > 1 AND spec_verify_ct > 0)
        / sum(spec_verify_ct) FILTER (WHERE ok AND output_tokens > 1 AND spec_verify_ct > 0);

-- accept_rate: accepted draft tokens / proposed draft tokens      NULL when none proposed
CREATE OR REPLACE MACRO accept_rate(accepted_tokens, draft_tokens) AS
    accepted_tokens / nullif(draft_tokens, 0);

-- accept_length_counters: acceptance length from a server's own drafting counters over a
--   window (vLLM's definition: tokens per drafting step, the bonus token included)
--   1 + d_accepted / d_drafts                                    NULL when d_drafts is 0
--   d_accepted, d_drafts: deltas of spec_decode_num_accepted_tokens and spec_decode_num_drafts
--   Convention: equal to tokens per target step only where every step drafts (vLLM);
--   llama.cpp's n-gram drafters draft on some steps only (analyze/sql/window_acceptance.sql).
CREATE OR REPLACE MACRO accept_length_counters(d_accepted, d_drafts) AS
    1 + d_accepted / nullif(d_drafts, 0);

-- meets_slo: whether one request meets every latency objective given (vLLM's goodput rule)
--   ok AND ttft_s, e2e_s known
--   AND (ttft_ms IS NULL OR ttft_s * 1000 <= ttft_ms)
--   AND (tpot_ms IS NULL OR tpot_s IS NULL OR tpot_s * 1000 <= tpot_ms)
--   AND (e2e_ms IS NULL OR e2e_s * 1000 <= e2e_ms)
--   An objective given as NULL is not set; a request without a TPOT (fewer than two tokens)
--   meets a TPOT objective; a failed request never meets any. The caller picks the clock:
--   open_requests passes latencies from the scheduled send and from the actual send.
--   Python twin: schema.metrics.meets_slo (collect's Slo.met; tests/unit/schema/test_metrics_parity.py).
CREATE OR REPLACE MACRO meets_slo(ok, ttft_s, tpot_s, e2e_s, ttft_ms, tpot_ms, e2e_ms) AS
    ok AND ttft_s IS NOT NULL AND e2e_s IS NOT NULL
    AND (ttft_ms IS NULL OR ttft_s * 1000 <= ttft_ms)
    AND (tpot_ms IS NULL OR tpot_s IS NULL OR tpot_s * 1000 <= tpot_ms)
    AND (e2e_ms IS NULL OR e2e_s * 1000 <= e2e_ms);
