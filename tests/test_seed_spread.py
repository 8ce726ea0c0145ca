"""Whether two cells differ beyond their seeds' spread (Welch's t-test), and how the reports use it."""
from __future__ import annotations

import math
import statistics

import pytest

from lit_rnncells.experiments.seed_spread import SeedResult, holm, p_text, separated, welch_p


def _seeds(*values: float) -> SeedResult:
    seeds = SeedResult.of(values)
    assert seeds == SeedResult(statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else None,
                               len(values))
    return seeds


def test_welch_p_is_the_two_sided_student_t_tail_computed_by_hand():
    """Equal variances and counts give Welch's df = 2n - 2 = 4, where Student's t has a closed form:
    two-sided p = 1 - x (3 - x^2) / 2 with x = |t| / sqrt(4 + t^2)."""
    a, b = _seeds(1.0, 2.0, 3.0), _seeds(4.0, 5.0, 6.0)
    t = (a.mean - b.mean) / math.sqrt(a.std ** 2 / 3 + b.std ** 2 / 3)
    x = abs(t) / math.sqrt(4 + t * t)
    assert welch_p(a, b) == pytest.approx(1 - x * (3 - x * x) / 2, rel=1e-9)
    assert welch_p(a, b) == pytest.approx(welch_p(b, a))  # two-sided: symmetric


def test_unequal_spreads_use_welchs_degrees_of_freedom_not_the_pooled_test():
    """With variances 1 and 4 the pooled test (df 4) separates at 5 %, Welch's (df 2.94) does not."""
    a, b = _seeds(1.0, 2.0, 3.0), _seeds(4.0, 6.0, 8.0)
    assert welch_p(a, b) == pytest.approx(0.0548, abs=2e-4)
    assert separated(a, b) is False and separated(a, b, alpha=0.06) is True


def test_under_two_seeds_nothing_is_tested_and_no_spread_is_exact():
    assert welch_p(_seeds(1.0), _seeds(2.0, 3.0)) is None and separated(_seeds(1.0), _seeds(5.0)) is None
    assert welch_p(_seeds(1.0, 1.0), _seeds(2.0, 2.0)) == 0.0  # identical seeds, different means: separated
    assert welch_p(_seeds(1.0, 1.0), _seeds(1.0, 1.0)) == 1.0
    assert p_text(None) == "under 2 seeds: not tested" and p_text(0.0004) == "p < 0.001"
    assert p_text(0.0213) == "p = 0.021"


def test_holm_multiplies_the_ith_smallest_p_by_the_tests_left_and_keeps_the_order():
    """Holm's step-down on four p-values, by hand: 0.01 x 4 = 0.04; 0.02 x 3 = 0.06; 0.03 x 2 = 0.06 (not below
    the one before); 0.5 x 1 = 0.5. In the order given, with an untested pair left out of m."""
    assert holm([0.03, 0.5, None, 0.01, 0.02]) == pytest.approx([0.06, 0.5, None, 0.04, 0.06])
    assert holm([0.04]) == [0.04]  # one test: unchanged
    assert holm([0.4, 0.6]) == pytest.approx([0.8, 0.8])  # 0.6 x 1 is below 0.4 x 2: kept at 0.8
    assert holm([0.9, 0.8]) == [1.0, 1.0]
    assert holm([]) == [] and holm([None]) == [None]
