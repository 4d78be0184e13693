"""A real systemd as PID 1 for the `systemd` manager's tests: a minimal Debian tree booted
with systemd-nspawn, its sshd on 127.0.0.1 of this machine's network namespace.

`ensure_image()` debootstraps the tree once (PACKAGES below) into the specsweep cache,
`~/.cache/specsweep/systemd-debian-<suite>-r<RECIPE>/` (about 260 MB), from the Debian mirror
and suite this machine's apt uses, so that the cached llama-server finds its libc there
(55-100 s on 2 cores; later runs reuse it). `booted(image, binds)` boots it with
`--volatile=overlay` (every change lands in a tmpfs and is gone at shutdown: the cached tree
never changes), `--register=no --keep-unit` (without them nspawn asks the host's systemd
for a scope and, with no systemd on the host, fails: "Failed to open system bus"), its sshd
configured through a bound drop-in (port, loopback only) and a bound authorized_keys, the
given host paths bound read-only at the same paths; it halts the container on exit, and
SIGKILLs what is left after 30 s. Boot takes about 1 s, halt under 1 s.

Anything that stops a boot raises `ContainerError` with what failed (the command, its
output); the tests skip with that message. `python -m tests.support.systemd_container`
builds the image and boots it once (a smoke test that prints its timings).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specsweep.collect.resources import cache_dir

# python3: the SSH host picks free ports with it (collect/hosts/ssh.py); libgomp1: llama-server;
# libpam-systemd: an SSH login of a non-root user gets its user manager (systemctl --user)
PACKAGES = [
    "systemd",
    "systemd-sysv",
    "dbus",
    "libpam-systemd",
    "openssh-server",
    "python3-minimal",
    "libgomp1",
    "procps",
]
# units a test container does not need (timers that would wake up mid-test, the console login)
MASKED = [
    "apt-daily.timer",
    "apt-daily-upgrade.timer",
    "dpkg-db-backup.timer",
    "e2scrub_all.timer",
    "fstrim.timer",
    "e2scrub_reap.service",
    "console-getty.service",
    "getty@tty1.service",
    "systemd-pstore.service",
    # root logins need no user manager (specsweep as root runs system units), and on cgroup
    # v1 stopping root's held the container's halt for 30 s and more
    "user@0.service",
]
RECIPE = "4"  # bump when PACKAGES, MASKED or the tree's set-up change: a new cache folder
PR_SET_PDEATHSIG = 1
DEFAULT_MIRROR, DEFAULT_SUITE = "http://deb.debian.org/debian", "bookworm"


class ContainerError(RuntimeError):
    """The image could not be built or the container did not boot (the message says why)."""


def apt_source() -> tuple[str, str]:
    """(mirror, suite) of this machine's Debian archive entry in /etc/apt/sources.list*, so
    that the container's libc matches the one the cached llama-server was built against."""
    files = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    for path in files:
        try:
            text = path.read_text()
        except OSError:
            continue
        for uri, suite in _entries(text):
            if uri.rstrip("/").endswith("/debian") and "-" not in suite:
                return uri, suite
    return DEFAULT_MIRROR, DEFAULT_SUITE


def _entries(text: str) -> Iterator[tuple[str, str]]:
    """(uri, suite) pairs from one-line (`deb URI SUITE ...`) and deb822 sources."""
    for line in text.splitlines():
        m = re.match(r"^\s*deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)", line)
        if m:
            yield m.group(1), m.group(2)
    for stanza in re.split(r"\n\s*\n", text):
        fields = dict(re.findall(r"^([A-Za-z-]+):\s*(.*)$", stanza, re.M))
        if "deb" in fields.get("Types", "").split() and "URIs" in fields:
            for suite in fields.get("Suites", "").split():
                yield fields["URIs"].split()[0], suite


def image_path(suite: str | None = None) -> Path:
    return cache_dir() / f"systemd-debian-{suite or apt_source()[1]}-r{RECIPE}"


def ensure_image(timeout_s: float = 900) -> Path:
    """The cached tree, debootstrapped first if missing (one builder at a time)."""
    mirror, suite = apt_source()
    target = image_path(suite)
    if (target / "etc/specsweep-image").exists():
        return target
    for tool in ("debootstrap", "systemd-nspawn"):
        if shutil.which(tool) is None:
            raise ContainerError(
                f"{tool} not found: apt-get install -y debootstrap "
                "systemd-container (make system installs them)"
            )
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f"{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / "etc/specsweep-image").exists():
            _build(target, mirror, suite, timeout_s)
    return target


def _build(target: Path, mirror: str, suite: str, timeout_s: float) -> None:
    partial = target.with_name(target.name + ".partial")
    _remove(partial)
    cmd = [
        "debootstrap",
        "--variant=minbase",
        f"--include={','.join(PACKAGES)}",
        suite,
        str(partial),
        mirror,
    ]
    print(f"[specsweep] building the systemd test image: {' '.join(cmd)}", flush=True)
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        raise ContainerError(f"{' '.join(cmd)} took over {timeout_s:.0f} s") from exc
    if done.returncode != 0:
        _remove(partial)
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-15:])
        raise ContainerError(f"{' '.join(cmd)} failed (exit {done.returncode}):\n{tail}")
    units = partial / "etc/systemd/system"
    for unit in MASKED:
        for link in units.glob(f"*.wants/{unit}"):
            link.unlink()
        (units / unit).unlink(missing_ok=True)
        (units / unit).symlink_to("/dev/null")
    (partial / "root/.ssh").mkdir(mode=0o700, exist_ok=True)
    (partial / "etc/specsweep-image").write_text(f"{suite} recipe {RECIPE}\n")
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)


def _remove(tree: Path) -> None:
    """rm -rf a partial tree, after unmounting what an interrupted debootstrap left mounted
    in it (its /proc, /sys), so that nothing outside the tree is touched."""
    prefix = str(tree) + "/"
    with contextlib.suppress(OSError):
        for line in reversed(Path("/proc/mounts").read_text().splitlines()):
            point = line.split()[1]
            if point.startswith(prefix):
                subprocess.run(["umount", "-l", point], check=False)
    shutil.rmtree(tree, ignore_errors=True)


@dataclass
class Container:
    """A booted container: root logs in over SSH at 127.0.0.1:port with key_file."""

    name: str
    port: int
    key_file: Path
    known_hosts: Path
    proc: subprocess.Popen[bytes]
    console: Path
    _namespace: str = ""

    def ssh(self, command: str, timeout_s: float = 30) -> subprocess.CompletedProcess[str]:
        """Run one shell command in the container as root (OpenSSH's client)."""
        argv = [
            "ssh",
            "-q",
            "-o",
            "BatchMode=yes",
            "-o",
            f"UserKnownHostsFile={self.known_hosts}",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "ConnectTimeout=5",
            "-i",
            str(self.key_file),
            "-p",
            str(self.port),
            "root@127.0.0.1",
            command,
        ]
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)

    def host_cfg(self, workdir: str, user: str = "root") -> dict[str, Any]:
        """A plan's `host:` for specsweep's SSH host on this container, manager systemd."""
        return {
            "kind": "ssh",
            "name": "nspawn",
            "address": "127.0.0.1",
            "port": self.port,
            "user": user,
            "key_file": str(self.key_file),
            "known_hosts_file": str(self.known_hosts),
            "use_ssh_config": False,
            "manager": "systemd",
            "workdir": workdir,
            "connect_timeout_s": 5,
        }

    def units(self, state: str) -> list[str]:
        """The container's specsweep units in a state (active, failed, ...)."""
        done = self.ssh(
            f"systemctl list-units --all --state={state} --plain --no-legend "
            "'specsweep-*' | cut -d' ' -f1"
        )
        return done.stdout.split()

    def server_pid_mid_workload(self, workdir: str, timeout_s: float) -> int:
        """MainPID of the running specsweep unit once the llama-server logs under workdir
        show two answered requests (the warm-up and the first measured one)."""
        deadline = time.monotonic() + timeout_s
        count = f"cat $(find {workdir}/logs -name '*.log') | grep -c 'print_timing.*total time'"
        while time.monotonic() < deadline:
            done = self.ssh(count).stdout.strip()
            if done.isdigit() and int(done) >= 2:
                for unit in self.units("active"):
                    pid = self.ssh(f"systemctl show -p MainPID --value {unit}").stdout.strip()
                    if pid.isdigit() and pid != "0":
                        return int(pid)
            time.sleep(0.1)
        raise AssertionError(f"no llama-server unit answered twice in {timeout_s} s")

    @property
    def pid_namespace(self) -> str:
        """The container's pid namespace (its init's /proc/PID/ns/pid link), '' if none."""
        if not self._namespace:
            for pid in descendants(self.proc.pid):
                with contextlib.suppress(OSError):
                    status = Path(f"/proc/{pid}/status").read_text()
                    if re.search(r"^NSpid:\s+\d+\s+1$", status, re.M):
                        self._namespace = os.readlink(f"/proc/{pid}/ns/pid")
                        break
        return self._namespace

    def console_tail(self, lines: int = 30) -> str:
        text = self.console.read_text(errors="replace") if self.console.exists() else ""
        return "\n".join(re.sub(r"\x1b\[[0-9;]*m", "", text).splitlines()[-lines:])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _prepare(folder: Path, image: Path, port: int) -> tuple[Path, Path]:
    """sshd drop-in, client key, authorized_keys and known_hosts in folder."""
    conf = folder / "sshd_config.d"
    conf.mkdir()
    (conf / "specsweep.conf").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
    )
    key = folder / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    (folder / "authorized_keys").write_text(key.with_suffix(".pub").read_text())
    known = folder / "known_hosts"
    lines = [
        f"[127.0.0.1]:{port} " + " ".join(p.read_text().split()[:2])
        for p in sorted((image / "etc/ssh").glob("ssh_host_*_key.pub"))
    ]
    known.write_text("\n".join(lines) + "\n")
    return key, known


def nspawn_command(image: Path, name: str, folder: Path, binds: Sequence[Path]) -> list[str]:
    cmd = [
        "systemd-nspawn",
        "--quiet",
        "-D",
        str(image),
        "--volatile=overlay",
        "--boot",
        "--register=no",
        "--keep-unit",
        f"--machine={name}",
        "--console=read-only",
        f"--bind-ro={folder / 'sshd_config.d'}:/etc/ssh/sshd_config.d",
        f"--bind-ro={folder / 'authorized_keys'}:/root/.ssh/authorized_keys",
    ]
    return cmd + [f"--bind-ro={Path(p).resolve()}" for p in binds]


@contextlib.contextmanager
def booted(
    image: Path, binds: Sequence[Path] = (), unified: bool = True, timeout_s: float = 60
) -> Iterator[Container]:
    """Boot the image; yield once `systemctl is-system-running --wait` answers over SSH.
    unified: the container's systemd on a cgroup v2 tree (as on current distributions),
    else on cgroup v1 (the legacy layout, a name=systemd hierarchy)."""
    if os.geteuid() != 0:
        raise ContainerError("systemd-nspawn needs root (this process is not root)")
    with tempfile.TemporaryDirectory(prefix="specsweep-nspawn-") as tmp:
        folder, port = Path(tmp), _free_port()
        key, known = _prepare(folder, image, port)
        name = f"specsweep-{secrets.token_hex(4)}"
        console = folder / "console.log"
        with open(console, "wb") as out:
            proc = subprocess.Popen(
                nspawn_command(image, name, folder, binds),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,
                preexec_fn=_halt_with_parent,
                env={**os.environ, "SYSTEMD_NSPAWN_UNIFIED_HIERARCHY": "1" if unified else "0"},
            )
        box = Container(name, port, key, known, proc, console)
        try:
            _wait_booted(box, timeout_s)
            if not box.pid_namespace:
                raise ContainerError("booted, but no container init below systemd-nspawn")
            yield box
        finally:
            _halt(box)


def _halt_with_parent() -> None:
    """In the nspawn child: SIGTERM (a clean halt) when the test process dies, so that even
    a SIGKILLed pytest leaves no container behind."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _wait_booted(box: Container, timeout_s: float) -> None:
    deadline, last = time.monotonic() + timeout_s, ""
    while time.monotonic() < deadline:
        if box.proc.poll() is not None:
            raise ContainerError(
                f"systemd-nspawn exited with {box.proc.returncode} during "
                f"boot:\n{box.console_tail()}"
            )
        with contextlib.suppress(subprocess.TimeoutExpired):
            done = box.ssh(
                "systemctl is-system-running --wait",
                timeout_s=max(1.0, min(30.0, deadline - time.monotonic())),
            )
            last = (done.stdout + done.stderr).strip()
            if done.returncode == 0 or last in ("degraded", "running"):
                return
            if last and done.returncode != 255:  # systemd answered: starting, maintenance, ...
                raise ContainerError(f"the container's systemd is {last!r}:\n{box.console_tail()}")
        time.sleep(0.2)
    raise ContainerError(
        f"no SSH login into the container within {timeout_s:.0f} s "
        f"(last answer {last!r}):\n{box.console_tail()}"
    )


def _halt(box: Container, grace_s: float = 30) -> None:
    """SIGTERM to nspawn halts the container cleanly; after grace_s, SIGKILL every process
    below nspawn (the container's PID 1 first: its namespace dies with it), then nspawn."""
    if box.proc.poll() is None:
        box.proc.send_signal(signal.SIGTERM)
        try:
            box.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            for pid in descendants(box.proc.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            box.proc.kill()
            box.proc.wait(timeout=30)
    _wait_gone(box.pid_namespace, timeout_s=10)
    with contextlib.suppress(OSError):
        Path(f"/run/systemd/nspawn/propagate/{box.name}").rmdir()


def namespace_members(namespace: str) -> list[int]:
    """pids of the processes in a pid namespace (given as its /proc/PID/ns/pid link)."""
    found = []
    for link in Path("/proc").glob("[0-9]*/ns/pid"):
        with contextlib.suppress(OSError):
            if os.readlink(link) == namespace:
                found.append(int(link.parent.parent.name))
    return found


def _wait_gone(namespace: str, timeout_s: float) -> None:
    """The kernel tears a pid namespace down after its init died: wait for that."""
    deadline = time.monotonic() + timeout_s
    while namespace and namespace_members(namespace) and time.monotonic() < deadline:
        time.sleep(0.1)


def descendants(root: int) -> list[int]:
    """Every process below root, parents before children, from /proc."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            parents.setdefault(ppid, []).append(int(stat.parent.name))
    found, todo = [], [root]
    while todo:
        kids = parents.get(todo.pop(0), [])
        found += kids
        todo += kids
    return found


def running_containers() -> list[int]:
    """pids of systemd-nspawn processes booting one of our machines (for leak checks)."""
    out = subprocess.run(
        ["pgrep", "-f", "systemd-nspawn .*--machine=specsweep-"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    return [int(p) for p in out.split()]


if __name__ == "__main__":
    t0 = time.monotonic()
    built = ensure_image()
    t1 = time.monotonic()
    with booted(built) as c:
        t2 = time.monotonic()
        print(c.ssh("cat /proc/1/comm; systemctl is-system-running").stdout.strip())
    print(
        f"image {built}: {t1 - t0:.1f} s; boot {t2 - t1:.1f} s; halt {time.monotonic() - t2:.1f} s"
    )
