"""Every command README.md and docs/reference.md show runs, in a dry form.

Read from the pages: each line of a code block (fenced or indented) and each code span that
starts with `make`, `specsweep` or `python -m`; a code-block line that starts with `[` or `--`
continues the command above it, and `# ...` is a comment. Then:

- `specsweep SUB ...` and `python -m STAGE [SUB] ...`: `--help` of that command exits 0, its
  usage line names the command as the page writes it (`specsweep report`, never
  `python -m specsweep.report`), and every `--option` the page gives it is in that help;
- `make TARGET [VAR=...]`: `make -n` (print, run nothing) knows the target and exits 0.

The commands run in this process, through the same typer apps the console script and
`python -m` call.
"""

from __future__ import annotations

import importlib
import re
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
PAGES = (ROOT / "README.md", ROOT / "docs" / "reference.md")
FENCED = re.compile(r"^(```|~~~)[^\n]*\n(.*?)^\1[ \t]*$", re.M | re.S)
INDENTED = re.compile(r"(?:^|\n\n)((?:(?: {4}|\t)[^\n]*(?:\n|$))+)")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
COMMAND = re.compile(r"^(?:make|specsweep|python -m [\w.]+)(?: |$)")
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z-]*")
# the stages' typer apps have subcommands (a first word in lower case, not a placeholder)
SUBCOMMANDS = {"collect": True, "analyze": True, "report": False}


def commands(markdown: str) -> list[str]:
    """The command lines a page shows, in page order, without comments, each once."""
    found: list[str] = []
    blocks = [m.group(2) for m in FENCED.finditer(markdown)]
    blocks += [m.group(1) for m in INDENTED.finditer(FENCED.sub("", markdown))]
    for block in blocks:
        for raw in block.splitlines():
            line = raw.split("  #", 1)[0].split(" # ", 1)[0].strip().removeprefix("$ ")
            if COMMAND.match(line):
                found.append(line)
            elif line.startswith(("[", "--")) and found and raw.startswith(" "):
                found[-1] += " " + line  # an option list continued on the next line
    found += [span.strip() for span in CODE_SPAN.findall(markdown) if COMMAND.match(span)]
    return list(dict.fromkeys(found))


def _target(line: str) -> tuple[str, list[str]]:
    """(program, argv up to the options): `specsweep check PLAN` -> ('specsweep', ['check'])."""
    words = line.split()
    if words[0] == "python":
        stage = words[2]
        sub = (
            words[3:4]
            if SUBCOMMANDS.get(stage.removeprefix("specsweep.")) and _is_word(words[3:4])
            else []
        )
        return f"python -m {stage}", sub
    return words[0], words[1:2] if _is_word(words[1:2]) else []


def _is_word(words: list[str]) -> bool:
    return bool(words) and re.fullmatch(r"[a-z][a-z-]*", words[0]) is not None


def run_help(program: str, sub: list[str]) -> tuple[int, str]:
    """`PROGRAM SUB --help` through the typer app the console script or `python -m` runs."""
    if program == "specsweep":
        from specsweep.cli import app
    else:
        app = importlib.import_module(f"{program.split()[-1]}.__main__").app
    result = CliRunner().invoke(app, [*sub, "--help"], prog_name=program, env={"COLUMNS": "200"})
    return result.exit_code, result.output


SHOWN = list(dict.fromkeys(c for page in PAGES for c in commands(page.read_text())))


@pytest.mark.parametrize("line", [c for c in SHOWN if not c.startswith("make")])
def test_shown_command_has_help_with_its_options(line: str) -> None:
    program, sub = _target(line)
    code, text = run_help(program, sub)
    assert code == 0, text
    usage = " ".join([program, *sub])
    assert f"Usage: {usage} " in text, text[:300]
    missing = [o for o in OPTION.findall(line) if o not in text]
    assert not missing, f"{line}: {missing} not in `{usage} --help`"


@pytest.mark.parametrize("line", [c for c in SHOWN if c.startswith("make")])
def test_shown_make_target_runs_dry(line: str) -> None:
    argv = [w.strip("[]") for w in line.split()[1:]]
    done = subprocess.run(
        ["make", "-n", *argv], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr


def test_the_pages_show_the_front_door() -> None:
    """The README's two steps and the reference's every stage command are found (the parser
    itself is checked: a page that showed nothing would pass the tests above)."""
    readme = commands(PAGES[0].read_text())
    assert readme[:3] == ["make collect", "make report", "make test"]
    reference = commands(PAGES[1].read_text())
    subs = {_target(c)[1][0] for c in reference if c.startswith("specsweep ") and _target(c)[1]}
    assert subs >= {"run", "check", "simulate", "provision", "import", "analyze", "compare"}
    assert subs >= {"gate", "export", "remove", "report", "sql"}


def test_commands_parses_blocks_spans_and_continuations() -> None:
    text = (
        "Run `specsweep run PLAN` or `make sql`; `--db` alone is not a command.\n\n"
        "    specsweep run PLAN [--db FILE]   # run\n"
        "        [--phase NAME]...             # only these\n"
        "    make collect PLAN=x.yaml\n\n"
        "```\n$ python -m specsweep.analyze export --out DIR  # files\n```\n"
    )
    assert commands(text) == [
        "python -m specsweep.analyze export --out DIR",
        "specsweep run PLAN [--db FILE] [--phase NAME]...",
        "make collect PLAN=x.yaml",
        "specsweep run PLAN",
        "make sql",
    ]
    assert _target("python -m specsweep.analyze export --out DIR") == (
        "python -m specsweep.analyze",
        ["export"],
    )
    assert _target("python -m specsweep.analyze [--db FILE]") == ("python -m specsweep.analyze", [])
    assert _target("python -m specsweep.report --compare A B") == ("python -m specsweep.report", [])
    assert _target("specsweep gate ...") == ("specsweep", ["gate"])
