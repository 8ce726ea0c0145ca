"""Read what a DataModule saved in a Lightning checkpoint, so ``test`` and ``predict`` can take the
tokenizers, vocabulary and labels from the checkpoint alone."""
from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

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
    return saved_state(read_checkpoint(checkpoint_path), checkpoint_path, datamodule_cls)


def saved_state(checkpoint: Mapping[str, Any], checkpoint_path: str, datamodule_cls: type) -> Dict[str, Any]:
    """:func:`datamodule_state` of a checkpoint already read."""
    key = datamodule_cls.__qualname__
    if key not in checkpoint:
        saved = sorted(k for k in checkpoint if isinstance(k, str) and k.endswith("DataModule"))
        trained = f"was trained with {', '.join(saved)}" if saved else "holds no DataModule state"
        raise ValueError(f"The checkpoint {checkpoint_path!r} {trained}, not {datamodule_cls.__name__}; use the config it was "
                         "trained with.")
    return checkpoint[key]


def reopen_cut_epoch(checkpoint: Dict[str, Any]) -> None:
    """Make a checkpoint of an epoch cut short (``max_steps`` reached, or a stop requested, before the epoch's
    last batch) resume that epoch at its next batch, as a checkpoint saved mid-epoch does.

    Lightning counts such an epoch as completed and saves ``epoch`` + 1, while the DataModule's saved position
    says which batch of the cut epoch comes next; resuming then started the next epoch and skipped the rest of
    the cut one. Here the epoch counters go back by one, so the loops and the data position agree. A checkpoint
    whose epoch ended at its last batch, or saved mid-epoch, is left as it is (applying this twice is harmless)."""
    loop = checkpoint.get("loops", {}).get("fit_loop")
    if not loop:
        return
    batches = loop.get("epoch_loop.batch_progress", {})
    epochs = loop.get("epoch_progress", {})
    current = epochs.get("current", {})
    cut = (not batches.get("is_last_batch", True) and batches.get("current", {}).get("ready", 0) > 0
           and current.get("ready", 0) > 0 and current.get("completed", 0) == current.get("ready"))
    if not cut:
        return
    for progress in (epochs.get("total", {}), current):
        for key in ("processed", "completed"):
            if progress.get(key, 0) > 0:
                progress[key] -= 1
    if "epoch" in checkpoint:
        checkpoint["epoch"] = current["completed"]


def options_the_checkpoint_overrides(datamodule: Any, checkpoint: Dict[str, Any]) -> List[str]:
    """``--data.init_args.<option> <given> (trained with <saved>)`` for each option of ``datamodule`` listed in
    its class's ``FROM_CHECKPOINT`` whose value differs from the one it was trained with. With a checkpoint,
    ``test`` / ``validate`` / ``predict`` take what those options build (tokenizers, vocabulary) from the
    checkpoint, so the values given are ignored. An option in a group is named ``group.field``; a checkpoint saved
    before the groups holds it under its old flat name (the class's ``DEPRECATED_NAMES``)."""
    names = getattr(type(datamodule), "FROM_CHECKPOINT", ())
    renames = getattr(type(datamodule), "DEPRECATED_NAMES", {})
    saved = checkpoint.get("datamodule_hyper_parameters") or {}
    given = getattr(datamodule, "hparams", {})
    found = [(name, saved_option(given, name, renames), saved_option(saved, name, renames)) for name in names]
    return [f"--data.init_args.{name} {now[0]} (trained with {then[0]})" for name, now, then in found
            if now and then and now[0] != then[0]]


def saved_option(hparams: Mapping[str, Any], name: str, renames: Mapping[str, str]) -> Optional[Tuple[Any]]:
    """``(value,)`` of option ``name`` (``field`` or ``group.field``) in saved hyperparameters, grouped or in the
    old flat form (``renames``: old name → ``group.field``); None when they do not hold it."""
    group, _, field = name.rpartition(".")
    if not group:
        return (hparams[name],) if name in hparams else None
    if isinstance(hparams.get(group), Mapping) and field in hparams[group]:
        return (hparams[group][field],)
    old = [flat for flat, new in renames.items() if new == name and flat in hparams]
    return (hparams[old[0]],) if old else None


def ignored_options_warning(datamodule: Any, checkpoint: Dict[str, Any], stage: str) -> str:
    """The warning for :func:`options_the_checkpoint_overrides` (``""`` when none differs)."""
    ignored = options_the_checkpoint_overrides(datamodule, checkpoint)
    if not ignored:
        return ""
    return (f"{'; '.join(ignored)}: ignored, because {stage} takes the tokenizers / vocabulary from the checkpoint "
            "(the model's weights were trained on them); drop the option, or train a new model to change it.")


class FromCheckpointMixin:
    """``load_from_checkpoint`` for the DataModules that take their tokenizers or vocabulary from a checkpoint
    (``checkpoint_path``): rebuilt with the options the checkpoint saved and ``checkpoint_path`` set to it, so no
    training file is read, then ``kwargs`` (e.g. ``predict_file``). Lightning's own built the DataModule from those
    options without the checkpoint, so it read the training data (from the hub, when the run had named no folder),
    and its first parameter, also named ``checkpoint_path``, took our option's name. In Python::

        data = DocumentSentimentDataModule.load_from_checkpoint(ckpt, predict_file="reviews.txt")
        Trainer().predict(DocumentClassifier.load_from_checkpoint(ckpt), data)
    """

    @classmethod
    def load_from_checkpoint(cls, checkpoint_path: str, map_location: Any = None, hparams_file: Any = None,
                             **kwargs: Any) -> Any:
        if hparams_file is not None:
            raise ValueError(f"{cls.__name__}.load_from_checkpoint reads the options the checkpoint saved; give "
                             "changed ones as keyword arguments instead of hparams_file.")
        checkpoint = read_checkpoint(checkpoint_path)
        saved_state(checkpoint, checkpoint_path, cls)  # one sentence when it holds another DataModule's state
        return rebuilt_datamodule(cls, str(checkpoint_path), checkpoint, **kwargs)


def rebuilt_datamodule(cls: type, checkpoint_path: str, checkpoint: Mapping[str, Any], **overrides: Any) -> Any:
    """``cls`` built with the options a checkpoint saved (those its ``__init__`` takes), ``checkpoint_path`` set to
    the checkpoint where it takes one (its vocabulary or tokenizers, no training file read), then ``overrides``."""
    accepted = inspect.signature(cls.__init__).parameters
    saved = checkpoint.get("datamodule_hyper_parameters") or {}
    options = {k: v for k, v in saved.items() if k in accepted and k != "self"}
    if "checkpoint_path" in accepted:
        options["checkpoint_path"] = checkpoint_path
    return cls(**{**options, **overrides})
