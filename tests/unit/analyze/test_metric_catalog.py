"""The metric catalogue: `specsweep analyze` writes schema.metrics.CATALOG into the results
file as metric_catalog; report (which imports nothing of the project) reads each metric's
label from it, falling back to the metric's name only where the table has no row; compare
and gate take a metric's direction from it."""

from __future__ import annotations

from pathlib import Path

import duckdb
import matplotlib.pyplot as plt
import pandas as pd
import pytest

from specsweep.analyze import build
from specsweep.analyze.compare import HIGHER_IS_BETTER
from specsweep.report import charts
from specsweep.report.compare.text import metric_label
from specsweep.report.data import _distribution, read_labels
from specsweep.report.labels import metric_label as label
from specsweep.schema.metrics import CATALOG
from tests.support.analyze_rows import decode_req, write_db


@pytest.fixture(scope="module")
def analysed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("catalog") / "r.duckdb"
    write_db(path, [decode_req(4.0)])
    build.run(path)
    return path


def _labels(path: Path) -> dict[str, str]:
    with duckdb.connect(str(path), read_only=True) as con:
        have = {
            r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()
        }
        return read_labels(con, have)


def test_analyze_writes_the_catalogue(analysed: Path) -> None:
    with duckdb.connect(str(analysed), read_only=True) as con:
        rows = {
            r[0]: r[1:]
            for r in con.execute(
                "SELECT metric, label, unit, direction, formula FROM metric_catalog"
            ).fetchall()
        }
    assert set(rows) == set(CATALOG)
    assert rows["decode_tps"][:3] == ("decode tok/s", "tok/s", "higher")
    assert rows["ttft_s"][:3] == ("TTFT (s)", "s", "lower")
    assert rows["tpot_s"][2] == "lower" and "(e2e_s - ttft_s)" in rows["tpot_s"][3]
    assert rows["accept_length"][2] == "higher"


def test_report_reads_labels_and_falls_back_to_the_name_without_a_row(
    analysed: Path, tmp_path: Path
) -> None:
    assert label(_labels(analysed), "ttft_s") == "TTFT (s)"
    # a file whose catalogue lacks a metric's row: only that one is labelled by its name
    copy = tmp_path / "copy.duckdb"
    copy.write_bytes(analysed.read_bytes())
    with duckdb.connect(str(copy)) as con:
        con.execute("DELETE FROM metric_catalog WHERE metric = 'ttft_s'")
    labels = _labels(copy)
    assert label(labels, "ttft_s") == "ttft_s"
    assert label(labels, "decode_tps") == "decode tok/s"
    # a file analysed before the catalogue existed: every metric by its name
    with duckdb.connect(str(copy)) as con:
        con.execute("DROP TABLE metric_catalog")
    assert _labels(copy) == {}


def test_charts_and_compare_tables_print_the_catalogue_label(analysed: Path) -> None:
    """The box chart's y label is its rows' label (report.data joins metric_catalog onto
    request_distribution); the acceptance chart's comes from the labels it is given; the
    compare table's from the row's label; each falls back to the metric's name."""
    palette = charts.method_palette(["m"])
    fig, ax = plt.subplots()
    charts.plot_ttft_by_method(ax, charts_frame(label="time to first token (s)"), palette)
    assert ax.get_ylabel() == "time to first token (s)"
    charts.plot_ttft_by_method(ax, charts_frame(label=None), palette)
    assert ax.get_ylabel() == "ttft_s"
    summary = pd.DataFrame([{"workload": "chat", "method": "m", "accept_length_tw": 2.5}])
    charts.plot_accept_length_by_workload(ax, summary, palette, labels=_labels(analysed))
    assert ax.get_ylabel() == "acceptance length (tok/step)"
    plt.close(fig)
    assert metric_label(pd.Series({"metric": "tpot_s", "label": "TPOT (s)"})) == "TPOT (s)"
    assert metric_label(pd.Series({"metric": "tpot_s", "label": None})) == "tpot_s"


def test_report_loads_the_box_rows_with_their_labels(analysed: Path) -> None:
    with duckdb.connect(str(analysed), read_only=True) as con:
        have = {
            r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()
        }
        frame = _distribution(con, "c1", have)
    assert dict(zip(frame["metric"], frame["label"])) == {
        "decode_tps": "decode tok/s",
        "ttft_s": "TTFT (s)",
    }


def test_compare_takes_each_direction_from_the_catalogue() -> None:
    for metric, higher in HIGHER_IS_BETTER.items():
        assert higher == (CATALOG[metric].direction == "higher"), metric
    assert HIGHER_IS_BETTER["decode_tps"] and not HIGHER_IS_BETTER["ttft_s_p90"]


def charts_frame(label: str | None) -> pd.DataFrame:
    """request_distribution rows of one method's TTFT box, with a catalogue label."""
    return pd.DataFrame(
        [
            {
                "campaign_id": "c1",
                "method": "m",
                "metric": "ttft_s",
                "n": 5,
                "mean": 0.5,
                "min": 0.1,
                "max": 0.9,
                "p25": 0.3,
                "p50": 0.5,
                "p75": 0.7,
                "iqr": 0.4,
                "whislo": 0.1,
                "whishi": 0.9,
                "label": label,
            }
        ]
    )


def test_every_metric_declares_what_it_needs_and_each_need_exists(analysed: Path) -> None:
    """A metric's `needs` are metrics of the catalogue or columns of the results file (raw
    or analysed), with no cycle; only what is measured needs nothing; goodput is listed."""
    with duckdb.connect(str(analysed), read_only=True) as con:
        columns = {r[0] for r in con.execute("SELECT column_name FROM duckdb_columns()").fetchall()}
        stored = dict(con.execute("SELECT metric, needs FROM metric_catalog").fetchall())
    assert {name: tuple(needs) for name, needs in stored.items()} == {
        m.name: m.needs for m in CATALOG.values()
    }
    assert {name for name, m in CATALOG.items() if not m.needs} == {"ttft_s", "e2e_s"}
    assert CATALOG["goodput_rps"].needs == ("meets_slo", "elapsed_s")
    for m in CATALOG.values():
        unknown = [n for n in m.needs if n not in CATALOG and n not in columns]
        assert not unknown, (m.name, unknown)

    def depth(name: str, seen: tuple[str, ...] = ()) -> int:
        assert name not in seen, f"cycle: {(*seen, name)}"
        inner = [depth(n, (*seen, name)) for n in CATALOG[name].needs if n in CATALOG]
        return 1 + max(inner, default=0)

    assert depth("goodput_rps") == 4  # goodput <- meets_slo <- tpot_s <- ttft_s, e2e_s
    assert all(depth(name) >= 1 for name in CATALOG)
