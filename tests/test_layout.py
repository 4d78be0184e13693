"""The house's rules, read from the code's own imports (static):

- the import contracts of /.importlinter hold (import-linter): stages point one way (the
  specsweep command -> the stages; collect, analyze -> schema; report -> nothing of ours: it
  reads only the DuckDB file), the folders of
  each stage are layered (collect: cluster > run > planning > hosts > plan > engines > ...),
  and no two modules or folders of one package import each other, even through a chain;
- no module over 400 lines, no package folder with more than 10 modules (__init__ and
  __main__ not counted); every package says in its docstring what it owns.

Lazy imports inside functions count (import-linter reads every import statement).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("collect", "schema", "analyze", "report")
CONTRACTS = ROOT / ".importlinter"
MAX_LINES = 400
MAX_MODULES = 10
# the `lint-imports` console script, run by this interpreter (no PATH needed)
LINT = "import sys; from importlinter.cli import lint_imports_command as c; c(sys.argv[1:])"


def lint_imports(config: Path, cwd: Path = ROOT, path: Path = ROOT) -> tuple[int, str]:
    """Run import-linter on a contract file; (exit code, its report)."""
    done = subprocess.run(
        [sys.executable, "-c", LINT, "--no-cache", "--no-logo", str(config)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(path), "PATH": "/usr/bin:/bin"},
    )
    return done.returncode, done.stdout + done.stderr


def test_import_contracts_are_kept() -> None:
    code, report = lint_imports(CONTRACTS)
    assert code == 0, report
    assert " broken" in report and "0 broken" in report


def test_a_broken_layering_is_reported(tmp_path: Path) -> None:
    """The check itself can fail: the plan imports the engines (its engine union), so a
    contract that puts the engines above the plan is broken, and says by which import."""
    config = tmp_path / "contracts.ini"
    config.write_text(
        "[importlinter]\nroot_packages =\n    collect\n    schema\n\n"
        "[importlinter:contract:upside-down]\nname = engines over plan\ntype = layers\n"
        "containers =\n    collect\nlayers =\n    engines\n    plan\n"
    )
    code, report = lint_imports(config)
    assert code == 1, report
    assert "engines over plan BROKEN" in report
    assert "collect.plan.components -> collect.engines" in report


def test_a_cycle_is_reported(tmp_path: Path) -> None:
    """A hand-built loop a -> b -> c -> a in a scratch package breaks the acyclic contract."""
    package = tmp_path / "loop"
    package.mkdir()
    (package / "__init__.py").write_text('"""A loop."""\n')
    for name, target in (("a", "b"), ("b", "c"), ("c", "a"), ("d", "a")):
        (package / f"{name}.py").write_text(f"from loop import {target}\n")
    config = tmp_path / "contracts.ini"
    config.write_text(
        "[importlinter]\nroot_packages =\n    loop\n\n"
        "[importlinter:contract:acyclic]\nname = no loop\ntype = acyclic_siblings\n"
        "ancestors =\n    loop\n"
    )
    code, report = lint_imports(config, cwd=tmp_path, path=tmp_path)
    assert code == 1, report
    assert "no loop BROKEN" in report


@pytest.mark.parametrize("package", PACKAGES)
def test_modules_and_folders_stay_small(package: str) -> None:
    too_long = [
        f"{path.relative_to(ROOT)} ({n} lines)"
        for path in (ROOT / package).rglob("*.py")
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    ]
    folders = [ROOT / package, *(p for p in (ROOT / package).rglob("*") if p.is_dir())]
    too_wide = [
        f"{folder.relative_to(ROOT)} ({n} modules)"
        for folder in folders
        if (n := sum(p.name not in ("__init__.py", "__main__.py") for p in folder.glob("*.py")))
        > MAX_MODULES
    ]
    assert (too_long, too_wide) == ([], [])


def test_every_package_says_what_it_owns() -> None:
    """Each package folder has an __init__ whose docstring names its role."""
    silent = [
        str(init.relative_to(ROOT))
        for package in PACKAGES
        for init in (ROOT / package).rglob("__init__.py")
        if not ast.get_docstring(ast.parse(init.read_text()))
    ]
    assert silent == []


def test_an_init_holds_a_docstring_and_imports_only() -> None:
    """No package hides code in its __init__.py (report/openloop/__init__.py once held the
    whole open-loop section): a function, class or statement lives in a module named for it;
    an __init__ may re-export names (imports and `__all__`)."""
    allowed = (ast.Import, ast.ImportFrom, ast.Expr)  # Expr: the docstring
    found = [
        f"{init.relative_to(ROOT)}:{node.lineno}"
        for package in (*PACKAGES, "specsweep")
        for init in (ROOT / package).rglob("__init__.py")
        for node in ast.parse(init.read_text()).body
        if not isinstance(node, allowed)
        and not (isinstance(node, ast.Assign) and [t.id for t in node.targets] == ["__all__"])
    ]
    assert found == []
