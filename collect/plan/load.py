"""Open-loop load in a plan: arrival processes, rate ramps, trace replay and latency SLOs.

A closed-loop window keeps N requests in flight and sends the next when one ends; an open-loop
window sends each request at the time its arrival schedule says, whether or not earlier ones
have finished, so queueing shows. `OpenLoad` is a requests workload's `load:` block (one window
per rate, or one ramp window), `TraceWorkload` replays a JSONL trace on its own clock, and
`Slo` is the plan's latency objectives (analysis only: they never change what is measured).
collect/run/arrivals.py turns these into schedules; the analysis definitions (steady state,
saturation, goodput) are in analyze/VIEWS.md.
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Generic, Literal, TypeVar

import numpy as np
from pydantic import AfterValidator, Field, PrivateAttr, field_validator, model_validator

from specsweep.collect.plan.fields import Name, Strict
from specsweep.collect.plan.traces.read import TraceItem, read_trace
from specsweep.collect.plan.traces.text import PoolText, TextMatch

# a prompt category (requests.category; schema.contracts.CATEGORY_PATTERN is the same rule)
CATEGORY_PATTERN = r"^[a-z][a-z0-9_-]{0,63}$"


def _category_name(value: str) -> str:
    if not re.match(CATEGORY_PATTERN, value):
        raise ValueError(
            f"category {value!r} must be a lowercase name: a letter, then letters, digits, "
            "'_' or '-', 64 characters at most (e.g. summarize)"
        )
    return value


Category = Annotated[str, AfterValidator(_category_name)]
CATEGORY_FIELD = (
    "The category of every prompt of this workload in requests.category (a lowercase name, "
    "e.g. summarize); default: the source's own (docs/categories.md)."
)


class Ramp(Strict):
    """A rate that changes within one window, as vLLM's `--ramp-up-strategy`: request i of n is
    sent at the rate start + (end - start) * i/(n-1) (linear) or start * (end/start)^(i/(n-1))
    (exponential), its gap drawn from the window's arrival process at that rate."""

    strategy: Literal["linear", "exponential"] = Field(description="How the rate moves.")
    start_rate: float = Field(gt=0, description="Rate of the first request (requests/s).")
    end_rate: float = Field(gt=0, description="Rate of the last request (requests/s).")


def ramp_rates(ramp: Ramp, n: int) -> np.ndarray:
    """The rate at each of n requests of a ramp window (vLLM's formulas, by request index)."""
    progress = np.arange(n) / max(n - 1, 1)
    if ramp.strategy == "linear":
        return ramp.start_rate + (ramp.end_rate - ramp.start_rate) * progress
    return ramp.start_rate * (ramp.end_rate / ramp.start_rate) ** progress


class OpenLoad(Strict):
    """Open-loop arrivals for a requests workload: one measured window per rate (or one ramp
    window) per max_tokens. The prompts are sent in order, cycling (request i takes prompt
    i mod n, repetition i div n), so every method gets the same prompts at the same times."""

    arrival: Literal["poisson", "gamma", "constant"] = Field(
        "poisson",
        description="Gaps between sends: exponential (poisson), gamma with shape `burstiness` "
        "(vLLM's --burstiness: < 1 burstier, > 1 smoother than poisson), or constant.",
    )
    rate: list[float] = Field(
        default_factory=list, description="Offered request rates (requests/s), one window each."
    )
    ramp: Ramp | None = Field(None, description="Instead of `rate`: one window whose rate ramps.")
    burstiness: float = Field(1.0, gt=0, description="Gamma shape (arrival: gamma only).")
    requests: int | None = Field(
        None, ge=2, le=100_000, description="Requests per window (or give duration_s)."
    )
    duration_s: float | None = Field(
        None, gt=0, description="Seconds of sending per window: requests = ceil(rate x duration)."
    )
    max_concurrency: int | None = Field(
        None,
        ge=1,
        description="At most this many requests in flight: a request whose time has come waits "
        "for a free slot (vLLM's and AIPerf's sleep-then-gate, no catch-up); the wait counts "
        "as schedule lag.",
    )
    seed: int = Field(0, ge=0, description="Seed of the arrival schedule (same for every method).")
    search: Literal["max_rate_under_slo"] | None = Field(
        None,
        description="After the swept rates, bisect between the highest rate whose attainment "
        "meets the plan's slo.target (it and every lower rate) and the next swept rate, which "
        "misses it: `search_steps` more windows per max_tokens, each method on its own.",
    )
    search_steps: int = Field(3, ge=1, le=10, description="Bisection windows (search only).")

    @field_validator("rate")
    @classmethod
    def _rates(cls, rates: list[float]) -> list[float]:
        if any(r <= 0 for r in rates):
            raise ValueError(f"rates must be > 0 requests/s, got {rates}")
        if len(set(rates)) != len(rates):
            raise ValueError(f"duplicate rates in {rates}")
        return rates

    @model_validator(mode="after")
    def _one_shape(self) -> OpenLoad:
        if bool(self.rate) == (self.ramp is not None):
            raise ValueError("give either `rate` (a list of rates) or `ramp`, not both or none")
        if (self.requests is None) == (self.duration_s is None):
            raise ValueError("give either `requests` or `duration_s` per window")
        if self.burstiness != 1.0 and self.arrival != "gamma":
            raise ValueError(f"burstiness applies to arrival: gamma, not {self.arrival}")
        if self.ramp is not None and self.duration_s is not None:
            raise ValueError("a ramp window takes `requests`, not `duration_s`")
        if self.search and len(self.rate) < 2:
            raise ValueError("search: max_rate_under_slo needs at least two swept rates")
        return self

    def window_requests(self, rate: float | None) -> int:
        """Requests in the window at `rate` (None: the ramp window)."""
        if self.requests is not None:
            return self.requests
        assert self.duration_s is not None and rate is not None
        return max(2, round(rate * self.duration_s))

    def windows(self) -> list[float | None]:
        """Each window's rate; None stands for the ramp window."""
        return list(self.rate) if self.rate else [None]


DRAWN_MAX = 8000  # characters of the text ids map kept in `environment`; longer: its sha256


class TextOption(Strict):
    """A trace workload's `text:`: real text for its input_length lines (docs/trace-text.md,
    rules in collect/plan/tracetext). Its `source` is a field of the subclass that knows the
    plan's prompt sources, `TraceText` in collect/plan/workloads.py (which imports this module,
    so this one cannot name them); the plan's trace workload is TraceWorkload[TraceText]."""

    seed: int = Field(0, ge=0, description="Seed of the draw: the same seed, the same texts.")
    tolerance: float = Field(
        0.1,
        gt=0,
        lt=1,
        description="A text fits a line asking for N tokens when its estimate is within "
        "N(1 - tolerance) .. N(1 + tolerance).",
    )
    chars_per_token: float = Field(
        4.0,
        gt=0,
        description="The estimate, no tokenizer loaded: tokens = characters / chars_per_token "
        "(the server's prompt_tokens is recorded; docs/trace-text.md has measured ratios).",
    )
    _match: TextMatch | None = PrivateAttr(None)

    def pool(self) -> list[PoolText]:
        """The texts to draw from, in the source's order (the subclass's source)."""
        raise ValueError("text: no prompt source to draw from")

    def match(self) -> TextMatch:
        """The draw's rules over the pool (built once per workload)."""
        if self._match is None:
            self._match = TextMatch(
                tuple(self.pool()), self.seed, self.tolerance, self.chars_per_token
            )
        return self._match


TextT = TypeVar("TextT", bound=TextOption)


class TraceWorkload(Strict, Generic[TextT]):
    kind: Literal["trace"] = Field(
        description="Replay a JSONL trace on its own clock: each line's request is sent at its "
        "timestamp (times time_scale) after the window starts, with its own prompt and output "
        "length (formats: collect/plan/traces/read.py and docs/open-loop.md)."
    )
    name: Name = Field(description="Workload label.")
    path: Path = Field(
        description="The trace file (JSONL); relative paths are relative to "
        "the directory `collect` runs in."
    )
    format: Literal["specsweep", "mooncake"] = Field(
        "specsweep",
        description="Line layout: specsweep's own, or Mooncake's (SGLang's "
        "bench_serving --dataset-name mooncake).",
    )
    time_scale: float = Field(
        1.0,
        gt=0,
        description="Multiplies every timestamp (2 = half the rate; SGLang's "
        "--mooncake-slowdown-factor).",
    )
    limit: int | None = Field(None, ge=1, description="Replay only the first N requests.")
    max_input_tokens: int | None = Field(
        None, ge=1, description="Clip synthesised prompts (input_length lines) to this length."
    )
    max_concurrency: int | None = Field(None, ge=1, description="As in `load:`.")
    system: str | None = Field(None, description="Optional system message.")
    category: Category | None = Field(None, description=CATEGORY_FIELD)
    text: TextT | None = Field(
        None,
        description="Real text for the trace's input_length lines instead of random words: "
        "drawn from a prompt source to match each line's length (docs/trace-text.md).",
    )

    @model_validator(mode="after")
    def _readable(self) -> TraceWorkload:
        self.items()  # a bad trace fails the plan, naming its file and line
        return self

    def items(self) -> list[TraceItem]:
        """The trace's requests, read once per process."""
        return _read(
            self.path,
            self.format,
            self.name,
            self.time_scale,
            self.limit,
            self.max_input_tokens,
            self.system,
            None if self.text is None else self.text.match(),
        )

    def text_facts(self) -> dict[str, str]:
        """The text draw's environment rows (docs/trace-text.md); {} without `text`."""
        if self.text is None:
            return {}
        drawn = [i for i in self.items() if i.text_ids and i.input_tokens]
        ids = json.dumps({i.prompt_id: i.text_ids for i in drawn})
        if len(ids) > DRAWN_MAX:  # a long trace: its hash (the draw is a function of the plan)
            ids = f"sha256:{hashlib.sha256(ids.encode()).hexdigest()} items:{len(drawn)}"
        pairs = [(i.input_tokens or 0, i.messages[-1]["content"]) for i in drawn]
        return {"items": str(len(drawn)), "drawn": ids, **self.text.match().errors(pairs)}

    @property
    def max_tokens(self) -> list[int]:
        """The longest output the trace asks for (estimates, memory budget, warm-up)."""
        return [max(i.max_tokens for i in self.items())]

    @property
    def concurrency(self) -> list[int]:
        """What the estimates and the memory budget assume in flight: the cap, else 1."""
        return [self.max_concurrency or 1]

    @property
    def repetitions(self) -> int:
        return 1


@lru_cache(maxsize=16)
def _read(
    path: Path,
    fmt: str,
    name: str,
    time_scale: float,
    limit: int | None,
    clip: int | None,
    system: str | None,
    text: TextMatch | None,
) -> list[TraceItem]:
    try:
        return read_trace(
            path,
            fmt,
            name=name,
            time_scale=time_scale,
            limit=limit,  # type: ignore[arg-type]
            max_input_tokens=clip,
            system=system,
            text=text,
        )
    except OSError as exc:
        raise ValueError(f"trace {path}: {exc.strerror or exc}") from exc


class Slo(Strict):
    """Latency objectives for goodput (vLLM's --goodput): a request is good when it meets every
    objective given. Changing them changes no measurement (they are not in the plan's hash);
    `specsweep analyze` reads them from the campaign's environment rows."""

    ttft_ms: float | None = Field(None, gt=0, description="Time to first token, ms.")
    tpot_ms: float | None = Field(None, gt=0, description="Time per output token, ms.")
    e2e_ms: float | None = Field(None, gt=0, description="Whole request, ms.")
    target: float = Field(
        0.99, gt=0, le=1, description="Attainment a rate must reach to count as sustained."
    )
    trim: float = Field(
        0.1,
        ge=0,
        lt=0.5,
        description="Steady state: requests scheduled in the first and last `trim` of a "
        "window's sending span are warm-up and cool-down.",
    )

    @model_validator(mode="after")
    def _some_objective(self) -> Slo:
        if self.ttft_ms is None and self.tpot_ms is None and self.e2e_ms is None:
            raise ValueError("an slo needs at least one of ttft_ms, tpot_ms, e2e_ms")
        return self

    def met(
        self, ok: bool, ttft_s: float | None, e2e_s: float | None, output_tokens: int | None
    ) -> bool:
        """Whether one request meets every objective given (vLLM's goodput rule, from the
        actual send): schema.metrics.meets_slo with TPOT = schema.metrics.tpot_s, the twins of
        the meets_slo and tpot_s macros that analyze/sql/open_requests.sql calls
        (tests/unit/schema/test_metrics_parity.py)."""
        # here: this method is the only user in the module
        from specsweep.schema.metrics import meets_slo, tpot_s

        tpot = tpot_s(output_tokens, e2e_s, ttft_s)
        return meets_slo(ok, ttft_s, tpot, e2e_s, self.ttft_ms, self.tpot_ms, self.e2e_ms)

    def attainment(self, rows: list[dict]) -> float:
        """Share of a window's requests (rows of `requests`) that meet every objective."""
        good = sum(self.met(r["ok"], r["ttft_s"], r["e2e_s"], r["output_tokens"]) for r in rows)
        return good / len(rows) if rows else 0.0

    def environment(self) -> dict[str, str]:
        """The campaign's environment rows (host 'campaign') analysis reads."""
        given = {
            "ttft_ms": self.ttft_ms,
            "tpot_ms": self.tpot_ms,
            "e2e_ms": self.e2e_ms,
            "target": self.target,
            "trim": self.trim,
        }
        return {f"slo.{k}": repr(float(v)) for k, v in given.items() if v is not None}
