"""One model trained by the tasks ``srun`` started (``srun python -m lit_rnncells fit ...``): Lightning's
``SLURMEnvironment`` makes each task one DDP rank; this module makes the trainer config agree with what srun
started, before anything is built (docs/compare.md, "One model on several tasks or nodes").

- ``srun -n 2`` (no ``--ntasks-per-node``) is read as 2 tasks per node when srun placed them evenly (Lightning
  alone refuses it).
- ``--trainer.devices`` left at ``auto`` becomes the tasks per node, ``--trainer.num_nodes`` left at 1 becomes
  the node count; a value that disagrees with srun is one sentence naming the fix (Lightning would stop with a
  traceback, or wait forever for ranks that never come).
"""
from __future__ import annotations

import os
import re
from typing import Any, Optional

INTERACTIVE_NAMES = ("bash", "interactive")
"""Job names Lightning treats as an interactive allocation (no SLURMEnvironment): ``srun --job-name bash``."""


def srun_tasks() -> int:
    """How many tasks the ``srun`` that started this process started (1 outside srun, or in an allocation Lightning
    treats as interactive)."""
    if "SLURM_NTASKS" not in os.environ or os.environ.get("SLURM_JOB_NAME") in INTERACTIVE_NAMES:
        return 1
    return int(os.environ["SLURM_NTASKS"])


def global_rank() -> int:
    """This process's rank as its launcher set it: ``LOCAL_RANK`` of a process Lightning's DDP launched, the
    task number of an ``srun`` with several tasks, else 0."""
    if os.environ.get("LOCAL_RANK", "0") != "0":
        return int(os.environ["LOCAL_RANK"])
    if srun_tasks() > 1:
        return int(os.environ.get("SLURM_PROCID", "0"))
    return 0


def _tasks_per_node() -> int:
    """srun's tasks per node: ``SLURM_NTASKS_PER_NODE``, or the even split ``SLURM_TASKS_PER_NODE`` names
    (``2`` or ``2(x3)``), which is then exported as ``SLURM_NTASKS_PER_NODE`` for Lightning."""
    given = os.environ.get("SLURM_NTASKS_PER_NODE")
    if given is not None:
        return int(given)
    split = os.environ.get("SLURM_TASKS_PER_NODE", "")
    match = re.fullmatch(r"(\d+)(?:\(x\d+\))?", split)
    if match is None:
        raise ValueError(f"srun started {srun_tasks()} tasks unevenly over the nodes (SLURM_TASKS_PER_NODE={split}); "
                         "start the same number on every node: srun --ntasks-per-node <devices per node> ...")
    os.environ["SLURM_NTASKS_PER_NODE"] = match.group(1)
    return int(match.group(1))


def _as_int(value: Any) -> Optional[int]:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def agree_with_srun(trainer_config: Any) -> None:
    """Under an ``srun`` of several tasks: fill ``devices`` (when ``auto``) and ``num_nodes`` (when 1) from srun,
    and refuse values that disagree with it, in one sentence with the fix."""
    if srun_tasks() <= 1 or trainer_config is None:
        return
    per_node, nodes = _tasks_per_node(), int(os.environ.get("SLURM_NNODES", "1"))
    if trainer_config.get("devices", "auto") == "auto":
        trainer_config["devices"] = per_node
    if _as_int(trainer_config.get("num_nodes", 1)) == 1 and nodes > 1:
        trainer_config["num_nodes"] = nodes
    devices, num_nodes = _as_int(trainer_config.get("devices")), _as_int(trainer_config.get("num_nodes", 1))
    if devices != per_node or num_nodes != nodes:
        raise ValueError(f"srun started {per_node} task(s) per node on {nodes} node(s), but the trainer asks for "
                         f"devices={trainer_config.get('devices')} and num_nodes={trainer_config.get('num_nodes', 1)}"
                         f"; pass --trainer.devices {per_node} --trainer.num_nodes {nodes} (one task per device), "
                         "or start srun with that many tasks.")
