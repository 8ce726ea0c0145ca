"""The default logger: Weights & Biases, offline unless the user has configured W&B."""
from __future__ import annotations

import atexit
import netrc
import os
import sys
from pathlib import Path
from typing import Any, Dict, Mapping, Optional

from lightning.pytorch import LightningDataModule, LightningModule, Trainer
from lightning.pytorch.loggers import WandbLogger


def wandb_configured() -> bool:
    """True when W&B can reach an account: an API key in the environment or in ~/.netrc."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    path = Path(os.environ.get("NETRC", Path.home() / ".netrc"))
    try:
        hosts = netrc.netrc(str(path)).hosts if path.is_file() else {}
    except (netrc.NetrcParseError, OSError):
        return False
    return any("wandb" in host for host in hosts)


END_OF_RUN_SETTINGS: Dict[str, Any] = {"max_end_of_run_history_metrics": 0, "max_end_of_run_summary_metrics": 0}
"""W&B's end-of-run lines without its history sparklines and summary table: the command line prints the run's
metrics itself, and W&B's service printed neither (what the footer held before :func:`_finish_run`)."""


def _finish_run(run: Any) -> None:
    """Finish a W&B run still open when the process exits (a no-op for a finished one).

    A run left open is finished by W&B's service process, which prints the end-of-run lines ("You can sync this
    run ...: wandb sync <folder>", "Find logs at ...") to its own stdout, the user's, always in colour: a
    redirected stdout got ANSI escape codes. Finished from Python, the same lines go through ``wandb.termlog``
    to stderr, where W&B's other lines go, coloured on a terminal and plain otherwise."""
    try:
        run.finish()
    except Exception as error:  # noqa: BLE001 - exiting anyway: W&B's own exit hook finishes what is left
        print(f"W&B: could not finish the run ({error}); its service finishes it", file=sys.stderr)


class DefaultWandbLogger(WandbLogger):
    """WandbLogger that never fails for lack of an account or network.

    ``offline=None`` (the default) means: online when W&B is configured
    (``WANDB_API_KEY`` or ``wandb login``) and ``WANDB_MODE`` does not say
    otherwise, offline otherwise; ``wandb sync`` uploads an offline run later.
    ``WANDB_MODE=disabled`` turns W&B off entirely.
    Lightning logs from rank 0 only.

    The run is finished by this process before it exits (:func:`_finish_run`), so W&B's end-of-run lines are
    coloured on a terminal and plain in a redirected stream; they show where the run is and how to sync it,
    without W&B's history and summary tables (:data:`END_OF_RUN_SETTINGS`; a ``settings`` you pass wins).
    """

    def __init__(self, project: str = "lit_rnncells", save_dir: str = "runs", offline: Optional[bool] = None,
                 log_model: bool = False, **kwargs: Any) -> None:
        mode = os.environ.get("WANDB_MODE", "")
        if mode == "disabled":  # respect an explicit "no W&B at all" (tests, quick checks)
            offline = False
            kwargs.setdefault("mode", "disabled")
        elif offline is None:
            offline = mode in ("offline", "dryrun") or not wandb_configured()
        Path(save_dir).mkdir(parents=True, exist_ok=True)
        settings = kwargs.get("settings")  # the command line passes every wandb.init argument, None when not given
        if settings is None or isinstance(settings, Mapping):
            kwargs["settings"] = {**END_OF_RUN_SETTINGS, **(settings or {})}
        super().__init__(project=project, save_dir=save_dir, offline=offline, log_model=log_model, **kwargs)
        if kwargs.get("anonymous") is None:
            self._wandb_init.pop("anonymous", None)  # W&B warns about the setting whenever it is passed
        self._finish_at_exit = False

    def __getstate__(self) -> Dict[str, Any]:
        """Lightning's, which ``ddp_spawn`` calls once per worker, without W&B's "`wandb.require('service')` is
        a no-op" line that Lightning's call to it prints each time (W&B's service is its default now)."""
        import wandb

        termwarn = wandb.termwarn

        def warn_unless_require_service(message: str, *args: Any, **kwargs: Any) -> None:
            if "wandb.require('service')" not in str(message):
                termwarn(message, *args, **kwargs)

        wandb.termwarn = warn_unless_require_service
        try:
            return super().__getstate__()
        finally:
            wandb.termwarn = termwarn

    @property
    def experiment(self) -> Any:
        """The W&B run (Lightning's), finished by this process before it exits (:func:`_finish_run`)."""
        import wandb  # as Lightning does: importing W&B takes half a second, and only a run needs it

        run = super().experiment
        if not self._finish_at_exit and isinstance(run, wandb.Run):  # not Lightning's stand-in on other ranks
            atexit.register(_finish_run, run)  # after W&B's own exit hook, so it runs before it
            self._finish_at_exit = True
        return run


def _plain_hparams(hparams: Mapping[str, Any]) -> Dict[str, Any]:
    """A copy of saved hyperparameters without LightningCLI's internal ``_class_path``."""
    return {k: v for k, v in hparams.items() if k != "_class_path"}


def grouped_hyperparameters(module: LightningModule, datamodule: Optional[LightningDataModule]) -> Dict[str, Any]:
    """The task's hyperparameters under ``model`` and the DataModule's under ``data``.

    Lightning's own logging merges both into one flat dict and refuses the run when a name is in both with
    different values (``max_source_length`` is a model limit and a data filter). Tasks and DataModules save
    theirs with ``logger=False`` and :class:`~lit_rnncells.tasks.base.RecurrentTask` logs them grouped, so
    the same name can never collide (W&B shows ``model.max_source_length`` and ``data.max_source_length``)."""
    groups: Dict[str, Any] = {"model": _plain_hparams(module.hparams)}
    if datamodule is not None and len(getattr(datamodule, "hparams", {})):
        groups["data"] = _plain_hparams(datamodule.hparams)
    return groups


def log_grouped_hyperparameters(trainer: Trainer, module: LightningModule) -> None:
    """Log :func:`grouped_hyperparameters` to every logger of ``trainer`` (unless the trainer's
    ``enable_autolog_hparams`` is off, as Lightning's own logging does)."""
    if not trainer.loggers or not getattr(trainer, "enable_autolog_hparams", True):
        return
    params = grouped_hyperparameters(module, trainer.datamodule)
    for logger in trainer.loggers:
        logger.log_hyperparams(params)
