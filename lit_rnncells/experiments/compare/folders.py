"""Run folders across reruns: which runs finished, which resume from which checkpoint, which go on to a longer
budget, and which are refused because they were made with other settings. Nothing here deletes a checkpoint a run
can resume from, or a result a run wrote."""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import MISSING, asdict, fields
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ...command import run_folder
from ..report import RESULT_FILE
from .planning import Budget, CompareError, RunSpec

RESUME_FILES = ("interrupted.ckpt", "last.ckpt")
"""The checkpoints an unfinished run resumes from, in order of preference when equally new."""

Resume = Optional[Tuple[Path, int]]
"""A checkpoint to resume from and the optimiser steps it had trained, or ``None`` for a fresh start."""


def resume_checkpoint(folder: Path) -> Resume:
    """The checkpoint an unfinished run in ``folder`` resumes from: the newest of ``checkpoints/interrupted.ckpt``
    (saved on SIGTERM / Ctrl-C) and ``checkpoints/last.ckpt`` (saved at each validation; or ``last-vN.ckpt``)
    that is readable, with the optimiser steps it had trained; ``None`` when there is none."""
    from ...data.checkpoint_state import read_checkpoint

    found = [folder / run_folder.CHECKPOINTS / name for name in RESUME_FILES]
    # last-v1.ckpt ...: what Lightning wrote beside a last.ckpt it did not own, as resumed runs of before
    # RunnerCheckpoint did (callbacks.py); the newest of all is taken
    found += sorted((folder / run_folder.CHECKPOINTS).glob("last-v*.ckpt"))
    found = sorted((p for p in found if p.is_file()), key=lambda p: -p.stat().st_mtime_ns)  # stable: ties keep order
    for path in found:
        try:
            steps = int(read_checkpoint(str(path)).get("global_step", 0))
        except (OSError, ValueError):  # truncated by a kill mid-write: try the other one
            continue
        return path, steps
    return None


NOT_SETTINGS = ("folder", "keep_epoch_checkpoints")
"""What of a :class:`RunSpec` may change between a run and its resume: where it lives, and whether the epochs'
checkpoints are kept after their tests (no number depends on either)."""


def spec_differences(folder: Path, spec: RunSpec) -> List[str]:
    """The settings in which ``spec`` differs from the one the run in ``folder`` was started with (its
    ``spec.json``; the folder's own path aside, so a moved ``--out`` still resumes)."""
    try:
        saved = json.loads((folder / "spec.json").read_text())
    except (OSError, ValueError):
        return ["spec.json (missing or unreadable)"]
    now, defaults = asdict(spec), spec_defaults()
    # a setting spec.json lacks (it was written before the setting existed) has its default
    return [key for key in now if key not in NOT_SETTINGS
            and not same_setting(key, saved.get(key, defaults.get(key)), json.loads(json.dumps(now[key])))]


def same_setting(key: str, saved: Any, now: Any) -> bool:
    """Whether a run's saved setting is the one given now; the config is the same file however its path is
    written (relative to this folder or absolute)."""
    if key == "config" and isinstance(saved, str) and isinstance(now, str):
        return os.path.realpath(saved) == os.path.realpath(now)
    return saved == now


def spec_defaults() -> Dict[str, Any]:
    """The default of each :class:`RunSpec` setting that has one."""
    defaults: Dict[str, Any] = {}
    for spec_field in fields(RunSpec):
        if spec_field.default is not MISSING:
            defaults[spec_field.name] = spec_field.default
        elif spec_field.default_factory is not MISSING:
            defaults[spec_field.name] = spec_field.default_factory()
    return defaults


def refuse_other_settings(spec: RunSpec, checkpoint: Path) -> None:
    """Refuse to run ``spec`` over an unfinished run started with other settings (it would delete or mix up
    a checkpoint the user can still resume from); a longer budget is not other settings (:func:`goes_on`)."""
    changed = spec_differences(Path(spec.folder), spec)
    if changed and not goes_on(Path(spec.folder), spec, changed):
        raise CompareError(f"The run folder {spec.folder} holds an unfinished run, resumable from {checkpoint}, that "
                           f"was started with other settings ({', '.join(changed)}); rerun with the settings it was "
                           "started with to resume it, or move the folder away to start it again.")


def saved_budget(folder: Path) -> Optional[str]:
    """The budget the run in ``folder`` was planned with (its ``spec.json``)."""
    try:
        return json.loads((folder / "spec.json").read_text()).get("budget")
    except (OSError, ValueError):
        return None


def goes_on(folder: Path, spec: RunSpec, changed: List[str]) -> bool:
    """Whether ``spec`` differs from the run in ``folder`` (by ``changed``, :func:`spec_differences`) only by a
    longer budget of the same kind (``epochs=8`` then ``epochs=30``): that run goes on from its checkpoint instead
    of starting again."""
    before = saved_budget(folder)
    if changed != ["budget"] or before is None or spec.budget is None:
        return False
    old, new = Budget.parse(before), Budget.parse(spec.budget)
    return old.kind == new.kind and new.value > old.value


def finished(folder: Path) -> bool:
    """Whether the run in ``folder`` is done: it wrote ``result.json`` and no time limit stopped it before its
    budget (``"partial": true``, :func:`.child.run_child`; such a run is reported, and resumed by the next run)."""
    try:
        return not json.loads((folder / RESULT_FILE).read_text()).get("partial", False)
    except (OSError, ValueError):
        return False


def check_resumable(specs: Sequence[RunSpec]) -> Dict[str, Resume]:
    """Before any run starts: no unfinished run with a checkpoint was started with other settings, and no finished
    run was made with other settings than the plan's but a longer budget. The checkpoint each unfinished run
    resumes from (:func:`resume_checkpoint`), and each finished run that goes on to a longer budget, by run
    folder; ``None`` for a finished run kept as it is and for a fresh start."""
    resumes: Dict[str, Resume] = {}
    for spec in specs:
        folder = Path(spec.folder)
        if folder.is_dir() and finished(folder):
            resumes[spec.folder] = longer_budget_checkpoint(spec)
            continue
        found = resume_checkpoint(folder) if folder.is_dir() else None
        if found is not None:
            refuse_other_settings(spec, found[0])
        resumes[spec.folder] = found
    return resumes


def longer_budget_checkpoint(spec: RunSpec) -> Resume:
    """For a finished run: ``None`` when the plan made it as it is (kept); its last checkpoint when the plan only
    gives it a longer budget (it goes on); otherwise a :class:`CompareError`, so that no table shows a run made
    with other settings under this plan's."""
    folder = Path(spec.folder)
    changed = spec_differences(folder, spec)
    if not changed or not (folder / "spec.json").is_file():  # no spec.json: nothing to compare, kept as before
        return None
    if not goes_on(folder, spec, changed):
        budget = f"; budget {saved_budget(folder)} there, {spec.budget} now" if "budget" in changed else ""
        raise CompareError(f"The run folder {folder} holds a finished run made with other settings "
                           f"({', '.join(changed)}{budget}); give another --out, or move the folder away to run it "
                           "again.")
    found = resume_checkpoint(folder)
    if found is None:
        raise CompareError(f"The run folder {folder} finished its budget {saved_budget(folder)} and keeps no "
                           f"checkpoint to go on to {spec.budget} from; move the folder away to run it again from the "
                           "start.")
    return found


def prepare_folder(spec: RunSpec, found: Resume) -> Resume:
    """Make ``spec``'s folder ready for its run; ``found``, the checkpoint it resumes from and its steps (see
    :func:`check_resumable`, which refused other settings), or ``None`` for a fresh start.

    An unfinished run with a usable checkpoint resumes (its folder kept as it is) when it was started with the
    same settings; with other settings it was refused, so no resumable checkpoint is ever deleted. A folder
    with no usable checkpoint is cleared and the run starts from scratch."""
    folder = Path(spec.folder)
    holder = run_folder.lock_holder(folder) if folder.is_dir() else None
    if holder is not None:
        raise CompareError(f"The run folder {folder} is in use by another fit ({holder}), perhaps a run of an earlier "
                           "compare that was stopped; wait for it to finish or stop it, then rerun the same command.")
    if found is not None:
        if spec_differences(folder, spec):  # a longer budget (check_resumable refused the rest)
            before = Budget.parse(saved_budget(folder) or "")
            if (folder / RESULT_FILE).is_file():  # the shorter budget's result, kept beside the new one
                (folder / RESULT_FILE).rename(folder / f"result_{before.kind}{before.value}.json")
            (folder / "spec.json").write_text(json.dumps(asdict(spec), indent=1))
        return found
    if folder.exists():
        shutil.rmtree(folder)  # nothing to resume from: the run starts again from scratch
    folder.mkdir(parents=True)
    (folder / "spec.json").write_text(json.dumps(asdict(spec), indent=1))
    return None
