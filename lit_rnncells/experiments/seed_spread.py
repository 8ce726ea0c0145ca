"""Whether two cells' results differ beyond their seeds' spread: Welch's t-test on the per-seed values.

A comparison over a few seeds orders cells by their means, but two means a few tenths apart with a spread of a
point are not an ordering. The reports (:mod:`.reproduce`), the comparison's ``summary.md`` (:mod:`.report`) and
the leaderboard say an order holds only where the seeds separate it: Welch's unequal-variance t-test
(``scipy.stats.ttest_ind_from_stats``, two-sided) at :data:`ALPHA`. With fewer than two seeds of either cell there
is no spread to test against, and the order rests on the means alone (:func:`welch_p` returns ``None``).

A report's verdict on a paper's ordering of k cells tests its k(k-1)/2 pairs. "Every pair is ordered the paper's
way" needs each pair separated at :data:`ALPHA` on its own: that is an intersection-union test, at level
:data:`ALPHA` with no correction (Berger, *Multiparameter hypothesis testing and acceptance sampling*,
Technometrics 1982). "Some pair is reversed" is a union over the pairs, which one lucky pair in ten would make at
ten times the error rate, so a reversal counts only where its p stays below :data:`ALPHA` after Holm's step-down
correction over the pairs (:func:`holm`; Holm, *A simple sequentially rejective multiple test procedure*, Scand.
J. Statist. 1979).
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import List, Optional, Sequence

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


def holm(p_values: Sequence[Optional[float]]) -> List[Optional[float]]:
    """Holm-adjusted p-values, in the order given: the i-th smallest of the m tested p-values times (m - i + 1),
    kept at least the adjusted value before it and at most 1. A pair below :data:`ALPHA` after adjustment is
    rejected by Holm's procedure at family-wise error :data:`ALPHA`. ``None`` (not tested) stays ``None`` and does
    not count towards m."""
    tested = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    adjusted: List[Optional[float]] = [None] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(tested):
        running = max(running, min(1.0, (len(tested) - rank) * p))
        adjusted[i] = running
    return adjusted


def p_text(p: Optional[float]) -> str:
    """``p = 0.031`` (three decimals; ``p < 0.001`` below that), or why nothing was tested."""
    if p is None:
        return "under 2 seeds: not tested"
    return ("p " if p < 0.001 else "p = ") + p_value(p)


def p_value(p: float) -> str:
    """A p-value to three decimals, ``< 0.001`` below that (for a table cell)."""
    return "< 0.001" if p < 0.001 else f"{p:.3f}"
