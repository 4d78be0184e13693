"""Each engine module's RESULT_FILE tells its tool's result files apart and names its summary
keys; `collect.importing.files` asks the engines instead of knowing the tools."""

from __future__ import annotations

import json
from pathlib import Path

from specsweep.collect import engines
from specsweep.collect.importing.files import read_runs

DETAILS = {
    "ttfts": [0.1, 0.2],
    "itls": [[0.01], [0.02]],
    "output_lens": [2, 2],
    "errors": ["", ""],
    "completed": 2,
}


def _runs(tmp_path: Path, obj: dict) -> list:
    path = tmp_path / "r.json"
    path.write_text(json.dumps(obj))
    return read_runs(path)


def test_the_tool_is_the_engine_whose_markers_the_file_carries(tmp_path: Path) -> None:
    sglang = _runs(tmp_path, {**DETAILS, "mean_e2e_latency_ms": 12.5})[0]
    vllm = _runs(tmp_path, {**DETAILS, "mean_e2el_ms": 11.0})[0]
    assert (sglang.tool, vllm.tool) == ("sglang", "vllm")
    assert sglang.summary("e2el", "mean") == 12.5 and vllm.summary("e2el", "mean") == 11.0
    assert vllm.summary("ttft", "p99") is None  # not in the file


def test_only_engines_with_a_benchmark_tool_have_a_format() -> None:
    formats = engines.result_formats()
    assert set(formats) == {"sglang", "vllm"}
    assert formats["sglang"].summary_key("e2el", "median") == "median_e2e_latency_ms"
    assert formats["vllm"].summary_key("tpot", "mean") == "mean_tpot_ms"
