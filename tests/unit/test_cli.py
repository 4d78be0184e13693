"""The `specsweep` console command (specsweep/cli.py), run as the installed script.

Each test runs the venv's `specsweep` (pyproject [project.scripts]) in a subprocess: the
forwarding to the stages, their exit codes, the lazy imports that keep `--help` fast, and
`specsweep analyze` after its move to typer.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
COMMANDS = {
    "run",
    "check",
    "simulate",
    "provision",
    "import",
    "analyze",
    "compare",
    "gate",
    "export",
    "remove",
    "compact",
    "report",
    "sql",
}


def specsweep(*argv: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    script = BIN / "specsweep"
    if not script.exists():
        pytest.fail(f"no {script}: pip install -e . (make test installs it)")
    return subprocess.run(
        [str(script), *argv], input=stdin, capture_output=True, text=True, cwd=REPO, timeout=120
    )


def test_help_lists_the_thirteen_commands() -> None:
    done = specsweep("--help")
    assert done.returncode == 0, done.stderr
    # a command's row starts its panel line; wrapped help continues under blanks
    listed = set(re.findall(r"^│ ([a-z]+) {2,}\S", done.stdout, re.M))
    assert listed == COMMANDS


def test_help_imports_no_stage() -> None:
    """`specsweep --help` loads none of the stages or their heavy libraries."""
    code = (
        "import sys; sys.argv = ['specsweep', '--help']\n"
        "from specsweep.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy = {'collect', 'analyze', 'report', 'schema', 'duckdb', 'pandas', 'numpy'}\n"
        "names = {m.removeprefix('specsweep.').split('.')[0] for m in sys.modules}\n"
        "print('LOADED', sorted(names & heavy))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert "LOADED []" in done.stdout, done.stdout[-500:] + done.stderr


def test_check_validates_the_default_plan() -> None:
    done = specsweep("check", "plans/local.yaml")
    assert done.returncode == 0, done.stderr
    assert re.search(r"^plan \S+ is valid: campaign ", done.stdout, re.M)


def test_forwarded_help_names_specsweep() -> None:
    done = specsweep("run", "--help")
    assert done.returncode == 0 and "Usage: specsweep run" in done.stdout, done.stderr


def test_analyze_subcommands_keep_their_exit_codes(tmp_path: Path) -> None:
    """Bad input is 2 through specsweep as through python -m analyze."""
    assert specsweep("compare", "A").returncode == 2  # B missing: a usage error
    gate = specsweep(
        "gate",
        "--db",
        str(tmp_path / "x.duckdb"),
        "--baseline",
        "A",
        "--candidate",
        "B",
        "--max-regression",
        "150%",
    )
    assert gate.returncode == 2 and "--max-regression must lie in" in gate.stderr
    bad = specsweep("export", "--format", "xlsx", "--out", str(tmp_path / "o"))
    assert bad.returncode == 2 and "invalid choice" in bad.stderr
    gone = specsweep("remove", "A", "--db", str(tmp_path / "x.duckdb"), "--yes")
    assert gone.returncode == 2 and "remove: " in gone.stderr and "x.duckdb" in gone.stderr


def test_python_m_analyze_still_works() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "specsweep.analyze", "--help"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "specsweep analyze" in done.stdout
    assert all(name in done.stdout for name in ("export", "compare", "gate", "remove"))


def test_report_forwards_its_arguments() -> None:
    done = specsweep("report", "--help")
    assert done.returncode == 0 and "--compare" in done.stdout, done.stderr
    assert "Usage: specsweep report" in done.stdout and "python -m" not in done.stdout


def test_report_html_takes_an_optional_path(tmp_path: Path) -> None:
    """`--html` alone (last, or before another option) means reports/report.html, as under
    argparse: the command parses and fails only on the missing results file."""
    missing = str(tmp_path / "none.duckdb")
    for argv in (["--html"], ["--html", "--no-pdf"], [f"--html={tmp_path}/r.html", "--no-pdf"]):
        done = specsweep("report", "--db", missing, *argv)
        assert done.returncode == 1, (argv, done.stderr)
        assert done.stderr.strip() == f"report: database not found: {missing}", argv
    bad = specsweep("report", "--db", missing, "--no-pdf")
    assert bad.returncode == 2 and "--no-pdf needs --html" in bad.stderr


def test_sql_runs_piped_sql_on_the_file(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE answer AS SELECT 42 AS value")
    done = specsweep("sql", "--db", str(db), stdin="SELECT value * 10 AS v FROM answer;\n")
    assert done.returncode == 0, done.stderr
    assert re.search(r"\b420\b", done.stdout), done.stdout


def test_sql_refuses_a_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "none.duckdb"
    done = specsweep("sql", "--db", str(missing))
    assert done.returncode == 2 and "no results file" in done.stderr
    assert not missing.exists()  # not created empty by the duckdb CLI
