"""Read what a DataModule saved in a Lightning checkpoint, so ``test`` and ``predict`` can take the
tokenizers, vocabulary and labels from the checkpoint alone."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

import torch


def read_checkpoint(path: str) -> Dict[str, Any]:
    """A Lightning checkpoint loaded on CPU with ``weights_only=True``; one clear error if it is not one."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise FileNotFoundError(f"Checkpoint {str(file)!r} does not exist; pass the path of a .ckpt file that "
                                "fit wrote (it prints where it saved them).")
    try:
        checkpoint = torch.load(file, map_location="cpu", weights_only=True)
    except Exception as error:  # truncated, random bytes, or pickled code we refuse to run
        raise ValueError(f"{str(file)!r} is not a readable checkpoint ({type(error).__name__}); pass a .ckpt file "
                         "that fit wrote, or train again if it was damaged.") from None
    if not isinstance(checkpoint, dict) or "state_dict" not in checkpoint:
        raise ValueError(f"{str(file)!r} is not a Lightning checkpoint (no state_dict); pass a .ckpt file that "
                         "fit wrote.")
    return checkpoint


def datamodule_state(checkpoint_path: str, datamodule_cls: type) -> Dict[str, Any]:
    """The ``state_dict()`` a DataModule of ``datamodule_cls`` saved in the checkpoint."""
    checkpoint = read_checkpoint(checkpoint_path)
    key = datamodule_cls.__qualname__
    if key not in checkpoint:
        saved = sorted(k for k in checkpoint if isinstance(k, str) and k.endswith("DataModule"))
        trained = f"was trained with {', '.join(saved)}" if saved else "holds no DataModule state"
        raise ValueError(f"The checkpoint {checkpoint_path!r} {trained}, not {datamodule_cls.__name__}; use the config it was "
                         "trained with.")
    return checkpoint[key]
