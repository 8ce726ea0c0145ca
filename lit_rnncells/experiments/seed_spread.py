"""Whether two cells' results differ beyond their seeds' spread: Welch's t-test on the per-seed values.

A comparison over a few seeds orders cells by their means, but two means a few tenths apart with a spread of a
point are not an ordering. The reports (:mod:`.reproduce`), the comparison's ``summary.md`` (:mod:`.report`) and
the leaderboard say an order holds only where the seeds separate it: Welch's unequal-variance t-test
(``scipy.stats.ttest_ind_from_stats``, two-sided) at :data:`ALPHA`, each pair tested on its own (no correction
for the number of pairs). With fewer than two seeds of either cell there is no spread to test against, and the
order rests on the means alone (:func:`welch_p` returns ``None``).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Optional, Sequence

ALPHA = 0.05  # two-sided: p below it separates two cells


@dataclass(frozen=True)
class SeedResult:
    """One cell's metric over its seeds: mean, sample standard deviation (``None`` for one seed) and count."""

    mean: float
    std: Optional[float]
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> "SeedResult":
        """The mean, sample standard deviation and count of per-seed ``values`` (at least one)."""
        return cls(statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else None, len(values))


def welch_p(a: SeedResult, b: SeedResult) -> Optional[float]:
    """Two-sided p-value of Welch's t-test that ``a`` and ``b`` have equal means; ``None`` below two seeds each.

    Seeds that all gave the same value (standard deviation 0 on both sides) have no spread: p is 0 when the means
    differ, 1 when they are equal."""
    if a.n < 2 or b.n < 2 or a.std is None or b.std is None:
        return None
    if a.std == 0 and b.std == 0:
        return 1.0 if a.mean == b.mean else 0.0
    from scipy.stats import ttest_ind_from_stats

    p = float(ttest_ind_from_stats(a.mean, a.std, a.n, b.mean, b.std, b.n, equal_var=False).pvalue)
    return 1.0 if math.isnan(p) else p


def separated(a: SeedResult, b: SeedResult, alpha: float = ALPHA) -> Optional[bool]:
    """Whether the seeds separate ``a`` from ``b`` (p < ``alpha``); ``None`` when there is no spread to test."""
    p = welch_p(a, b)
    return None if p is None else p < alpha


def p_text(p: Optional[float]) -> str:
    """``p = 0.031`` (three decimals; ``p < 0.001`` below that), or why nothing was tested."""
    if p is None:
        return "under 2 seeds: not tested"
    return ("p " if p < 0.001 else "p = ") + p_value(p)


def p_value(p: float) -> str:
    """A p-value to three decimals, ``< 0.001`` below that (for a table cell)."""
    return "< 0.001" if p < 0.001 else f"{p:.3f}"
