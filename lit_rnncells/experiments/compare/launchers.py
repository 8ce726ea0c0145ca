"""The launcher ``--launcher`` names, built from the command's options: the Slurm launcher's settings are checked
against the cluster before anything is submitted. :mod:`.slurm` (and submitit, an optional dependency: ``pip
install 'lit_rnncells[slurm]'``) is imported only when ``--launcher slurm`` is asked for."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .options import PROGRESS_EVERY
from .slurm_settings import SlurmSettingsError, check_settings, settings_from, slurm_options_given, test_submission


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


def check_local_launcher(args: argparse.Namespace) -> None:
    """With the local launcher (the default) the Slurm options do nothing: a ``--partition gpu`` without
    ``--launcher slurm`` ran every run on this machine (a login node), so it is refused."""
    given = slurm_options_given(args) if getattr(args, "launcher", "local") == "local" else []
    if given:
        options = " and ".join(given) if len(given) <= 2 else ", ".join(given[:-1]) + " and " + given[-1]
        raise SlurmSettingsError(f"{options} {'is an option' if len(given) == 1 else 'are options'} of --launcher "
                                 "slurm, but the runs would run on this machine (--launcher local, the default); add "
                                 f"--launcher slurm, or drop {options}.")


def launcher_from(args: argparse.Namespace, out: Path, log: Any = None) -> Any:
    """The launcher ``--launcher`` names: :func:`slurm_launcher`'s, or ``None`` for the local one (whose runs the
    Slurm options cannot reach: :func:`check_local_launcher`)."""
    if args.launcher == "slurm":
        return slurm_launcher(args, out, log)
    check_local_launcher(args)
    return None
