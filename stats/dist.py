"""The quantiles and tail probabilities of the t, F, chi-square and normal distributions that
specsweep's intervals and tests use, from scipy.special's C functions, and the one root
finder they need.

Why not scipy.stats: importing it costs about 0.5 s (it pulls in most of scipy), a quarter of
a small campaign's whole analysis; scipy.special holds the same functions (scipy.stats'
distributions call them) and imports in a fraction of that. tests/unit/stats/test_dist.py
checks each against scipy.stats on a grid. Arguments are scalars or numpy arrays; a t with
infinite degrees of freedom is the normal. scipy.optimize (0.3 s to import) is imported
only when `root` is first called: most analyses never need it.
"""

from __future__ import annotations

from collections.abc import Callable

from scipy import special


def t_ppf(q: float, df: float) -> float:
    """The q quantile of Student's t with df degrees of freedom."""
    return special.stdtrit(df, q)


def t_sf(x: float, df: float) -> float:
    """P(T > x) for Student's t with df degrees of freedom."""
    return special.stdtr(df, -x)


def t_isf(p: float, df: float) -> float:
    """The x with P(T > x) = p for Student's t with df degrees of freedom."""
    return -special.stdtrit(df, p)


def f_ppf(q: float, df_num: float, df_den: float) -> float:
    """The q quantile of the F distribution with (df_num, df_den) degrees of freedom."""
    return special.fdtri(df_num, df_den, q)


def chi2_ppf(q: float, df: float) -> float:
    """The q quantile of the chi-square distribution with df degrees of freedom."""
    return special.chdtri(df, 1 - q)


def norm_ppf(q: float) -> float:
    """The q quantile of the standard normal."""
    return special.ndtri(q)


def norm_sf(x: float) -> float:
    """P(Z > x) for the standard normal."""
    return special.ndtr(-x)


def root(f: Callable[[float], float], a: float, b: float, xtol: float = 2e-12) -> float:
    """A root of f between a and b, where f changes sign (scipy's brentq)."""
    from scipy.optimize import brentq  # noqa: PLC0415 - see the module's docstring

    return float(brentq(f, a, b, xtol=xtol))
