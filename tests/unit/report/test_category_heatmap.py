"""The category x method heatmaps (report/speculation/categories.py) and the acceptance-by-load
figure (report/speculation/load.py) on hand-built analysis tables (category_pooled,
acceptance_by_load with the columns of analyze/VIEWS.md) added to the report fixture's file;
the PDF builds with both."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from specsweep.report.data import load
from specsweep.report.figures import make_figures
from specsweep.report.speculation import categories, section
from specsweep.report.speculation import load as by_load
from tests.support.fixtures.report import CAMPAIGN
from tests.unit.report.test_report_openloop import with_tables

KEY = {"campaign_id": CAMPAIGN, "engine": "llama.cpp", "tp": 1, "max_tokens": 64}
# (category, method) -> (acceptance, its interval or None, speedup, its interval or None, prompts)
CELLS = {
    ("writing", "dflash"): (3.2, (2.9, 3.5), 1.8, (1.5, 2.1), 10),
    ("writing", "ngram"): (1.4, (1.2, 1.6), 0.9, (0.8, 1.05), 10),
    ("math", "dflash"): (4.1, (3.6, 4.6), 2.3, (1.9, 2.8), 10),
    ("code", "dflash"): (5.0, None, 2.6, None, 2),
    ("code", "ngram"): (2.2, None, 1.1, None, 2),
}


def pooled_rows() -> pd.DataFrame:
    rows = []
    for (cat, method), (acc, aci, s, sci, n) in CELLS.items():
        rows.append({
            **KEY, "method": method, "workloads": "chat, code", "n_windows": 2,
            "category": cat, "is_control": False, "n_prompts": n, "n_runs": 1, "n": n,
            "n_baseline": n, "n_verified": n, "accept_length": acc, "acceptance_gain": acc,
            "acceptance_low": aci[0] if aci else None, "acceptance_high": aci[1] if aci else None,
            "acceptance_reason": None if aci else f"{n} prompts: too few",
            "speedup": s, "ci_low": sci[0] if sci else None, "ci_high": sci[1] if sci else None,
            "ci_reason": None if sci else f"{n} prompts: too few",
        })  # fmt: skip
    aa = {**rows[0], "method": "autoregressive-aa", "is_control": True}
    return pd.DataFrame([*rows, aa])


def load_rows() -> pd.DataFrame:
    """dflash at concurrency 1, 4, 16: acceptance 3.0 flat, step cost 1.5, 2.0, 3.0."""
    rows = []
    for conc, cost in ((1, 1.5), (4, 2.0), (16, 3.0)):
        rows.append({
            **KEY, "workload": "chat", "method": "dflash", "load_kind": "concurrency",
            "load": float(conc), "effective_concurrency": float(conc), "n_prompts": 8, "n": 8,
            "n_verified": 8, "accept_length": 3.0, "acceptance_gain": 3.0, "step_time_s": cost,
            "baseline_token_time_s": 1.0, "step_cost": cost, "speedup": 3.0 / cost,
            "ci_low": None if conc == 16 else 2.5 / cost,
            "ci_high": None if conc == 16 else 3.5 / cost,
            "lowest_load": 1.0, "acceptance_vs_lowest": 1.0, "step_cost_vs_lowest": cost / 1.5,
        })  # fmt: skip
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def cat_db(report_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    tables = {"category_pooled": pooled_rows(), "acceptance_by_load": load_rows()}
    return with_tables(report_db, tmp_path_factory.mktemp("cat") / "c.duckdb", tables)


def test_the_heatmap_draws_every_cell_and_marks_those_without_an_interval() -> None:
    fig = categories.figure(pooled_rows(), (KEY["engine"], KEY["tp"], KEY["max_tokens"]))
    heat = [ax for ax in fig.axes if ax.get_title(loc="left")]  # not the colour bars' axes
    assert [ax.get_title(loc="left") for ax in heat] == [p[3] for p in categories.PANELS]
    acc, speed = heat
    assert [t.get_text() for t in acc.get_yticklabels()] == ["code", "math", "writing"]
    assert [t.get_text() for t in acc.get_xticklabels()] == ["dflash", "ngram"]  # no A/A
    texts = sorted(t.get_text() for t in speed.texts)
    assert texts == ["0.90\n[0.80, 1.05]", "1.10", "1.80\n[1.50, 2.10]", "2.30\n[1.90, 2.80]",
                     "2.60"]  # fmt: skip
    mesh = speed.collections[0]  # seaborn.heatmap's QuadMesh, its colour bar attached
    grid = mesh.get_array()
    assert grid.shape == (3, 2) and grid.mask.tolist() == [[False, False], [False, True],
                                                            [False, False]]  # fmt: skip
    assert grid[2, 1] == pytest.approx(0.9)  # writing x ngram: rows and columns sorted
    assert speed.get_facecolor()[:3] == pytest.approx((0.88,) * 3)  # shows where masked: grey
    hollow = [ln for ax in heat for ln in ax.lines if ln.get_markerfacecolor() == "white"]
    assert len(hollow) == 4  # code's two cells in each panel
    # code is row 0; seaborn's cell (x, y) spans [x, x+1] x [y, y+1], the y axis inverted:
    # the circle sits in the top right corner
    corners = np.vstack([ln.get_xydata() for ln in hollow[:2]])
    assert corners == pytest.approx(np.array([[0.86, 0.2], [1.86, 0.2]]))
    assert speed.get_ylim()[0] > speed.get_ylim()[1]
    assert np.isclose(mesh.norm.vmin * mesh.norm.vmax, 1.0)  # centred on 1x
    assert mesh.norm.vmax == pytest.approx(2.6)  # the largest |log2| is 2.6's (0.9 is nearer 1)
    assert mesh.colorbar is not None and "2\u00d7" in [
        t.get_text() for t in mesh.colorbar.ax.get_yticklabels()
    ]
    plt.close(fig)


def test_an_uncategorized_file_draws_no_heatmap() -> None:
    rows = pooled_rows().assign(category="uncategorized")
    assert categories.groups(rows) == [] and categories.summary(rows) is None


def test_the_load_figure_has_three_panels_and_the_finding(cat_db: Path, tmp_path: Path) -> None:
    data = load(cat_db)
    jobs = dict(section.figure_jobs(data, tmp_path, lambda fig, path: fig))
    assert {"spec-load:0", "spec-category:0"} <= set(jobs)
    fig = jobs["spec-load:0"]()
    acc, cost, speed = fig.axes
    assert list(acc.lines[0].get_ydata()) == [3.0, 3.0, 3.0]
    assert list(cost.lines[0].get_ydata()) == [1.5, 2.0, 3.0]
    hollow = [ln for ln in speed.lines if ln.get_markerfacecolor() == "white"]
    assert [list(ln.get_xdata()) for ln in hollow] == [[16.0]]  # no interval at 16
    plt.close(fig)
    assert by_load.finding(data.acceptance_by_load) == (
        "From the lowest load to the highest, each factor as a multiple of its value at the "
        "lowest load (point estimates): dflash on chat (concurrency 1 to 16): step cost "
        "$\\times$2.00, acceptance $\\times$1.00."
    )


def test_the_section_says_how_many_cells_have_an_interval(cat_db: Path, tmp_path: Path) -> None:
    data = load(cat_db)
    figs = make_figures(data, tmp_path / "figs", workers=1)
    cats = section.section(data, figs)["categories"]
    assert cats["figures"] == [{"name": "spec-category-0.pdf", "key": "max\\_tokens 64"}]
    assert cats["summary"] == (
        "3 of 5 speedup cells have a 95\\% interval. Too few prompts for an interval: code."
    )
