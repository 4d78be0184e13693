"""Page 1's table of claims (report/findings/table.py) on hand-built claims, shaped as
Findings.claims: the cells, the order (headlines, then significant, then the rest, by Holm p)
and the cap."""

from __future__ import annotations

from typing import Any

from specsweep.report.findings import table


def _claim(method: str, p: float | None, **kw: Any) -> dict[str, Any]:
    base = {
        "engine": "llama.cpp",
        "tp": 1,
        "workload": "chat",
        "max_tokens": 64,
        "concurrency": 1,
        "method": method,
        "speedup": 1.25,
        "ci_low": 1.1,
        "ci_high": 1.4,
        "sim_ci_low": 1.0,
        "sim_ci_high": 1.6,
        "p_holm": p,
        "n_family": 6,
        "significant": p is not None and p < 0.05,
        "physics": None,
        "headline": False,
    }
    return base | kw


def test_cells_say_claim_interval_family_and_check() -> None:
    head = _claim("a", 0.004, headline=True, physics="within bound")
    rows, left_out = table.rows([head])
    assert left_out == 0 and list(rows[0]) == list(table.HEADERS)
    assert rows[0] == {
        "claim": "a on chat, max_tokens 64, conc. 1: 1.25\u00d7 (headline)",
        "interval": "1.00\u20131.60 (sim.)",  # picked after looking: the simultaneous one
        "family": "significant (p 0.0040)",
        "check": "yes",
    }
    assert table.headers([head])["family"] == "family: Holm over m = 6"
    plain = table.rows([_claim("b", 0.3)])[0][0]
    assert plain["interval"] == "1.10\u20131.40" and plain["check"] == "\u2013"
    assert plain["family"] == "not significant (p 0.30)"
    none = table.rows([_claim("c", None, ci_low=None, ci_high=None)])[0][0]
    assert none["interval"] == "none" and none["family"] == "not tested"
    # claims adjusted in separate families (a file analysed before one family per campaign)
    apart = [_claim("d", 0.01), _claim("e", 0.02, n_family=3)]
    assert table.headers(apart) == table.HEADERS
    assert [r["family"] for r in table.rows(apart)[0]] == [
        "significant (p 0.010, m = 6)",
        "significant (p 0.020, m = 3)",
    ]
    checks = [table.check(_claim("d", 0.01, physics=v)) for v in table.CHECK]
    assert checks == ["yes", "no", "not checked"]


def test_headlines_come_first_then_significant_then_the_rest_by_holm_p() -> None:
    claims = [
        _claim("late", 0.6),
        _claim("sig2", 0.03),
        _claim("head", 0.04, headline=True),
        _claim("sig1", 0.01),
        _claim("early", 0.2),
    ]
    rows, left_out = table.rows(claims)
    assert [r["claim"].split(" ")[0] for r in rows] == ["head", "sig1", "sig2", "early", "late"]
    assert left_out == 0
    rows, left_out = table.rows(claims, limit=2)
    assert len(rows) == 2 and left_out == 3


def test_engine_and_tp_name_the_claim_where_the_campaign_ran_several() -> None:
    rows, _ = table.rows([_claim("a", 0.01), _claim("a", 0.01, engine="vllm", tp=2)])
    assert [r["claim"] for r in rows] == [
        "a on chat, llama.cpp TP1, max_tokens 64, conc. 1: 1.25\u00d7",
        "a on chat, vllm TP2, max_tokens 64, conc. 1: 1.25\u00d7",
    ]
