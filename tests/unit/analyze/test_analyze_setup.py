"""The setup views the report's first pages read: host_summary, service_summary's own_flags,
n_gpus and transport, campaign_summary's description; on hand-built raw rows."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from specsweep.analyze import build
from tests.support.analyze_rows import fetch, insert_rows, one, write_db

T = datetime(2026, 1, 1, 12, 0, 0)
PLAN = """name: gpu   # a comment
description: >
  SmolLM2 on an H200,
  fully offloaded.
host: {kind: local}
"""
FACTS = {
    "os": "Linux 6.8 x86_64",
    "cpu.model": "AMD EPYC 9654",
    "cpu.count": "16",
    "memory.total_gb": "125.7",
    "gpus": "2",
    "gpu.0.name": "NVIDIA H200",
    "gpu.1.name": "NVIDIA H200",
    "gpu.0.memory_total_mib": "143771",
    "gpu.1.memory_total_mib": "143771",
    "gpu.driver": "570.86",
    "cuda.version": "12.8",
    "engine.kind": "llamacpp",
    "price.gpu_hour_usd": "3.5",
    "service.autoregressive.tp1.engine.build_info": "b6000-cuda",
    "service.ngram.tp1.engine.build_info": "b6000-cuda",
}
COMMANDS = {
    "autoregressive": "llama-server -m /m.gguf --port 8001 -ngl 99 --spec-type none",
    "ngram": "CUDA_VISIBLE_DEVICES=1 LLAMA_ARG_X=1 llama-server -m /m.gguf --port 8002 "
    "-ngl 99 --spec-type ngram-map-k --draft-min -1",
}


def _database(tmp_path: Path) -> Path:
    path = tmp_path / "setup.duckdb"
    write_db(path, [])
    insert_rows(
        path,
        "campaigns",
        [
            {
                "campaign_id": "c1",
                "plan_name": "gpu",
                "plan_sha256": "ab",
                "plan_yaml": PLAN,
                "baseline": "autoregressive",
                "started_at": T,
                "status": "complete",
            }
        ],
    )
    insert_rows(
        path,
        "environment",
        [{"campaign_id": "c1", "host": "h1", "key": k, "value": v} for k, v in FACTS.items()],
    )
    insert_rows(
        path,
        "services",
        [
            {
                "service_id": f"s-{m}",
                "campaign_id": "c1",
                "config_id": f"cfg-{m}",
                "engine": "llamacpp",
                "method": m,
                "tp": 1,
                "gpus": gpus,
                "host": "h1",
                "launch_command": COMMANDS[m],
                "requested_at": T,
                "startup_s": 3.0,
                "state": "stopped",
                "transport": transport,
            }
            for m, gpus, transport in (
                ("autoregressive", "0", "direct"),
                ("ngram", "1", "paramiko-tunnel"),
            )
        ],
    )
    build.run(path, baseline="autoregressive")
    return path


def test_host_summary_pivots_the_facts(tmp_path: Path) -> None:
    """Two H200 of 143771 MiB -> '2 x NVIDIA H200', 143771 / 1024 = 140.4 GiB; no
    engine.build or engine.version key, so the services' one distinct build string."""
    h = one(_database(tmp_path), "SELECT * FROM host_summary")
    assert (h["cpu_model"], h["cpu_count"], h["memory_gb"]) == ("AMD EPYC 9654", "16", "125.7")
    assert (h["n_gpus"], h["gpu_models"]) == (2, "2 x NVIDIA H200")
    assert round(h["gpu_memory_gib"], 1) == 140.4
    assert (h["driver"], h["cuda"], h["engine_build"]) == ("570.86", "12.8", "b6000-cuda")
    assert (h["gpu_hour_usd"], h["n_services"]) == (3.5, 2)


def test_service_flags_that_not_every_service_shares(tmp_path: Path) -> None:
    """Shared by both: -m /m.gguf, -ngl 99. --port and CUDA_VISIBLE_DEVICES differ by design
    and are left out, and so is the binary; the env assignment LLAMA_ARG_X=1 is a unit of
    its own (not followed by the binary); '-1' is a value."""
    rows = fetch(
        _database(tmp_path),
        "SELECT method, own_flags, n_gpus, transport FROM service_summary ORDER BY method",
    )
    assert rows == [
        {
            "method": "autoregressive",
            "own_flags": "--spec-type none",
            "n_gpus": 1,
            "transport": "direct",
        },
        {
            "method": "ngram",
            "own_flags": "LLAMA_ARG_X=1 --spec-type ngram-map-k --draft-min -1",
            "n_gpus": 1,
            "transport": "paramiko-tunnel",
        },
    ]


def test_campaign_summary_carries_the_plan_description(tmp_path: Path) -> None:
    """The folded YAML scalar, as one line."""
    c = one(_database(tmp_path), "SELECT description FROM campaign_summary")
    assert c["description"] == "SmolLM2 on an H200, fully offloaded."


def test_plan_description_of_odd_plans() -> None:
    assert build.plan_description("name: x\n") == ""
    assert build.plan_description("description: [unclosed") == ""
    assert build.plan_description("- a list") == ""
    assert build.plan_description('description: "one  line"') == "one line"
