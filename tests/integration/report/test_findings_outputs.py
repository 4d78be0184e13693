"""One findings object, three outputs (issue 37, item 3): the PDF's ``.tex``, the HTML report
and the JSON export of one fixture campaign hold the same findings, sentence for sentence,
and page 1 reads in the issue's order: the claims' table, the headline chart, the method, then
the findings (the open-loop and speculation sections' among them).

The tests that start real programs (servers, subprocesses, latexmk); the in-process ones, and
the helpers both use, are in tests/unit/report/test_findings_outputs.py."""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

from markupsafe import escape

from specsweep.report import findings
from specsweep.report.data import load
from specsweep.report.findings import table
from specsweep.report.latex import escape_latex
from specsweep.report.text import em, latex, plain
from specsweep.report.text import html as html_text
from tests.support.fixtures.report import CAMPAIGN, needs_latex
from tests.unit.report.test_findings_outputs import WORKLOAD, _between, _cli, _in_order, special_db  # noqa: F401


@needs_latex
def test_the_pdf_the_html_and_the_json_hold_the_same_findings(
    special_db: Path, tmp_path: Path
) -> None:
    pdf, page, doc = tmp_path / "r.pdf", tmp_path / "r.html", tmp_path / "f.json"
    done = _cli("-m", "specsweep.report", "--db", str(special_db), "--out", str(pdf), "--html",
                str(page), "--findings", str(doc), "--workers", "1", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(pdf), str(page), str(doc)]
    found = findings.build(load(special_db, CAMPAIGN))
    assert len(found.method) == 4 and len(found.summary) > 5 and len(found.validity) > 3
    assert any(em(WORKLOAD) in s for s in found.summary)  # the renamed workload's headline
    # the sections' findings are the object's too: open loop, a swept family, the losers
    assert [plain(s).split(":")[0] for s in found.summary[-6:]] == [
        "Open loop on chat",
        "Open loop on rag_2k #1 & 50%",
        "ddtree over budget",
        "draft_simple over n_max",
        "ngram over mode",
        "Where a method is significantly slower than the baseline (Holm, the campaign’s family "
        "of claims; its acceptance gain is then below its step cost), it loses on step cost, not "
        "acceptance",
    ]
    rows, _ = table.rows(found.claims)

    # the PDF's page 1: the claims, the headline chart, the method, then every finding
    tex = pdf.with_suffix(".tex").read_text(encoding="utf-8")
    page1 = _between(tex, "\\section*{Summary of findings}", "\\end{itemize}")
    _in_order(
        [
            *(escape_latex(r["claim"], newline=" ") for r in rows),
            "\\includegraphics[width=\\linewidth,max height=0.36\\textheight]{speedup.pdf}",
            "\\subsection*{Method}\n",
            *(f"{latex(s)}\n\n" for s in found.method),
            "\\subsection*{Findings}\n",
        ],
        page1,
    )
    items = [line for line in page1.splitlines() if line.lstrip().startswith("\\item")]
    assert items == [f"  \\item {latex(s)}" for s in found.summary]
    threats_tex = _between(tex, "\\section{Threats to validity}", "\\end{itemize}")
    _in_order([f"\\item {latex(s)}\n" for s in found.validity], threats_tex)
    assert WORKLOAD not in tex and "\\textless{}b\\textgreater{}c\\_1" in page1

    # the HTML: the same table, chart, method and lists, in the same order
    body = page.read_text(encoding="utf-8")
    top = _between(body, '<section id="findings">', "</section>")
    cells = re.findall(r"<tr>(.*?)</tr>", _between(top, "<tbody>", "</tbody>"), re.S)
    assert [re.findall(r"<td>(.*?)</td>", c) for c in cells] == [
        [str(escape(r[k])) for k in table.HEADERS]
        for r in rows  # as jinja2's autoescape
    ]
    order = ["<tbody>", "<h3>Method</h3>", '<ul class="findings">']
    if shutil.which("pdftocairo"):  # without it the page has no figures (docs/html-report.md)
        order.insert(1, '<figure id="fig-speedup">')
        assert body.count('id="fig-speedup"') == 1  # not a second time under Figures
    _in_order(order, top)
    method = re.findall(r'<p class="method">(.*?)</p>', top, re.S)
    assert method == [str(html_text(s)) for s in found.method]
    lists = re.findall(r'<ul class="findings">\n(.*?)</ul>', body, re.S)
    items = [re.findall(r"<li>(.*?)</li>", block, re.S) for block in lists[:2]]
    assert items == [[str(html_text(s)) for s in found.summary],
                     [str(html_text(s)) for s in found.validity]]  # fmt: skip
    assert WORKLOAD not in body and html.escape(WORKLOAD, quote=False) in lists[0]
    assert [html.unescape(re.sub(r"</?(em|strong|code)>", "", i)) for i in items[0]] == [
        plain(s) for s in found.summary
    ]

    # the JSON: the plain text of every sentence, the claims with their numbers
    written = json.loads(doc.read_text(encoding="utf-8"))
    assert [s["text"] for s in written["method"]] == [plain(s) for s in found.method]
    assert [s["text"] for s in written["summary"]] == [plain(s) for s in found.summary]
    assert [s["text"] for s in written["validity"]] == [plain(s) for s in found.validity]
    assert [s["marked"] for s in written["summary"]] == found.summary
    assert written["claims"] == found.claims and written["campaign_id"] == CAMPAIGN
