"""The command line's CPU defaults: OpenMP threads sleep instead of spinning, set before torch loads."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _show(**env: str) -> str:
    base = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "LIT_RNNCELLS_CPU_DEFAULTS")}
    base["PYTHONPATH"] = str(ROOT)
    out = subprocess.run([sys.executable, "-m", "lit_rnncells.show_cpu_defaults"], env={**base, **env},
                         capture_output=True, text=True, check=True)
    return out.stdout


def test_the_command_line_sets_a_passive_wait_policy_and_keeps_freed_memory():
    shown = _show()
    assert "OMP_WAIT_POLICY=PASSIVE" in shown and "keep_freed_memory=True" in shown


@pytest.mark.parametrize("env, expected", [({"OMP_WAIT_POLICY": "ACTIVE"}, "OMP_WAIT_POLICY=ACTIVE"),
                                           ({"LIT_RNNCELLS_CPU_DEFAULTS": "0"}, "OMP_WAIT_POLICY=(unset")])
def test_the_users_setting_wins_and_the_defaults_can_be_turned_off(env, expected):
    shown = _show(**env)
    assert expected in shown
    if "LIT_RNNCELLS_CPU_DEFAULTS" in env:
        assert "keep_freed_memory=False" in shown


def test_importing_the_library_in_a_script_changes_nothing():
    code = "import lit_rnncells, os; print(os.environ.get('OMP_WAIT_POLICY'))"
    base = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run([sys.executable, "-c", code], env={**base, "PYTHONPATH": str(ROOT)}, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "None"
