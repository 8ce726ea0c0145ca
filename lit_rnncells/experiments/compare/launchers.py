"""The launcher ``--launcher`` names, built from the command's options: the Slurm launcher's settings are checked
against the cluster before anything is submitted. :mod:`.slurm` (and submitit, an optional dependency: ``pip
install 'lit_rnncells[slurm]'``) is imported only when ``--launcher slurm`` is asked for."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .options import PROGRESS_EVERY
from .slurm_settings import SlurmSettingsError, check_settings, settings_from, test_submission


def slurm_launcher(args: argparse.Namespace, out: Path, log: Any = None) -> Any:
    """The :class:`.slurm.SlurmLauncher` of ``--launcher slurm`` and its options, checked against the cluster;
    the jobs an earlier submission into ``out`` (or a folder in it: reproduce's experiments) left queued or running
    are waited for first."""
    if getattr(args, "jobs", None) not in (None, 1):
        raise SlurmSettingsError("--jobs is for runs on this machine; with --launcher slurm every run is a job and "
                                 "Slurm runs as many at once as the cluster allows: drop --jobs.")
    settings = settings_from(args)
    check_settings(settings)
    test_submission(settings)
    from .slurm import SlurmLauncher, wait_for_earlier_jobs

    wait_for_earlier_jobs(out, log)
    return SlurmLauncher(settings, getattr(args, "progress_every", PROGRESS_EVERY))
