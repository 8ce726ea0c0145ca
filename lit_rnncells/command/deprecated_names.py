"""The old flat option names of the typed option groups, on the command line and in config files.

A task or DataModule whose options moved into groups (``Seq2Seq``'s ``decoding``, ...) lists its old names in
a class attribute ``DEPRECATED_NAMES`` (old name → ``group.field``). Python calls and checkpoints reach the
constructor, which regroups them itself (:func:`lit_rnncells.utils.arguments.apply_deprecated_names`); the command
line's parser knows only the new names, so this module rewrites the old ones before it parses:

* ``--model.init_args.beam_size 5`` (or ``--model.beam_size=5``) on the command line, by :func:`rewrite_argv`;
* ``init_args`` holding old names, in any YAML the parser loads (``--config``, ``--model file.yaml``, a value),
  by the loader :data:`PARSER_MODE` registers.

Each old name prints one deprecation line naming its new key; the run folder's config.yaml has the new names.
"""
from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Type

import yaml
from jsonargparse import get_loader, set_loader
from lightning.pytorch import LightningDataModule

from ..utils.arguments import regroup_flat_mapping, say_deprecated_name
from ..tasks.base import RecurrentTask
from .. import data as _data  # noqa: F401  (the DataModules, so their classes are found by name)
from .. import tasks as _tasks  # noqa: F401
from ..utils.imports import import_object

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
        return import_object(class_path)
    for base in NAMESPACES.values():
        for sub in _subclasses(base):
            if sub.__name__ == class_path:
                return sub
    return None


MOVED_MODULES: Dict[str, str] = {f"lit_rnncells.{old}": f"lit_rnncells.{new}" for old, new in (
    ("loggers", "utils.loggers"), ("callbacks", "command.callbacks"))}
"""Modules a config's ``class_path`` may name that moved (the run folder's config.yaml of an earlier release names
``DefaultWandbLogger`` by its old module): old → new, rewritten silently when a config is loaded."""


def moved_class_path(class_path: str) -> str:
    """``class_path`` with a module of :data:`MOVED_MODULES` replaced by where it is now."""
    module, _, name = class_path.rpartition(".")
    return f"{MOVED_MODULES[module]}.{name}" if module in MOVED_MODULES else class_path


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
    if isinstance(value.get("class_path"), str):
        value["class_path"] = moved_class_path(value["class_path"])
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


def _names_of(namespace: str, chosen: Optional[type] = None) -> Dict[str, str]:
    """The old names ``--<namespace>.<name>`` may mean. With the class the command line chooses, its own;
    without one, every old name of the namespace's classes that no class of it takes as a current parameter
    (``min_frequency`` is old for TranslationDataModule but current for SentimentDataModule: rewritten only
    when the class is known)."""
    if chosen is not None:
        return dict(deprecated_names(chosen))
    names: Dict[str, str] = {}
    current: set = set()
    for cls in _subclasses(NAMESPACES[namespace]):
        names.update(deprecated_names(cls))
        current.update(inspect.signature(cls.__init__).parameters)
    return {old: new for old, new in names.items() if old not in current}


def _class_in(value: Any, namespace: str) -> Optional[type]:
    """The class a ``--<namespace>`` value or a loaded config names (a class name or path, a YAML file or text)."""
    if isinstance(value, str):
        path = Path(value).expanduser()
        try:
            value = yaml.safe_load(path.read_text()) if path.suffix in (".yaml", ".yml") and path.is_file() \
                else yaml.safe_load(value)
        except (OSError, yaml.YAMLError):
            return None
    if isinstance(value, str):
        return class_named(value)
    if isinstance(value, dict) and namespace in value:  # a whole config (--config)
        return _class_in(value[namespace], namespace)
    if isinstance(value, dict) and isinstance(value.get("class_path"), str):
        return class_named(value["class_path"])
    return None


def chosen_classes(argv: List[str]) -> Dict[str, Optional[type]]:
    """The task and DataModule classes the command line chooses (the last ``--config`` / ``--model`` /
    ``--model.class_path`` that names one wins), None where it names none."""
    chosen: Dict[str, Optional[type]] = {namespace: None for namespace in NAMESPACES}
    pairs = [(a.partition("=")[0], a.partition("=")[2] if "=" in a else (argv[i + 1] if i + 1 < len(argv) else ""))
             for i, a in enumerate(argv) if a.startswith("--")]
    for key, value in pairs:
        targets = list(NAMESPACES) if key == "--config" else [
            ns for ns in NAMESPACES if key in (f"--{ns}", f"--{ns}.class_path")]
        for namespace in targets:
            found = _class_in(value, namespace)
            chosen[namespace] = found or chosen[namespace]
    return chosen


def rewrite_argv(argv: List[str]) -> List[str]:
    """The command line with ``--model[.init_args].<old name>`` and ``--data[.init_args].<old name>`` written
    with the new keys, one deprecation line each (the old names of the class the command line chooses)."""
    out = []
    chosen = chosen_classes(argv)
    for arg in argv:
        key, eq, rest = arg.partition("=")
        parts = key[2:].split(".") if key.startswith("--") else []
        if len(parts) in (2, 3) and parts[0] in NAMESPACES and (len(parts) == 2 or parts[1] == "init_args"):
            renames = _names_of(parts[0], chosen[parts[0]])
            if parts[-1] in renames:
                owner = chosen[parts[0]].__name__ if chosen[parts[0]] is not None else parts[0]
                say_deprecated_name(owner, parts[-1], renames[parts[-1]])
                arg = "--" + ".".join(parts[:-1] + [renames[parts[-1]]]) + eq + rest
        out.append(arg)
    return out


def _load(text: str) -> Any:
    return rewrite_config(get_loader("yaml")(text))


set_loader(PARSER_MODE, _load, exceptions=(yaml.YAMLError,))
