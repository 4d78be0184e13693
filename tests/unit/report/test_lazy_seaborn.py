"""seaborn is imported by the category heatmap's figure worker only
(report/speculation/categories.py, docs/decisions.md): importing report, every module under it
and building the figure jobs loads no seaborn; drawing the heatmap does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

# Imports every module of the report package (its __main__ aside: it would run the report),
# then prints whether seaborn is loaded; then draws one heatmap and prints it again.
PROBE = """
import importlib, pkgutil, sys
import specsweep.report as report
names = [m.name for m in pkgutil.walk_packages(report.__path__, "specsweep.report.")
         if not m.name.endswith("__main__")]
for name in names:
    importlib.import_module(name)
print("MODULES", len(names), "specsweep.report.speculation.categories" in names)
print("AFTER IMPORT", "seaborn" in sys.modules)
from tests.unit.report.test_category_heatmap import KEY, pooled_rows
from specsweep.report.speculation import categories
categories.groups(pooled_rows()), categories.summary(pooled_rows())
print("AFTER SUMMARY", "seaborn" in sys.modules)
categories.figure(pooled_rows(), (KEY["engine"], KEY["tp"], KEY["max_tokens"]))
print("AFTER DRAWING", "seaborn" in sys.modules)
"""


def test_only_drawing_the_heatmap_imports_seaborn() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    modules = next(ln for ln in lines if ln.startswith("MODULES")).split()
    assert int(modules[1]) > 20 and modules[2] == "True"  # the walk found the package
    assert "AFTER IMPORT False" in lines
    assert "AFTER SUMMARY False" in lines  # the section's text needs no seaborn either
    assert "AFTER DRAWING True" in lines  # the probe can see seaborn when it is there
