"""The Slurm launcher: each run of a comparison is one Slurm job, submitted through submitit.

- A job runs the run's child command (:meth:`.runner.Job.command`) with its output appended to ``<run>/log.txt``,
  resuming from the run's newest checkpoint when it has one.
- Preemption or the time limit: Slurm signals the job ahead (submitit's USR2); the run is sent SIGTERM, saves
  ``interrupted.ckpt`` and the job is requeued, resuming from it exactly (submitit's checkpointing).
- The job ids are kept in ``<out>/slurm/jobs.json`` and submitit's files (the job's own logs) in ``<out>/slurm/``.
  The submitting command waits for the jobs; stopped (Ctrl-C, SIGTERM), it leaves them running, and a rerun of the
  same command first waits for the jobs still queued or running, then keeps the runs that finished and submits
  only the missing ones (:func:`wait_for_earlier_jobs`).
- A run that fails is reported with the path of its log and of its job's Slurm log.

The cluster is asked for nothing but ``sbatch`` (through submitit) and ``squeue``: it needs no accounting database.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence

from .folders import resume_checkpoint
from .planning import CompareError, RunSpec
from .options import PROGRESS_EVERY
from .runner import ROOT, SLURM_START, Job, Launcher, ProgressLines, child_env, read_result
from .slurm_settings import SlurmSettings, SlurmSettingsError, import_submitit

submitit = import_submitit()

SLURM_FOLDER = "slurm"
"""``<out>/slurm``: submitit's files and ``jobs.json``."""
JOBS_FILE = "jobs.json"
POLL_SECONDS = 3.0
ALIVE = ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING",
         "SIGNALING", "STAGE_OUT", "SUSPENDED", "PREEMPTED")
"""squeue states of a job that has not ended (a preempted or timed-out job is requeued: PENDING again)."""


def _ignore_requeue_signal() -> None:
    """In the run's process: Slurm's early warning (USR2) is for the job's submitit process, which stops the run."""
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)


class SlurmRun(submitit.helpers.Checkpointable):
    """What one Slurm task runs: the run in ``folder`` as a child process (one per task: with several GPUs, each
    task is a DDP rank through Lightning's SLURMEnvironment)."""

    def __init__(self, folder: str, env: Optional[Dict[str, str]] = None) -> None:
        self.folder = folder
        self.env = dict(env or {})
        self._proc: Optional[subprocess.Popen] = None

    def __getstate__(self) -> Dict[str, Any]:
        return {"folder": self.folder, "env": self.env}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__init__(state["folder"], state["env"])  # type: ignore[misc]

    def __call__(self) -> int:
        folder = Path(self.folder)
        rank = int(os.environ.get("SLURM_PROCID", "0"))
        found = resume_checkpoint(folder)
        spec = RunSpec(**json.loads((folder / "spec.json").read_text()))
        command = Job(spec, None if found is None else found[0], 1, 1).command()
        log_path = folder / ("log.txt" if rank == 0 else f"log-rank{rank}.txt")
        job = os.environ.get("SLURM_JOB_ID", "?")
        with open(log_path, "a") as log:
            restart = os.environ.get("SLURM_RESTART_COUNT", "0")
            resuming = f", resuming from {found[0]} (step {found[1]})" if found is not None else ""
            log.write(f"{SLURM_START} {job} on {socket.gethostname()} "
                      f"(start {int(restart) + 1}){resuming}\n")
            log.flush()
            self._proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=child_env(self.env),
                                          preexec_fn=_ignore_requeue_signal)
            while self._proc.poll() is None:  # not wait(): it would hold the lock checkpoint()'s wait needs
                time.sleep(0.5)
            code = self._proc.returncode
        if code != 0:
            raise RuntimeError(f"the run exited with status {code}; its log is {log_path}")
        return code

    def checkpoint(self, *args: Any, **kwargs: Any) -> submitit.helpers.DelayedSubmission:
        """Preempted or near the time limit: the run saves ``interrupted.ckpt`` on SIGTERM and exits; the requeued
        job resumes from it (its :meth:`__call__` finds the newest checkpoint)."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=120)
        return submitit.helpers.DelayedSubmission(SlurmRun(self.folder, self.env))


def jobs_file(out: Path) -> Path:
    return Path(out) / SLURM_FOLDER / JOBS_FILE


def read_jobs(out: Path) -> Dict[str, str]:
    """Run id -> the Slurm job id it was last submitted as (``<out>/slurm/jobs.json``; empty when none)."""
    try:
        return dict(json.loads(jobs_file(out).read_text()))
    except (OSError, ValueError):
        return {}


def alive_jobs(job_ids: Sequence[str]) -> Dict[str, str]:
    """The state of each of ``job_ids`` that has not ended, by id."""
    if not job_ids:
        return {}
    for attempt in range(20):
        proc = subprocess.run(["squeue", "-h", "-o", "%i %T", "-j", ",".join(job_ids)], capture_output=True,
                              text=True, timeout=120)
        if proc.returncode == 0 or "Invalid job id" in proc.stderr:
            states = dict(line.split()[:2] for line in proc.stdout.splitlines() if len(line.split()) >= 2)
            return {j: states[j] for j in job_ids if states.get(j) in ALIVE}
        time.sleep(POLL_SECONDS)  # slurmctld busy or restarting: ask again
    raise CompareError(f"squeue keeps failing ({proc.stderr.strip()}); the jobs {', '.join(job_ids)} go on; rerun "
                       "the same command once Slurm answers to collect them.")


class Detached(CompareError):
    """The submitting command was stopped while its runs' jobs go on (rerun it to collect them)."""


@contextlib.contextmanager
def _stoppable() -> Iterator[None]:
    """Within the block, SIGTERM stops the wait as Ctrl-C does (raising ``KeyboardInterrupt``)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def wait_for(job_ids: Dict[str, str], out: Path, on_end: Any = None, on_poll: Any = None) -> None:
    """Wait until none of ``job_ids`` (run id -> job id) is queued or running; ``on_end(run_id)`` as each ends,
    ``on_poll(run_ids)`` with those still waiting at each poll. Ctrl-C or SIGTERM stops the wait (not the jobs):
    :class:`Detached` says how to collect them later."""
    waiting = dict(job_ids)
    try:
        with _stoppable():
            while waiting:
                alive = alive_jobs(list(waiting.values()))
                for run_id in [r for r, j in waiting.items() if j not in alive]:
                    del waiting[run_id]
                    if on_end is not None:
                        on_end(run_id)
                if waiting:
                    if on_poll is not None:
                        on_poll(list(waiting))
                    time.sleep(POLL_SECONDS)
    except KeyboardInterrupt:
        raise Detached(f"stopped waiting; {len(waiting)} run(s) go on as Slurm jobs ({', '.join(waiting.values())}, "
                       f"listed in {jobs_file(out)}); rerun the same command to collect them, or scancel them."
                       ) from None


def wait_for_earlier_jobs(out: Path, log: Any = None) -> None:
    """Before a rerun plans anything: wait for the jobs of an earlier submission that are still queued or running
    (their runs are then kept when they finished, resumed or restarted when not)."""
    log = sys.stderr if log is None else log
    recorded_files = [jobs_file(Path(out)), *sorted(Path(out).glob(f"*/{SLURM_FOLDER}/{JOBS_FILE}"))]
    for recorded in (f for f in recorded_files if f.is_file()):
        folder = recorded.parent.parent
        earlier = read_jobs(folder)
        alive = alive_jobs(list(earlier.values()))
        if alive:
            waiting = {run_id: job for run_id, job in earlier.items() if job in alive}
            print(f"compare: {len(waiting)} run(s) of an earlier submission into {folder} are still Slurm jobs "
                  f"({', '.join(waiting.values())}); waiting for them before going on", file=log, flush=True)
            wait_for(waiting, folder)


class SlurmLauncher(Launcher):
    """Each run one Slurm job (see the module's docstring)."""

    def __init__(self, settings: SlurmSettings, progress_every: float = PROGRESS_EVERY) -> None:
        self.settings = settings
        self.progress = ProgressLines(progress_every)  # where each job's run stands (a queued one: no line yet)
        self.out = Path(".")  # the comparison's folder, the parent of its runs' folders (set by :meth:`run`)

    def executor(self) -> submitit.AutoExecutor:
        """submitit's executor with the settings: one node, one task per GPU (one task without GPUs)."""
        settings = self.settings
        minutes = settings.minutes()
        executor = submitit.AutoExecutor(folder=str(self.out / SLURM_FOLDER), cluster="slurm", slurm_max_num_timeout=100)
        parameters: Dict[str, Any] = dict(
            name="lit_rnncells-compare", timeout_min=minutes, nodes=1, tasks_per_node=max(1, settings.gpus_per_run),
            cpus_per_task=settings.cpus_per_run, slurm_signal_delay_s=min(120, max(15, minutes * 60 // 10)),
            slurm_setup=[f"export PYTHONPATH={ROOT}${{PYTHONPATH:+:$PYTHONPATH}}"])
        if settings.gpus_per_run:
            parameters["gpus_per_node"] = settings.gpus_per_run
        for name in ("partition", "account", "mem"):
            if getattr(settings, name) is not None:
                parameters[f"slurm_{name}"] = getattr(settings, name)
        executor.update_parameters(**parameters)
        return executor

    def submit(self, jobs: Sequence[Job], env: Optional[Dict[str, str]]) -> List[str]:
        """Submit each of ``jobs``; their job ids, also recorded in ``<out>/slurm/jobs.json``."""
        executor = self.executor()
        recorded, ids = read_jobs(self.out), []
        # one job per run, not an array: Slurm cannot signal or requeue an array's task while others wait
        for job in jobs:
            try:
                ids.append(str(executor.submit(SlurmRun(job.spec.folder, env)).job_id))
            except (submitit.core.utils.FailedJobError, subprocess.CalledProcessError) as error:
                said = " ".join(str(error).split())[-300:]
                going = (f"; the {len(ids)} job(s) submitted before it go on and a rerun collects them" if ids
                         else "")
                raise SlurmSettingsError(f"sbatch refused the job of {job.spec.run_id} ({said}){going}; fix the Slurm "
                                         "settings and rerun.") from None
            recorded[job.spec.run_id] = ids[-1]
            jobs_file(self.out).write_text(json.dumps(recorded, indent=1))  # as each is submitted
        return ids

    def run(self, jobs: Sequence[Job], env: Optional[Dict[str, str]], log: Any) -> Dict[str, Optional[Dict[str, Any]]]:
        self.out = Path(jobs[0].spec.folder).parent
        ids = self.submit(jobs, env)
        by_run = {job.spec.run_id: job for job in jobs}
        started = time.perf_counter()
        for job, job_id in zip(jobs, ids):
            job.started(log, f" as Slurm job {job_id}")
        results: Dict[str, Optional[Dict[str, Any]]] = {}

        def ended(run_id: str) -> None:
            job = by_run[run_id]
            results[run_id] = read_result(job.spec, 0)
            job.ended(results[run_id], time.perf_counter() - started, log)
            if results[run_id] is None:
                job_id = dict(zip(by_run, ids))[run_id]
                print(f"compare: {run_id}: Slurm's log of job {job_id} is "
                      f"{self.out / SLURM_FOLDER / (job_id + '_0_log.err')}", file=log, flush=True)

        self.progress.restart()
        wait_for(dict(zip(by_run, ids)), self.out, ended,
                 lambda waiting: self.progress([by_run[run_id] for run_id in waiting], log))
        return results
