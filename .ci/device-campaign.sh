# Sourced by .ci/device-steps.sh and .ci/device-engine.sh: one campaign per plan on a lent GPU
# machine, started once in the background, waited for within the call's budget, analysed.
# Needs from the caller: S (state folder), R (results folder), PLAN, and the functions say and
# wait_for. The campaign's tag is the plan's file name; its files are $S/TAG.started, .log,
# .rc, $R/TAG.duckdb and $R/logs-TAG.

# campaign_tag: the plan's file name, or with ONLY (e.g. ONLY="autoregressive draft-k4": the
# methods or families `collect run --only` takes) the same joined by ".", so that a part of a
# plan and the whole plan keep their own state and database on one machine
campaign_tag() {
    local tag
    tag=$(basename "$PLAN" .yaml)
    [ -n "${ONLY:-}" ] && tag="$tag.$(echo $ONLY | tr ' /' '._')"
    echo "$tag"
}

# campaign_start TAG: `collect run PLAN` once (check --probe first), in its own session, so
# that it outlives the call
campaign_start() {
    [ -f "$S/$1.started" ] && return 0
    python3 -m specsweep check "$PLAN" --probe 2>&1 | tee "$S/check-$1.log" | tail -12
    touch "$S/$1.started"
    local only="" m
    for m in ${ONLY:-}; do only="$only --only $m"; done
    setsid bash -c "python3 -m specsweep run '$PLAN' $only --db '$R/$1.duckdb' --logs '$R/logs-$1' \
        --no-progress > '$S/$1.log' 2>&1; echo \$? > '$S/$1.rc'" \
        < /dev/null > /dev/null 2>&1 &
    say "campaign $1 started (log $S/$1.log)"
}

# campaign_end TAG STEP: wait for the campaign's exit code within the budget (else say to call
# STEP again and exit 0), then analyze it (its database comes back even when that fails)
campaign_end() {
    if ! wait_for "$S/$1.rc"; then
        tail -5 "$S/$1.log"; say "campaign still running: call $2 again now"; exit 0
    fi
    say "campaign ended with exit code $(cat "$S/$1.rc")"
    tail -15 "$S/$1.log"
    python3 -m specsweep analyze --db "$R/$1.duckdb" > "$S/analyze-$1.log" 2>&1 \
        || { tail -20 "$S/analyze-$1.log"; say "analyze failed (the database still comes back)"; }
}

# campaign_stop TAG: Ctrl-C for the campaign, as the last call of a lease does before the
# device time runs out (its service stops, its finished windows stay); the caller then ends
# it as usual (campaign_end). Only the python process (its command line starts with python3),
# not the bash around it, which must live on to write the exit code.
campaign_stop() {
    [ -f "$S/$1.started" ] || { say "campaign $1 was not started here"; exit 3; }
    pkill -INT -f "^python3 -m specsweep run $PLAN .*--db $R/$1.duckdb" \
        && say "sent SIGINT to campaign $1"
    return 0
}
