"""requirements.lock pins what pyproject.toml declares, at versions its floors allow, and the
Makefile's venv (what `make` and CI use) installs through it."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PIN = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")


def pins(text: str) -> dict[str, str]:
    """name -> version of every `name==version` line; other lines are '#' comments."""
    out = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        m = PIN.fullmatch(line.strip())
        assert m, f"not a pin: {line!r}"
        out[canonicalize_name(m[1])] = m[2]
    return out


def declared() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [
        Requirement(r) for r in project["dependencies"] + project["optional-dependencies"]["dev"]
    ]


def test_the_lock_pins_every_declared_package_within_its_floor() -> None:
    locked = pins((ROOT / "requirements.lock").read_text())
    for req in declared():
        name = canonicalize_name(req.name)
        assert name in locked, f"{req.name} is declared but not in requirements.lock: make lock"
        assert req.specifier.contains(locked[name], prereleases=True), (
            f"requirements.lock pins {req.name}=={locked[name]}, outside {req}"
        )


def test_the_venv_installs_through_the_lock() -> None:
    makefile = (ROOT / "Makefile").read_text()
    rule = makefile[makefile.index("$(STAMP): ") :].split("\n\n")[0]
    assert "requirements.lock" in rule.splitlines()[0]  # a new lock reinstalls
    assert "pip install --quiet -c requirements.lock -e '.[dev]'" in rule


def test_pins_reads_only_pins() -> None:
    assert pins("# a comment\nPyYAML==6.0.4\n\nmarkupsafe==3.0.4\n") == {
        "pyyaml": "6.0.4",
        "markupsafe": "3.0.4",
    }
