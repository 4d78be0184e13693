"""schema.store.scratch_folder: analyze's temporary folders beside the results file, and the
ones a killed process left, which the next one removes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from specsweep.schema.store import scratch_folder


def test_a_killed_process_folder_is_removed_and_a_live_one_kept(tmp_path: Path) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    left = tmp_path / f".specsweep-itl-{gone}-abc"
    (left / "sub").mkdir(parents=True)
    (left / "sub" / "gaps.f64").write_bytes(b"x" * 64)
    live = tmp_path / f".specsweep-analyze-{os.getppid()}-def"
    live.mkdir()
    other = tmp_path / ".specsweep-notes"  # not one of ours: no pid in its name
    other.mkdir()
    with scratch_folder(tmp_path / "results.duckdb", "analyze") as folder:
        made = Path(folder)
        assert made.parent == tmp_path and made.name.startswith(
            f".specsweep-analyze-{os.getpid()}-"
        )
        assert not left.exists() and live.exists() and other.exists()
    assert not made.exists()
