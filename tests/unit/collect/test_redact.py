"""Tests for collect/redact.py: secrets are masked, token counts are left alone."""

from __future__ import annotations

import pytest

from specsweep.collect.redact import MASK, redact, redact_argv


@pytest.mark.parametrize(
    ("text", "secret", "kept"),
    [
        pytest.param("HF_TOKEN=abc123def", "abc123def", "HF_TOKEN=", id="env-var"),
        pytest.param("export HF_TOKEN=abc123def && run", "abc123def", "&& run", id="export"),
        pytest.param("llama-server --api-key X9zz -m m.gguf", "X9zz", "-m m.gguf", id="flag-space"),
        pytest.param("--api-key=X9zz", "X9zz", "--api-key=", id="flag-equals"),
        pytest.param("--password=Y7yy", "Y7yy", "--password=", id="password-equals"),
        pytest.param('OPENAI_API_KEY="a b" next', "a b", "next", id="double-quoted"),
        pytest.param("OPENAI_API_KEY='a b' next", "a b", "next", id="single-quoted"),
        pytest.param(
            "Authorization: Bearer eyJhbGciOi.abc-def",
            "eyJhbGciOi",
            "Authorization",
            id="bearer-header",
        ),
        pytest.param("bearer   tok.en_123", "tok.en_123", "", id="bearer-lowercase"),
        pytest.param("key is sk-abcdefghij123456 ok", "sk-abcdefghij123456", "ok", id="sk-key"),
        pytest.param("used hf_AbCdEfGhIjKlMnOp here", "hf_AbCdEfGhIjKlMnOp", "here", id="hf-key"),
        pytest.param(
            "GITHUB_TOKEN=ghp_abcdefghijklmnop",
            "ghp_abcdefghijklmnop",
            "GITHUB_TOKEN",
            id="ghp-key",
        ),
        pytest.param("https://user:pass@host/path", ":pass@", "https://user:", id="url-https"),
        pytest.param(
            "http://bob:s3cr3t@example.com:8080/x",
            "s3cr3t",
            "example.com:8080/x",
            id="url-http-port",
        ),
        pytest.param("secret: hunter2", "hunter2", "secret", id="yaml-secret"),
        pytest.param("db_passwd=hunter2", "hunter2", "db_passwd", id="passwd"),
        pytest.param("curl https://h/v1?token=abc123&x=1", "abc123", "curl", id="query-token"),
    ],
)
def test_secrets_are_masked(text: str, secret: str, kept: str) -> None:
    out = redact(text)
    assert secret not in out
    assert MASK in out
    assert kept in out


@pytest.mark.parametrize(
    "text",
    [
        "max_tokens=64",
        "n_tokens = 225",
        "tokenizer",
        "the tokenizer has 32000 tokens",
        "prompt_tokens: 12, draft_tokens: 8, accepted_tokens: 3",
        "MAX_TOKENS=64 N_TOKENS=5",
        "--n-predict 64 --max-tokens 64",
        "llama-server -t 2 -c 8192 -np 4 --metrics --spec-type ngram-simple",
        "https://example.com/v1/chat/completions",
        "tokens_per_second: 12.5",
        "sk-short",
        # prose in a plan's comments: a word after "N-token" is no secret (seen masked in
        # an H200 campaign's stored plan, 2026-12-03)
        "so a 256-token reply takes ~0.4 s",
        "a 65536-token context, 24-token drafts",
    ],
)
def test_benign_strings_are_unchanged(text: str) -> None:
    assert redact(text) == text


def test_several_secrets_on_one_line_are_all_masked() -> None:
    out = redact('HF_TOKEN=aaa111 OPENAI_API_KEY="b b" max_tokens=64 https://u:ppp@h')
    for secret in ("aaa111", "b b", "ppp"):
        assert secret not in out
    assert "max_tokens=64" in out


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        pytest.param(
            ["llama-server", "--api-key", "X9", "-m", "m.gguf"],
            ["llama-server", "--api-key", MASK, "-m", "m.gguf"],
            id="api-key-next",
        ),
        pytest.param(
            ["--password=Y7", "--port", "8080"],
            [f"--password={MASK}", "--port", "8080"],
            id="password-inline",
        ),
        pytest.param(
            ["--hf-token", "abc", "-n", "64"], ["--hf-token", MASK, "-n", "64"], id="hf-token-next"
        ),
        pytest.param(
            ["-n", "64", "--max-tokens", "64", "--n-tokens", "5"],
            ["-n", "64", "--max-tokens", "64", "--n-tokens", "5"],
            id="token-counts",
        ),
        pytest.param(["env", "HF_TOKEN=abc"], ["env", f"HF_TOKEN={MASK}"], id="env-arg"),
        pytest.param(
            ["-H", "Authorization: Bearer abc"],
            ["-H", f"Authorization: {MASK} {MASK}"],
            id="header-arg",
        ),
    ],
)
def test_redact_argv(argv: list[str], expected: list[str]) -> None:
    assert redact_argv(argv) == expected


def test_redact_argv_does_not_change_its_input() -> None:
    argv = ["--api-key", "X9"]
    redact_argv(argv)
    assert argv == ["--api-key", "X9"]


@pytest.mark.parametrize("text", ["password = hunter2", "HF_TOKEN = hunter2"])
def test_secret_with_spaces_around_equals_is_masked(text: str) -> None:
    assert "hunter2" not in redact(text)


@pytest.mark.parametrize("text", ['{"HF_TOKEN": "hunter2"}', "env: {'api_key': 'hunter2'}"])
def test_secret_under_a_quoted_key_is_masked(text: str) -> None:
    assert "hunter2" not in redact(text)
