"""The object a dotted import path names (``package.module.Class``), for the places that resolve a config's
``class_path`` or a checkpoint's recorded class themselves."""
from __future__ import annotations

import importlib
from typing import Any, Optional


def import_object(path: str) -> Optional[Any]:
    """The attribute ``name`` of module ``package.module`` for ``"package.module.name"`` (``"package.module:name"``
    too), importing the module; ``None`` when the path has no module part, the module cannot be imported or
    lacks the attribute."""
    module, sep, name = path.partition(":")
    if not sep:
        module, _, name = path.rpartition(".")
    if not module or not name:
        return None
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError):
        return None
