"""README.md is a short front door, and it and docs/ point only at what the repository holds.

Checked here: every repository path that README.md and docs/*.md name exists (in a code span, a
markdown link or a markdown file named in prose; the rules are `named_paths`'s); the README has
at most MAX_README_LINES lines; no link in the README or docs/ leaves the repository (a ``../``
climbing above the root, an absolute filesystem path such as ``/work/...``) and no page names a
path outside it; every relative link in README.md and docs/*.md reaches a file, and its
``#anchor`` a heading of that file (GitHub's slug rule). The dated pages in docs/measurements/
record what was true on their day and are not held to today's tree. The helpers take the
markdown as a string, so each check is also shown failing on hand-made text.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_README_LINES = 260
# A code span ending so names a file even when its folder is misspelt.
FILE_SUFFIX = re.compile(r"\.(md|py|yaml|yml|sql|sh|toml|png|pdf|json|jsonl|j2|tex|txt|cfg)$")
# Suffixes of the files this repository holds: a bare name (no folder) ending so is one of ours
# (`config.json`, `build.json` are a model's or the cache's files, never checked bare).
SOURCE_SUFFIX = re.compile(r"\.(md|py|yaml|yml|sql|sh|toml|j2|tex)$")
NOT_A_PATH = re.compile(r"[\s{}<>*$=\[\]()|,'\"]|://")
# Placeholders stand for a name: `analyze/sql/NN_name.sql`, `YYYY-MM-DD-what.md`, `DIR/x.json`.
PLACEHOLDER = re.compile(r"(?<![A-Za-z])(YYYY|NN|DIR|PATH|FILE)(?![a-z])")
FENCED = re.compile(r"^(```|~~~)[^\n]*\n.*?^\1[ \t]*$", re.M | re.S)
# an indented code block: a paragraph whose first line starts with 4 spaces or a tab
INDENTED = re.compile(r"(?:^|\n\n)(?:(?: {4}|\t)[^\n]*(?:\n|$))+")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"!?\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
OUTSIDE_TEXT = ("/work/", "../shared")
# A markdown file named in plain prose, as in "(DESIGN.md)"; URLs are removed first.
BARE_MD = re.compile(r"(?<![\w/.-])([\w.-]+(?:/[\w.-]+)*\.md)\b")
URL = re.compile(r"[a-z][a-z0-9+.-]*://\S+", re.I)
# Names that look like ours but are not, each with why. Keep it short: a stale name is fixed
# in the page, never listed here.
NOT_OURS = {
    "request_stats.py": "guidellm's module, named in docs/metrics.md's comparison",
    "docs/metrics_reference.md": "AIPerf's page, named in docs/metrics.md's sources",
    "ct200-qwen36-cluster.yaml": "the copy of plans/ct200-qwen36.yaml docs/cluster.md has the "
    "user make",
}


@cache
def _ignored_folders(root: Path) -> tuple[str, ...]:
    """Folders .gitignore names (`results/`, `reports/`, `device/`): written by the make
    targets and the scripts, a page may name them (and what is in them) before they exist."""
    ignore = root / ".gitignore"
    lines = ignore.read_text().splitlines() if ignore.exists() else []
    return tuple(line.strip() for line in lines if line.strip().endswith("/"))


def _prose(markdown: str) -> str:
    """The markdown without code blocks, fenced or indented (commands and plan examples: a
    fence's backticks are not a code span, and an example's paths are the user's)."""
    return INDENTED.sub("\n\n", FENCED.sub("", markdown))


def _blocks(prose: str) -> list[str]:
    """Paragraphs and list items, and each table row on its own: the context in which a bare
    file name (`config.py`) is read against the folders named beside it."""
    out = []
    for para in re.split(r"\n\s*\n", prose):
        out += re.split(r"\n(?=\s*(?:\||[-*] |\d+\. ))", para)
    return out


def _is_external(target: str) -> bool:
    return bool(re.match(r"[a-z][a-z0-9+.-]*:", target, re.I))  # http:, https:, mailto:


def _looks_like_path(token: str) -> bool:
    """A code span may be a path: one word of path characters, no placeholder, that ends in
    '/', ends in a file suffix or holds a '/' (`tokens/J` and `A/A` are then ruled out by
    where they would resolve: `_resolve`); `/health` is an HTTP path, `~/.cache/...` the
    user's, `.tar.gz` a suffix."""
    if NOT_A_PATH.search(token) or PLACEHOLDER.search(token) or token in NOT_OURS:
        return False
    if token.startswith(("/", "~", "-", "#")) or (token.startswith(".") and "/" not in token):
        return False
    return token.endswith("/") or bool(FILE_SUFFIX.search(token)) or "/" in token


def _resolve(token: str, page_dir: Path, root: Path, folders: list[Path]) -> list[Path] | None:
    """Where a path-like token may point, any one of which must exist; None when it is not a
    path of this repository. With a folder: from the page (`../x`, or a first part that is an
    entry of the page's folder: `measurements/...` in docs/) or from the root (a first part
    that is a top-level entry); another project's path (`vllm/config/speculative.py`) is not
    ours. A bare name (`config.py`, `traces/`): in the folders the same row or paragraph
    names, else anywhere in the repository; bare, only our files' suffixes are checked."""
    head, _, rest = token.partition("/")
    if token.startswith(("../", "./")):
        return [page_dir / token]
    if rest:
        if (page_dir / head).exists() and page_dir != root:
            return [page_dir / token]
        return [root / token] if (root / head).exists() or head.startswith(".") else None
    if not (token.endswith("/") or SOURCE_SUFFIX.search(token)):
        return None
    if folders:
        return [page_dir / token, root / token, *(f / token for f in folders)]
    return [page_dir / token, root / token, *_everywhere(root, token.rstrip("/"))]


@cache
def _everywhere(root: Path, name: str) -> tuple[Path, ...]:
    """Every file or folder of the repository called name (git-ignored folders left out)."""
    skip = {".git", ".venv", "__pycache__", *(d.rstrip("/") for d in _ignored_folders(root))}
    found = []
    for path in root.rglob(name):
        if not skip.intersection(path.relative_to(root).parts):
            found.append(path)
    return tuple(found)


def named_paths(markdown: str, root: Path, page: Path | None = None) -> list[tuple[str, list]]:
    """The repository paths a page names, each with the places it may point to: code spans
    that look like paths (read against the folders named in the same row or paragraph),
    relative link targets (anchor dropped) and markdown files named in plain prose, in that
    order; what lies in a git-ignored folder (`results/`) left out."""
    page_dir = (page or root / "README.md").parent
    prose = _prose(markdown)
    out: list[tuple[str, list]] = []
    for block in _blocks(prose):
        spans = [t for t in CODE_SPAN.findall(block) if _looks_like_path(t)]
        folders = [root / t for t in spans if t.endswith("/") and (root / t).is_dir()]
        for token in spans:
            places = _resolve(token, page_dir, root, folders)
            if places is not None:
                out.append((token, places))
    for target in LINK.findall(prose):
        path = target.split("#", 1)[0]
        if path and not _is_external(path):
            out.append((path, [page_dir / path]))
    plain = URL.sub("", LINK.sub("", CODE_SPAN.sub("", prose)))
    for name in BARE_MD.findall(plain):
        if name not in NOT_OURS:
            out.append((name, [page_dir / name, root / name]))
    ignored = _ignored_folders(root)
    return [(t, ps) for t, ps in out if not t.lstrip("./").startswith(ignored)]


def missing_paths(markdown: str, root: Path, page: Path | None = None) -> list[str]:
    """Named paths none of whose places exists (relative to ``page``'s folder, default the
    root)."""
    return [
        t for t, places in named_paths(markdown, root, page) if not any(map(Path.exists, places))
    ]


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


@pytest.mark.parametrize("page", _doc_pages(), ids=lambda p: p.name)
def test_docs_name_only_existing_paths(page: Path):
    assert missing_paths(page.read_text(), ROOT, page) == []


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


def test_missing_paths_reads_a_docs_page_in_its_context():
    """Bare names are read against the folders of their row; a page's own folder counts;
    commands, plan examples, URLs, placeholders, other projects' and git-ignored paths are
    never repository paths."""
    page = ROOT / "docs" / "x.md"
    text = (
        "| `collect/cluster/` | the driver (`driver.py`), its model (`config.py`) |\n"
        "| `schema/` | DDL (`ddl.sql`) |\n\n"
        "See `measurements/nope.md`, `../schema/ddl.sql`, `plan-guide.md`, `sglang.py`,\n"
        "`nowhere.py`, `config.json`, `vllm/config/speculative.py`, `analyze/sql/NN_name.sql`,\n"
        "`YYYY-MM-DD-what.md`, `device/sharegpt`, `https://x.org/a/b.md` and https://x.org/c.md.\n"
        "\n    specsweep run plans/nope.yaml --db `results/x.duckdb`\n\n"
        "```yaml\nmodel: `/models/x.gguf`\ntrace: `plans/traces/nope.jsonl`\n```\n"
    )
    assert missing_paths(text, ROOT, page) == ["config.py", "measurements/nope.md", "nowhere.py"]


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
