"""The old flat option names of the typed option groups, on the command line and in config files.

A task or DataModule whose options moved into groups (``Seq2Seq``'s ``decoding``, ...) lists its old names in
a class attribute ``DEPRECATED_NAMES`` (old name → ``group.field``). Python calls and checkpoints reach the
constructor, which regroups them itself (:func:`lit_rnncells.arguments.apply_deprecated_names`); the command
line's parser knows only the new names, so this module rewrites the old ones before it parses:

* ``--model.init_args.beam_size 5`` (or ``--model.beam_size=5``) on the command line, by :func:`rewrite_argv`;
* ``init_args`` holding old names, in any YAML the parser loads (``--config``, ``--model file.yaml``, a value),
  by the loader :data:`PARSER_MODE` registers.

Each old name prints one deprecation line naming its new key; the run folder's config.yaml has the new names.
"""
from __future__ import annotations

import importlib
from typing import Any, Dict, Iterator, List, Mapping, Optional, Type

import yaml
from jsonargparse import get_loader, set_loader
from lightning.pytorch import LightningDataModule

from .arguments import regroup_flat_mapping
from .tasks.base import RecurrentTask
from . import data as _data  # noqa: F401  (the DataModules, so their classes are found by name)
from . import tasks as _tasks  # noqa: F401

PARSER_MODE = "lit_rnncells_yaml"
"""The parser mode of the command line: jsonargparse's YAML loader, then :func:`rewrite_config`."""
NAMESPACES: Dict[str, type] = {"model": RecurrentTask, "data": LightningDataModule}


def _subclasses(base: type) -> Iterator[type]:
    for sub in base.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def class_named(class_path: str) -> Optional[Type[Any]]:
    """The task or DataModule class a config's ``class_path`` names (dotted or short), or None."""
    if "." in class_path:
        module, _, name = class_path.rpartition(".")
        try:
            return getattr(importlib.import_module(module), name, None)
        except ImportError:
            return None
    for base in NAMESPACES.values():
        for sub in _subclasses(base):
            if sub.__name__ == class_path:
                return sub
    return None


def deprecated_names(cls: Optional[type]) -> Mapping[str, str]:
    """A class's old flat names (old → ``group.field``); empty for a class without groups."""
    return getattr(cls, "DEPRECATED_NAMES", {}) if cls is not None else {}


def rewrite_config(value: Any) -> Any:
    """``value`` (a loaded YAML) with every ``{class_path, init_args}`` of a class with old names regrouped."""
    if isinstance(value, list):
        return [rewrite_config(v) for v in value]
    if not isinstance(value, dict):
        return value
    value = {k: rewrite_config(v) for k, v in value.items()}
    init_args = value.get("init_args")
    if isinstance(value.get("class_path"), str) and isinstance(init_args, dict):
        value["init_args"] = regroup_init_args(value["class_path"], init_args)
    return value


def regroup_init_args(class_path: Optional[str], init_args: Mapping[str, Any]) -> Dict[str, Any]:
    """``init_args`` of the class ``class_path`` names with its old flat names moved into their groups (one
    deprecation line each): a config's, or the hyperparameters of a checkpoint saved before the groups."""
    cls = class_named(class_path) if class_path else None
    renames = deprecated_names(cls)
    if cls is None or not set(init_args) & set(renames):
        return dict(init_args)
    return regroup_flat_mapping(cls.__name__, renames, init_args)


def _names_of(namespace: str) -> Dict[str, str]:
    """Every old name of the namespace's classes (a name means one thing across them; a test keeps it so)."""
    names: Dict[str, str] = {}
    for cls in _subclasses(NAMESPACES[namespace]):
        names.update(deprecated_names(cls))
    return names


def rewrite_argv(argv: List[str]) -> List[str]:
    """The command line with ``--model[.init_args].<old name>`` and ``--data[.init_args].<old name>`` written
    with the new keys, one deprecation line each."""
    out = []
    for arg in argv:
        key, eq, rest = arg.partition("=")
        parts = key[2:].split(".") if key.startswith("--") else []
        if len(parts) in (2, 3) and parts[0] in NAMESPACES and (len(parts) == 2 or parts[1] == "init_args"):
            renames = _names_of(parts[0])
            if parts[-1] in renames:
                regroup_flat_mapping(parts[0], renames, {parts[-1]: None})  # the deprecation line
                arg = "--" + ".".join(parts[:-1] + [renames[parts[-1]]]) + eq + rest
        out.append(arg)
    return out


def _load(text: str) -> Any:
    return rewrite_config(get_loader("yaml")(text))


set_loader(PARSER_MODE, _load, exceptions=(yaml.YAMLError,))
