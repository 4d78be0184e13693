"""Metric labels for tables and charts, from the ``metric_catalog`` table analyze writes
(schema.metrics.CATALOG; docs/metrics.md). report imports nothing of the project, so the
labels travel through the DuckDB file: :func:`report.data.read_labels` reads them into
``ReportData.labels`` (and joins them onto ``request_distribution``'s rows), and every table
or chart that names a metric asks :func:`metric_label`."""

from __future__ import annotations

from collections.abc import Mapping

Labels = Mapping[str, str] | None  # metric -> label, metric_catalog's


def metric_label(labels: Labels, metric: str) -> str:
    """The catalogue's label of metric; the metric's own name when the catalogue has no row
    for it (a file analysed before the catalogue existed, or a metric it does not list)."""
    found = (labels or {}).get(metric)
    return found if isinstance(found, str) and found else metric
