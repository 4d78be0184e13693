"""Import vLLM `bench serve` and SGLang `bench_serving` result files into the raw tables.

`specsweep import FILE` turns each benchmark run in FILE into one measured window:
a `campaigns` row, a `services` row, a `units` row per run and a `requests` row per request,
all through the pandera contracts. It writes raw rows only: the stages meet in DuckDB.
`specsweep analyze` then builds the views: `latency_conventions` recomputes the tool's own
TTFT/TPOT/ITL/E2EL summary from those rows, and `import_check` sets each figure the file
printed (kept in `environment` as `import.run<k>.<field>`) beside ours, with `match` = equal
to the printed digit; `specsweep analyze` prints how many match and names any that differ.

The formats, as read in the tools' source:

vLLM `vllm bench serve --save-result --save-detailed` (vllm/benchmarks/serve.py,
https://github.com/vllm-project/vllm/blob/main/vllm/benchmarks/serve.py; before 0.9 the same
keys came from benchmarks/benchmark_serving.py, which always saved the per-request lists):
one JSON object (one per line with --append-result). Per-request lists, one entry per request
sent, failed ones included: `input_lens`, `output_lens` (server usage.completion_tokens, else
the tokenizer's count of the text; 0 when failed), `ttfts` (s), `itls` (list per request, s:
gaps between consecutive streamed chunks that carry `choices`), `generated_texts`, `errors`
('' when successful), and since 0.10 `start_times` (perf_counter at send) and `latencies`.
The request function (vllm/benchmarks/lib/endpoint_request_func.py) sets latency = arrival of
the last chunk with choices - send, so latency = ttft + sum(itls). Summary numbers, in ms,
over successful requests only (`calculate_metrics`): ttft over all of them; tpot =
(latency - ttft) / (output_len - 1) over requests with output_len > 1; itl pooled over every
request's itls (not a mean of means); e2el = latency; mean np.mean, median np.median, std
np.std (population), pNN np.percentile (linear). Keys mean_ttft_ms, median_ttft_ms,
std_ttft_ms, p99_ttft_ms, same for tpot, itl and (when selected) e2el; plus duration,
completed, failed, request_rate ("inf" or a number), max_concurrency (null when unlimited),
model_id, date (%Y%m%d-%H%M%S, local time when the file was written). Printed with "{:.2f}".

SGLang `python -m sglang.bench_serving --output-file F --output-details`
(python/sglang/bench_serving.py, from 2025 python/sglang/benchmark/metrics.py `save_results`,
https://github.com/sgl-project/sglang/blob/main/python/sglang/bench_serving.py): appends one
JSON object per run to a JSONL file. The details are the same lists as vLLM's (`input_lens`,
`output_lens`, `ttfts`, `itls`, `generated_texts`, `errors`) without start times or
latencies. `calculate_metrics` uses the same formulas (successful requests, tpot over
output_len > 1, pooled itl, numpy mean/median/std/percentile) with summary keys
mean/median/std/p99_ttft_ms, ..._tpot_ms, ..._itl_ms (also p95_itl_ms, max_itl_ms) and
mean/median/std/p99_e2e_latency_ms; also completed, request_rate, max_concurrency,
dataset_name, random_output_len, sharegpt_output_len, backend, accept_length. Its streaming
request functions set latency at the last stream line (including `[DONE]`), so its E2E and
TPOT may exceed ours, which end at the last token chunk, by that final line's gap.
output_len is the server's count when the reply carries one, else the requested length.
Its native backend (`--backend sglang`, POST /generate; bench_serving.py of sglang 0.4.6)
splits each chunk gap evenly over the chunk's new tokens and stores one itl per token, so
its "ITL" is a per-token ITL: a server sending k tokens per chunk shows gap / k. Imported,
those become one pseudo-chunk per token (chunk_times_s interpolated inside a chunk), and
the pooled itl_ms then reproduces SGLang's number; its OpenAI backends store chunk gaps.

Mapping to `requests` (never guessed: what the file lacks stays NULL):
- ttft_s = ttfts[i]; chunk_times_s = [ttft, ttft + itls[0], ttft + itls[0] + itls[1], ...]
  (arrival offsets of the chunks the tool timed); e2e_s = latencies[i] when the file has
  them, else the last chunk offset (ttft + sum(itls), vLLM's own latency);
  output_tokens = output_lens[i]; prompt_tokens = input_lens[i]; output_text =
  generated_texts[i]. chunk_tokens, cached_tokens, finish_reason and every speculative
  column are NULL: the files do not record them (so per-token ITL stays NULL).
- ok = errors[i] is empty; failed rows keep error_message = the error text and NULL
  timings (the files hold 0.0 placeholders there); error_kind from the text: 'empty' (no
  token chunk), 'timeout', 'connect', 'protocol' (a Python traceback), else 'http' (the
  HTTP reason phrase the tools store for a non-200 reply). The count of ok rows must equal
  the file's `completed`, or the import fails.
- category = the file's `category`: a list, one per request (specsweep's own key: neither
  tool writes one; a null entry is 'uncategorized'), or one string for the whole run; a file
  without it: 'uncategorized' (docs/categories.md). Names must be lowercase (the contract).
- start_s = start_times[i] - min(start_times) when present, else 0.0 (not recorded: the
  throughput_tps of config_summary is then not a real window duration).
- sent_at = the file's `date` when present (vLLM), else the import time.
- Columns the key needs but the file may lack come from options: tp (--tp, default 1),
  method (--method, default 'unknown'), workload (--workload, default the file's
  dataset_name, else 'imported'; runs of one file get '-run<k>' suffixes), engine
  (--engine, default the tool that wrote the file), concurrency (--concurrency, else the
  file's max_concurrency, else the number of requests of the run: no client limit),
  max_tokens (--max-tokens, else random_output_len for SGLang's random dataset, else
  sharegpt_output_len, else the largest output_len of the run). `import` prints which.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from specsweep.collect.importing.files import ImportFileError, Run, read_runs
from specsweep.schema.store import Store, utcnow, validate

UNCATEGORIZED = "uncategorized"  # requests.category of a request whose file names none


@dataclass(frozen=True)
class ImportOptions:
    """Key columns the files do not record; None = take them from the file (see module doc)."""

    method: str = "unknown"
    tp: int = 1
    engine: str | None = None
    workload: str | None = None
    concurrency: int | None = None
    max_tokens: int | None = None


# --- window keys -------------------------------------------------------------------------


def resolve_keys(runs: list[Run], options: ImportOptions) -> None:
    """Fill each run's workload, concurrency and max_tokens (options, else the file)."""
    for k, run in enumerate(runs, 1):
        base = options.workload or run.data.get("dataset_name") or "imported"
        run.workload = f"{base}-run{k}" if len(runs) > 1 else base
        run.concurrency, note = _concurrency(run, options)
        run.notes.append(note)
        run.max_tokens, note = _max_tokens(run, options)
        run.notes.append(note)


def _concurrency(run: Run, options: ImportOptions) -> tuple[int, str]:
    if options.concurrency:
        return options.concurrency, f"concurrency {options.concurrency} (--concurrency)"
    limit = run.data.get("max_concurrency")
    if limit:
        return int(limit), f"concurrency {limit} (file: max_concurrency)"
    return run.n, f"concurrency {run.n} (file: no client limit, all {run.n} requests)"


def _max_tokens(run: Run, options: ImportOptions) -> tuple[int, str]:
    if options.max_tokens:
        return options.max_tokens, f"max_tokens {options.max_tokens} (--max-tokens)"
    data = run.data
    if str(data.get("dataset_name")).startswith("random") and data.get("random_output_len"):
        return int(data["random_output_len"]), "max_tokens from file: random_output_len"
    if data.get("sharegpt_output_len"):
        return int(data["sharegpt_output_len"]), "max_tokens from file: sharegpt_output_len"
    top = max([int(x) for x in data["output_lens"]] + [1])
    return top, f"max_tokens {top} (not in file: the largest output_len; --max-tokens sets it)"


# --- rows --------------------------------------------------------------------------------


def campaign_id(path: Path, sha256: str) -> str:
    return f"import-{path.stem}-{sha256[:12]}"


def build_rows(
    path: Path, sha256: str, runs: list[Run], options: ImportOptions
) -> dict[str, list[dict[str, Any]]]:
    """Every raw-table row the file becomes, keyed by table."""
    cid = campaign_id(path, sha256)
    now = utcnow()
    engine = options.engine or runs[0].tool
    config_id = _sha12(engine, options.method, options.tp, runs[0].data.get("model_id"))
    service_id = f"{cid}-{config_id}"
    rows: dict[str, list[dict[str, Any]]] = {"requests": [], "units": []}
    for k, run in enumerate(runs):
        sent_at = _file_date(run.data) or now
        # window_id '<cid>-w<k>' is how analyze's import_check finds run k's window
        window = {
            "campaign_id": cid, "config_id": config_id, "service_id": service_id,
            "engine": engine, "method": options.method, "tp": options.tp,
            "workload": run.workload, "window_id": f"{cid}-w{k}",
            "max_tokens": run.max_tokens, "concurrency": run.concurrency,
        }  # fmt: skip
        rows["requests"] += [_request(run, i, window, sent_at) for i in range(run.n)]
        rows["units"].append(_unit(window, run.n, sent_at))
    rows["campaigns"] = [{
        "campaign_id": cid, "plan_name": f"import-{path.stem}", "plan_sha256": sha256,
        "plan_yaml": f"# not a plan: imported by `specsweep import {path.name}` "
                     f"({runs[0].tool} result file, {len(runs)} run(s))\n",
        "baseline": options.method, "started_at": now, "finished_at": now,
        "status": "complete",
    }]  # fmt: skip
    rows["services"] = [{
        "service_id": service_id, "campaign_id": cid, "config_id": config_id,
        "engine": engine, "method": options.method, "tp": options.tp, "gpus": "",
        "host": "imported", "launch_command": "", "requested_at": now, "ready_at": None,
        "stopped_at": None, "startup_s": None, "state": "stopped", "error": None,
        "log_tail": None,
        "transport": "unknown",  # the file does not say how its client reached the server
    }]  # fmt: skip
    rows["environment"] = _environment(cid, path, sha256, runs)
    return rows


def _request(run: Run, i: int, window: dict[str, Any], sent_at: datetime) -> dict[str, Any]:
    data = run.data
    error = data["errors"][i]
    ok = not error
    chunks = _chunk_times(data["ttfts"][i], data["itls"][i]) if ok else None
    e2e = None
    if ok:
        e2e = float(data["latencies"][i]) if "latencies" in data else chunks[-1]
    return {
        **window,
        "request_id": _sha12(window["window_id"], i),
        "prompt_id": str(i), "rep": 0, "session_id": None, "turn": None,
        "is_warmup": False, "sent_at": sent_at, "start_s": _start_s(data, i),
        "ttft_s": chunks[0] if ok else None, "e2e_s": e2e, "chunk_times_s": chunks,
        "chunk_tokens": None, "prompt_tokens": _item(data, "input_lens", i),
        "cached_tokens": None, "output_tokens": int(data["output_lens"][i]) if ok else None,
        "finish_reason": None, "spec_verify_ct": None, "draft_tokens": None,
        "accepted_tokens": None, "accept_length": None, "engine_accept_length": None,
        "accept_histogram": None, "accepted_per_pos": None, "step_accepted": None,
        "output_text": _item(data, "generated_texts", i), "server_stats": None,
        "ok": ok, "error_kind": None if ok else error_kind(str(error)),
        "error_message": None if ok else str(error), "category": _category(data, i),
    }  # fmt: skip


def _category(data: dict[str, Any], i: int) -> str:
    """requests.category: the file's `category` (a list or one string), else uncategorized."""
    given = data.get("category")
    if isinstance(given, list):
        given = given[i]
    return str(given) if given else UNCATEGORIZED


def _chunk_times(ttft: float, itls: list[float]) -> list[float]:
    times = [float(ttft)]
    for gap in itls:
        times.append(times[-1] + float(gap))
    return times


def _start_s(data: dict[str, Any], i: int) -> float:
    starts = data.get("start_times")
    return float(starts[i] - min(starts)) if starts else 0.0


def _item(data: dict[str, Any], key: str, i: int) -> Any:
    return data[key][i] if key in data else None


def error_kind(text: str) -> str:
    """Map the tools' error text onto requests.error_kind (see the module docstring)."""
    if "Never received a valid chunk" in text:
        return "empty"
    if "Timeout" in text:
        return "timeout"
    if "ClientConnector" in text or "ConnectionRefused" in text:
        return "connect"
    return "protocol" if "Traceback" in text else "http"


def _unit(window: dict[str, Any], n: int, at: datetime) -> dict[str, Any]:
    row = {key: window[key] for key in ("campaign_id", "config_id", "workload", "service_id")}
    # a result file is one run of one server: nothing known to have shared its host
    return row | {
        "n_requests": n,
        "complete": True,
        "colocated_with": "",
        "started_at": at,
        "finished_at": at,
    }


def _environment(cid: str, path: Path, sha256: str, runs: list[Run]) -> list[dict[str, Any]]:
    """Provenance: the file and every scalar field of each run (model_id, request_rate, ...)."""
    values = {"import.file": path.name, "import.sha256": sha256, "import.tool": runs[0].tool}
    for k, run in enumerate(runs):
        for key, value in run.data.items():
            if not isinstance(value, (list, dict)):
                values[f"import.run{k}.{key}"] = json.dumps(value)
        values[f"import.run{k}.keys_from"] = "; ".join(run.notes)
    return [
        {"campaign_id": cid, "host": "imported", "key": k, "value": v} for k, v in values.items()
    ]


def _file_date(data: dict[str, Any]) -> datetime | None:
    try:
        return datetime.strptime(str(data.get("date")), "%Y%m%d-%H%M%S")
    except ValueError:
        return None


def _sha12(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:12]


# --- writing -----------------------------------------------------------------------------

TABLE_ORDER = ("campaigns", "environment", "services", "units", "requests")


def import_file(path: Path, db: Path, options: ImportOptions) -> tuple[str, list[Run]]:
    """Read, validate and write FILE into db; replaces an earlier import of the same file.

    Nothing is written unless every row passes its contract.
    """
    raw = path.read_bytes()
    sha256 = hashlib.sha256(raw).hexdigest()
    runs = read_runs(path)
    resolve_keys(runs, options)
    rows = build_rows(path, sha256, runs, options)
    _require_contracts(path, rows)
    cid = campaign_id(path, sha256)
    with Store(db) as store, store.transaction():
        for table in reversed(TABLE_ORDER):
            # table names are fixed constants, never user input
            store.execute(f"DELETE FROM {table} WHERE campaign_id = ?", [cid])
        for table in TABLE_ORDER:
            store.append(table, rows[table])
    return cid, runs


def _require_contracts(path: Path, rows: dict[str, list[dict[str, Any]]]) -> None:
    for table in TABLE_ORDER:
        _, rejected = validate(table, rows[table])
        if rejected:
            first = rejected[0]
            raise ImportFileError(
                f"{path}: {len(rejected)} {table} row(s) break the contract, first: "
                f"{first['reason']}"
            )


def run(path: Path, db: Path, options: ImportOptions) -> list[str]:
    """Import FILE into db; the lines `specsweep import` prints."""
    cid, runs = import_file(path, db, options)
    lines = [f"imported {path} ({runs[0].tool}, {len(runs)} run(s)) as campaign {cid} in {db}"]
    for run_ in runs:
        lines.append(
            f"run at line {run_.line}: workload {run_.workload}, {run_.n} requests; "
            + "; ".join(run_.notes)
        )
    lines.append(
        f"next: `specsweep analyze --db {db}` builds the views and compares the "
        "file's printed figures with specsweep's (view import_check)"
    )
    return lines
