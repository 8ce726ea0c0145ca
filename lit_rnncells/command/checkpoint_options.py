"""How ``test`` / ``validate`` / ``predict --ckpt_path`` weigh a config's model options against the checkpoint's.

Options that change the weights' shapes are refused; others that differ are listed, and the checkpoint's values
win. Both sides compare field by field, so an option group's field (``encoder.num_layers``) counts like a flat
option; a checkpoint saved before the groups arrives regrouped (:func:`.deprecated_names.regroup_init_args`).
"""
from __future__ import annotations

from typing import Any, Dict

from lightning.pytorch.utilities import rank_zero_warn

from ..cells.registry import UnknownCellError, cell_defaults, get_cell

DATA_TO_MODEL_LINKS = ("vocab_size", "num_classes", "pad_id", "source_vocab_size", "target_vocab_size",
                       "bos_id", "eos_id")
"""Sizes that come from the data flow into the model when the model has a parameter of that name; against a
checkpoint they are never a mismatch (the checkpoint's data decides them)."""
SHAPE_SUFFIXES = ("_size", "_layers", "_cell")
SHAPE_NAMES = ("cell", "bidirectional", "tie_weights", "tie_target_embedding", "zones", "num_classes")


def _plain(value: Any) -> Any:
    """A comparable form of a config or hparams value: cells by class name with the options that differ from
    their defaults (a checkpoint saved before a cell gained an option holds none), namespaces as dicts."""
    if hasattr(value, "as_dict"):
        value = value.as_dict()
    if isinstance(value, dict) and "class_path" in value:
        class_path = str(value["class_path"])
        return (class_path.rsplit(".", 1)[-1], _without_defaults(class_path, _plain(value.get("init_args") or {})))
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, str) and value and value[0].isupper():
        return (value.rsplit(".", 1)[-1], {})  # a cell by name, as GRU or lit_rnncells.cells.GRU
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _without_defaults(class_path: str, options: Dict[str, Any]) -> Dict[str, Any]:
    """``options`` of the cell at ``class_path`` less those equal to the cell's defaults; all of them for a
    class that is not a cell."""
    try:
        defaults = cell_defaults(get_cell(class_path))
    except UnknownCellError:
        return options
    return {k: v for k, v in options.items() if k not in defaults or v != _plain(defaults[k])}


def _show(value: Any) -> str:
    """A short rendering of a config value for messages: cells by class name (and options)."""
    plain = _plain(value)
    if isinstance(plain, tuple):
        name, options = plain
        return f"{name}({', '.join(f'{k}={v!r}' for k, v in options.items())})" if options else name
    return repr(plain)


def _flat_groups(options: Dict[str, Any]) -> Dict[str, Any]:
    """Options with each option group's fields as ``group.field`` (a cell's ``class_path`` dict stays whole)."""
    flat: Dict[str, Any] = {}
    for key, value in options.items():
        if hasattr(value, "as_dict"):
            value = value.as_dict()
        if isinstance(value, dict) and "class_path" not in value and value:
            flat.update({f"{key}.{k}": v for k, v in _flat_groups(value).items()})
        else:
            flat[key] = value
    return flat


def compare_with_checkpoint(init_args: Any, hparams: Dict[str, Any], ckpt_path: str) -> None:
    """Refuse flags that change the weights' shapes; warn about the others (the checkpoint's values win).
    Both sides compare field by field (``encoder.num_layers``); ``hparams`` come regrouped (old flat names)."""
    given = _flat_groups(init_args.as_dict() if hasattr(init_args, "as_dict") else dict(init_args))
    differing = {k: (given[k], v) for k, v in _flat_groups(hparams).items()
                 if k in given and k not in DATA_TO_MODEL_LINKS and _plain(given[k]) != _plain(v)}
    shaped = {k: d for k, d in differing.items()
              if k.rsplit(".", 1)[-1] in SHAPE_NAMES or k.endswith(SHAPE_SUFFIXES)}
    if shaped:
        listed = ", ".join(f"{k}={_show(g)} (checkpoint: {_show(c)})" for k, (g, c) in shaped.items())
        raise ValueError(f"The options {listed} differ from the checkpoint {ckpt_path}, whose weights have other "
                         "shapes; drop those options to use the checkpoint, or train a new model without --ckpt_path.")
    if differing:
        listed = ", ".join(f"{k}={_show(c)} (you gave {_show(g)})" for k, (g, c) in differing.items())
        rank_zero_warn(f"Using the checkpoint's values {listed}: a checkpoint's model options win over the config.")


