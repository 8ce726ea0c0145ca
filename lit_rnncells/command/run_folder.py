"""One folder per ``fit``: where its config, checkpoints and logs go, and a lock against a second writer.

Layout (docs/runs.md)::

    <run folder>/                 --run_dir, or <trainer.default_root_dir or runs>/<YYYYmmdd-HHMMSS>
        config.yaml               the full config of the fit (config-resume-1.yaml, ... for each resume)
        checkpoints/              last.ckpt, the best checkpoint(s), interrupted.ckpt
        logs/                     CSV / TensorBoard logs (logs-resume-1/, ... for each resume)
        wandb/                    the W&B run(s)
        .lock                     held while a fit writes here

A resumed fit (``--ckpt_path <run>/checkpoints/<file>.ckpt``) writes into the checkpoint's run folder without
overwriting anything. A folder that already holds another run is refused, and so is a folder another process is
writing to. Under DDP the launching process (rank 0) chooses the folder and its launched ranks inherit it; of the
ranks ``srun`` started, rank 0 chooses and the others use what it broadcasts.
"""
from __future__ import annotations

import os
import re
import time
from pathlib import Path
from datetime import timedelta
from typing import Any, Dict, List, Optional, Tuple

from ..utils.paths import check_output_folder
from .slurm_tasks import global_rank
from ..utils.imports import import_object

try:  # POSIX; without it (Windows) a run folder is not locked
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

DEFAULT_ROOT = "runs"
CONFIG_NAME = "config.yaml"
CHECKPOINTS = "checkpoints"
LOGS = "logs"
LOCK_NAME = ".lock"
RUN_MARKERS = (CONFIG_NAME, CHECKPOINTS, LOGS, "wandb")
"""What makes a folder another run's: a fit's config, checkpoints or logs."""
ENV = "LIT_RNNCELLS_RUN_DIR"
"""Set by the launching process to the run folder it chose, so DDP ranks it starts use the same one."""

_held: Dict[str, int] = {}  # run folder -> file descriptor of its held lock
_created: Dict[str, List[Path]] = {}
"""Run folders this process created, with the parent folders it created for them (all removed again, when
empty, if the fit fails before writing anything)."""


class RunFolderError(ValueError):
    """The run folder cannot be used; one sentence naming the problem and the fix."""


def cannot_write(folder: Path, error: OSError) -> RunFolderError:
    """A run folder this process may not create or write into (read-only, not ours, a full disk)."""
    where = f": {error.filename}" if error.filename and str(error.filename) != str(folder) else ""
    return RunFolderError(f"Cannot write the run folder {folder} ({error.strerror or error}{where}); pass --run_dir "
                          "<a folder you can write to>, or --trainer.default_root_dir <one> for new run folders.")


def new_run_folder(root: Path) -> Path:
    """A fresh ``<root>/<YYYYmmdd-HHMMSS>`` folder (``-1``, ``-2``, ... when that second is taken), created."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    missing = [p for p in [root, *root.parents] if not p.exists()]
    for n in range(1000):
        folder = root / (stamp if n == 0 else f"{stamp}-{n}")
        try:
            root.mkdir(parents=True, exist_ok=True)
            folder.mkdir()
            _created[str(folder.resolve())] = missing
            return folder
        except FileExistsError:
            continue
        except OSError as error:  # a read-only folder or file system, a full disk
            raise cannot_write(folder, error) from None
    raise RunFolderError(f"Could not create a new run folder under {root}; pass --run_dir <a new folder>.")


def holds_a_run(folder: Path) -> Optional[str]:
    """The first thing in ``folder`` that belongs to a run (config.yaml, checkpoints/, logs/, wandb/), if any."""
    for name in RUN_MARKERS:
        if (folder / name).exists():
            return name
    return None


def run_folder_of_checkpoint(ckpt_path: str) -> Optional[Path]:
    """The run folder a checkpoint was written into (``<run>/checkpoints/x.ckpt`` beside ``<run>/config.yaml``)."""
    ckpt = Path(ckpt_path).expanduser().resolve()
    folder = ckpt.parent.parent
    if ckpt.parent.name == CHECKPOINTS and (folder / CONFIG_NAME).is_file():
        return folder
    return None


def choose(run_dir: Optional[str], ckpt_path: Optional[str], root: Optional[str]) -> Tuple[Path, bool]:
    """The run folder of a fit and whether it resumes a run already there.

    ``run_dir`` given: that folder; it must not hold another run unless ``ckpt_path`` is inside it (a resume).
    Otherwise a checkpoint inside a run folder resumes there, and anything else gets a new folder under
    ``root`` (``runs`` by default)."""
    ckpt_folder = run_folder_of_checkpoint(ckpt_path) if ckpt_path else None
    if global_rank() != 0:
        return _folder_of_other_rank(run_dir, ckpt_folder, root)
    if run_dir is not None:
        folder = check_output_folder(run_dir, "--run_dir").resolve()  # neither it nor a folder above is a file
        found = holds_a_run(folder) if folder.is_dir() else None
        if found is not None and ckpt_folder != folder:
            last = folder / CHECKPOINTS / "last.ckpt"
            fix = (f"resume it with --ckpt_path {last}, or pass a new --run_dir" if last.is_file()
                   else "pass a new --run_dir")
            raise RunFolderError(f"The run folder {folder} already holds another run ({found}); {fix}.")
        if not folder.exists():
            missing = [p for p in folder.parents if not p.exists()]
            try:
                folder.mkdir(parents=True)
            except OSError as error:
                raise cannot_write(folder, error) from None
            _created[str(folder)] = missing
        return folder, found is not None
    if ckpt_folder is not None:
        return ckpt_folder, True
    return new_run_folder(Path(root or DEFAULT_ROOT).expanduser().resolve()), False


def _folder_of_other_rank(run_dir: Optional[str], ckpt_folder: Optional[Path], root: Optional[str]) -> Tuple[Path, bool]:
    """The run folder as a rank other than 0 sees it, creating and checking nothing (rank 0 does): the one the
    launching process exported, else ``run_dir`` or the checkpoint's folder, else (the ranks ``srun`` started
    each choose alone) the root: rank 0's folder reaches them where it counts, as ModelCheckpoint and
    ``trainer.log_dir`` broadcast rank 0's paths, and only rank 0 writes the config and checkpoints."""
    inherited = os.environ.get(ENV)
    folder = Path(inherited) if inherited else (Path(run_dir).expanduser().resolve() if run_dir is not None
                                                else ckpt_folder)
    if folder is None:
        return Path(root or DEFAULT_ROOT).expanduser().resolve(), False
    return folder, holds_a_run(folder) is not None


def resume_index(folder: Path) -> int:
    """How many fits wrote into ``folder`` before: 0 for a new run, 1 for the first resume, ..."""
    if not (folder / CONFIG_NAME).exists():
        return 0
    taken = [int(m.group(1)) for p in folder.glob("config-resume-*.yaml")
             if (m := re.fullmatch(r"config-resume-(\d+)\.yaml", p.name))]
    return max(taken, default=0) + 1


def suffixed(name: str, index: int) -> str:
    """``config.yaml`` -> ``config-resume-2.yaml``; ``logs`` -> ``logs-resume-2`` (index 0: unchanged)."""
    if index == 0:
        return name
    stem, dot, ext = name.partition(".")
    return f"{stem}-resume-{index}{dot}{ext}"


def lock_holder(folder: Path) -> Optional[str]:
    """Who holds ``folder``'s lock (``process N``), or ``None`` when nobody writes there."""
    if fcntl is None or not (folder / LOCK_NAME).is_file():
        return None
    if str(folder.resolve()) in _held:
        return f"process {os.getpid()}"
    with open(folder / LOCK_NAME, "a+") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            return f"process {handle.read().strip() or '?'}"
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    return None


def lock(folder: Path) -> None:
    """Hold ``folder``'s lock until :func:`unlock` or the end of this process; refuse a folder another process
    holds."""
    key = str(folder.resolve())
    if fcntl is None or key in _held:
        return
    try:
        fd = os.open(folder / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as error:
        raise cannot_write(folder, error) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.read(fd, 64).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise RunFolderError(f"The run folder {folder} is in use by another fit (process {holder}); wait for it to "
                             "finish or stop it, or pass another --run_dir.") from None
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    _held[key] = fd


def unlock(folder: Optional[Path] = None, refused: bool = False) -> None:
    """Release ``folder``'s lock (every lock this process holds when ``None``). A folder this process created is
    removed again when the fit wrote nothing into it, or, when it was ``refused`` (a setting refused at the fit's
    start, after Lightning wrote the config), nothing but that config: otherwise the same command, corrected, was
    refused because the folder "already holds another run"."""
    keys = list(_held) if folder is None else [str(Path(folder).resolve())]
    leftovers = {LOCK_NAME, CONFIG_NAME} if refused else {LOCK_NAME}
    for key in keys:
        fd = _held.pop(key, None)
        if fd is not None:
            os.close(fd)  # closing the descriptor releases the flock
        path = Path(key)
        parents = _created.pop(key, None)
        if parents is not None and path.is_dir() and {p.name for p in path.iterdir()} <= leftovers:
            (path / CONFIG_NAME).unlink(missing_ok=True)  # this fit's own, written into the folder it created
            (path / LOCK_NAME).unlink(missing_ok=True)
            path.rmdir()  # a fit that failed before writing anything leaves no empty run folder
            for parent in parents:  # deepest first
                if parent.is_dir() and not any(parent.iterdir()):
                    parent.rmdir()


def _logger_class(class_path: str) -> Optional[type]:
    if "." not in class_path:
        class_path = f"lightning.pytorch.loggers.{class_path}"
    return import_object(class_path)


def _default_of(cls: type, name: str) -> object:
    import inspect

    parameter = inspect.signature(cls.__init__).parameters.get(name)
    return None if parameter is None or parameter.default is inspect.Parameter.empty else parameter.default


def logger_entries(logger: object) -> list:
    """The ``{class_path, init_args}`` entries of a ``trainer.logger`` config value (a bool gives none)."""
    items = logger if isinstance(logger, list) else [logger]
    return [item for item in items if getattr(item, "get", None) is not None and item.get("class_path")]


def given_save_dir(logger: object) -> Optional[str]:
    """A ``save_dir`` the user gave a logger (not its default): the root their run folders go under."""
    for entry in logger_entries(logger):
        cls = _logger_class(str(entry["class_path"]))
        init_args = entry.get("init_args") or {}
        value = init_args.get("save_dir") if hasattr(init_args, "get") else None
        if cls is not None and value is not None and value != _default_of(cls, "save_dir"):
            return str(value)
    return None


def point_loggers(logger: object, folder: Path, index: int) -> None:
    """Make every configured logger write inside ``folder``: W&B into ``wandb/``, CSV and TensorBoard into
    ``logs/`` (``logs-resume-N/`` for the N-th resume, so nothing is overwritten)."""
    from jsonargparse import Namespace
    from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger

    for entry in logger_entries(logger):
        cls = _logger_class(str(entry["class_path"]))
        if cls is None:
            continue
        import inspect

        accepted = inspect.signature(cls.__init__).parameters
        if entry.get("init_args") is None:
            entry["init_args"] = Namespace()
        init_args = entry["init_args"]
        if "save_dir" in accepted:
            init_args["save_dir"] = str(folder)
        if issubclass(cls, (CSVLogger, TensorBoardLogger)):
            init_args["name"] = ""
            init_args["version"] = suffixed(LOGS, index)


MAX_TIME = re.compile(r"^(\d+):(\d{2}):(\d{2}):(\d{2})$")
"""Lightning's ``trainer.max_time`` string, ``DD:HH:MM:SS`` (its ``Timer``'s own format)."""


def max_time_seconds(max_time: Any) -> Optional[float]:
    """``trainer.max_time`` (``DD:HH:MM:SS``, a ``timedelta`` or a dict of its fields, as Lightning's ``Timer``
    takes it) in seconds; ``None`` when unset or none of those (Lightning then names the problem itself)."""
    if isinstance(max_time, timedelta):
        return max_time.total_seconds()
    if isinstance(max_time, dict):
        try:
            return timedelta(**max_time).total_seconds()
        except TypeError:
            return None
    match = MAX_TIME.match(str(max_time).strip()) if isinstance(max_time, str) else None
    if match is None:
        return None
    days, hours, minutes, seconds = (int(g) for g in match.groups())
    return timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds).total_seconds()


def duration_text(seconds: float) -> str:
    """Seconds as Lightning's ``trainer.max_time`` string ``DD:HH:MM:SS`` (whole seconds)."""
    days, rest = divmod(int(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{days:02d}:{hours:02d}:{minutes:02d}:{seconds:02d}"


def trained_seconds(checkpoint: Dict) -> float:
    """The training seconds Lightning's ``Timer`` had counted when ``checkpoint`` was saved (0 without a Timer:
    Lightning adds one only for ``max_time``)."""
    states = checkpoint.get("callbacks", {}) or {}
    timer = next((v for k, v in states.items() if str(k).startswith("Timer")), {}) or {}
    return float((timer.get("time_elapsed", {}) or {}).get("train", 0.0))


def finished(checkpoint: Dict, max_epochs: Optional[int], max_steps: Optional[int],
             max_time: Any = None) -> Optional[str]:
    """Why resuming from ``checkpoint`` under these limits would train nothing (``None`` when it would train).

    A step limit is reached when the checkpoint's optimiser steps reach ``max_steps``; an epoch limit when
    ``max_epochs`` epochs ran to their last batch (Lightning's ``max_epochs=None`` with ``max_steps=-1`` is
    1000 epochs); a time limit when the training time Lightning's ``Timer`` counted reaches ``max_time`` (the
    Timer counts on from the checkpoint: ``max_time`` is the run's total, not each resume's)."""
    limit_seconds = max_time_seconds(max_time)
    trained = trained_seconds(checkpoint)
    if limit_seconds is not None and trained >= limit_seconds:
        return (f"it trained for {duration_text(trained)} of max_time {duration_text(limit_seconds)} (Lightning counts "
                "max_time over the run, resumes included); to train further, raise --trainer.max_time (e.g. "
                f"--trainer.max_time {duration_text(max(2 * trained, trained + 60))})")
    steps = int(checkpoint.get("global_step", 0))
    if max_steps is not None and max_steps >= 0 and steps >= max_steps:
        return (f"it trained {steps} step{'' if steps == 1 else 's'} of max_steps {max_steps}; to train further, "
                "raise "
                f"--trainer.max_steps (e.g. --trainer.max_steps {max(2 * steps, steps + 1)})")
    loop = checkpoint.get("loops", {}).get("fit_loop", {})
    epochs = int(loop.get("epoch_progress", {}).get("current", {}).get("processed", 0))
    epoch_done = bool(loop.get("epoch_loop.batch_progress", {}).get("is_last_batch", False))
    limit = max_epochs if max_epochs is not None else (1000 if max_steps in (None, -1) else -1)
    if limit is not None and limit >= 0 and epoch_done and epochs >= limit:
        return (f"it trained {epochs} epoch{'' if epochs == 1 else 's'} of max_epochs {limit}; to train further, "
                "raise "
                f"--trainer.max_epochs (e.g. --trainer.max_epochs {max(2 * epochs, epochs + 1)})")
    return None
