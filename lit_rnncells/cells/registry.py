"""A registry of cells by name, so configs and users can list and build them."""
from __future__ import annotations

import difflib
import inspect
import re
from typing import Any, Callable, Dict, List, Optional, Sequence, Type, TypeVar

from .base import RecurrentCell
from ..utils.imports import import_object, import_problem

_CELLS: Dict[str, Type[RecurrentCell]] = {}


class UnknownCellError(ValueError):
    """Raised for a cell name that is not registered; the message lists the known ones."""

C = TypeVar("C", bound=Type[RecurrentCell])


def _key(name: str) -> str:
    return name.lower().replace("-", "").replace("_", "")


def register_cell(name: str | None = None) -> Callable[[C], C]:
    """Class decorator adding a cell to the registry under ``name`` (default: class name).

    Look-ups ignore case, ``-`` and ``_``: ``"cap_mzu"``, ``"CapMZU"`` and
    ``"capmzu"`` name the same cell.
    """

    def decorate(cls: C) -> C:
        if not (isinstance(cls, type) and issubclass(cls, RecurrentCell)):
            raise TypeError(f"register_cell expects a RecurrentCell subclass, got {cls!r}.")
        key = _key(name or cls.__name__)
        if key in _CELLS and _CELLS[key] is not cls:
            raise ValueError(f"A cell named {name or cls.__name__!r} is already registered "
                             f"({_CELLS[key].__module__}.{_CELLS[key].__qualname__}); pick another name.")
        _CELLS[key] = cls
        return cls

    return decorate


def available_cells() -> List[str]:
    """Registered cell class names, sorted."""
    return sorted({cls.__name__ for cls in _CELLS.values()})


def imported_cell(path: str) -> Type[RecurrentCell] | None:
    """The cell class at an import path (``package.module.Class`` or ``package.module:Class``), importing its
    module (which registers the cell, if it registers itself); ``None`` when it is not one."""
    found = import_object(path)
    return found if isinstance(found, type) and issubclass(found, RecurrentCell) else None


def no_option_message(name: str, option: str, accepted: Optional[Sequence[str]], flag: str = "") -> str:
    """``<name> has no option '<option>' (<flag>). Did you mean '<close>'? <name> accepts: ...`` (``accepted``
    None: the first sentence only; empty: ``<name> takes no options.``). Shared by the command line, compare and
    :func:`get_cell`."""
    where = f" ({flag})" if flag else ""
    if accepted is None:
        return f"{name} has no option '{option}'{where}."
    close = difflib.get_close_matches(option, accepted, n=1)
    hint = f" Did you mean '{close[0]}'?" if close else ""
    takes = f"{name} accepts: {', '.join(accepted)}." if accepted else f"{name} takes no options."
    return f"{name} has no option '{option}'{where}.{hint} {takes}"


def no_cell_option_message(cls: type, option: str, flag: str = "") -> str:
    """:func:`no_option_message` for a cell, naming the registered cells that have the option when the cell has
    none close to it (``zones`` given to GRU: ``'zones' is an option of CapMZU, GcnMZU, SatMZU.``)."""
    accepted = cell_options(cls)
    message = no_option_message(cls.__name__, option, accepted, flag)
    if difflib.get_close_matches(option, accepted, n=1):
        return message
    having = [name for name in available_cells() if option in cell_options(get_cell(name))]
    return f"{message} '{option}' is an option of {', '.join(having)}." if having else message


_IMPORT_PATH = re.compile(r"[A-Za-z_][\w.]*[.:][A-Za-z_]\w*")
"""``package.module.Name`` or ``package.module:Name``: a name :func:`get_cell` imports."""


def _options_form(name: str) -> Optional[str]:
    """``Name(key=value, ...)`` (compare's ``--cells`` form) given where a cell name is expected: the sentence
    that names a misspelt option and the form the command line takes; ``None`` for any other name."""
    found = re.fullmatch(r"\s*([\w.:]+)\((.*)\)\s*", name)
    if found is None:
        return None
    given = found.group(1)
    by_path = _IMPORT_PATH.fullmatch(given) is not None  # a user's cell (it was "Unknown cell", with an example
    cls = _CELLS.get(_key(given)) or (imported_cell(given) if by_path else None)  # naming it twice over)
    if cls is None:
        problem = import_problem(given) if by_path else None
        return None if problem is None else f"Cell {name!r} cannot be imported: {problem}."
    class_path = cls.__name__ if _key(given) in _CELLS else given.replace(":", ".")
    pairs = [p.partition("=") for p in (p.strip() for p in found.group(2).split(",")) if p]
    accepted = cell_options(cls)
    wrong = [key.strip() for key, _, _ in pairs if key.strip() not in accepted]
    spelt = {k: (difflib.get_close_matches(k, accepted, n=1) or [k])[0] for k in wrong}
    fixed = ", ".join(f'"{spelt.get(key.strip(), key.strip())}": {value.strip()}' for key, _, value in pairs)
    first = f"{no_cell_option_message(cls, wrong[0])} " if wrong else ""
    return (f"Cell {name!r}: {first}Name(key=value) is compare's --cells form; here give the cell's options as "
            f"--model.init_args.cell '{{\"class_path\": \"{class_path}\", \"init_args\": {{{fixed}}}}}'.")


def get_cell(name: str) -> Type[RecurrentCell]:
    """The cell class registered as ``name``, or at the import path ``name`` (``mycells.minimal.MyCell`` or
    ``mycells.minimal:MyCell``); a clear error lists the known ones."""
    try:
        return _CELLS[_key(name)]
    except KeyError:
        imported = imported_cell(name) if "." in name or ":" in name else None
        if imported is not None:
            return imported
        form = _options_form(name)
        if form is not None:
            raise UnknownCellError(form) from None
        if "class_path" in name:
            raise UnknownCellError(f"Cell {name!r} could not be imported: check the class_path spelling, e.g. "
                                   f"'lit_rnncells.cells.GRU'. Known cells: {', '.join(available_cells())}.") from None
        if _IMPORT_PATH.fullmatch(name):
            problem = import_problem(name)
            raise UnknownCellError(f"Cell {name!r} cannot be imported: {problem}." if problem is not None else
                                   f"{name!r} is not a cell: a cell subclasses lit_rnncells.cells.RecurrentCell "
                                   f"(README, \"Adding a cell\"). Known cells: {', '.join(available_cells())}.") from None
        known = available_cells()
        by_key = {_key(k): k for k in known}
        close = difflib.get_close_matches(_key(name), list(by_key), n=1, cutoff=0.6)
        hint = f" Did you mean {by_key[close[0]]!r}?" if close else ""
        example = f"mycells.minimal.{name}" if name.isidentifier() else "mycells.minimal.MyCell"
        raise UnknownCellError(f"Unknown cell {name!r}.{hint} Known cells: {', '.join(known)}; a cell of your own "
                               f"module is named by its import path, e.g. {example} (the command line imports that "
                               "module, which registers the cell).") from None


def cell_options(cls: type) -> List[str]:
    """A cell's constructor options, following ``**options`` passed up to its base classes."""
    names: List[str] = []
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        params = list(inspect.signature(init).parameters.values())
        names += [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                  and p.name not in ("self", "input_size", "hidden_size") and p.name not in names]
        if not any(p.kind == p.VAR_KEYWORD for p in params):
            break
    return names


def cell_defaults(cls: type) -> Dict[str, Any]:
    """A cell's constructor options that have a default, with it (the same walk as :func:`cell_options`)."""
    defaults: Dict[str, Any] = {}
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        params = list(inspect.signature(init).parameters.values())
        defaults.update({p.name: p.default for p in params if p.default is not p.empty and p.name not in defaults
                         and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)})
        if not any(p.kind == p.VAR_KEYWORD for p in params):
            break
    return defaults


def build_cell(name: str, input_size: int, hidden_size: int, **options: Any) -> RecurrentCell:
    """Build a registered cell by name: ``build_cell("gru", 128, 256)``."""
    return get_cell(name)(input_size, hidden_size, **options)
