"""One findings object, three outputs (issue 37, item 3): the PDF's ``.tex``, the HTML report
and the JSON export of one fixture campaign hold the same findings, sentence for sentence,
and page 1 reads in the issue's order: the claims' table, the headline chart, the method, then
the findings (the open-loop and speculation sections' among them).

The outputs are written by the command lines a user runs (`specsweep report --out --html
--findings`, `python -m specsweep export --findings`); the expected sentences come from one
:class:`report.findings.Findings` built here from the same file and rendered with each of
report.text's renderers. The campaign is the report fixture's with the open-loop and
speculation tables of their own tests added; its data (the fixture's HOSTILE description, a
workload renamed to LaTeX and HTML specials) must come out escaped in every output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from specsweep.report import findings
from specsweep.report.data import load
from specsweep.report.text import plain
from tests.support.fixtures.report import CAMPAIGN
from tests.unit.report.test_report_openloop import open_tables, with_tables
from tests.unit.report.test_report_speculation import tables as speculation_tables

ROOT = Path(__file__).resolve().parents[3]
WORKLOAD = "<b>c_1</b> & 100% $x$ \\emph{y}"  # an HTML tag and LaTeX specials, as data


@pytest.fixture(scope="module")
def special_db(report_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("findings-db") / "specsweep.duckdb"
    with_tables(report_db, path, open_tables() | speculation_tables())
    with duckdb.connect(str(path)) as con:
        con.execute("UPDATE speedup SET workload = ? WHERE workload = 'summ'", [WORKLOAD])
    return path


def _cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *argv],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def _between(text: str, start: str, end: str) -> str:
    head = text.index(start) + len(start)
    return text[head : text.index(end, head)]


def _in_order(items: list[str], text: str) -> None:
    at = 0
    for item in items:
        found = text.find(item, at)
        assert found >= 0, item
        at = found + len(item)


def test_specsweep_export_writes_the_findings_json(special_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "out" / "findings.json"
    done = _cli("-m", "specsweep", "export", "--findings", str(out), "--db", str(special_db),
                cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(out)] and not (tmp_path / "reports").exists()
    written = json.loads(out.read_text(encoding="utf-8"))
    found = findings.build(load(special_db, CAMPAIGN))
    assert written["findings_version"] == 2 and written["baseline"] == found.baseline
    assert [s["text"] for s in written["summary"]] == [plain(s) for s in found.summary]
    sp = load(special_db, CAMPAIGN).speedup
    claims = sp[~sp["is_control"].fillna(False).astype(bool)] if "is_control" in sp else sp
    assert len(written["claims"]) == len(claims) > 0
    for claim in written["claims"]:  # numbers stay numbers; the check's verdict where it exists
        assert isinstance(claim["speedup"], float) and isinstance(claim["concurrency"], int)
        assert claim["physics"] in (None, "within bound", "exceeds bound", "unchecked")
        assert isinstance(claim["headline"], bool)
    heads = [c for c in written["claims"] if c["headline"]]
    assert {c["workload"] for c in heads} < {c["workload"] for c in written["claims"]}
    assert all(c["significant"] and c["speedup"] > 1 for c in heads)
    bad = _cli("-m", "specsweep", "export", "--findings", str(out), "--compare", "a", "b",
               cwd=tmp_path)  # fmt: skip
    assert bad.returncode == 2 and "does not apply to --compare" in bad.stderr
