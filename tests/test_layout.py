"""The house's rules, read from the code's own imports (static, by AST):

- no import cycle between any two modules of the project;
- stages point one way: collect -> schema, analyze -> schema, schema -> nothing of ours,
  report -> nothing of ours (it reads only the DuckDB file);
- no module over 400 lines, no package folder with more than 10 modules (__init__ and
  __main__ not counted).

Lazy imports inside functions count: a cycle through a function body is still a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("collect", "schema", "analyze", "report")
ALLOWED = {
    "collect": {"collect", "schema"},
    "schema": {"schema"},
    "analyze": {"analyze", "schema"},
    "report": {"report"},
}
MAX_LINES = 400
MAX_MODULES = 10


def modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the project's packages."""
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules that module `name` imports (from x import y counts x.y if a module)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = name.split(".")
                keep = len(parts) - node.level + (path.name == "__init__.py")
                base = ".".join(parts[:keep] + ([base] if base else []))
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        out |= {t for t in targets if t in known and t != name and not name.startswith(t + ".")}
    return out


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imported(name, path, known) for name, path in known.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(edges[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_no_import_cycle() -> None:
    assert cycles(graph()) == []


def test_cycle_finder_finds_a_cycle() -> None:
    """The checker itself can fail: a hand-built loop is found."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_imports_follow_the_stage_order() -> None:
    against = sorted(
        f"{source} -> {target}"
        for source, targets in graph().items()
        for target in targets
        if target.split(".")[0] not in ALLOWED[source.split(".")[0]]
    )
    assert against == []


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
