"""The A/A control's one definition: a second start of the baseline, compared with it.

A plan with `aa_control: true` measures the baseline again as a method of its own, started
as a separate service, so that the analysis can compare the baseline with itself: the spread
between the two starts is the campaign's noise floor (analyze.stats.service_noise). collect
names the control and analyze recognises it by this name.
"""

from __future__ import annotations

AA_SUFFIX = "-aa"


def aa_control_name(baseline: str) -> str:
    """The A/A control method's name for `baseline` (e.g. 'autoregressive-aa')."""
    return f"{baseline}{AA_SUFFIX}"
