"""The Slurm cluster the Slurm tests submit to: the one ``sinfo`` answers for (in CI the one-node cluster
scripts/start_slurm.sh starts on localhost). Where none answers, those tests skip and say why."""
from __future__ import annotations

import shutil
import subprocess
from typing import Optional

import pytest

START = "start one on this machine with scripts/start_slurm.sh (as root)"


def why_no_slurm() -> Optional[str]:
    """Why no Slurm cluster can take jobs here (``None`` when one can)."""
    if shutil.which("sinfo") is None or shutil.which("sbatch") is None:
        return f"no Slurm here: sinfo / sbatch are not on PATH; {START}"
    try:
        proc = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return f"no Slurm cluster answers: sinfo timed out; {START}"
    if proc.returncode != 0:
        said = (proc.stderr.strip().splitlines() or ["no message"])[0]
        return f"no Slurm cluster answers (sinfo: {said}); {START}"
    states = proc.stdout.split()
    if not any(s.rstrip("*~#$@") in ("idle", "mix", "alloc", "comp") for s in states):
        return f"the Slurm cluster has no node that takes jobs (sinfo states: {' '.join(states) or 'none'}); {START}"
    return None


@pytest.fixture(scope="session")
def slurm() -> None:
    """Skip (with the reason) unless a Slurm cluster takes jobs here."""
    reason = why_no_slurm()
    if reason is not None:
        pytest.skip(reason)
