"""The default logger: Weights & Biases, offline unless the user has configured W&B."""
from __future__ import annotations

import netrc
import os
from pathlib import Path
from typing import Any, Optional

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
