"""README.md is a short front door, and it and docs/ point only at what the repository holds.

Checked here: every repository path the README names (in a code span or a markdown link)
exists; the README has at most MAX_README_LINES lines; no link in the README or docs/ leaves the
repository (a ``../`` climbing above the root, an absolute filesystem path such as ``/work/...``)
and no page names a path outside it; every relative link in README.md and docs/*.md reaches a
file, and its ``#anchor`` a heading of that file (GitHub's slug rule). The helpers take the
markdown as a string, so each check is also shown failing on hand-made text.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_README_LINES = 260
# Written by the make targets and git-ignored: a README may name them before they exist.
OUTPUT_DIRS = ("results/", "reports/")
# A code span ending so names a file even when its folder is misspelt.
FILE_SUFFIX = re.compile(r"\.(md|py|yaml|yml|sql|sh|toml|png|pdf|json|jsonl|j2|tex|txt|cfg)$")
NOT_A_PATH = re.compile(r"[\s{}<>*$=\[\]()|,'\"]|://")
FENCED = re.compile(r"^(```|~~~)[^\n]*\n.*?^\1[ \t]*$", re.M | re.S)
CODE_SPAN = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"!?\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
OUTSIDE_TEXT = ("/work/", "../shared")
# A markdown file named in plain prose, as in "(DESIGN.md)"; URLs are removed first.
BARE_MD = re.compile(r"(?<![\w/.-])([\w.-]+(?:/[\w.-]+)*\.md)\b")
URL = re.compile(r"[a-z][a-z0-9+.-]*://\S+", re.I)


def _prose(markdown: str) -> str:
    """The markdown without fenced code blocks (a fence's backticks are not a code span)."""
    return FENCED.sub("", markdown)


def _is_external(target: str) -> bool:
    return bool(re.match(r"[a-z][a-z0-9+.-]*:", target, re.I))  # http:, https:, mailto:


def _looks_like_repo_path(token: str, top_level: set[str]) -> bool:
    """A code span names a repository path when it is one word of path characters that ends
    in '/', ends in a file suffix, or starts with a top-level entry of the repository
    (`tokens/J` and `A/A` do not; `/health` is an HTTP path, `~/.cache/...` the user's)."""
    if NOT_A_PATH.search(token) or token.startswith(("/", "~", "-", "#")):
        return False
    if token.startswith("."):  # `.ci/run`, but not `.tar.gz`
        return "/" in token and token.split("/")[0] in top_level
    if token.endswith("/") or FILE_SUFFIX.search(token):
        return True
    return "/" in token and token.split("/")[0] in top_level


def named_paths(markdown: str, root: Path) -> list[str]:
    """Repository paths a page names: code spans that look like paths, relative link
    targets (anchor dropped) and markdown files named in plain prose, in that order;
    generated outputs (OUTPUT_DIRS) left out."""
    top_level = {p.name for p in root.iterdir()}
    prose = _prose(markdown)
    spans = [t for t in CODE_SPAN.findall(prose) if _looks_like_repo_path(t, top_level)]
    links = [t.split("#", 1)[0] for t in LINK.findall(prose)]
    links = [t for t in links if t and not _is_external(t)]
    plain = URL.sub("", LINK.sub("", CODE_SPAN.sub("", prose)))
    bare = BARE_MD.findall(plain)
    return [p for p in spans + links + bare if not p.startswith(OUTPUT_DIRS)]


def missing_paths(markdown: str, root: Path) -> list[str]:
    """Named paths (relative to the repository root) that do not exist under ``root``."""
    return [p for p in named_paths(markdown, root) if not (root / p).exists()]


def escaping_links(markdown: str, page: Path, root: Path) -> list[str]:
    """Link targets that leave the repository, and text naming a place outside it."""
    bad = [t for t in OUTSIDE_TEXT if t in markdown]
    root = root.resolve()
    for target in LINK.findall(_prose(markdown)):
        if _is_external(target) or target.startswith("#"):
            continue
        path = target.split("#", 1)[0]
        resolved = (page.parent / path).resolve()
        if path.startswith("/") or not resolved.is_relative_to(root):
            bad.append(target)
    return bad


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    """Every heading's anchor; a repeated heading gets GitHub's -1, -2 suffixes."""
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*$", _prose(markdown), re.M):
        base = slug(heading)
        n = seen.get(base, 0)
        out.add(base if n == 0 else f"{base}-{n}")
        seen[base] = n + 1
    return out


def _has_anchor(page: Path, anchor: str) -> bool:
    return page.suffix != ".md" or anchor in anchors(page.read_text())


def broken_links(markdown: str, page: Path) -> list[str]:
    """Relative link targets whose file is missing or whose #anchor names no heading there."""
    bad = []
    for target in LINK.findall(_prose(markdown)):
        if _is_external(target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path) if path else page
        if not dest.exists() or (anchor and not _has_anchor(dest, anchor)):
            bad.append(target)
    return bad


def _doc_pages() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


# --- the repository ---------------------------------------------------------------------


def test_readme_names_only_existing_paths():
    assert missing_paths(README.read_text(), ROOT) == []


def test_readme_is_short():
    assert len(README.read_text().splitlines()) <= MAX_README_LINES


@pytest.mark.parametrize("page", [README, *sorted(DOCS.rglob("*.md"))], ids=lambda p: p.name)
def test_no_link_leaves_the_repository(page: Path):
    assert escaping_links(page.read_text(), page, ROOT) == []


@pytest.mark.parametrize("page", [README, *_doc_pages()], ids=lambda p: p.name)
def test_relative_links_resolve(page: Path):
    assert broken_links(page.read_text(), page) == []


# --- the checks themselves, on hand-made text --------------------------------------------


def test_missing_paths_finds_a_bad_path():
    text = (
        "Run `plans/local.yaml` or `plans/nope.yaml`; see [it](docs/nope.md#x), `tokens/J`,\n"
        "`A/A`, `/health`, `~/.cache/specsweep/`, `results/specsweep.duckdb`, `.ci/run`,\n"
        "`.ci/nope`, `.ci/nope STEP`, `.tar.gz`, `collect/nowhere/` and [ok](docs/statistics.md).\n"
        "They follow the scripts (DESIGN.md); see https://x.org/a.md and tests/data/README.md.\n"
        "```\nnot/a/span.md `inside/a/fence.md`\n```\n"
    )
    assert missing_paths(text, ROOT) == [
        "plans/nope.yaml",
        ".ci/nope",
        "collect/nowhere/",
        "docs/nope.md",
        "DESIGN.md",
    ]


def test_missing_paths_in_a_copied_tree(tmp_path: Path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n")
    text = "[a](docs/a.md) and `docs/b.md`"
    assert missing_paths(text, tmp_path) == ["docs/b.md"]
    (tmp_path / "docs" / "b.md").write_text("# B\n")
    assert missing_paths(text, tmp_path) == []


def test_escaping_links_finds_links_out_of_the_root():
    page = ROOT / "docs" / "x.md"
    text = (
        "[up](../README.md) [out](../../etc/passwd) [abs](/work/shared/DESIGN.md) "
        "[web](https://docs.ray.io) [here](#top) see ../shared/STYLE.md"
    )
    assert escaping_links(text, page, ROOT) == [
        "/work/",
        "../shared",
        "../../etc/passwd",
        "/work/shared/DESIGN.md",
    ]


def test_broken_links_checks_files_and_anchors(tmp_path: Path):
    (tmp_path / "b.md").write_text(
        "# Speculation's knobs\n\n## The `load:` block\n\n## Notes\n\n## Notes\n"
    )
    page = tmp_path / "a.md"
    page.write_text("# Top\n")
    text = (
        "[1](b.md) [2](b.md#speculations-knobs) [3](b.md#the-load-block) [4](b.md#notes-1) "
        "[5](b.md#nothing) [6](c.md) [7](#top) [8](#bottom)"
    )
    assert broken_links(text, page) == ["b.md#nothing", "c.md", "#bottom"]
