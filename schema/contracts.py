"""Pandera contracts: one DataFrameModel per raw table (see schema/ddl.sql).

Every batch `collect` writes is validated lazily against the model of its table before
it lands; rows that break a check go to `quarantine` with the reasons, the rest land.
Column order in each model matches the DDL.
"""

from __future__ import annotations

import math

import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series

ERROR_KINDS = [
    "http",
    "timeout",
    "connect",
    "protocol",
    "empty",
    "server_died",
    "cancelled",
]


# requests.category: a lowercase name (collect.plan.workloads.CATEGORY_PATTERN is the same rule)
CATEGORY_PATTERN = r"^[a-z][a-z0-9_-]{0,63}$"

HISTORIES = ["own", "replay"]  # requests.history (collect.plan.model.AgenticWorkload.history)


class _Base(pa.DataFrameModel):
    class Config:
        strict = True
        coerce = True


class CampaignsSchema(_Base):
    campaign_id: Series[str] = pa.Field(unique=True)
    plan_name: Series[str]
    plan_sha256: Series[str] = pa.Field(str_matches=r"^[0-9a-f]{64}$")
    plan_yaml: Series[str]
    baseline: Series[str]
    started_at: Series[pd.Timestamp]
    finished_at: Series[pd.Timestamp] = pa.Field(nullable=True)
    # unreachable: the host could not be reached (environment key host.last_error says why)
    status: Series[str] = pa.Field(
        isin=["running", "complete", "partial", "interrupted", "unreachable"]
    )


class EnvironmentSchema(_Base):
    campaign_id: Series[str]
    host: Series[str]
    key: Series[str] = pa.Field(str_length={"min_value": 1})
    value: Series[str]

    class Config:
        unique = ["campaign_id", "host", "key"]


class ServicesSchema(_Base):
    service_id: Series[str] = pa.Field(unique=True)
    campaign_id: Series[str]
    config_id: Series[str]
    engine: Series[str]
    method: Series[str]
    tp: Series[int] = pa.Field(ge=1)
    gpus: Series[str]
    host: Series[str]
    launch_command: Series[str]
    requested_at: Series[pd.Timestamp]
    ready_at: Series[pd.Timestamp] = pa.Field(nullable=True)
    stopped_at: Series[pd.Timestamp] = pa.Field(nullable=True)
    startup_s: Series[float] = pa.Field(nullable=True, ge=0)
    state: Series[str] = pa.Field(isin=["ready", "failed", "stopped"])
    error: Series[str] = pa.Field(nullable=True)
    log_tail: Series[str] = pa.Field(nullable=True)
    transport: Series[str] = pa.Field(isin=["direct", "paramiko-tunnel", "ssh-tunnel", "unknown"])
    run: Series[int] | None = pa.Field(ge=1)  # absent: the DDL's default 1
    replica: Series[int] | None = pa.Field(ge=1)  # absent: the DDL's default 1


class UnitsSchema(_Base):
    campaign_id: Series[str]
    config_id: Series[str]
    workload: Series[str]
    service_id: Series[str]
    n_requests: Series[int] = pa.Field(ge=0)
    complete: Series[bool]
    colocated_with: Series[str] | None  # absent: the DDL's default '' (ran alone)
    started_at: Series[pd.Timestamp]
    finished_at: Series[pd.Timestamp]
    run: Series[int] | None = pa.Field(ge=1)  # absent: the DDL's default 1

    class Config:
        unique = ["campaign_id", "config_id", "workload", "run"]


class RequestsSchema(_Base):
    request_id: Series[str] = pa.Field(unique=True)
    campaign_id: Series[str]
    config_id: Series[str]
    service_id: Series[str]
    engine: Series[str]
    method: Series[str]
    tp: Series[int] = pa.Field(ge=1)
    workload: Series[str]
    window_id: Series[str]
    prompt_id: Series[str]
    max_tokens: Series[int] = pa.Field(ge=1)
    rep: Series[int] = pa.Field(ge=0)
    concurrency: Series[int] = pa.Field(ge=0)  # 0: an uncapped open-loop window
    session_id: Series[str] = pa.Field(nullable=True)
    turn: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
    is_warmup: Series[bool]
    sent_at: Series[pd.Timestamp]
    start_s: Series[float] = pa.Field(ge=0)
    ttft_s: Series[float] = pa.Field(nullable=True, ge=0)
    e2e_s: Series[float] = pa.Field(nullable=True, ge=0)
    chunk_times_s: Series[object] = pa.Field(nullable=True)
    chunk_tokens: Series[object] = pa.Field(nullable=True)
    prompt_tokens: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
    cached_tokens: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
    output_tokens: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
    finish_reason: Series[str] = pa.Field(nullable=True)
    spec_verify_ct: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
    draft_tokens: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
    accepted_tokens: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0)
    accept_length: Series[float] = pa.Field(nullable=True, ge=1)
    output_text: Series[str] = pa.Field(nullable=True)
    server_stats: Series[str] = pa.Field(nullable=True)
    ok: Series[bool]
    error_kind: Series[str] = pa.Field(nullable=True, isin=ERROR_KINDS)
    error_message: Series[str] = pa.Field(nullable=True)
    scheduled_s: Series[float] | None = pa.Field(nullable=True, ge=0)  # absent: closed loop
    # acceptance details as the engine reports them (absent: the engine reports none)
    engine_accept_length: Series[float] | None = pa.Field(nullable=True, ge=0)
    accept_histogram: Series[object] | None = pa.Field(nullable=True)
    accepted_per_pos: Series[object] | None = pa.Field(nullable=True)
    step_accepted: Series[object] | None = pa.Field(nullable=True)
    run: Series[int] | None = pa.Field(ge=1)  # absent: the DDL's default 1
    # agentic turns: own | replay (where the history's replies came from); absent: NULL
    history: Series[str] | None = pa.Field(nullable=True, isin=HISTORIES)
    # the prompt's category (docs/categories.md); required so no writer forgets it
    category: Series[str] = pa.Field(str_matches=CATEGORY_PATTERN)

    @pa.check(
        "accept_histogram",
        "accepted_per_pos",
        "step_accepted",
        name="acceptance details are lists of counts >= 0",
    )
    def _counts(cls, s: Series[object]) -> Series[bool]:
        return s.map(_is_counts)

    @pa.check("chunk_times_s", name="chunk times are non-decreasing offsets")
    def _chunk_times(cls, s: Series[object]) -> Series[bool]:
        return s.map(_is_sorted_offsets)

    @pa.check("chunk_tokens", name="chunk tokens are positive integers")
    def _chunk_tokens(cls, s: Series[object]) -> Series[bool]:
        return s.map(lambda v: v is None or all(int(x) >= 1 for x in v))

    @pa.dataframe_check(name="ok rows have ttft <= e2e and output tokens")
    def _ok_rows(cls, df: pd.DataFrame) -> Series[bool]:
        bad = df["ok"] & (
            df["ttft_s"].isna()
            | df["e2e_s"].isna()
            | (df["ttft_s"] > df["e2e_s"])
            | df["output_tokens"].isna()
        )
        return ~bad

    @pa.dataframe_check(name="closed-loop rows have concurrency >= 1")
    def _concurrency(cls, df: pd.DataFrame) -> Series[bool]:
        scheduled = df["scheduled_s"] if "scheduled_s" in df else pd.Series(None, index=df.index)
        return scheduled.notna() | (df["concurrency"] >= 1)

    @pa.dataframe_check(name="failed rows carry an error_kind")
    def _failed_rows(cls, df: pd.DataFrame) -> Series[bool]:
        return df["ok"] | df["error_kind"].notna()

    @pa.dataframe_check(name="accepted_tokens <= draft_tokens")
    def _accepted(cls, df: pd.DataFrame) -> Series[bool]:
        both = df["accepted_tokens"].notna() & df["draft_tokens"].notna()
        return ~both | (df["accepted_tokens"] <= df["draft_tokens"]).fillna(True)


def _is_counts(v: object) -> bool:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return True
    try:
        return all(int(x) == x and x >= 0 for x in v)  # type: ignore[union-attr]
    except (TypeError, ValueError):
        return False


def _is_sorted_offsets(v: object) -> bool:
    if v is None:
        return True
    try:
        xs = [float(x) for x in v]  # type: ignore[union-attr]
    except (TypeError, ValueError):
        return False
    return all(not math.isnan(x) and x >= 0 for x in xs) and all(a <= b for a, b in zip(xs, xs[1:]))


LOADS = ["closed", "poisson", "gamma", "constant", "trace"]
CACHE_RESETS = [
    "flush_cache",
    "reset_prefix_cache",
    "slots_erase",
    "cache_prompt_off",
    "kept",
    "unsupported",
    "failed",
]


class WindowsSchema(_Base):
    campaign_id: Series[str]
    service_id: Series[str]
    config_id: Series[str]
    workload: Series[str]
    window_id: Series[str]
    max_tokens: Series[int] = pa.Field(ge=1)
    load: Series[str] = pa.Field(isin=LOADS)
    rate: Series[float] = pa.Field(nullable=True, gt=0)
    ramp: Series[str] = pa.Field(nullable=True, isin=["linear", "exponential"])
    ramp_start_rate: Series[float] = pa.Field(nullable=True, gt=0)
    ramp_end_rate: Series[float] = pa.Field(nullable=True, gt=0)
    burstiness: Series[float] = pa.Field(nullable=True, gt=0)
    seed: Series[pd.Int64Dtype] = pa.Field(nullable=True)
    max_concurrency: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=1)
    n_scheduled: Series[int] = pa.Field(ge=0)
    schedule_span_s: Series[float] = pa.Field(nullable=True, ge=0)
    cache_reset: Series[str] = pa.Field(isin=CACHE_RESETS)
    started_at: Series[pd.Timestamp]
    elapsed_s: Series[float] = pa.Field(ge=0)
    run: Series[int] | None = pa.Field(ge=1)  # absent: the DDL's default 1
    loop_lag_p99_s: Series[float] | None = pa.Field(nullable=True, ge=0)
    loop_lag_max_s: Series[float] | None = pa.Field(nullable=True, ge=0)

    class Config:
        unique = ["campaign_id", "window_id"]

    @pa.dataframe_check(name="open-loop windows have a schedule span and seed")
    def _open(cls, df: pd.DataFrame) -> Series[bool]:
        closed = df["load"] == "closed"
        return closed | (df["schedule_span_s"].notna())


class ServerMetricsSchema(_Base):
    campaign_id: Series[str]
    service_id: Series[str]
    config_id: Series[str]
    workload: Series[str]
    phase: Series[str] = pa.Field(isin=["before", "after"])
    source: Series[str]
    name: Series[str]
    labels: Series[str]
    value: Series[float]
    scraped_at: Series[pd.Timestamp]


class EndpointErrorsSchema(_Base):
    campaign_id: Series[str]
    service_id: Series[str]
    config_id: Series[str]
    workload: Series[str]
    hook: Series[str] = pa.Field(isin=["fingerprint", "before_workload", "scrape", "reset_cache"])
    phase: Series[str] = pa.Field(isin=["start", "before", "after"])
    endpoint: Series[str]
    status: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=100, le=599)
    error: Series[str]
    failed_at: Series[pd.Timestamp]


class GpuSamplesSchema(_Base):
    campaign_id: Series[str]
    service_id: Series[str]
    config_id: Series[str]
    workload: Series[str]
    window_id: Series[str]
    gpu_index: Series[int] = pa.Field(ge=0)
    t_s: Series[float]
    power_w: Series[float] = pa.Field(nullable=True, ge=0)
    energy_j: Series[float] = pa.Field(nullable=True, ge=0)
    sm_clock_mhz: Series[float] = pa.Field(nullable=True, ge=0)
    mem_clock_mhz: Series[float] = pa.Field(nullable=True, ge=0)
    util_gpu_pct: Series[float] = pa.Field(nullable=True, ge=0, le=100)
    util_mem_pct: Series[float] = pa.Field(nullable=True, ge=0, le=100)
    memory_used_mib: Series[float] = pa.Field(nullable=True, ge=0)
    temperature_c: Series[float] = pa.Field(nullable=True)
    throttle_reasons: Series[str]


class MethodParamsSchema(_Base):
    campaign_id: Series[str]
    method: Series[str]
    family: Series[str] = pa.Field(str_length={"min_value": 1})
    param: Series[str] = pa.Field(str_length={"min_value": 1})
    value: Series[str]
    value_num: Series[float] = pa.Field(nullable=True)

    class Config:
        unique = ["campaign_id", "method", "param"]


class RacesSchema(_Base):
    campaign_id: Series[str]
    phase: Series[str] = pa.Field(str_length={"min_value": 1})
    tp: Series[int] = pa.Field(ge=1)
    methods: Series[str] = pa.Field(str_length={"min_value": 1})
    workloads: Series[str]
    objective: Series[str] = pa.Field(isin=["decode_tps"])
    within: Series[float] = pa.Field(gt=0, lt=1)
    confidence: Series[float] = pa.Field(gt=0, lt=1)
    first_rounds: Series[int] = pa.Field(ge=1)
    max_rounds: Series[int] = pa.Field(ge=1)
    priors: Series[str]

    class Config:
        unique = ["campaign_id", "phase"]


class QuarantineSchema(_Base):
    table_name: Series[str]
    row_json: Series[str]
    reason: Series[str]
    quarantined_at: Series[pd.Timestamp]


CONTRACTS: dict[str, type[_Base]] = {
    "campaigns": CampaignsSchema,
    "environment": EnvironmentSchema,
    "services": ServicesSchema,
    "units": UnitsSchema,
    "requests": RequestsSchema,
    "windows": WindowsSchema,
    "server_metrics": ServerMetricsSchema,
    "endpoint_errors": EndpointErrorsSchema,
    "gpu_samples": GpuSamplesSchema,
    "method_params": MethodParamsSchema,
    "races": RacesSchema,
    "quarantine": QuarantineSchema,
}
