""".ci/gpu/gguf_random.py: a random-weight llama GGUF with SmolLM2's tokenizer, read back with
gguf.GGUFReader and served by the real CPU llama-server with SmolLM2 drafting for it under
synthetic acceptance (`--spec-synth-len 3`).

The script runs as a subprocess, as on the GPU machine. Every test here is in the slow tier
(the smollm_model / llama_server fixtures); building `tiny` takes about 5 s, most of it
GGUFReader parsing SmolLM2's 49152 tokens and 48900 merges.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path

import gguf
import httpx
import numpy as np
import pytest
from gguf import quants

from specsweep.collect.engines import create
from specsweep.collect.engines.llamacpp import LlamaCppEngine
from specsweep.collect.hosts.local import Local
from specsweep.collect.http import client
from specsweep.collect.plan.model import LocalHost, Method, ServiceConfig
from specsweep.collect.run.service import Service
from tests.support.collect_cli import llama_engine

SCRIPT = Path(__file__).resolve().parents[3] / ".ci" / "gpu" / "gguf_random.py"
# tiny: 2 layers, hidden 64, ffn 128, 4 heads of 16, 2 KV heads (so K and V are 32 x 64)
LAYER = {
    "attn_norm": (64,),
    "attn_q": (64, 64),
    "attn_k": (64, 32),
    "attn_v": (64, 32),
    "attn_output": (64, 64),
    "ffn_norm": (64,),
    "ffn_gate": (64, 128),
    "ffn_up": (64, 128),
    "ffn_down": (128, 64),
}
# GGUF order (ne0 = the row length first), as GGUFReader gives it
TINY = {
    "token_embd.weight": (64, 49152),
    **{f"blk.{b}.{k}.weight": v for b in (0, 1) for k, v in LAYER.items()},
    "output_norm.weight": (64,),
    "output.weight": (64, 49152),
}


def _build(source: str, out: Path, kind: str) -> str:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), source, str(out), "tiny", "--type", kind],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory, smollm_model: str) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("gguf") / "tiny-f16.gguf"
    return out, _build(smollm_model, out, "f16")


def test_the_script_prints_parameters_bytes_and_seconds(tiny: tuple[Path, str]) -> None:
    out, printed = tiny
    # 2 * 49152 * 64 (embedding, output) + 2 * (2 * 64 * 64 + 2 * 32 * 64 + 3 * 64 * 128 + 2 * 64)
    # + 64 (output norm), by hand
    params = 2 * 49152 * 64 + 2 * (8192 + 4096 + 24576 + 128) + 64
    assert f"{params} parameters" in printed
    assert f"{out.stat().st_size} bytes" in printed
    assert re.search(r", \d+\.\d\d s, peak RSS \d+ MiB", printed)


def test_the_header_is_llama_with_smollm2s_tokenizer(tiny: tuple[Path, str], smollm_model: str):
    made, source = gguf.GGUFReader(tiny[0]), gguf.GGUFReader(smollm_model)
    value = {k: f.contents() for k, f in made.fields.items()}
    assert value["general.architecture"] == "llama"
    assert value["llama.block_count"] == 2 and value["llama.vocab_size"] == 49152
    assert value["llama.embedding_length"] == 64 and value["llama.feed_forward_length"] == 128
    assert value["llama.attention.head_count"] == 4
    assert value["llama.attention.head_count_kv"] == 2
    assert value["llama.rope.dimension_count"] == 16
    assert value["llama.rope.freq_base"] == 500000.0
    assert len(value["tokenizer.ggml.tokens"]) == 49152
    theirs = {k: f for k, f in source.fields.items() if k.startswith("tokenizer.")}
    assert "tokenizer.chat_template" in theirs and "tokenizer.ggml.eos_token_id" in theirs
    for key, field in theirs.items():
        assert made.fields[key].types == field.types, key
        assert value[key] == field.contents(), key


def test_tensors_have_llamas_names_and_shapes_and_safe_values(tiny: tuple[Path, str]) -> None:
    tensors = {t.name: t for t in gguf.GGUFReader(tiny[0]).tensors}
    assert {name: tuple(int(n) for n in t.shape) for name, t in tensors.items()} == TINY
    for name, t in tensors.items():
        data = np.asarray(t.data, dtype=np.float32)
        if name.endswith("norm.weight"):
            assert t.tensor_type == gguf.GGMLQuantizationType.F32 and (data == 1).all()
        else:
            assert t.tensor_type == gguf.GGMLQuantizationType.F16
            # a normal tile of std 0.02: the sample std of >= 2048 values is within 10 %
            assert np.isfinite(data).all() and 0.018 < data.std() < 0.022, name
    # layers differ (each tensor starts the tile at its own offset)
    q0, q1 = (np.asarray(tensors[f"blk.{b}.attn_q.weight"].data) for b in (0, 1))
    assert not np.array_equal(q0, q1)


def test_q8_0_is_quantised_and_dequantises_to_the_same_scale(tmp_path: Path, smollm_model: str):
    out = tmp_path / "tiny-q8.gguf"
    _build(smollm_model, out, "q8_0")
    tensors = {t.name: t for t in gguf.GGUFReader(out).tensors}
    down = tensors["blk.1.ffn_down.weight"]
    assert down.tensor_type == gguf.GGMLQuantizationType.Q8_0
    # 64 rows of 128 values, 34 bytes (an f16 scale and 32 int8) per block of 32
    assert down.n_bytes == 64 * (128 // 32) * 34
    values = quants.dequantize(np.asarray(down.data), gguf.GGMLQuantizationType.Q8_0)
    assert values.shape == (64, 128) and 0.018 < values.std() < 0.022


def _service(tmp_path: Path, llama_server: str, model: Path, draft: str) -> Service:
    cfg = LlamaCppEngine.model_validate(
        llama_engine(
            llama_server,
            str(model),
            # one thread each for target and draft: on 2 shared cores, -t 2 made every token
            # take 150-900 ms (the two models' threads spin against each other)
            ["-t", "1", "-c", "1024", "-np", "1"],
            # a random target emits its end-of-sequence token at random: ignore it, so the
            # reply is max_tokens long
            request_extra={"cache_prompt": False, "ignore_eos": True, "seed": 7},
        )
    )
    method = Method(
        name="synth-l3",
        args=["-md", draft, "--spec-type", "draft-simple", "--spec-synth-len", "3"],
    )
    config = ServiceConfig(method=method, tp=1, engine=cfg)
    return Service(Local(LocalHost(kind="local")), create(cfg), config, tmp_path, "test")


async def _props_and_reply(svc: Service) -> tuple[dict, client.Result]:
    path, body = svc.engine.request([{"role": "user", "content": "Say hello."}], 32)
    async with httpx.AsyncClient() as http:
        props = (await http.get(svc.base_url + "/props", timeout=10)).json()
        reply = await client.stream(http, svc.base_url + path, body, svc.engine.parser(), 60)
    return props, reply


def test_llama_server_serves_it_with_smollm2_drafting_at_the_synthetic_length(
    tiny: tuple[Path, str], tmp_path: Path, llama_server: str, smollm_model: str
) -> None:
    """Acceptance length L = (predicted_n - 1) / steps, steps = predicted_n - 1 - accepted.

    Tolerance 2 <= L <= 4. With --spec-draft-n-max 3 (the default) llama.cpp accepts draft i
    with probability p^i, p = 0.8105 (p + p^2 + p^3 = 2, its log prints the rates), and the
    last steps draft fewer (32 - tokens so far - 1). An exact sum over the step paths of a
    32-token reply gives E[L] = 2.93 and P(L < 2) = 0.0014; 4 is the most a step can yield
    (3 drafts + 1). Without synthetic acceptance L would be about 1: the random target never
    agrees with SmolLM2. (The server draws the same acceptances for the same request, so the
    test does not flake from run to run.)
    """
    source = gguf.GGUFReader(smollm_model).fields
    with _service(tmp_path, llama_server, tiny[0], smollm_model) as svc:
        props, reply = asyncio.run(_props_and_reply(svc))
    assert props["model_path"] == str(tiny[0])
    assert props["chat_template"] == source["tokenizer.chat_template"].contents()
    assert (props["bos_token"], props["eos_token"]) == ("<|im_start|>", "<|im_end|>")
    assert reply.ok, reply.error_message
    timings = json.loads(reply.stats["server_stats"])["timings"]
    assert reply.stats["output_tokens"] == timings["predicted_n"] == 32
    drafted, accepted = timings["draft_n"], timings["draft_n_accepted"]
    steps = 31 - accepted
    assert 0 < accepted <= drafted <= 3 * steps
    assert 2.0 <= 31 / steps <= 4.0
    assert reply.stats["accept_length"] == pytest.approx(31 / steps)
