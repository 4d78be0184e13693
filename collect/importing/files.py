"""Reading vLLM `bench serve --save-detailed` JSON and SGLang `bench_serving
--output-details` JSONL result files into runs (one JSON object each), checked for the
per-request lists `collect.importing.importer` needs; errors name the file, the line and the key.
The formats and how each tool computes its numbers: collect/importing/importer.py's docstring;
what tells the tools' files apart is each engine module's `RESULT_FILE`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specsweep.collect import engines

DETAIL_KEYS = ("ttfts", "itls", "output_lens", "errors")


class ImportFileError(ValueError):
    """The file is not a readable vLLM/SGLang result with per-request details."""


@dataclass
class Run:
    """One benchmark run (one JSON object) of a result file."""

    tool: str  # the engine whose tool wrote it: a KIND with a RESULT_FILE (vllm, sglang)
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
        value = self.data.get(engines.result_formats()[self.tool].summary_key(metric, stat))
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
    category = obj.get("category")
    if category is not None and not isinstance(category, (str, list)):
        raise ImportFileError(f"{where}: 'category' is neither a list nor a string")
    if isinstance(category, list) and len(category) != n:
        raise ImportFileError(f"{where}: 'category' has {len(category)} entries, ttfts {n}")
    if "completed" not in obj:
        raise ImportFileError(f"{where}: missing key 'completed'")
    ok = sum(1 for e in obj["errors"] if not e)
    if ok != obj["completed"]:
        raise ImportFileError(
            f"{where}: {ok} requests have no error but 'completed' is {obj['completed']}"
        )
    return Run(tool=_tool(obj), line=line, data=obj)


def _tool(obj: dict[str, Any]) -> str:
    """The engine whose markers the object carries, else the one whose format has none."""
    formats = engines.result_formats()
    marked = [k for k, f in formats.items() if any(m in obj for m in f.markers)]
    plain = [k for k, f in formats.items() if not f.markers]
    return (marked or plain)[0]
