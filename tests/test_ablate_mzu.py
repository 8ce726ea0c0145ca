"""scripts/ablate_mzu.py: the MZU ablation's one-line refusal without data, and its matched hidden sizes."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "ablate_mzu.py"


def _run(args, env):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT,
                          env={**env, "PYTHONPATH": str(ROOT)}, timeout=600)


def test_without_data_it_says_what_to_set_in_one_line() -> None:
    env = {k: v for k, v in os.environ.items() if k != "LIT_RNNCELLS_DATA"}
    result = _run(["--init-only"], env)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: set LIT_RNNCELLS_DATA to the data folder holding ptb/ (PTB character level)."]


def test_init_only_matches_hidden_sizes_and_shows_the_weak_m_function(data_dir: Path, tmp_path: Path) -> None:
    env = {**os.environ, "LIT_RNNCELLS_DATA": str(data_dir), "LIT_RNNCELLS_CACHE": str(tmp_path)}
    result = _run(["--init-only", "--only", "gru", "cap-repro"], env)
    assert result.returncode == 0, result.stderr
    rows = {line.split("|")[1].strip(): line.split("|")[2:] for line in result.stdout.splitlines()
            if line.startswith("| ")}
    assert int(rows["gru"][0]) == 256 and int(rows["cap-repro"][0]) == 136  # the reproduction's matched sizes
    assert float(rows["cap-repro"][2]) < 0.1 * float(rows["gru"][2])  # the M-function's output starts small
