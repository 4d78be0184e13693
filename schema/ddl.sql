-- specsweep raw layer, schema version 13 (v1 had no units.complete, v2 no units.colocated_with,
-- v3 no endpoint_errors; v4 no gpu_samples nor services.transport; v5 no windows nor
-- requests.scheduled_s; v6 no method_params nor the requests' acceptance details
-- engine_accept_length, accept_histogram, accepted_per_pos, step_accepted; v7 no `run`, every
-- campaign had one; v8 no services.replica; v9 no requests.history; v10 no
-- requests.category; v11 no races; v12 no races.priors; v13 no windows.loop_lag_p99_s nor loop_lag_max_s; see
-- schema/migrations.py).
-- Written only by `collect`, each batch validated by the pandera model of the same
-- name in schema/contracts.py before it lands. Names are user-facing: document changes
-- in docs/data-dictionary.md and add a migrate_to_N step in schema/migrations.py.
-- These comments are the raw layer's data dictionary (docs/data-dictionary.md links here). Times are
-- UTC wall clock; every duration is measured with time.perf_counter().

-- One row per migration applied to the file (schema/migrations.py: one migrate_to_N per version).
CREATE TABLE IF NOT EXISTS schema_version (
    version     INTEGER NOT NULL,
    applied_at  TIMESTAMP NOT NULL
);

CREATE TABLE IF NOT EXISTS campaigns (
    campaign_id  VARCHAR PRIMARY KEY,   -- plan name + '-' + first 12 hex of plan_sha256
    plan_name    VARCHAR NOT NULL,
    plan_sha256  VARCHAR NOT NULL,      -- sha256 of the normalised plan (JSON of the model)
    plan_yaml    VARCHAR NOT NULL,      -- the plan file as written, secrets redacted
    baseline     VARCHAR NOT NULL,      -- the plan's baseline method
    started_at   TIMESTAMP NOT NULL,    -- UTC
    finished_at  TIMESTAMP,             -- UTC, set when every unit is complete
    status       VARCHAR NOT NULL       -- running | complete | partial (phases left) | interrupted
                                        -- | unreachable (the host could not be reached;
                                        -- environment host.last_error says why)
);

CREATE TABLE IF NOT EXISTS environment (
    campaign_id  VARCHAR NOT NULL,
    host         VARCHAR NOT NULL,
    key          VARCHAR NOT NULL,      -- e.g. cpu.model, engine.version; per service
                                        -- service.<method>.tp<N>.* (launch command, start-up
                                        -- time, build info, slots and context the server reports)
    value        VARCHAR NOT NULL,
    PRIMARY KEY (campaign_id, host, key)
);

CREATE TABLE IF NOT EXISTS services (
    service_id      VARCHAR PRIMARY KEY,
    campaign_id     VARCHAR NOT NULL,
    config_id       VARCHAR NOT NULL,   -- stable hash of engine+method+tp+flags+env
    engine          VARCHAR NOT NULL,
    method          VARCHAR NOT NULL,
    tp              INTEGER NOT NULL,
    gpus            VARCHAR NOT NULL,   -- comma-separated GPU indices, '' on CPU
    host            VARCHAR NOT NULL,
    launch_command  VARCHAR NOT NULL,   -- shell-quoted, secrets redacted
    requested_at    TIMESTAMP NOT NULL,
    ready_at        TIMESTAMP,
    stopped_at      TIMESTAMP,
    startup_s       DOUBLE,             -- perf_counter from launch to first healthy answer
    state           VARCHAR NOT NULL,   -- ready | failed | stopped
    error           VARCHAR,
    log_tail        VARCHAR,
    transport       VARCHAR NOT NULL DEFAULT 'direct'
                                        -- how the client reached it: direct | paramiko-tunnel |
                                        -- ssh-tunnel (an OpenSSH `ssh -L` process) | unknown
                                        -- (imported results, rows older than v5); through a
                                        -- tunnel, receive stamps are taken when the forward
                                        -- wrote the bytes to loopback
    ,run            INTEGER NOT NULL DEFAULT 1 -- which run of the campaign (requests.run)
    ,replica        INTEGER NOT NULL DEFAULT 1 -- which replica of its configuration
                                        -- (a long configuration split into several service
                                        -- starts, each running a share of its workloads)
);

CREATE TABLE IF NOT EXISTS units (
    campaign_id  VARCHAR NOT NULL,
    config_id    VARCHAR NOT NULL,
    workload     VARCHAR NOT NULL,
    service_id   VARCHAR NOT NULL,
    n_requests   INTEGER NOT NULL,
    complete     BOOLEAN NOT NULL,      -- false: interrupted; its rows are kept, excluded from
                                        -- analysis, and replaced when resume redoes the unit
    colocated_with VARCHAR NOT NULL DEFAULT '', -- comma-separated service_ids of other services
                                        -- running on the same host at any time during the
                                        -- unit (packed configurations); '' = ran alone
    started_at   TIMESTAMP NOT NULL,
    finished_at  TIMESTAMP NOT NULL,
    run          INTEGER NOT NULL DEFAULT 1, -- which run of the campaign (1-based; `repeat`)
    PRIMARY KEY (campaign_id, config_id, workload, run)
);

CREATE TABLE IF NOT EXISTS requests (
    request_id       VARCHAR PRIMARY KEY,  -- deterministic hash of the request's key fields
    campaign_id      VARCHAR NOT NULL,
    config_id        VARCHAR NOT NULL,
    service_id       VARCHAR NOT NULL,
    engine           VARCHAR NOT NULL,
    method           VARCHAR NOT NULL,
    tp               INTEGER NOT NULL,
    workload         VARCHAR NOT NULL,
    window_id        VARCHAR NOT NULL,     -- one measured window: config x workload x max_tokens x concurrency
    prompt_id        VARCHAR NOT NULL,
    max_tokens       INTEGER NOT NULL,
    rep              INTEGER NOT NULL,
    concurrency      INTEGER NOT NULL,     -- closed loop: requests in flight; open loop: the
                                           -- window's max_concurrency cap, 0 = uncapped
    session_id       VARCHAR,              -- agentic sessions only
    turn             INTEGER,              -- agentic sessions only, 0-based
    is_warmup        BOOLEAN NOT NULL,
    sent_at          TIMESTAMP NOT NULL,   -- UTC wall clock, never used for durations
    start_s          DOUBLE NOT NULL,      -- perf_counter offset of t0 (the actual send) from
                                           -- the window start
    ttft_s           DOUBLE,
    e2e_s            DOUBLE,
    chunk_times_s    DOUBLE[],             -- arrival offsets (from t0) of chunks carrying tokens
    chunk_tokens     INTEGER[],            -- tokens in each of those chunks, where the engine tells
                                           -- (NULL for llama.cpp: one token per chunk)
    prompt_tokens    INTEGER,
    cached_tokens    INTEGER,
    output_tokens    INTEGER,              -- the server's count, never max_tokens
    finish_reason    VARCHAR,
    spec_verify_ct   INTEGER,              -- target verify (decode) steps after the prefill
                                           -- (SGLang, vLLM per-request metrics; llama.cpp derived)
    draft_tokens     INTEGER,
    accepted_tokens  INTEGER,
    accept_length    DOUBLE,               -- specsweep's one definition for every engine: tokens
                                           -- made by decode steps / verify steps =
                                           -- (output_tokens - 1) / spec_verify_ct (the token
                                           -- sampled at prefill excluded; vLLM's and the DFlash
                                           -- paper's tau); 1 for plain decoding
    output_text      VARCHAR,
    server_stats     VARCHAR,              -- the engine's final stats object as JSON (timings, meta_info, usage)
    ok               BOOLEAN NOT NULL,
    error_kind       VARCHAR,              -- http | timeout | connect | protocol | empty | server_died | cancelled
    error_message    VARCHAR,
    scheduled_s      DOUBLE,               -- open-loop windows only: the send time the arrival
                                           -- schedule asked for, same clock as start_s (lag =
                                           -- start_s - scheduled_s; with a max_concurrency cap
                                           -- it includes the wait for a free slot); NULL in
                                           -- closed-loop windows
    engine_accept_length DOUBLE,           -- the engine's own per-request figure, as it reports
                                           -- it (SGLang spec_accept_length, which counts the
                                           -- prefill token; vLLM mean_acceptance_length); NULL
                                           -- where the engine reports none (llama.cpp)
    accept_histogram BIGINT[],             -- [j] = verify steps that accepted exactly j draft
                                           -- tokens, j = 0..K, as the engine reports it
    accepted_per_pos BIGINT[],             -- [k-1] = verify steps whose draft token at position k
                                           -- was accepted, as the engine reports it
    step_accepted    INTEGER[],            -- draft tokens accepted at each verify step, in order
                                           -- (vLLM `detailed`)
    run              INTEGER NOT NULL DEFAULT 1 -- which run of the campaign (1-based): a plan's
                                           -- `repeat: N` (or `collect run --repeat N`) measures
                                           -- every unit N times, each run on fresh service
                                           -- starts; run r > 1's window_id ends in /run<r>
    ,history         VARCHAR               -- agentic sessions only: where the assistant messages
                                           -- of this turn's prompt came from: own (this method's
                                           -- earlier replies) | replay (the baseline's recorded
                                           -- replies of the same session: the plan's `history:
                                           -- replay`; turn k's prompt is the baseline's);
                                           -- docs/agentic-pairing.md. NULL outside sessions
    ,category        VARCHAR NOT NULL DEFAULT 'uncategorized'
                                           -- the prompt's category (docs/categories.md): the
                                           -- workload's `category:` when the plan sets one, else
                                           -- the source's rule: MT-Bench its question's own
                                           -- (writing, roleplay, reasoning, math, coding,
                                           -- extraction, stem, humanities), HumanEval code,
                                           -- inline prompts inline, agentic turns agentic, trace
                                           -- items trace (or what the trace text says); imported
                                           -- rows the file's category column; rows older than v11
                                           -- and imports without one: uncategorized
);

-- One row per measured window, closed- and open-loop: how its load was made and what was done
-- to the server's prefix cache before it. Lands in the unit's transaction, like its requests.
CREATE TABLE IF NOT EXISTS windows (
    campaign_id      VARCHAR NOT NULL,
    service_id       VARCHAR NOT NULL,
    config_id        VARCHAR NOT NULL,
    workload         VARCHAR NOT NULL,
    window_id        VARCHAR NOT NULL,     -- requests.window_id
    max_tokens       INTEGER NOT NULL,
    load             VARCHAR NOT NULL,     -- closed | poisson | gamma | constant | trace
    rate             DOUBLE,               -- offered requests/s; NULL for closed, trace and ramps
    ramp             VARCHAR,              -- NULL | linear | exponential (vLLM's ramp-up strategies)
    ramp_start_rate  DOUBLE,               -- a ramp's first and last rate (requests/s)
    ramp_end_rate    DOUBLE,
    burstiness       DOUBLE,               -- gamma shape (1 = poisson); NULL otherwise
    seed             BIGINT,               -- the arrival schedule's seed; NULL closed-loop
    max_concurrency  INTEGER,              -- open loop: the cap (NULL none); closed: the concurrency
    n_scheduled      INTEGER NOT NULL,     -- requests the window's schedule holds
    schedule_span_s  DOUBLE,               -- the last scheduled send offset; NULL closed-loop
    cache_reset      VARCHAR NOT NULL,     -- what was done to the prefix cache before the window:
                                           -- flush_cache (SGLang) | reset_prefix_cache (vLLM) |
                                           -- slots_erase (llama.cpp) | cache_prompt_off (llama.cpp
                                           -- requests ask for no caching: nothing to reset) |
                                           -- kept (plan prefix_cache: keep) | unsupported |
                                           -- failed (an endpoint_errors row says why)
    started_at       TIMESTAMP NOT NULL,   -- UTC
    elapsed_s        DOUBLE NOT NULL,      -- perf_counter, window start to the last reply's end
    run              INTEGER NOT NULL DEFAULT 1, -- requests.run
    loop_lag_p99_s   DOUBLE,               -- how late the client's event loop woke, p99 and max
    loop_lag_max_s   DOUBLE,               -- (collect/http/loop_lag.py: a 1 ms probe since
                                           -- 2026-12-06, 5 ms before; collect's warning judges
                                           -- each chunk's read). NULL: before schema v14
    PRIMARY KEY (campaign_id, window_id)
);

CREATE TABLE IF NOT EXISTS server_metrics (
    campaign_id  VARCHAR NOT NULL,
    service_id   VARCHAR NOT NULL,
    config_id    VARCHAR NOT NULL,
    workload     VARCHAR NOT NULL,
    phase        VARCHAR NOT NULL,      -- before | after (the workload)
    source       VARCHAR NOT NULL,      -- metrics (Prometheus) | server_info | props
    name         VARCHAR NOT NULL,
    labels       VARCHAR NOT NULL,      -- JSON object, '{}' when none
    value        DOUBLE NOT NULL,
    scraped_at   TIMESTAMP NOT NULL
);

-- One row per failed call of an optional endpoint (fingerprint, metrics scrape) or of the
-- before-workload hook (cache flush): the measurement went on without it (a failed hook
-- fails the service, which is restarted once, as before).
CREATE TABLE IF NOT EXISTS endpoint_errors (
    campaign_id  VARCHAR NOT NULL,
    service_id   VARCHAR NOT NULL,
    config_id    VARCHAR NOT NULL,
    workload     VARCHAR NOT NULL,      -- '' for the fingerprint (taken before any workload)
    hook         VARCHAR NOT NULL,      -- fingerprint | before_workload | scrape | reset_cache
    phase        VARCHAR NOT NULL,      -- start (fingerprint) | before | after (the workload)
    endpoint     VARCHAR NOT NULL,      -- the last request the hook sent, e.g. 'GET /metrics';
                                        -- '' when it sent none
    status       INTEGER,               -- HTTP status of that request's reply; NULL if none came
    error        VARCHAR NOT NULL,      -- the exception's type and message
    failed_at    TIMESTAMP NOT NULL     -- UTC
);

-- GPU telemetry: one row per GPU the service holds per sample, sampled every
-- plan.telemetry.period_s while a window runs (NVML on a local host, `nvidia-smi --query-gpu
-- ... -lms` over SSH). Lands in the unit's transaction, like its requests.
CREATE TABLE IF NOT EXISTS gpu_samples (
    campaign_id       VARCHAR NOT NULL,
    service_id        VARCHAR NOT NULL,
    config_id         VARCHAR NOT NULL,
    workload          VARCHAR NOT NULL,
    window_id         VARCHAR NOT NULL,  -- the window (requests.window_id) it was taken in
    gpu_index         INTEGER NOT NULL,  -- the host's index (as nvidia-smi numbers it)
    t_s               DOUBLE NOT NULL,   -- perf_counter offset from the window start, the
                                         -- same clock as requests.start_s
    power_w           DOUBLE,            -- board power draw (W); NULL if not reported
    energy_j          DOUBLE,            -- NVML total energy counter (J) since driver load;
                                         -- NULL where not available (nvidia-smi path)
    sm_clock_mhz      DOUBLE,
    mem_clock_mhz     DOUBLE,
    util_gpu_pct      DOUBLE,            -- 0..100
    util_mem_pct      DOUBLE,            -- 0..100
    memory_used_mib   DOUBLE,
    temperature_c     DOUBLE,
    throttle_reasons  VARCHAR NOT NULL   -- comma-separated active clock-event reasons other
                                         -- than idle ('' none), e.g. 'sw_power_cap,hw_slowdown'
);

-- One row per parameter of a method (plan `methods[].params`, or one value of a `grid`):
-- what a method family swept, queryable without parsing method names. A method without
-- parameters has no rows (its family is its own name). Written when the campaign starts.
CREATE TABLE IF NOT EXISTS method_params (
    campaign_id  VARCHAR NOT NULL,
    method       VARCHAR NOT NULL,      -- the expanded method name (services.method)
    family       VARCHAR NOT NULL,      -- the family it belongs to (the grid's method name)
    param        VARCHAR NOT NULL,
    value        VARCHAR NOT NULL,      -- the value as the plan wrote it
    value_num    DOUBLE,                -- the same as a number, NULL when it is not one
    PRIMARY KEY (campaign_id, method, param)
);

-- One row per raced phase of a campaign (plan `search:`, docs/race.md): the rule its rounds
-- were decided by. The race itself is not stored: its decisions are a function of the measured
-- values alone (stats.race.replay over schema/measured.sql's race_values), so collect and the
-- analysis replay the same answer from the rows above.
CREATE TABLE IF NOT EXISTS races (
    campaign_id  VARCHAR NOT NULL,
    phase        VARCHAR NOT NULL,
    tp           INTEGER NOT NULL,      -- the phase's tensor-parallel size
    methods      VARCHAR NOT NULL,      -- comma-separated arms, in the phase's order (the
                                        -- baseline among them; its A/A control is not an arm)
    workloads    VARCHAR NOT NULL,      -- comma-separated workloads whose windows are the
                                        -- levels; '' = all the phase's methods run
    objective    VARCHAR NOT NULL,      -- decode_tps: the mean ln decode tok/s of a window
    within       DOUBLE NOT NULL,       -- the indifference zone, a share of the best's value
    confidence   DOUBLE NOT NULL,
    first_rounds INTEGER NOT NULL,      -- rounds every arm runs before any is dropped
    max_rounds   INTEGER NOT NULL
    ,priors      VARCHAR NOT NULL DEFAULT '{}'
                                        -- JSON {level: [sigma2, df]}: each level's start
                                        -- variance from earlier campaigns of the file (plan
                                        -- search.prior), fixed when the race began; {}: none
    ,PRIMARY KEY (campaign_id, phase)
);

-- Rows a pandera contract rejected (schema/contracts.py), kept with the reason; no analysis
-- object reads them.
CREATE TABLE IF NOT EXISTS quarantine (
    table_name  VARCHAR NOT NULL,
    row_json    VARCHAR NOT NULL,
    reason      VARCHAR NOT NULL,
    quarantined_at  TIMESTAMP NOT NULL
);
