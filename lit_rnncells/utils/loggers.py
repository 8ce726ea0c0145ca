"""The default logger: Weights & Biases, offline unless the user has configured W&B."""
from __future__ import annotations

import netrc
import os
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


class DefaultWandbLogger(WandbLogger):
    """WandbLogger that never fails for lack of an account or network.

    ``offline=None`` (the default) means: online when W&B is configured
    (``WANDB_API_KEY`` or ``wandb login``) and ``WANDB_MODE`` does not say
    otherwise, offline otherwise; ``wandb sync`` uploads an offline run later.
    ``WANDB_MODE=disabled`` turns W&B off entirely.
    Lightning logs from rank 0 only.
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
        super().__init__(project=project, save_dir=save_dir, offline=offline, log_model=log_model, **kwargs)
        if kwargs.get("anonymous") is None:
            self._wandb_init.pop("anonymous", None)  # W&B warns about the setting whenever it is passed


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
