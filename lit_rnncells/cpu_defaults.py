"""CPU settings the command line applies for you, before torch starts (``LIT_RNNCELLS_CPU_DEFAULTS=0``: none).

``python -m lit_rnncells.show_cpu_defaults`` prints what the command line runs with.

* ``OMP_WAIT_POLICY=PASSIVE`` unless you set it: torch's OpenMP threads then sleep between parallel
  regions instead of spinning. Spinning threads of one training take the cores another process needs
  (measured by ``scripts/bench_load.py``; the table is in docs/measured.md). OpenMP reads this once, when torch loads, so it is set
  on import of the package when the process was started as the command line (``python -m lit_rnncells``,
  ``lit-rnncells``) and torch is not loaded yet; in your own scripts set it in the environment.
* glibc's malloc keeps freed memory (:func:`lit_rnncells.benchmark.keep_freed_memory`) instead of
  returning each step's activations to the OS and page-faulting them back in.
"""
from __future__ import annotations

import os
import sys

SWITCH = "LIT_RNNCELLS_CPU_DEFAULTS"


def enabled() -> bool:
    """False when the user turned the defaults off (``LIT_RNNCELLS_CPU_DEFAULTS=0``)."""
    return os.environ.get(SWITCH, "1").strip().lower() not in ("0", "off", "false", "no")


def started_as_command_line() -> bool:
    """Whether this process is ``python -m lit_rnncells[.x]`` or the ``lit-rnncells`` script.

    While ``python -m`` imports the package, ``sys.argv[0]`` is still ``"-m"``."""
    first = sys.argv[0] if sys.argv else ""
    return first == "-m" or os.path.basename(first) in ("lit-rnncells", "lit_rnncells")


def set_wait_policy() -> bool:
    """``OMP_WAIT_POLICY=PASSIVE`` when wanted and still possible; returns whether it was set."""
    if not enabled() or "OMP_WAIT_POLICY" in os.environ or "torch" in sys.modules or not started_as_command_line():
        return False
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    return True


def keep_freed_memory() -> bool:
    """glibc keeps freed memory for reuse, unless the defaults are off; returns whether it took effect."""
    if not enabled():
        return False
    from .benchmark import keep_freed_memory as keep

    return keep()

