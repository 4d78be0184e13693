-- reads: analysis_params, open_windows, rate_attainment, rate_speedup, slo_targets
-- rate_limits: per method and setting, the highest rate that keeps the SLO, the first rate
-- that saturates and the rate where speculation stops paying.
-- grain: (campaign_id, tp, method, workload, max_tokens) with open-loop windows; key: the same.
-- "Swept rates" are the rates of the setting's windows with a single offered rate (a sweep's
-- and a max_rate_under_slo search's; ramps and trace replays have none). A rate's windows are
-- the rounds' starts of the configuration (one window per round, each on its own service
-- start); their attainment is rate_attainment's (analyze/attainment.py): sum(n_good) /
-- sum(n_scheduled), n_good counting latency from the scheduled send (open_requests.meets_slo),
-- with an interval that carries the start-to-start variance.
-- Columns:
--   n_rates     = swept rates (0: ramps or trace replays only, every rate column NULL)
--   lowest_rate, highest_rate = the lowest and the highest swept rate (what a NULL max rate
--                 is read against: below the lowest, or nothing judged)
--   target      = slo_targets.target (0.99 by default)
--   max_rate_under_slo = the highest swept rate r with attainment >= target at r and at every
--                 lower swept rate (a pass above a failing rate does not count); NULL when the
--                 lowest swept rate misses, or without an SLO. A point estimate. A rate at which
--                 a window fell behind its schedule (open_windows.behind_schedule) misses
--                 whatever its attainment: the rate was not offered, so it was not met; so does
--                 a rate with a window whose rows contradict its schedule
--                 (open_windows.invalid_reason: its attainment is unknown, and a rate not shown
--                 met is not met)
--   max_rate_under_slo_strict = the same rule on rate_attainment.attainment_lo, the lower end
--                 of the attainment's 95% interval over the rounds' starts (start variance
--                 pooled over the stratum's starts on Satterthwaite's df): the highest rate the
--                 configuration is shown to meet on another start too. A rate without that
--                 interval (one start: plan repeat 1; rate_attainment.ci_reason) is not shown
--                 met, so with one start per configuration it is NULL. Before issue 36 this
--                 was Wilson's bound on the summed counts, requests of every start as
--                 independent trials: it hid the start-to-start variance
--   strict_reason = why max_rate_under_slo_strict stops where it does when the rate above it
--                 (or the lowest rate, when it is NULL) has no interval: that rate's
--                 rate_attainment.ci_reason; NULL when a lower bound below the target, a window
--                 behind schedule or invalid rows decided it, or every rate passed
--   saturation_rate = the lowest swept rate with a saturated window (NULL: none)
--   stops_paying_rate = the lowest swept rate where the method is significantly SLOWER than
--                 the baseline (rate_speedup.significant, Holm, and tpot_speedup_hi < 1); a
--                 rate whose interval holds 1 does not say it stopped, as in `crossover` (NULL
--                 for the baseline and where no rate is significantly slower)
--   pays_at_rate  = the lowest swept rate where it is significantly faster (significant and
--                 tpot_speedup_lo > 1; NULL: pays at no rate, and for the baseline); above
--                 stops_paying_rate when a method that does not pay at low load pays under
--                 more (speculation can win where batching slows the baseline's steps)
--   compared      = rate_speedup has rows for the key (the control's included): a NULL
--                 stops_paying_rate then means no rate was significantly slower, which is not
--                 the same as never compared (false, never NULL)

CREATE OR REPLACE TABLE rate_limits AS

WITH

params AS (
    SELECT baseline FROM analysis_params
),

settings AS (
    SELECT DISTINCT campaign_id, tp, method, workload, max_tokens FROM open_windows
),

per_rate AS (
    SELECT
        campaign_id, tp, method, workload, max_tokens, rate,
        bool_and(has_slo) AS has_slo,
        bool_or(saturated) AS saturated,
        bool_or(behind_schedule) AS behind_schedule,
        bool_or(invalid_reason IS NOT NULL) AS invalid
    FROM open_windows
    WHERE rate IS NOT NULL
    GROUP BY ALL
),

judged AS (
    SELECT
        r.*,
        coalesce(t.target, 0.99) AS target,
        NOT r.behind_schedule AND NOT r.invalid AND coalesce(
            a.attainment >= coalesce(t.target, 0.99), false) AS passes,
        NOT r.behind_schedule AND NOT r.invalid AND coalesce(
            a.attainment_lo >= coalesce(t.target, 0.99), false) AS passes_strict,
        CASE WHEN NOT r.behind_schedule AND NOT r.invalid AND a.attainment_lo IS NULL
             THEN a.ci_reason END AS strict_reason
    FROM per_rate AS r
    LEFT JOIN rate_attainment AS a USING (campaign_id, tp, method, workload, max_tokens, rate)
    LEFT JOIN slo_targets AS t USING (campaign_id)
),

first_miss AS (
    SELECT
        campaign_id, tp, method, workload, max_tokens,
        count(*) AS n_rates,
        min(rate) AS lowest_rate,
        max(rate) AS highest_rate,
        bool_and(has_slo) AS has_slo,
        min(rate) FILTER (WHERE NOT passes) AS miss,
        min(rate) FILTER (WHERE NOT passes_strict) AS miss_strict,
        min(rate) FILTER (WHERE saturated) AS saturation_rate
    FROM judged
    GROUP BY ALL
),

limits AS (
    SELECT
        f.campaign_id, f.tp, f.method, f.workload, f.max_tokens, f.n_rates,
        f.lowest_rate, f.highest_rate, f.saturation_rate,
        CASE WHEN f.has_slo THEN
            max(j.rate) FILTER (WHERE f.miss IS NULL OR j.rate < f.miss) END
            AS max_rate_under_slo,
        CASE WHEN f.has_slo THEN
            max(j.rate) FILTER (WHERE f.miss_strict IS NULL OR j.rate < f.miss_strict) END
            AS max_rate_under_slo_strict,
        CASE WHEN f.has_slo THEN
            any_value(j.strict_reason) FILTER (WHERE j.rate = f.miss_strict) END
            AS strict_reason
    FROM first_miss AS f
    JOIN judged AS j USING (campaign_id, tp, method, workload, max_tokens)
    GROUP BY f.campaign_id, f.tp, f.method, f.workload, f.max_tokens, f.n_rates,
             f.lowest_rate, f.highest_rate, f.saturation_rate, f.has_slo
),

stops AS (
    SELECT campaign_id, tp, method, workload, max_tokens,
           min(rate) FILTER (WHERE NOT is_control AND significant AND tpot_speedup_hi < 1)
               AS stops_paying_rate,
           min(rate) FILTER (WHERE NOT is_control AND significant AND tpot_speedup_lo > 1)
               AS pays_at_rate,
           true AS compared
    FROM rate_speedup
    GROUP BY ALL
),

final AS (
    SELECT
        s.campaign_id, s.tp, s.method, s.workload, s.max_tokens,
        coalesce(l.n_rates, 0) AS n_rates,
        l.lowest_rate,
        l.highest_rate,
        coalesce(t.target, 0.99) AS target,
        l.max_rate_under_slo,
        l.max_rate_under_slo_strict,
        l.strict_reason,
        l.saturation_rate,
        CASE WHEN s.method <> p.baseline THEN x.stops_paying_rate END AS stops_paying_rate,
        CASE WHEN s.method <> p.baseline THEN x.pays_at_rate END AS pays_at_rate,
        coalesce(x.compared, false) AS compared
    FROM settings AS s
    CROSS JOIN params AS p
    LEFT JOIN limits AS l USING (campaign_id, tp, method, workload, max_tokens)
    LEFT JOIN stops AS x USING (campaign_id, tp, method, workload, max_tokens)
    LEFT JOIN slo_targets AS t USING (campaign_id)
)

SELECT * FROM final
