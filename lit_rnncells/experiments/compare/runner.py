"""Running a comparison's planned runs: the :class:`Launcher` interface and the :class:`LocalLauncher`.

:func:`run_specs` owns what is the same for every launcher: it reuses the ``result.json`` of runs that finished,
refuses a run made or started with other settings, prepares each other run's folder (resuming from its
checkpoint, or going on from it to a longer budget, :mod:`.folders`), hands the rest to a launcher as
:class:`Job` s and returns the results in the plan's order. A launcher only runs jobs:

    class Launcher:
        def run(self, jobs: Sequence[Job], env: Optional[Dict[str, str]], log: Any) -> Dict[str, Optional[dict]]

It returns each job's ``result.json`` contents (``None``: the run failed) by run id (a result with
``"partial": true`` was stopped by a time limit before its budget, and is resumed by the next run), announcing
each run with :meth:`Job.started` and :meth:`Job.ended` on ``log``. A run is the command :meth:`Job.command` (the child process of
:mod:`.child`) with its output appended to ``<run>/log.txt``; a launcher that runs the work in Python instead
(a cluster job through submitit) calls :func:`.child.run_child` with ``job.spec`` and ``job.resume_from``. When
SIGTERM or Ctrl-C stops the runner, a launcher passes SIGTERM on to every run it started (each saves a
resumable checkpoint), waits for them, and raises :class:`Interrupted`; rerunning the same comparison resumes
them. A new launcher is one more module implementing :class:`Launcher`, passed to :func:`run_specs` (or
``compare(..., launcher=)``).
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence

from ...utils.progress import last_progress_line, plural
from ..report import RESULT_FILE, load_result
from .folders import check_resumable, finished, prepare_folder, saved_budget
from .options import PROGRESS_EVERY
from .planning import CompareError, RunSpec

ROOT = Path(__file__).resolve().parents[3]
"""The repository root, put on the children's PYTHONPATH."""


class Interrupted(Exception):
    """The runner was stopped by SIGTERM or Ctrl-C while runs trained; ``run_ids`` the runs it stopped, ``code``
    the first one's exit status (``run_id``: that run)."""

    def __init__(self, run_id: str, signal_name: str, code: int, run_ids: Optional[List[str]] = None) -> None:
        super().__init__(f"{signal_name} while run {run_id} trained")
        self.run_id, self.signal_name, self.code = run_id, signal_name, code
        self.run_ids = list(run_ids or [run_id])


@dataclass
class Job:
    """One run for a launcher: its spec (folder prepared, ``spec.json`` written), the checkpoint it resumes from
    (``None``: a fresh start) and its place in the plan, 1-based, of ``total``."""

    spec: RunSpec
    resume_from: Optional[Path]
    index: int
    total: int
    steps: int = 0  # the steps of ``resume_from``

    def command(self, time_limit: Optional[float] = None) -> List[str]:
        """The child process's command line (:func:`.child.child_main`); ``time_limit``: its seconds of training."""
        command = [sys.executable, "-m", "lit_rnncells.compare", "--child", str(Path(self.spec.folder) / "spec.json")]
        command += ["--ckpt_path", str(self.resume_from)] if self.resume_from is not None else []
        return command + (["--time_limit", f"{time_limit:g}"] if time_limit is not None else [])

    def started(self, log: Any, where: str = "") -> None:
        """Say on ``log`` that the run starts (or resumes, and from where); ``where``: e.g. its device."""
        head = f"compare: [{self.index}/{self.total}] {self.spec.run_id}"
        if self.resume_from is None:
            print(f"{head}{where} ...", file=log, flush=True)
        else:
            print(f"{head} resumes from {self.resume_from} (step {self.steps}){where} ...", file=log, flush=True)

    def ended(self, result: Optional[Dict[str, Any]], seconds: float, log: Any) -> None:
        """Say on ``log`` how the run ended: its time and best metric, or where its log is."""
        spec = self.spec
        if result is None:
            log_file = Path(spec.folder) / "log.txt"
            said = refusal(log_file)
            reason = f": {said.rstrip('.')}" if said else ""
            print(f"compare: {spec.run_id} failed{reason}; its log is {log_file}", file=log, flush=True)
        else:
            partial = (f" (its time limit stopped it at epoch {result['epochs']}, step {result['steps']}; the same "
                       "command goes on from its checkpoint)") if result.get("partial") else ""
            print(f"compare: {spec.run_id} done in {seconds:.0f} s: best {spec.monitor} "
                  f"{result[f'best {spec.monitor}']:.4g}{partial}", file=log, flush=True)


RESUMING = "compare: resuming from"
"""The line :func:`open_log` writes before a resumed run's part of its log."""
SLURM_START = "compare: Slurm job"
"""The line a Slurm job writes before its part of a run's log (:mod:`.slurm`)."""
STARTS = (RESUMING, SLURM_START)
"""The lines that begin a part of a run's log: a local resume, a Slurm job's start."""


def refusal(log_file: Path, tail_bytes: int = 65536) -> Optional[str]:
    """The sentence of the ``error:`` line that ends the last part of a run's log (a setting the run refused,
    :func:`.child.child_main`), or ``None`` (a crash: its traceback ends it). An earlier part's line (the run
    resumed since) does not count."""
    try:
        with open(log_file, "rb") as handle:
            handle.seek(max(0, handle.seek(0, os.SEEK_END) - tail_bytes))
            lines = handle.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        if line.startswith(STARTS):
            return None
        if line.startswith("error: "):
            return line[len("error: "):].strip()
    return None


class ProgressLines:
    """Where the running runs stand, on the comparison's log every ``every`` seconds (0: never): a line for each,
    the last progress line of its ``log.txt``, e.g. ``compare: [2/6] GRU-h4-s2: fit: epoch 3/5, batch 120/1568,
    step 3256, train/loss_step 1.41 (1502 s)``. A launcher calls it as it polls its runs."""

    def __init__(self, every: float = PROGRESS_EVERY) -> None:
        if not every >= 0:
            raise CompareError(f"--progress-every {every:g} is not a number of seconds; give e.g. --progress-every "
                               "300, or 0 for no progress lines.")
        self.every = float(every)
        self.restart()

    def restart(self) -> None:
        """Count the next interval from now (a launcher's run starts)."""
        self.last = time.monotonic()

    def __call__(self, jobs: Sequence[Job], log: Any) -> None:
        if not self.every or not jobs or time.monotonic() - self.last < self.every:
            return
        self.last = time.monotonic()
        for job in jobs:
            line = last_progress_line(Path(job.spec.folder) / "log.txt")
            print(f"compare: [{job.index}/{job.total}] {job.spec.run_id}: {line or 'no progress line yet'}", file=log,
                  flush=True)


def child_env(env: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """This process's environment with the repository on PYTHONPATH and ``env`` on top: what a child runs with."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, **(env or {})}


def open_log(job: Job) -> Any:
    """The run's ``log.txt``: appended to (with a line saying so) when it resumes, else written anew."""
    log = open(Path(job.spec.folder) / "log.txt", "a" if job.resume_from is not None else "w")
    if job.resume_from is not None:
        log.write(f"\n{RESUMING} {job.resume_from}\n")
        log.flush()
    return log


def read_result(spec: RunSpec, returncode: int) -> Optional[Dict[str, Any]]:
    """The run's ``result.json`` after its process ended with ``returncode``; ``None`` when it failed."""
    path = Path(spec.folder) / RESULT_FILE
    if returncode != 0 or not path.is_file():
        return None
    return load_result(path.parent)


def terminate(proc: subprocess.Popen) -> None:
    """Send ``proc`` SIGTERM once (a second one could cut short the checkpoint the first makes it save)."""
    if proc.poll() is None and not getattr(proc, "terminated", False):
        proc.send_signal(signal.SIGTERM)
        proc.terminated = True  # type: ignore[attr-defined]


@contextlib.contextmanager
def forwarding_signals(procs: Any) -> Iterator[List[str]]:
    """While the runner waits, SIGTERM to this process goes on to each process in ``procs`` (one ``Popen`` or a
    list, which may grow meanwhile; each saves a resumable checkpoint and exits) and Ctrl-C waits for them (the
    terminal sent them their own SIGINT); the signals received, by name."""
    received: List[str] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def on_term(signum: int, frame: Any) -> None:
        received.append("SIGTERM")
        for proc in procs if isinstance(procs, list) else [procs]:
            terminate(proc)

    def on_int(signum: int, frame: Any) -> None:
        received.append("SIGINT")

    previous = {signal.SIGTERM: signal.signal(signal.SIGTERM, on_term),
                signal.SIGINT: signal.signal(signal.SIGINT, on_int)}
    try:
        yield received
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def wait(proc: subprocess.Popen) -> int:
    """``proc``'s exit status, waiting through a Ctrl-C delivered outside the main thread's handler."""
    while True:
        try:
            return proc.wait()
        except KeyboardInterrupt:  # pragma: no cover
            continue


def launch(spec: RunSpec, env: Optional[Dict[str, str]] = None,
           resume_from: Optional[Path] = None) -> Optional[Dict[str, Any]]:
    """Run ``spec`` in a fresh process (its log in ``<run>/log.txt``, appended to when it resumes from
    ``resume_from``, a checkpoint of :func:`.folders.prepare_folder`); the result, or ``None`` if it failed.

    SIGTERM to this process is forwarded to the run, which saves its checkpoint; :class:`Interrupted` then
    carries the run's exit status."""
    job = Job(spec, resume_from, 1, 1)
    with open_log(job) as log:
        proc = subprocess.Popen(job.command(), stdout=log, stderr=subprocess.STDOUT, env=child_env(env))
        with forwarding_signals(proc) as received:
            returncode = wait(proc)
    if received:
        raise Interrupted(spec.run_id, received[0], returncode)
    return read_result(spec, returncode)


class Launcher:
    """Runs a comparison's jobs (see the module's docstring); subclasses implement :meth:`run`."""

    def run(self, jobs: Sequence[Job], env: Optional[Dict[str, str]], log: Any) -> Dict[str, Optional[Dict[str, Any]]]:
        raise NotImplementedError


def visible_gpus() -> List[str]:
    """The GPUs a child may be given: the entries of this process's ``CUDA_VISIBLE_DEVICES`` when set, else
    ``0..n-1`` for the n GPUs torch sees (none on a machine without CUDA)."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [d.strip() for d in listed.split(",") if d.strip() and d.strip() != "-1"]
    try:
        import torch

        return [str(i) for i in range(torch.cuda.device_count())]
    except Exception:  # noqa: BLE001 - no usable CUDA: no GPUs
        return []


def cpu_cores() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def where_it_runs(given: Dict[str, str]) -> str:
    """The words after a run's name in its start line, from what its slot was given: its GPU and its threads."""
    gpu = f" on GPU {given['CUDA_VISIBLE_DEVICES']}" if "CUDA_VISIBLE_DEVICES" in given else ""
    threads = given.get("OMP_NUM_THREADS")
    return gpu + (f" ({plural(threads, 'thread')})" if threads else "")


class LocalLauncher(Launcher):
    """Each job in a fresh process on this machine, ``jobs`` at once (default one after another).

    With ``jobs`` > 1, the run in slot *i* gets ``CUDA_VISIBLE_DEVICES`` = ``devices[i % len(devices)]`` (default
    :func:`visible_gpus`: one GPU per run while there are enough, round-robin after; ``devices=["0"]`` puts every
    run on GPU 0, sharing it) and ``OMP_NUM_THREADS`` = cores // ``jobs`` (unless this process's environment or
    ``env`` sets it). Jobs start in the plan's order; the results do not depend on which ends first. ``time_limit``:
    the seconds of training each run may spend in this command (:func:`.child.run_child`), none by default;
    ``progress_every``: the seconds between the lines saying where the running runs stand (:class:`ProgressLines`)."""

    def __init__(self, jobs: int = 1, devices: Optional[Sequence[str]] = None, poll_seconds: float = 0.2,
                 time_limit: Optional[float] = None, progress_every: float = PROGRESS_EVERY) -> None:
        if int(jobs) < 1:
            raise CompareError(f"--jobs {jobs} is not a positive number of runs at once; use e.g. --jobs 2.")
        self.jobs, self.poll_seconds, self.time_limit = int(jobs), poll_seconds, time_limit
        self.progress = ProgressLines(progress_every)
        self.devices = list(devices) if devices is not None else (visible_gpus() if self.jobs > 1 else [])

    def slot_env(self, slot: int, env: Optional[Dict[str, str]]) -> Dict[str, str]:
        """What the run in ``slot`` is given on top of this process's environment (see the class docstring)."""
        if self.jobs == 1:
            return {}
        given: Dict[str, str] = {}
        if self.devices:
            given["CUDA_VISIBLE_DEVICES"] = self.devices[slot % len(self.devices)]
        if "OMP_NUM_THREADS" not in os.environ and "OMP_NUM_THREADS" not in (env or {}):
            given["OMP_NUM_THREADS"] = str(max(1, cpu_cores() // self.jobs))
        return given

    def run(self, jobs: Sequence[Job], env: Optional[Dict[str, str]], log: Any) -> Dict[str, Optional[Dict[str, Any]]]:
        pending, free = list(jobs), list(range(self.jobs))
        running: Dict[subprocess.Popen, tuple] = {}
        procs: List[subprocess.Popen] = []  # every child started: SIGTERM goes to those still running
        results: Dict[str, Optional[Dict[str, Any]]] = {}
        stopped: List[tuple] = []  # (run id, exit status) of the runs a signal stopped
        self.progress.restart()
        with forwarding_signals(procs) as received:
            while pending or running:
                while pending and free and not received:
                    slot, job = free.pop(0), pending.pop(0)
                    running[self.start(job, slot, env, log, procs)] = (job, slot, time.perf_counter())
                for proc in [p for p in running if p.poll() is not None]:
                    job, slot, start = running.pop(proc)
                    proc.stdout_file.close()
                    results[job.spec.run_id] = read_result(job.spec, proc.returncode)
                    if received and results[job.spec.run_id] is None:
                        stopped.append((job.spec.run_id, proc.returncode))
                    else:
                        job.ended(results[job.spec.run_id], time.perf_counter() - start, log)
                    free.append(slot)
                self.progress([job for job, _, _ in running.values()], log)
                if received and not running:
                    break
                if "SIGTERM" in received:  # a child started as the signal came
                    for proc in running:
                        terminate(proc)
                time.sleep(self.poll_seconds if running else 0)
        if received and (stopped or pending):
            code = 143 if received[0] == "SIGTERM" else 130
            first = stopped[0] if stopped else (pending[0].spec.run_id, code)
            raise Interrupted(first[0], received[0], first[1], [run_id for run_id, _ in stopped])
        return results

    def start(self, job: Job, slot: int, env: Optional[Dict[str, str]], log: Any,
              procs: List[subprocess.Popen]) -> subprocess.Popen:
        """Start ``job``'s child in ``slot``, its output to its ``log.txt``; say so on ``log``."""
        given = self.slot_env(slot, env)
        job.started(log, where_it_runs(given))
        output = open_log(job)
        proc = subprocess.Popen(job.command(self.time_limit), stdout=output, stderr=subprocess.STDOUT,
                                env=child_env({**given, **(env or {})}))
        proc.stdout_file = output  # type: ignore[attr-defined]  # closed when the run ends
        procs.append(proc)
        return proc


def run_specs(specs: Sequence[RunSpec], env: Optional[Dict[str, str]] = None, log: Any = None,
              failed: Optional[List[str]] = None, launcher: Optional[Launcher] = None) -> List[Dict[str, Any]]:
    """Run each spec in its own process (through ``launcher``, default :class:`LocalLauncher`), or reuse its
    ``result.json`` when it finished earlier, or resume it from its checkpoint when it was stopped
    (:func:`.folders.prepare_folder`); the results in the plan's order. A failed run is reported on ``log``
    (default: the current ``sys.stderr``, looked up at the call, not at import) and its id appended to
    ``failed``. A finished run planned again with a longer budget goes on from its last checkpoint (its earlier
    ``result.json`` kept as ``result_<budget>.json``). A run made or started with other settings is a
    :class:`CompareError` before any run."""
    log = sys.stderr if log is None else log
    resumes = check_resumable(specs)  # reads each resumable checkpoint once
    failed = [] if failed is None else failed
    kept: Dict[str, Dict[str, Any]] = {}
    jobs: List[Job] = []
    for i, spec in enumerate(specs, 1):
        done = Path(spec.folder) / RESULT_FILE
        if finished(Path(spec.folder)):
            if resumes[spec.folder] is None:
                print(f"compare: [{i}/{len(specs)}] {spec.run_id} finished earlier, kept", file=log, flush=True)
                kept[spec.run_id] = load_result(done.parent)
                continue
            print(f"compare: [{i}/{len(specs)}] {spec.run_id} finished {saved_budget(Path(spec.folder))} earlier; "
                  f"goes on to {spec.budget}", file=log, flush=True)
        resume = prepare_folder(spec, resumes[spec.folder])
        jobs.append(Job(spec, None if resume is None else resume[0], i, len(specs), 0 if resume is None else resume[1]))
    ran = (launcher or LocalLauncher()).run(jobs, env, log) if jobs else {}
    results: List[Dict[str, Any]] = []
    for spec in specs:
        result = kept.get(spec.run_id) or ran.get(spec.run_id)
        if result is None:
            failed.append(spec.run_id)
        else:
            results.append(result)
    return results
