"""Cells of the report's setup pages: an environment value the services table cuts is marked
and the appendix keeps it whole; the host table has no row for the campaign's own facts
(host 'campaign'); timestamps print to the second, in the tables, the title and the HTML."""

from __future__ import annotations

import pandas as pd

from specsweep.report import commands, sections
from specsweep.report.context import campaign_table
from specsweep.report.data import known_hosts
from specsweep.report.html.views import cell
from specsweep.report.latex import make_environment

SPACED = "--mem-fraction 0.8 --log-level info"
LONG = "x " * 40
COMMAND = f"ARGS='{SPACED}' LONG='{LONG.strip()}' ONE=1 /usr/bin/server --port 8000 --x 1"


def _service(own_flags: str, command: str = COMMAND) -> pd.DataFrame:
    row = {"method": "m", "engine": "sglang", "tp": 1, "gpus": "0", "own_flags": own_flags}
    row |= {"startup_s": 1.0, "state": "stopped", "launch_command": command, "error": None}
    return pd.DataFrame([row])


def _flat(tex: str) -> str:
    return (
        tex.replace("\\allowbreak{}", "").replace("-{}-", "--").replace("\\textquotesingle{}", "'")
    )


def test_an_environment_value_cut_at_a_blank_comes_back_whole() -> None:
    """service_summary's own_flags hold `ARGS='--mem-fraction` (the command split on
    blanks); the table shows the assignment as the command writes it."""
    flat = _flat(sections.services_table(_service("ARGS='--mem-fraction ONE=1 --x 1")))
    assert f"ARGS='{SPACED}' ONE=1 --x 1" in flat


def test_a_long_or_unfound_cut_value_is_marked() -> None:
    shown = commands.whole_env("LONG='x", COMMAND)
    assert shown.endswith(commands.CUT) and len(shown) == commands.ENV_SHOWN + len(commands.CUT)
    assert commands.whole_env("GONE='a", "no such assignment") == "GONE='a" + commands.CUT
    # whole values and flags pass as they are
    assert commands.whole_env("ONE=1 --x 1 --y=Z", COMMAND) == "ONE=1 --x 1 --y=Z"


def test_the_appendix_keeps_the_whole_command() -> None:
    [entry] = sections.launch_commands(_service("ARGS='--mem-fraction"))
    assert f"LONG='{LONG.strip()}'" in _flat(str(entry["command"]))


def _hosts() -> pd.DataFrame:
    facts = {"os": "Debian 12", "cpu_model": "EPYC", "cpu_count": 2, "memory_gb": 7.8}
    empty = dict.fromkeys(facts)
    return pd.DataFrame(
        [
            {"campaign_id": "c", "host": "campaign", **empty, "n_gpus": 0, "n_services": 0},
            {"campaign_id": "c", "host": "local", **facts, "n_gpus": 0, "n_services": 6},
        ]
    )


def test_the_campaigns_own_facts_are_no_host_row() -> None:
    hosts = known_hosts(_hosts())
    assert hosts["host"].tolist() == ["local"]
    row = _hosts().iloc[[0]].assign(n_services=1)  # a host that ran something stays
    assert known_hosts(row)["host"].tolist() == ["campaign"]
    assert known_hosts(pd.DataFrame()).empty


def test_timestamps_print_to_the_second() -> None:
    at = pd.Timestamp("2026-12-05 16:48:32.736504")
    table = str(campaign_table({"campaign_id": "c", "started_at": at, "finished_at": pd.NaT}))
    assert "2026-12-05 16:48:32" in table and ".736504" not in table and "NaT" not in table
    title = make_environment().from_string(r"\date{((( t ))) UTC}").render(t=at)
    assert title == r"\date{2026-12-05 16:48:32 UTC}"
    assert cell(at).text == "2026-12-05 16:48:32"
