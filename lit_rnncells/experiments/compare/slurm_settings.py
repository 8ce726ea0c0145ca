"""What the Slurm launcher (:mod:`.slurm`) asks of the cluster: partition, time limit, memory, account, GPUs and CPUs
per run, from ``--slurm-config FILE.yaml`` with the command line's options over it; checked against the cluster
(``sbatch`` on PATH, the partition known to ``sinfo``, a time limit Slurm reads and the partition allows) before
anything is submitted, each problem one sentence with its fix (:class:`SlurmSettingsError`)."""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Dict, List, Optional

from .planning import CompareError


class SlurmSettingsError(CompareError):
    """A Slurm launcher setting the cluster cannot take; one sentence naming it and the fix."""


SUBMITIT_LOG_VARIABLE = "SUBMITIT_LOG_LEVEL"


def import_submitit() -> Any:
    """submitit, imported without letting it reconfigure this process's logging: on import it calls
    ``logging.config.dictConfig``, which closes every handler already installed (a user's log files, pytest's
    capture of the test that imports it). ``SUBMITIT_LOG_LEVEL=NOCONFIG`` (unless the user set it) skips that; its
    warnings still reach stderr through the root logger."""
    os.environ.setdefault(SUBMITIT_LOG_VARIABLE, "NOCONFIG")
    import submitit

    return submitit


@dataclass
class SlurmSettings:
    """One job per run: ``partition`` (default: the cluster's default), ``time`` (Slurm's format: minutes,
    ``HH:MM:SS``, ``D-HH:MM``, ...), ``mem`` (e.g. ``16G``), ``account``, ``gpus_per_run`` (that many tasks too:
    one DDP rank per GPU) and ``cpus_per_run`` (per task)."""

    partition: Optional[str] = None
    time: str = "60"
    mem: Optional[str] = None
    account: Optional[str] = None
    gpus_per_run: int = 0
    cpus_per_run: int = 1

    def minutes(self) -> int:
        """The time limit in whole minutes (what submitit takes)."""
        return time_minutes(self.time, "--time")


_TIME = re.compile(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?")


def time_minutes(text: str, option: str) -> int:
    """Minutes of a Slurm time limit: ``M``, ``M:S``, ``H:M:S``, ``D-H``, ``D-H:M``, ``D-H:M:S`` (seconds round up)."""
    match = _TIME.fullmatch(str(text).strip())
    if match is None:
        raise SlurmSettingsError(f"{option} {text!r} is not a Slurm time limit; use minutes (90), HH:MM:SS "
                                 "(01:30:00) or D-HH:MM (1-12:00).")
    days, first, second, third = match.groups()
    numbers = [int(n) for n in (first, second, third) if n is not None]
    if days is not None:  # D-H, D-H:M, D-H:M:S
        hours, minutes, seconds = (numbers + [0, 0])[:3]
        total = ((int(days) * 24 + hours) * 60 + minutes) * 60 + seconds
    elif len(numbers) == 3:  # H:M:S
        total = (numbers[0] * 60 + numbers[1]) * 60 + numbers[2]
    else:  # M or M:S
        total = numbers[0] * 60 + (numbers[1] if len(numbers) == 2 else 0)
    if total <= 0:
        raise SlurmSettingsError(f"{option} {text!r} is no time at all; give the time one run may take, e.g. 60.")
    return -(-total // 60)


def add_slurm_options(parser: argparse.ArgumentParser, group: Any = None) -> None:
    """The launcher options of ``compare`` / ``reproduce``, in ``group`` (an argument group of ``parser``; default
    a new one)."""
    group = group if group is not None else parser.add_argument_group("launcher (docs/compare.md, 'On a Slurm "
                                                                      "cluster')")
    group.add_argument("--launcher", choices=("local", "slurm"), default="local",
                       help="local: runs on this machine; slurm: one Slurm job per run, through submitit")
    group.add_argument("--slurm-config", metavar="FILE.yaml",
                       help="Slurm settings (partition, time, mem, account, gpus_per_run, cpus_per_run); the "
                            "options below win over it")
    group.add_argument("--partition", help="Slurm partition (default: the cluster's default partition)")
    group.add_argument("--time", help="time limit of each run's job, e.g. 90, 01:30:00, 1-12:00 (default 60 "
                                      "minutes); a run that reaches it is checkpointed and requeued")
    group.add_argument("--mem", help="memory of each run's job, e.g. 16G")
    group.add_argument("--account", help="Slurm account to charge")
    group.add_argument("--gpus-per-run", type=int, help="GPUs of each run (that many DDP tasks; default 0)")
    group.add_argument("--cpus-per-run", type=int, help="CPUs of each run's task (default 1)")


SLURM_OPTIONS = ("slurm_config", "partition", "time", "mem", "account", "gpus_per_run", "cpus_per_run")
"""The destinations of the options :func:`add_slurm_options` adds besides ``--launcher``: Slurm's alone."""


def slurm_options_given(args: argparse.Namespace) -> List[str]:
    """The Slurm options (``--partition`` ...) given on the command line, as they are spelt there."""
    return ["--" + name.replace("_", "-") for name in SLURM_OPTIONS if getattr(args, name, None) is not None]


def read_settings(path: Optional[str]) -> Dict[str, Any]:
    """The settings of ``--slurm-config`` (empty without one); unknown keys are an error naming the known ones."""
    if path is None:
        return {}
    import yaml

    try:
        loaded = yaml.safe_load(Path(path).read_text()) or {}
    except OSError as error:
        raise SlurmSettingsError(f"--slurm-config {path}: cannot read it ({error.strerror}); give the path of a "
                                 "YAML file of Slurm settings.") from None
    except yaml.YAMLError as error:
        raise SlurmSettingsError(f"--slurm-config {path} is not YAML ({str(error).splitlines()[0]}); fix the file.") \
            from None
    known = [f.name for f in fields(SlurmSettings)]
    if not isinstance(loaded, dict):
        raise SlurmSettingsError(f"--slurm-config {path} holds no mapping; write key: value lines with the keys "
                                 f"{', '.join(known)}.")
    loaded = {str(k).replace("-", "_"): v for k, v in loaded.items()}
    unknown = sorted(set(loaded) - set(known))
    if unknown:
        raise SlurmSettingsError(f"--slurm-config {path} has unknown keys {', '.join(unknown)}; the keys are "
                                 f"{', '.join(known)}.")
    return loaded


def settings_from(args: argparse.Namespace) -> SlurmSettings:
    """The settings of ``--slurm-config`` with the command line's options over them."""
    values = read_settings(args.slurm_config)
    for name in ("partition", "time", "mem", "account", "gpus_per_run", "cpus_per_run"):
        given = getattr(args, name, None)
        if given is not None:
            values[name] = given
    for name in ("gpus_per_run", "cpus_per_run"):
        if name in values and not isinstance(values[name], int):
            raise SlurmSettingsError(f"{name} {values[name]!r} in --slurm-config is not a whole number; write e.g. "
                                     f"{name}: 1.")
    settings = SlurmSettings(**values)
    settings.time = str(settings.time)
    return settings


def _sinfo_partitions() -> Dict[str, str]:
    """Partition name -> its time limit, as ``sinfo`` lists them (the default one with a trailing ``*``)."""
    try:
        proc = subprocess.run(["sinfo", "-h", "-o", "%P %l"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise SlurmSettingsError(f"Slurm does not answer (sinfo: {error}); run compare where the cluster's commands "
                                 "work (a login node), or drop --launcher slurm.") from None
    if proc.returncode != 0:
        said = (proc.stderr.strip().splitlines() or ["no message"])[0]
        raise SlurmSettingsError(f"Slurm does not answer (sinfo: {said}); run compare where the cluster's commands "
                                 "work (a login node), or drop --launcher slurm.")
    return dict(line.split(None, 1) for line in proc.stdout.splitlines() if len(line.split()) == 2)


def check_settings(settings: SlurmSettings) -> None:
    """Everything the cluster would refuse, before any job is submitted: no ``sbatch``, no submitit, an unknown
    partition, a time limit Slurm cannot read or the partition does not allow, negative GPU / CPU counts."""
    minutes = settings.minutes()
    if settings.gpus_per_run < 0 or settings.cpus_per_run < 1:
        raise SlurmSettingsError(f"gpus_per_run {settings.gpus_per_run} / cpus_per_run {settings.cpus_per_run}: "
                                 "give 0 or more GPUs and 1 or more CPUs per run.")
    if settings.mem is not None and not re.fullmatch(r"\d+[KMGT]?", str(settings.mem)):
        raise SlurmSettingsError(f"--mem {settings.mem!r} is not a Slurm memory size; use e.g. 16G or 4000M.")
    if shutil.which("sbatch") is None:
        raise SlurmSettingsError("--launcher slurm needs Slurm's sbatch on PATH and there is none; run compare on a "
                                 "machine of the cluster (a login node), or drop --launcher slurm to run here.")
    try:
        import_submitit()
    except ImportError:
        raise SlurmSettingsError("--launcher slurm submits through submitit, which is not installed; pip install "
                                 "'lit_rnncells[slurm]' (or pip install submitit).") from None
    partitions = _sinfo_partitions()
    names = {name.rstrip("*"): limit for name, limit in partitions.items()}
    if settings.partition is not None and settings.partition not in names:
        raise SlurmSettingsError(f"--partition {settings.partition!r} is not a partition of this cluster; sinfo "
                                 f"lists {', '.join(sorted(names)) or 'none'}.")
    chosen = settings.partition or next((n.rstrip("*") for n in partitions if n.endswith("*")), None)
    limit = names.get(chosen) if chosen is not None else None
    if limit not in (None, "infinite", "UNLIMITED", "n/a") and minutes > time_minutes(limit, "limit"):
        raise SlurmSettingsError(f"--time {settings.time} is over the partition {chosen}'s limit of {limit}; give at "
                                 "most that (a run that reaches it is checkpointed and requeued).")


def test_submission(settings: SlurmSettings) -> None:
    """``sbatch --test-only`` with the job a run would get: Slurm's own refusal (memory no node has, an account it
    does not know, ...) as one sentence, before anything is submitted."""
    command = ["sbatch", "--test-only", "--nodes=1", f"--ntasks-per-node={max(1, settings.gpus_per_run)}",
               f"--cpus-per-task={settings.cpus_per_run}", f"--time={settings.minutes()}", "--wrap", "true"]
    for name, value in (("partition", settings.partition), ("account", settings.account), ("mem", settings.mem),
                        ("gpus-per-node", settings.gpus_per_run or None)):
        if value is not None:
            command.append(f"--{name}={value}")
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise SlurmSettingsError(f"sbatch --test-only failed ({error}); check that Slurm answers (sinfo), or drop "
                                 "--launcher slurm.") from None
    if proc.returncode != 0:
        said = "; ".join(line.replace("sbatch: error: ", "") for line in proc.stderr.strip().splitlines()) or "no message"
        raise SlurmSettingsError(f"Slurm would refuse the runs' jobs ({said}); fix --partition / --time / --mem / "
                                 "--account / --gpus-per-run (or --slurm-config).")
