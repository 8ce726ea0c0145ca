"""Argument checks every layer shares (cells, the layer, DataModules, tasks): one clear ``ValueError`` each.

It imports nothing of the package, so any module may use it (tests/test_layers.py keeps it at the bottom).
"""
from __future__ import annotations


def check_positive(**sizes: int) -> None:
    """Raise one clear ``ValueError`` if any named size is not a positive integer."""
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}; set it to 1 or more.")


def check_probability(**probabilities: float) -> None:
    """Raise one clear ``ValueError`` if any named dropout-style probability is outside [0, 1).

    1 is excluded: dropping everything trains on nothing (and scales by 1/(1-p) = inf)."""
    for name, value in probabilities.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
            raise ValueError(f"{name} must be a probability in [0, 1), got {value!r}; use 0 to turn it off "
                             "(AWD-LSTM uses 0.1-0.5).")
