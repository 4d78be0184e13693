"""`python -m specsweep`: the same command as the `specsweep` console script."""

from __future__ import annotations

from specsweep.cli import main

if __name__ == "__main__":
    main()
