-- reads: analysis_params, request_metrics
-- speedup_pairs: the per-request rows that analyze/stats.py turns into the speedup table.
-- grain: (comparison, role, request); key: (campaign_id, engine, tp, workload, max_tokens,
--   concurrency, method, role, request_id). `method` is the compared method M; role is
--   'method' (a request of M) or 'baseline' (a request of the baseline, repeated once per M).
--   service_id: the start that measured the request (service_starts gives its position).
-- Baseline name: analysis_params.baseline (bound by analyze.build.run, never formatted in).
-- Same-prompts rule: a request counts only if its prompt_id has at least one usable request
--   (ok, decode_tps > 0) in both M's and the baseline's window of the same
--   (campaign_id, engine, tp, workload, max_tokens, concurrency) in every run of the comparison.
--   All reps of such a prompt count. Runs (requests.run): the comparison's runs are those in
--   which M and the baseline share a prompt; a run only one side measured is left out, and so
--   is a prompt missing from any of the comparison's runs on either side (one run: the rule
--   above, nothing more). `run` is carried so that analyze/stats.py can cross runs with prompts.
-- Agentic turns (prompt_id '<workload>/turn<k>'): turns k > 0 count only where M replayed the
--   baseline's replies (requests.history = 'replay'); with its own history M's turn-k prompt
--   is not the baseline's (docs/agentic-pairing.md).
-- Formula fed downstream (stats.paired): speedup = exp(mean over (run, prompt) of
--   mean ln decode_tps(method) - mean ln decode_tps(baseline)), with a t interval.

CREATE OR REPLACE VIEW speedup_pairs AS

WITH

params AS (
    SELECT baseline FROM analysis_params
),

usable AS (
    SELECT
        COLUMNS(comparison_key()), method,
        run, prompt_id, rep, request_id, service_id, decode_tps, ttft_s
    FROM request_metrics
    WHERE decode_tps > 0  -- NULL and non-positive speeds have no log ratio
      -- an agentic turn > 0 pairs only if its prompt is the baseline's: a method's turn
      -- replayed the baseline's replies (docs/agentic-pairing.md; agentic_turns.sql)
      AND (turn IS NULL OR turn = 0 OR history = 'replay'
           OR method = (SELECT baseline FROM analysis_params))
),

baseline_rows AS (
    SELECT u.*, p.baseline
    FROM usable AS u
    JOIN params AS p ON u.method = p.baseline
),

method_rows AS (
    SELECT u.*, p.baseline
    FROM usable AS u
    JOIN params AS p ON u.method <> p.baseline
),

-- (run, prompt) cells that both sides measured
shared_cells AS MATERIALIZED (
    SELECT DISTINCT COLUMNS(comparison_key()), m.method, m.run, m.prompt_id
    FROM method_rows AS m
    SEMI JOIN baseline_rows AS b
        USING (campaign_id, engine, tp, workload, max_tokens, concurrency, run, prompt_id)
),

comparison_runs AS (
    SELECT COLUMNS(comparison_key()), method, count(DISTINCT run) AS n_runs
    FROM shared_cells
    GROUP BY ALL
),

prompt_runs AS (
    SELECT COLUMNS(comparison_key()), method, prompt_id, count(*) AS n_runs
    FROM shared_cells
    GROUP BY ALL
),

-- a prompt shared in every run of its comparison
shared_prompts AS (
    SELECT p.* EXCLUDE (n_runs)
    FROM prompt_runs AS p
    JOIN comparison_runs AS c
        USING (campaign_id, engine, tp, workload, max_tokens, concurrency, method, n_runs)
),

paired_cells AS (
    SELECT c.*
    FROM shared_cells AS c
    SEMI JOIN shared_prompts AS s
        USING (campaign_id, engine, tp, workload, max_tokens, concurrency, method, prompt_id)
),

method_side AS (
    SELECT m.*, 'method' AS role
    FROM method_rows AS m
    SEMI JOIN paired_cells AS s
        USING (campaign_id, engine, tp, workload, max_tokens, concurrency, method, run,
               prompt_id)
),

baseline_side AS (
    SELECT b.* EXCLUDE (method), s.method, 'baseline' AS role
    FROM paired_cells AS s
    JOIN baseline_rows AS b
        USING (campaign_id, engine, tp, workload, max_tokens, concurrency, run, prompt_id)
),

final AS (
    SELECT
        COLUMNS(comparison_key()), method, baseline, role,
        run, prompt_id, rep, request_id, service_id, decode_tps, ttft_s
    FROM method_side
    UNION ALL BY NAME
    SELECT
        COLUMNS(comparison_key()), method, baseline, role,
        run, prompt_id, rep, request_id, service_id, decode_tps, ttft_s
    FROM baseline_side
)

SELECT * FROM final
