"""Reading vLLM `bench serve --save-detailed` JSON and SGLang `bench_serving
--output-details` JSONL result files into runs (one JSON object each), checked for the
per-request lists `collect.importing.importer` needs; errors name the file, the line and the key.
The formats and how each tool computes its numbers: collect/importing/importer.py's docstring."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DETAIL_KEYS = ("ttfts", "itls", "output_lens", "errors")
SGLANG_MARKERS = ("total_output_tokens_retokenized", "mean_e2e_latency_ms")


class ImportFileError(ValueError):
    """The file is not a readable vLLM/SGLang result with per-request details."""


@dataclass
class Run:
    """One benchmark run (one JSON object) of a result file."""

    tool: str  # vllm | sglang
    line: int
    data: dict[str, Any]
    workload: str = ""
    concurrency: int = 0
    max_tokens: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.data["ttfts"])

    def summary(self, metric: str, stat: str) -> float | None:
        """The file's own number for metric (ttft|tpot|itl|e2el) and stat, in ms."""
        key = f"{stat}_{metric}_ms"
        if metric == "e2el" and self.tool == "sglang":
            key = f"{stat}_e2e_latency_ms"
        value = self.data.get(key)
        return float(value) if isinstance(value, (int, float)) else None


# --- reading -----------------------------------------------------------------------------


def read_runs(path: Path) -> list[Run]:
    """Parse FILE into runs, detecting the tool per object; fails naming file, line, key."""
    text = path.read_text(encoding="utf-8")
    try:
        objects = [(1, json.loads(text))]
    except json.JSONDecodeError:
        objects = [(n, _json_line(path, n, line)) for n, line in _lines(text)]
    if not objects:
        raise ImportFileError(f"{path}: empty file")
    return [_check(path, line, obj) for line, obj in objects]


def _lines(text: str) -> list[tuple[int, str]]:
    return [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]


def _json_line(path: Path, n: int, line: str) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise ImportFileError(f"{path} line {n}: not JSON ({exc.msg})") from None


def _check(path: Path, line: int, obj: Any) -> Run:
    where = f"{path} line {line}"
    if not isinstance(obj, dict):
        raise ImportFileError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    for key in DETAIL_KEYS:
        if key not in obj:
            raise ImportFileError(
                f"{where}: missing key {key!r} (save the run with vLLM --save-detailed or "
                "SGLang --output-details)"
            )
        if not isinstance(obj[key], list):
            raise ImportFileError(f"{where}: {key!r} is not a list")
    n = len(obj["ttfts"])
    for key in (*DETAIL_KEYS, "input_lens", "generated_texts", "latencies", "start_times"):
        if key in obj and len(obj[key]) != n:
            raise ImportFileError(f"{where}: {key!r} has {len(obj[key])} entries, ttfts {n}")
    if "completed" not in obj:
        raise ImportFileError(f"{where}: missing key 'completed'")
    ok = sum(1 for e in obj["errors"] if not e)
    if ok != obj["completed"]:
        raise ImportFileError(
            f"{where}: {ok} requests have no error but 'completed' is {obj['completed']}"
        )
    tool = "sglang" if any(k in obj for k in SGLANG_MARKERS) else "vllm"
    return Run(tool=tool, line=line, data=obj)
