"""Silencing the messages every run printed that say nothing about the run (issue: users learn to ignore
output, then miss what matters). Only exact, known messages are dropped; everything else still shows."""
from __future__ import annotations

import contextlib
import logging
import os
import warnings
from typing import Iterator, List

# (logger name, message prefix) of Lightning info lines that advertise products or restate a default.
_LOG_NOISE = (
    ("lightning.pytorch.utilities.rank_zero", "💡 Tip:"),
    ("lightning.pytorch.trainer.connectors.checkpoint_connector", "`weights_only` was not set"),
    # the hardware banners when there is none of that hardware (the start line says where the run runs; a GPU
    # that is present but unused is still announced)
    ("lightning.pytorch.utilities.rank_zero", "GPU available: False, used: False"),
    ("lightning.pytorch.utilities.rank_zero", "TPU available: False, using: 0 TPU cores"),
    ("lightning.pytorch.utilities.rank_zero", "HPU available: False, using: 0 HPUs"),
)
# Warnings whose cause is not ours to fix, or that do not apply to how we load data.
_WARNING_NOISE = (
    r"`isinstance\(treespec, LeafSpec\)` is deprecated",  # Lightning calling a torch API torch deprecated
    r"Your `IterableDataset` has `__len__` defined",  # ours run in the main process: the length is exact
    r"The dirpath has changed from",  # testing a checkpoint from another run's folder is what `test` is for
    r"\s*Unable to serialize instance",  # jsonargparse, when it reports a config value we then reject
    r"Couldn't infer the batch indices",  # predict: our writer orders by each record's own index
    r"Checkpoint directory .* exists and is not empty",  # a resume writes into its own run's folder (docs/runs.md)
    # cuDNN, when the fused GRU / LSTM / Elman kernel gets each cell's own weights rather than one flat buffer (by
    # design: Recurrent.flatten_parameters); its advice, flatten_parameters(), has nothing to do here
    r"RNN module weights are not part of single contiguous chunk of memory",
    # Lightning's all-gather (sync_dist, DDP) calling a torch API torch deprecated, once per rank and run
    r"torch\.distributed\.nn\.functional\.all_gather is deprecated",
)


MID_EPOCH_RESUME_WARNING = r"You're resuming from a checkpoint that ended before the epoch ended"
"""Lightning's warning on every mid-epoch resume whose dataloader is not itself stateful."""


def quiet_mid_epoch_resume_warning(datamodule: object) -> None:
    """Drop Lightning's "resuming mid-epoch ... can cause unreliable results" warning for a DataModule that
    resumes exactly (``resumes_mid_epoch = True``: ours keep the training position in the checkpoint and
    continue at the next batch, tested in tests/test_resume_and_ddp.py). A user's DataModule without that
    flag keeps the warning. The command line's ``run()`` restores the filters when its run ends."""
    if getattr(datamodule, "resumes_mid_epoch", False):
        warnings.filterwarnings("ignore", message=MID_EPOCH_RESUME_WARNING)


class _DropPrefixes(logging.Filter):
    def __init__(self, prefixes: tuple) -> None:
        super().__init__()
        self.prefixes = prefixes

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.prefixes)


CALLBACKS_NOT_RESTORED_WARNING = r"Be aware that when using `ckpt_path`, callbacks used to create the checkpoint"
"""Lightning's warning when a checkpoint holds the state of callbacks the Trainer lacks (a comparison run's best
checkpoint and learning curves): it matters to a fit that goes on, not to ``test`` / ``validate`` / ``predict``."""


def quiet_evaluation_warnings() -> None:
    """Drop the warnings that concern only a fit that goes on, for an evaluating subcommand (the command line's
    ``run()`` restores the filters when it ends)."""
    warnings.filterwarnings("ignore", message=CALLBACKS_NOT_RESTORED_WARNING)


SRUN_NOT_USED_WARNING = r"The `srun` command is available on your system but is not used"
"""Lightning's warning on every Trainer of a machine with Slurm installed: a hint for a job that forgot ``srun``,
noise for a run outside any Slurm job (a login node, a workstation with Slurm installed)."""


def quiet_known_noise() -> None:
    """Install the filters (idempotent)."""
    if "SLURM_JOB_ID" not in os.environ:  # not inside a Slurm job: there is no srun to forget
        warnings.filterwarnings("ignore", message=SRUN_NOT_USED_WARNING)
    for name, prefix in _LOG_NOISE:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropPrefixes) and prefix in f.prefixes for f in logger.filters):
            logger.addFilter(_DropPrefixes((prefix,)))
    for pattern in _WARNING_NOISE:
        warnings.filterwarnings("ignore", message=pattern)


def installed_patterns() -> List[str]:
    """The message patterns of the ``ignore`` filters of this module now installed (the known noise and the
    per-run ones), for a spawned process to install them too (:func:`install_patterns`)."""
    ours = {*_WARNING_NOISE, SRUN_NOT_USED_WARNING, MID_EPOCH_RESUME_WARNING, CALLBACKS_NOT_RESTORED_WARNING}
    found = []
    for action, message, *_ in warnings.filters:
        pattern = getattr(message, "pattern", None)
        if action == "ignore" and pattern in ours and pattern not in found:
            found.append(pattern)
    return found


def install_patterns(patterns: List[str]) -> None:
    """In a process the command line did not start (Lightning's ``ddp_spawn`` workers), install the log filters
    and the warning filters ``patterns`` (:func:`installed_patterns` of the parent)."""
    quiet_known_noise()
    for pattern in patterns:
        warnings.filterwarnings("ignore", message=pattern)


@contextlib.contextmanager
def no_lightning_info() -> Iterator[None]:
    """Within the block, Lightning's info lines (``Seed set to``, ``GPU available``, ...) are not printed: for
    library helpers that build a Trainer only to read a config (e.g. ``ParamCounter``). Warnings still show."""
    loggers = [logging.getLogger(name) for name in ("lightning.pytorch", "lightning.fabric")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)
