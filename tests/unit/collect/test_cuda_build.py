"""The CUDA flavour of the cached llama-server: folder names, architecture detection, the
`auto-cuda` binary of a plan, builds from a local source, and the `provision` flags.

No CUDA is compiled here (no nvcc on CI): `nvidia-smi`, `nvcc` and `cmake` are small scripts on
PATH, and the `provision` test checks the exact CMake command lines the real CLI runs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from specsweep.collect.provision import llama_cpp_tree
from specsweep.collect.resources import (
    CMAKE_FLAGS,
    LLAMA_CPP_PYTHON_VERSION,
    ResourceError,
    build_label,
    cmake_flags,
    cuda_builds,
    detect_cuda_arch,
    flavour_label,
    llama_server_path,
    mtbench_path,
    parse_compute_caps,
    resolve_llama_server,
    sharegpt_path,
)

ROOT = Path(__file__).resolve().parents[3]


def script(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def fake_build(cache: Path, arch: str | None, version: str = LLAMA_CPP_PYTHON_VERSION) -> Path:
    """A cached build as build_llama_server leaves it: bin/llama-server and build.json."""
    path = llama_server_path(version, arch)
    path.parent.mkdir(parents=True)
    path.write_text("#!/bin/sh\n")
    meta = {"version": version, "cuda_arch": arch, "cmake_flags": cmake_flags(arch)}
    (path.parent.parent / "build.json").write_text(json.dumps(meta))
    return path


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SPECSWEEP_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_compute_caps_become_cmake_architectures() -> None:
    assert parse_compute_caps("9.0\n") == "90"
    assert parse_compute_caps("9.0\n8.6\n9.0\n") == "86;90"  # mixed GPUs: both, sorted, once
    assert parse_compute_caps(" 12.0 \n") == "120"
    assert parse_compute_caps("") is None
    assert parse_compute_caps("[N/A]\nNo devices were found\n") is None


def test_flavour_names_the_folder(cache: Path) -> None:
    cpu = llama_server_path("9.9.9")
    assert cpu.parent.parent.name.startswith("llama-server-9.9.9-")
    assert "cuda" not in cpu.parent.parent.name
    h200 = llama_server_path("9.9.9", "90")
    assert h200.parent.parent.name.startswith("llama-server-9.9.9-cuda90-")
    assert llama_server_path("9.9.9", "86;90").parent.parent.name.startswith(
        "llama-server-9.9.9-cuda86-90-"
    )
    assert flavour_label("native") == "cudanative" and flavour_label(None) == ""
    # the hash differs per architecture, so two builds never share a folder
    others = {llama_server_path("9.9.9", "89"), llama_server_path("9.9.9", "native")}
    assert len({cpu, h200, *others}) == 4


def test_cuda_flags_extend_the_cpu_flags() -> None:
    assert cmake_flags() == CMAKE_FLAGS
    flags = cmake_flags("90")
    assert flags[: len(CMAKE_FLAGS)] == CMAKE_FLAGS
    assert flags[len(CMAKE_FLAGS) :] == ["-DGGML_CUDA=ON", "-DCMAKE_CUDA_ARCHITECTURES=90"]


def test_arch_is_detected_from_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    script(bin_dir, "nvidia-smi", 'case "$*" in *compute_cap*) printf "9.0\\n9.0\\n";; esac\n')
    monkeypatch.setenv("PATH", str(bin_dir))
    assert detect_cuda_arch() == "90"
    script(bin_dir, "nvidia-smi", 'echo "NVIDIA-SMI has failed" >&2; exit 9\n')
    assert detect_cuda_arch() is None  # a driver that does not answer: no GPUs
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert detect_cuda_arch() is None


def test_auto_cuda_finds_the_cuda_build(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no nvidia-smi
    with pytest.raises(ResourceError, match="make engine CUDA=1"):
        resolve_llama_server("auto-cuda")
    fake_build(cache, None)  # a CPU build is no answer to auto-cuda
    with pytest.raises(ResourceError, match="no CUDA llama-server"):
        resolve_llama_server("auto-cuda")
    h200 = fake_build(cache, "90")
    assert resolve_llama_server("auto-cuda") == str(h200)
    assert resolve_llama_server("auto") == str(llama_server_path())
    assert resolve_llama_server("/opt/llama-server") == "/opt/llama-server"


def test_a_cached_build_says_how_it_was_built(cache: Path, tmp_path: Path) -> None:
    """The fingerprint's engine.version for an sdist build (its own build_info is
    'b0-unknown'); nothing for a binary outside the cache, even with a build.json."""
    assert build_label(str(fake_build(cache, "90"))) == (
        f"llama.cpp of llama-cpp-python {LLAMA_CPP_PYTHON_VERSION} (cuda90)"
    )
    assert build_label(str(fake_build(cache, None))).endswith("(cpu)")
    elsewhere = tmp_path / "opt" / "bin" / "llama-server"
    elsewhere.parent.mkdir(parents=True)
    (tmp_path / "opt" / "build.json").write_text(json.dumps({"version": "x"}))
    assert build_label(str(elsewhere)) == "" and build_label("/no/such/llama-server") == ""


def test_stale_and_ambiguous_cuda_builds(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    monkeypatch.setenv("PATH", str(bin_dir))
    # a build made with other flags (an older specsweep) is not reused
    stale = cache / f"llama-server-{LLAMA_CPP_PYTHON_VERSION}-cuda90-00000000"
    (stale / "bin").mkdir(parents=True)
    (stale / "bin" / "llama-server").write_text("")
    (stale / "build.json").write_text(json.dumps({"cuda_arch": "90"}))
    assert cuda_builds() == {}
    h200 = fake_build(cache, "90")
    a100 = fake_build(cache, "80")
    assert cuda_builds() == {"90": h200, "80": a100}
    with pytest.raises(ResourceError, match="several CUDA builds"):
        resolve_llama_server("auto-cuda")  # no nvidia-smi to choose with
    script(bin_dir, "nvidia-smi", "echo 8.0\n")
    assert resolve_llama_server("auto-cuda") == str(a100)


def sdist_tree(root: Path, version: str) -> Path:
    """The shape of llama-cpp-python's sdist: PKG-INFO and vendor/llama.cpp."""
    tree = root / f"llama_cpp_python-{version}" / "vendor" / "llama.cpp"
    (tree / "ggml").mkdir(parents=True)
    (tree / "CMakeLists.txt").write_text("project(llama.cpp)\n")
    (tree.parent.parent / "PKG-INFO").write_text(f"Metadata-Version: 2.1\nVersion: {version}\n")
    return tree


def test_local_sources(tmp_path: Path) -> None:
    tree = sdist_tree(tmp_path / "unpacked", LLAMA_CPP_PYTHON_VERSION)
    work = tmp_path / "work"
    work.mkdir()
    assert llama_cpp_tree(tree, work) == tree  # the llama.cpp tree itself
    assert llama_cpp_tree(tree.parent.parent, work) == tree  # the unpacked sdist
    archive = tmp_path / "src.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tree.parent.parent, arcname=tree.parent.parent.name)
    found = llama_cpp_tree(archive, work)  # the sdist or device-pieces' trimmed copy
    assert found.is_relative_to(work) and (found / "CMakeLists.txt").is_file()
    old = sdist_tree(tmp_path / "old", "0.0.1")
    with pytest.raises(ResourceError, match="is llama-cpp-python 0.0.1"):
        llama_cpp_tree(old.parent.parent, work)
    with pytest.raises(ResourceError, match="no llama.cpp tree"):
        llama_cpp_tree(tmp_path / "work", work)
    with pytest.raises(ResourceError, match="does not exist"):
        llama_cpp_tree(tmp_path / "nowhere", work)
    (tmp_path / "junk.tar.gz").write_text("not a tar")
    with pytest.raises(ResourceError, match="cannot unpack"):
        llama_cpp_tree(tmp_path / "junk.tar.gz", work)


FAKE_CMAKE = """echo "$*" >> "$CMAKE_LOG"
if [ "$1" = --build ]; then mkdir -p "$2/bin" && echo built > "$2/bin/llama-server"; fi
"""


@pytest.mark.parametrize("how", ["flag", "env"])
def test_provision_cuda_from_a_local_source(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """`specsweep provision --cuda --source PATH` with no network: the CMake lines it
    runs, the folder it fills, and the build.json that `auto-cuda` reads."""
    bin_dir = tmp_path / "bin"
    script(bin_dir, "cmake", FAKE_CMAKE)
    script(bin_dir, "nvcc", "exit 0\n")
    script(bin_dir, "nvidia-smi", "echo 9.0\n")
    for tool in ("c++", "sh", "mkdir"):
        os.symlink(
            subprocess.check_output(["sh", "-c", f"command -v {tool}"], text=True).strip(),
            bin_dir / tool,
        )
    mtbench = mtbench_path()  # cached already: provision fetches nothing
    mtbench.parent.mkdir(parents=True)
    mtbench.write_text('{"question_id": 81, "category": "writing", "turns": ["Hi"]}\n')
    sharegpt_path().parent.mkdir(parents=True)  # cached too: no network
    sharegpt_path().write_text("[\n]\n")
    tree = sdist_tree(tmp_path / "src", LLAMA_CPP_PYTHON_VERSION)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}",
        "CMAKE_LOG": str(tmp_path / "cmake.log"),
        "SPECSWEEP_CACHE": str(cache),
    }
    argv = [sys.executable, "-m", "specsweep.collect", "provision", "--cuda"]
    if how == "flag":
        argv += ["--source", str(tree.parent.parent)]
    else:
        env["SPECSWEEP_LLAMA_SOURCE"] = str(tree)
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    target = llama_server_path(cuda_arch="90")
    assert f"llama-server: {target}" in done.stdout and target.read_text() == "built\n"
    configure, build = (tmp_path / "cmake.log").read_text().splitlines()
    assert configure.startswith(f"-S {tree} -B ")
    assert configure.endswith(" ".join(cmake_flags("90")))
    assert build.endswith(f"--target llama-server -j {os.cpu_count()}")
    meta = json.loads((target.parent.parent / "build.json").read_text())
    assert meta["cuda_arch"] == "90" and meta["cmake_flags"] == cmake_flags("90")
    monkeypatch.setenv("PATH", str(bin_dir))
    assert resolve_llama_server("auto-cuda") == str(target)
    # an explicit architecture wins over nvidia-smi's and builds into its own folder
    (tmp_path / "cmake.log").unlink()
    argv = [
        sys.executable,
        "-m",
        "specsweep.collect",
        "provision",
        "--cuda-arch",
        "89",
        "--source",
        str(tree),
    ]
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "-DCMAKE_CUDA_ARCHITECTURES=89" in (tmp_path / "cmake.log").read_text()
    assert llama_server_path(cuda_arch="89").exists()


def test_provision_cuda_without_nvcc_says_so(cache: Path, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    script(bin_dir, "cmake", FAKE_CMAKE)
    script(bin_dir, "c++", "exit 0\n")
    env = {**os.environ, "PATH": str(bin_dir), "SPECSWEEP_CACHE": str(cache)}
    done = subprocess.run(
        [sys.executable, "-m", "specsweep.collect", "provision", "--cuda-arch", "90"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert "nvcc not found" in done.stderr


def test_gpu_plan_offloads_target_and_draft_to_the_cuda_build() -> None:
    from specsweep.collect.plan.file import load_plan

    plan = load_plan(ROOT / "plans" / "gpu-llamacpp.yaml")
    local = load_plan(ROOT / "plans" / "local.yaml")
    assert plan.engine.binary == "auto-cuda" and plan.engine.model == local.engine.model
    args = plan.engine.args
    assert args[args.index("-ngl") + 1] == "99"
    drafts = [m for m in plan.methods if "-md" in m.args]
    assert drafts and all(m.args[m.args.index("-ngld") + 1] == "99" for m in drafts)
    slots = int(args[args.index("-np") + 1])
    assert max(c for w in plan.workloads for c in w.concurrency) <= slots
    gpu_names, local_names = {w.name for w in plan.workloads}, {w.name for w in local.workloads}
    # the local plan's workloads plus the category sweep (issue 27), cheap on a GPU
    assert gpu_names - local_names == {"categories"} and local_names <= gpu_names
    assert {m.name for m in local.methods} <= {m.name for m in plan.methods}


def test_a_llamacpp_engine_uses_gpus_only_when_built_and_asked_for_them() -> None:
    """The planner (check, simulate) and a cluster's task size read engine.uses_gpus: the
    GPU plan's services take a GPU, the default plan's run on the CPU."""
    from specsweep.collect.engines.llamacpp import Config
    from specsweep.collect.plan.file import load_plan

    assert load_plan(ROOT / "plans" / "gpu-llamacpp.yaml").engine.uses_gpus
    assert not load_plan(ROOT / "plans" / "local.yaml").engine.uses_gpus

    def uses(binary: str, args: list[str]) -> bool:
        return Config(kind="llamacpp", model="/m.gguf", binary=binary, args=args).uses_gpus

    assert uses("auto-cuda", []) and uses("/opt/llama-server", ["-ngl", "99"])
    assert uses("auto", ["--n-gpu-layers", "12"]) and uses("auto", ["--gpu-layers", "all"])
    assert not uses("auto", []) and not uses("auto", ["-ngl", "0", "-t", "2"])


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_an_interrupted_build_leaves_no_compiler_and_no_folder(
    cache: Path, tmp_path: Path, signum: int
) -> None:
    """`kill PID` (or SIGINT, inherited ignored as in a background job) while cmake builds:
    the build's whole process group ends, not cmake alone (its make and compilers would go
    on building into a folder being removed); the build folder goes; nothing is installed."""
    bin_dir, tmp = tmp_path / "bin", tmp_path / "tmp"
    tmp.mkdir()
    script(  # the build: cmake with a compiler under it that would outlive it
        bin_dir,
        "cmake",
        'if [ "$1" = --build ]; then sleep 300 & echo "$$ $!" > "$PIDS.tmp"; '
        'mv "$PIDS.tmp" "$PIDS"; wait; fi\n',
    )
    for tool in ("c++", "sleep", "mv"):
        os.symlink(
            subprocess.check_output(["sh", "-c", f"command -v {tool}"], text=True).strip(),
            bin_dir / tool,
        )
    tree = sdist_tree(tmp_path / "src", LLAMA_CPP_PYTHON_VERSION)
    pids = tmp_path / "pids"
    env = {**os.environ, "PATH": str(bin_dir), "PIDS": str(pids), "TMPDIR": str(tmp)}
    env["SPECSWEEP_CACHE"] = str(cache)
    proc = subprocess.Popen(
        [sys.executable, "-m", "specsweep.collect", "provision", "--source", str(tree)],
        cwd=ROOT,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        deadline = time.monotonic() + 60
        while not pids.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
            time.sleep(0.02)
        builders = [int(p) for p in pids.read_text().split()]
        proc.send_signal(signum)
        err = proc.communicate(timeout=30)[1]
    finally:
        proc.kill()
    assert proc.returncode == 128 + signum, err
    assert err.strip().splitlines()[-1] == "interrupted: nothing half-built was installed; rerun"
    for pid in builders:  # killed and reaped, or a zombie of pid 1's
        stat = Path(f"/proc/{pid}/stat")
        assert not stat.exists() or stat.read_text().split(")")[-1].split()[0] == "Z", pid
    assert list(tmp.iterdir()) == [] and not llama_server_path().exists()
