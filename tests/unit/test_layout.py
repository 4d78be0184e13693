"""The house's rules, read from the code's own imports (static):

- the import contracts of /.importlinter hold (import-linter): stages point one way (the
  specsweep command -> the stages; collect, analyze -> schema; report -> nothing of ours: it
  reads only the DuckDB file), the folders of
  each stage are layered (collect: cluster > run > planning > hosts > plan > engines > ...),
  and no two modules or folders of one package import each other, even through a chain;
- one installed name: the stages (collect/, schema/, analyze/, report/, latex/) are imported as
  `specsweep.<stage>` (the symlinks in specsweep/), never by their bare folder name, in code,
  tests and the commands of scripts and docs: a bare `import schema` would load a second copy
  of the stage from the repository, and beside a user's own `schema` package, theirs;
- no module over 400 lines, no package folder with more than 10 modules (__init__ and
  __main__ not counted); every package says in its docstring what it owns.

Lazy imports inside functions count (import-linter reads every import statement).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("collect", "schema", "stats", "analyze", "report")
STAGES = (*PACKAGES, "latex")  # with stats: every folder under specsweep/
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
        "[importlinter]\nroot_package = specsweep\n\n"
        "[importlinter:contract:upside-down]\nname = engines over plan\ntype = layers\n"
        "containers =\n    specsweep.collect\nlayers =\n    engines\n    plan\n"
    )
    code, report = lint_imports(config)
    assert code == 1, report
    assert "engines over plan BROKEN" in report
    assert "specsweep.collect.plan.components -> specsweep.collect.engines" in report


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


def _tracked(*patterns: str) -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files", *patterns], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return [ROOT / p for p in out if not p.startswith("docs/measurements/")]


def test_the_stages_are_imported_through_the_specsweep_namespace() -> None:
    bare = []
    for path in _tracked("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and node.level == 0
                else []
            )
            bare += [
                f"{path.relative_to(ROOT)}:{node.lineno} {n}"
                for n in names
                if n.split(".")[0] in STAGES
            ]
    assert bare == []
    for stage in STAGES:
        assert (ROOT / "specsweep" / stage).resolve() == ROOT / stage


def test_scripts_and_docs_run_the_stages_through_specsweep() -> None:
    stages = "|".join(STAGES)
    # a bare stage after -m, and in Python inside a shell line (python3 -c 'from <stage>.x ...')
    bare = re.compile(rf"-m[\"', ]+({stages})\b(?!\.)|(?<![\w.])from ({stages})\.[\w.]+ import ")
    found = [
        f"{path.relative_to(ROOT)}: {m.group(0)}"
        for path in _tracked("*.sh", "*.md", "*.yaml", "*.j2", "Makefile", ".ci/*")
        if path.is_file()
        for m in bare.finditer(path.read_text(encoding="utf-8", errors="replace"))
    ]
    found += [
        f"{path.relative_to(ROOT)}: {m.group(0)}"
        for path in _tracked("*.py")
        for m in re.finditer(rf"-m[\"', ]+({stages})\b(?!\.)", path.read_text(encoding="utf-8"))
    ]
    assert found == []
