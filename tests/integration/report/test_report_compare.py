"""`specsweep report --compare A B`: the compare PDF built with latexmk from the tables that
`specsweep compare A B` stores, on the hand-made campaigns of
tests/unit/analyze/test_analyze_compare.py (B's ngram 40% slower, engine.version 0.29 -> 0.30);
hostile plan and environment strings are escaped; a pair never stored (or stored by an older
specsweep, with issue 24's drift column) exits 1 saying which command stores it; the Holm and
start-variance columns, the service-start sentence and the prompts section are shown. The
verdict sentence is checked on hand-built rows.

The tests that start real programs (servers, subprocesses, latexmk); the in-process ones, and
the helpers both use, are in tests/unit/report/test_report_compare.py."""

from __future__ import annotations

from pathlib import Path

from tests.unit.analyze.test_analyze_compare import _compare, _db, _open_db
from tests.unit.report.test_report_compare import PLAN, _report, stored  # noqa: F401


def test_the_pdf_names_the_slowdown_and_the_environment_change(
    stored: Path, tmp_path: Path
) -> None:
    out = tmp_path / "compare.pdf"
    done = _report(stored, out)
    assert done.returncode == 0, done.stderr
    assert out.read_bytes().startswith(b"%PDF") and out.stat().st_size > 10_000
    first = done.stdout.splitlines()[0]
    # decode and TPOT of ngram; TTFT has no spread, the p90s are point estimates
    assert (
        first.startswith(
            "B is slower: 2 of 10 matched metrics are significantly worse, "
            "none better (Holm-adjusted); the largest decode-speed change is "
            "ngram chat 256 c=1 decode tok/s "
        )
        and "(-40%, 95% CI [" in first
    )
    text = " ".join(out.with_suffix(".tex").read_text().split())
    # the t interval of 0.6 with B's jitter: exp(ln 0.6 -/+ 2.571 * 0.0118) = 0.582, 0.618
    assert r"ngram chat 256 c=1 decode tok/s" in text and r"(-40\%, 95\% CI {[}-42\%" in text
    assert "p Holm" in text and "point estimate" in text  # the p90 rows
    assert "start sd" in text and "0.0\\%" in text  # every start alike: sd 0
    assert "for 2 tested change(s) the start variance is pooled from every configuration" in text
    assert "4 change(s) have no interval, none of them because a side has one start" in text
    assert "chat: not checked (a plan does not define the workload)" in text
    assert r"\textbf{0.29~$\rightarrow$~0.30} on gpu1: \texttt{engine.version}" in text
    assert "decode-ratio.pdf" in text  # the chart
    assert "Measured in B only, 2 window(s):" in text and "ngram code 256 c=1" in text
    # each campaign's own speedup: 1.50 in A, 1.20 in B, 0.80 B/A
    assert "autoregressive" not in text.split("own baseline}")[1].split("section")[0]
    assert "ngram chat 256 c=1&1.50&0.90&0.60" in text


def test_an_open_loop_comparison_names_its_load(tmp_path: Path) -> None:
    """B's TTFT 1.5x A's at 2 req/s: the verdict counts it, the changes table names the
    window by its load, the ramp only B measured is listed; no closed-loop window: no chart."""
    db = _open_db(tmp_path)
    assert _compare(db).returncode == 0
    out = tmp_path / "open.pdf"
    done = _report(db, out)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].startswith(
        "B is worse: 1 of 5 matched metrics are significantly worse, none better "
        "(Holm-adjusted); the largest change is autoregressive chat 256 poisson 2 rps TTFT "
        "(s) 0.115 -> 0.17"
    )
    assert "(+50%, 95% CI [" in done.stdout.splitlines()[0]
    text = " ".join(out.with_suffix(".tex").read_text().split())
    assert "autoregressive chat 256 poisson 2 rps" in text and "TTFT (s)" in text
    assert "Measured in B only, 1 window(s):" in text
    assert "autoregressive chat 256 poisson linear ramp 0.5-2 rps" in text
    assert "No matched closed-loop window has a decode-speed figure" in text


def test_plan_and_environment_strings_are_escaped(stored: Path, tmp_path: Path) -> None:
    out = tmp_path / "compare.pdf"
    assert _report(stored, out).returncode == 0  # latexmk accepted every hostile string
    text = out.with_suffix(".tex").read_text()
    assert r"nightly\_\%\&\#\{x\}" in text and PLAN not in text
    for raw in (r"\input{/etc/passwd}", r"\write18{", r"\def\x", r"\end{verbatim}", "100% #"):
        assert raw not in text
    assert r"100\% \# \$x\$ \& y\_z" in text


def test_a_pair_never_stored_exits_1_with_the_command(stored: Path, tmp_path: Path) -> None:
    done = _report(stored, tmp_path / "c.pdf", "B", "A")  # (A, B) is stored, (B, A) is not
    assert done.returncode == 1
    assert "run specsweep compare B A first" in done.stderr
    bare = _db(tmp_path, 1.0)  # analysed, never compared: no compare_* table at all
    done = _report(bare, tmp_path / "c.pdf")
    assert done.returncode == 1 and "run specsweep compare A B first" in done.stderr
    assert not (tmp_path / "c.pdf").exists()
