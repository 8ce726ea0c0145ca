"""Every ``python -m`` entry point answers ``--help`` with its usage and exit code 0 (a ``%`` in a help text, which
argparse formats, once made ``reproduce --help`` a traceback)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENTRY_POINTS = ["lit_rnncells.compare", "lit_rnncells.reproduce", "lit_rnncells.leaderboard", "lit_rnncells.data",
                "lit_rnncells.analysis"]


@pytest.mark.parametrize("module", ENTRY_POINTS)
def test_help_is_the_usage_and_exits_zero(module):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("usage:") and "Traceback" not in done.stderr
