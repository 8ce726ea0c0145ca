"""A validation metric that something monitors but the task does not log, named before training starts.

A ``ReduceLROnPlateau`` scheduler (``--model.init_args.scheduler_monitor``), a ``ModelCheckpoint`` or an
``EarlyStopping`` watching a misspelt metric (``val/los``) fails in Lightning only where it first reads it: at the
first epoch's end or the first validation, after all the training before it. Lightning's sanity validation runs
before training and logs every validation metric the task has, so :class:`MonitoredMetricsCheck` compares the
monitors with what it logged and stops the run there, naming the metric and the fix.

Only monitors of validation metrics (``val/...`` or ``val_...``) are checked: training metrics are first logged
during training. Without a sanity validation (``--trainer.num_sanity_val_steps 0``, or a fit resumed where
Lightning skips it) nothing is checked.
"""
from __future__ import annotations

import difflib
from typing import List, Tuple

from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.callbacks import Callback, EarlyStopping, ModelCheckpoint

VALIDATION_PREFIXES = ("val/", "val_")
CALLBACK_OPTION = "its monitor (the trainer callbacks' init_args)"


def monitors(trainer: Trainer) -> List[Tuple[str, str, str]]:
    """``(metric, who watches it, the option that sets it)`` for every validation metric the run's scheduler
    and callbacks read (an ``EarlyStopping`` with ``strict=False`` accepts a missing metric: left out)."""
    found: List[Tuple[str, str, str]] = []
    for config in getattr(trainer, "lr_scheduler_configs", None) or []:
        if config.reduce_on_plateau and config.monitor:
            found.append((config.monitor, f"the {type(config.scheduler).__name__} scheduler",
                          "--model.init_args.scheduler_monitor"))
    for callback in trainer.callbacks:
        if isinstance(callback, ModelCheckpoint) and callback.monitor:  # the runner's names its own option
            found.append((callback.monitor, getattr(callback, "monitor_owner", "the ModelCheckpoint callback"),
                          getattr(callback, "monitor_option", CALLBACK_OPTION)))
        elif isinstance(callback, EarlyStopping) and callback.monitor and callback.strict:
            found.append((callback.monitor, "the EarlyStopping callback", CALLBACK_OPTION))
    return [entry for entry in found if entry[0].startswith(VALIDATION_PREFIXES)]


class MonitoredMetricsCheck(Callback):
    """After the sanity validation, an error naming any monitored validation metric the task did not log."""

    def on_sanity_check_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        logged = sorted(str(name) for name in trainer.callback_metrics)
        for metric, who, option in monitors(trainer):
            if metric in logged:
                continue
            close = difflib.get_close_matches(metric, logged, n=1)
            shown = ", ".join(logged) if logged else "nothing"
            raise ValueError(f"{who} monitors {metric}, which {type(pl_module).__name__}'s validation does not log "
                             f"(it logs {shown}); set {option} to "
                             f"{close[0] if close else 'one of those'}.")
