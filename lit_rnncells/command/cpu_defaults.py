"""CPU settings the command line applies for you (``LIT_RNNCELLS_CPU_DEFAULTS=0``: none).

``python -m lit_rnncells.show_cpu_defaults`` prints what the command line runs with.

* **One thread for small models.** A model of fewer than :data:`SMALL_MODEL_PARAMETERS` parameters
  trained on the CPU runs with one torch thread: its matrices are too small for a second thread to pay,
  and OpenMP threads spin-waiting between those small parallel regions take the core another process
  needs. Measured by ``scripts/bench_load.py`` (docs/measured.md): for the README's run command and a
  short LM fit, one thread was as fast alone as torch's two (0.92–1.02×) and took 1.0× as long beside a
  busy process, where torch's two spinning threads took 2.5× as long. ``OMP_WAIT_POLICY=PASSIVE``, the
  other cure for spinning, made the runs alone 1.65–1.89× slower, so it is not set. Your own ``OMP_NUM_THREADS``
  (or ``torch.set_num_threads``-style setting through it) always wins. ``LIT_RNNCELLS_CPU_DEFAULTS=0`` costs
  2.5× the time beside one busy process, and far more on a crowded machine (docs/measured.md).
* glibc's malloc keeps freed memory (:func:`lit_rnncells.nn.benchmark.keep_freed_memory`) instead of
  returning each step's activations to the OS and page-faulting them back in (measured on the seq2seq
  reference, which ran at 50% system time without it).
"""
from __future__ import annotations

import os
from typing import Optional

import torch

from ..nn.benchmark import keep_freed_memory as keep

SWITCH = "LIT_RNNCELLS_CPU_DEFAULTS"
SMALL_MODEL_PARAMETERS = 1_000_000
"""Below this many parameters a model trains on one CPU thread by default."""


def enabled() -> bool:
    """False when the user turned the defaults off (``LIT_RNNCELLS_CPU_DEFAULTS=0``)."""
    return os.environ.get(SWITCH, "1").strip().lower() not in ("0", "off", "false", "no")


def threads_for(model: torch.nn.Module) -> Optional[int]:
    """The torch thread count the command line sets for ``model`` on the CPU, or None to leave torch's."""
    if not enabled() or os.environ.get("OMP_NUM_THREADS"):
        return None
    parameters = sum(p.numel() for p in model.parameters())
    return 1 if parameters < SMALL_MODEL_PARAMETERS else None


def keep_freed_memory() -> bool:
    """glibc keeps freed memory for reuse, unless the defaults are off; returns whether it took effect."""
    if not enabled():
        return False
    return keep()
