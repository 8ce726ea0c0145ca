"""The object a dotted import path names (``package.module.Class``), for the places that resolve a config's
``class_path`` or a checkpoint's recorded class themselves, and why a path does not import, for their errors."""
from __future__ import annotations

import difflib
import importlib
from typing import Any, Dict, List, Optional, Sequence, Tuple


def _split(path: str) -> Tuple[str, str]:
    """``("package.module", "name")`` for ``"package.module.name"`` or ``"package.module:name"``."""
    module, sep, name = path.partition(":")
    if not sep:
        module, _, name = path.rpartition(".")
    return module, name


def import_object(path: str) -> Optional[Any]:
    """The attribute ``name`` of module ``package.module`` for ``"package.module.name"`` (``"package.module:name"``
    too), importing the module; ``None`` when the path has no module part, the module cannot be imported or
    lacks the attribute."""
    module, name = _split(path)
    if not module or not name:
        return None
    try:
        return getattr(importlib.import_module(module), name)
    except Exception:  # noqa: BLE001 - a module that fails while imported (a user's error) cannot give the object
        return None


def import_problem(path: str) -> Optional[str]:
    """Why the import path ``package.module.Name`` does not import, as the end of an error sentence that names the
    fix; ``None`` when it imports (or is no import path). A module missing from Python's path (the usual cause: a
    user's module, and the command run from another folder), a module that fails while it is imported (the
    user's own error, with its message), and a module without the name are told apart."""
    module, name = _split(path)
    if not module or not name:
        return None
    problem = _module_problem(module, path)
    if problem is not None:
        return problem
    imported = importlib.import_module(module)
    if not hasattr(imported, name):
        close = difflib.get_close_matches(name, [n for n in dir(imported) if not n.startswith("_")], n=1)
        hint = f" (did you mean {module}.{close[0]}?)" if close else "; check the spelling"
        return f"module {module} has no {name!r}{hint}"
    return None


def _module_problem(module: str, path: Optional[str] = None) -> Optional[str]:
    """Why ``module`` does not import (see :func:`import_problem`; ``path``, the import path it is the module
    of, for the spelling hint), or ``None`` when it imports."""
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as error:
        missing = error.name or ""
        if missing and (module == missing or module.startswith(missing + ".")):
            if "." in missing:  # the package is there, not the module in it
                return f"there is no module {missing!r}; check the spelling of {path or module}"
            return (f"there is no module {missing!r} on Python's path; run the command from the folder that holds "
                    f"{missing}, or add that folder to PYTHONPATH")
        return f"importing {module} raised ModuleNotFoundError: {error}; install {missing or 'it'} or fix the import"
    except Exception as error:  # noqa: BLE001 - the user's module failed while it was imported: its own message
        return (f"importing {module} raised {type(error).__name__}: {error}{_where(error)}; fix {module} and run the "
                "command again")
    return None


def _where(error: BaseException) -> str:
    """`` (at file:line)`` of the innermost frame an error was raised in, or nothing."""
    tb = error.__traceback__
    if tb is None:
        return ""
    while tb.tb_next is not None:
        tb = tb.tb_next
    return f" (at {tb.tb_frame.f_code.co_filename}:{tb.tb_lineno})"


def named_class_paths(hyper_parameters: Any) -> List[str]:
    """The import paths a checkpoint's hyperparameters name: every ``class_path`` (a cell's, an optimiser's, ...)
    and a cell given by its import path, in order, once each."""
    found: Dict[str, None] = {}

    def walk(value: Any, key: str = "") -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, str(k))
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v, key)
        elif isinstance(value, str) and key in ("class_path", "cell") and "." in value.strip(".") \
                and " " not in value:
            found.setdefault(value, None)

    walk(hyper_parameters)
    return list(found)


def unimportable_class(hyper_parameters: Any, skip: Sequence[str] = ()) -> Optional[Tuple[str, str]]:
    """``(import path, why it does not import)`` for the first class the hyperparameters name that does not import
    here (a user's cell or optimiser, its module not on Python's path), or ``None``; paths starting with one of
    ``skip`` are not checked."""
    for class_path in named_class_paths(hyper_parameters):
        if class_path.startswith(tuple(skip)):
            continue
        problem = import_problem(class_path)
        if problem is not None:
            return class_path, problem
    return None
