"""The report labels the baseline the analysis compared against (issue 26), not a hard-coded
"autoregressive": analysis_params.baseline first, then the campaign's plan baseline, then
"autoregressive" only for a file that names neither."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from matplotlib import colors as mcolors

from specsweep.analyze import build as analyze_build
from specsweep.report.build import render_tex
from specsweep.report.charts import COLORBLIND
from specsweep.report.context import build_context
from specsweep.report.data import load
from specsweep.schema.store import DDL
from tests.support.fixtures.report import _meta, altered_copy, raw_requests

OTHER = "plain-ar"  # not "autoregressive", and sorts after the other methods
FIRST = mcolors.to_rgb(COLORBLIND[0])  # the baseline's colour
FIGURES = dict.fromkeys(
    ["speedup", "accept", "decode_tps", "ttft", "throughput", "concurrency", "agentic"]
)


@pytest.fixture(scope="module")
def analysed_other(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report fixture's raw rows with the baseline method named ``plain-ar`` (the plan's
    campaigns row still says "autoregressive"), through the real analyze with
    ``baseline="plain-ar"``."""
    path = tmp_path_factory.mktemp("baseline") / "raw.duckdb"
    req = raw_requests(agentic=False)
    for col in ("method", "config_id", "service_id", "window_id", "request_id"):
        req[col] = req[col].str.replace("autoregressive", OTHER, regex=False)
    with duckdb.connect(str(path)) as con:
        con.execute(DDL.read_text())
        _meta(con)
        con.execute(  # every round's start: svc-plain-ar, svc-plain-ar/run2, ...
            "UPDATE services SET method = ?, config_id = ?, "
            "service_id = replace(service_id, 'autoregressive', ?) "
            "WHERE method = 'autoregressive'",
            [OTHER, f"cfg-{OTHER}", OTHER],
        )
        con.register("req_df", req)
        con.execute("INSERT INTO requests BY NAME SELECT * FROM req_df")
    analyze_build.run(path, baseline=OTHER)
    return path


def test_the_report_uses_the_baseline_analyze_used(analysed_other: Path) -> None:
    data = load(analysed_other)
    assert data.baseline == OTHER
    # baseline first in the palette: it gets the first colour
    assert data.palette[OTHER] == FIRST
    # the analysis did compare against plain-ar (so the labels below are the true ones)
    assert not data.speedup.empty and OTHER not in set(data.speedup["method"])
    tex = render_tex(build_context(data, FIGURES))
    assert f"baseline: \\emph{{{OTHER}}}" in tex
    assert "baseline: \\emph{autoregressive}" not in tex


def test_without_analysis_params_the_campaigns_baseline(
    analysed_other: Path, tmp_path: Path
) -> None:
    path = altered_copy(
        analysed_other,
        tmp_path / "no-params.duckdb",
        "DROP TABLE analysis_params",
        "UPDATE campaign_summary SET baseline = 'plan-base'",
    )
    assert load(path).baseline == "plan-base"


def test_a_file_naming_no_baseline_falls_back_to_autoregressive(
    analysed_other: Path, tmp_path: Path
) -> None:
    path = altered_copy(
        analysed_other,
        tmp_path / "neither.duckdb",
        "DROP TABLE analysis_params",
        "ALTER TABLE campaign_summary DROP COLUMN baseline",
    )
    data = load(path)
    assert data.baseline == "autoregressive"
    assert data.palette[OTHER] != FIRST  # no longer first: sorted among the others


def test_an_explicit_baseline_wins(analysed_other: Path) -> None:
    assert load(analysed_other, baseline="dflash").baseline == "dflash"
