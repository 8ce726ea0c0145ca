"""Turning failures of the command line into one sentence a user can act on.

Our own checks raise ``ValueError`` / ``TypeError`` / ``FileNotFoundError`` with one sentence that names
the problem and the fix. By the time they reach the command line, jsonargparse may have wrapped them in
a long report (every Union subtype it tried, the whole config namespace). :func:`user_message` digs the
sentence back out; it returns ``None`` for failures that are not the user's to fix (a bug), which the
command line then shows with the full traceback.
"""
from __future__ import annotations

import difflib
import inspect
import math
import re
from pathlib import Path
from typing import Any, Iterator, List, Optional

from ..cells.registry import (available_cells, cell_options, get_cell, imported_cell, no_cell_option_message,
                              no_option_message)
from ..utils.imports import import_object, import_problem

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # lit_rnncells/ (this file is in lit_rnncells/command/)
USER_ERRORS = (ValueError, TypeError, FileNotFoundError, NotADirectoryError, IsADirectoryError, KeyError,
               ArithmeticError)  # ArithmeticError: callbacks.TrainingDiverged
SAME_COMMAND_HELP = "run the same command with --help to see the accepted options"
"""The hint after an unrecognised argument; a runner whose runs take the arguments after ``--`` names the run's
command instead (the runner's own --help lists only its options)."""
_NOISE = re.compile(r"Expected a <class 'NoneType'>|Does not validate against any of the Union subtypes")
_NOT_ACCEPTED = re.compile(r"Problem with given class_path '([\w.]+)':\s*\n\s*Option '(\w+)' is not accepted")
_KEY = re.compile(r'Key "([\w.]+)" is not expected|Option \'([\w.]+)\' is not accepted|'
                  r'Unrecognized arguments: (\S+)')


def _chain(error: BaseException) -> Iterator[BaseException]:
    """The error and every error it was raised from or while handling, outermost first."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__  # type: ignore[assignment]


def _raised_by_us(error: BaseException) -> bool:
    """Whether the innermost frame of the error's traceback is in this package."""
    tb = error.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    return Path(tb.tb_frame.f_code.co_filename).resolve().is_relative_to(PACKAGE_DIR)


def _constructor_options(class_path: str) -> Optional[List[str]]:
    """The constructor options of a class given by its import path (None when it cannot be imported)."""
    cls = import_object(class_path)
    try:
        return None if cls is None else [p for p in inspect.signature(cls.__init__).parameters
                                         if p not in ("self", "args", "kwargs")]
    except (ValueError, TypeError):
        return None


_NESTED_CELL = re.compile(r"NestedArg\(key='((?:[\w]+\.)*cell)(?:\.((?:init_args\.)?)(\w+))?', val=(.*)\)\s*$",
                          re.M)


_REFUSED_BY_CELL = re.compile(r"Option '(\w+)' is not accepted\. Got value: Namespace\(class_path='([\w.:]+)'")
"""jsonargparse's line for the class that refused an option: ``Option 'zone' is not accepted. Got value:
Namespace(class_path='lit_rnncells.cells.SatMZU', ...``."""


def _cell_option_message(text: str) -> Optional[str]:
    """A cell spec jsonargparse refused as a whole (``NestedArg(key='cell', val={class_path, init_args})`` or
    ``--model.init_args.cell.<option>``): name the option no cell has, with a close match."""
    import ast

    matches = list(_NESTED_CELL.finditer(text))
    if not matches:
        return None
    key, middle, option, value = matches[-1].groups()  # the last: the whole key, as given
    if option is not None:  # --model.init_args.cell.<option> <value> (or cell.init_args.<option>)
        flag = f"--model.init_args.{key}.{middle or ''}{option}"
        refused = _REFUSED_BY_CELL.search(text)
        cell = imported_cell(refused.group(2)) if refused is not None and refused.group(1) == option else None
        if cell is not None:  # the report names the cell that refused it (the innermost, for a wrapped cell)
            return no_cell_option_message(cell, option, flag)
        having = [name for name in available_cells() if option in cell_options(get_cell(name))]
        if having:
            return (f"The cell given has no option '{option}' ({flag}); '{option}' is an "
                    f"option of {', '.join(having)}: name one of those with --model.init_args.{key}.")
        close = sorted({m for name in available_cells() for m in
                        difflib.get_close_matches(option, cell_options(get_cell(name)), n=1)})
        hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        return (f"No cell has the option '{option}' ({flag}).{hint} Give the cell's "
                f"options with its name, e.g. --model.init_args.{key} '{{\"class_path\": \"SatMZU\", "
                f"\"init_args\": {{\"zones\": 4}}}}'.")
    try:
        spec = ast.literal_eval(value)
        cls = get_cell(str(spec["class_path"]))
    except (ValueError, SyntaxError, KeyError, TypeError):
        return None
    accepted = cell_options(cls)
    unknown = [k for k in (spec.get("init_args") or {}) if k not in accepted]
    if not unknown:
        return None
    return no_cell_option_message(cls, unknown[0])


_REQUIRED = re.compile(r'Parser key "((?:\w+\.)*cell)":[\s\S]*?the following arguments are required: ([\w, ]+)')


def _required_cell_option_message(text: str) -> Optional[str]:
    """A cell named without an option it requires (``--model.init_args.cell MultiChannel``, whose ``cell`` is the
    cell it wraps): the option and the flag that gives it (jsonargparse's report ended "the following arguments are
    required: cell" inside the whole model it echoed)."""
    match = _REQUIRED.search(text)
    if match is None:
        return None
    key, options = match.group(1), [o.strip() for o in match.group(2).split(",") if o.strip()]
    cell = next(filter(None, (imported_cell(path) for path in _CLASS_PATH.findall(text))), None)
    if cell is None or not options:
        return None
    flag = f"--model.init_args.{key}.init_args.{options[0]}"
    example = "GRU" if options[0] == "cell" else "<value>"
    return (f"The cell {cell.__name__} needs the option{'s' if len(options) > 1 else ''} {', '.join(options)}; "
            f"give it with {flag} {example}, or under the cell's init_args in a config.")


_CLASS_KEY = re.compile(r'^Parser key "(model|data)"')
_CLASS_GIVEN = re.compile(r"Problem with given class_path '([\w.]+)'|dot import path string: ([\w.]+)|"
                          r"'class_path': '([\w.]+)'|Given value: ([\w.]+)\s*$", re.M)


def _known_classes(key: str) -> List[str]:
    """The task classes (``model``) or DataModules (``data``) the package ships, by short name."""
    if key == "model":
        from .. import tasks
        from ..tasks.base import RecurrentTask

        return sorted(n for n in tasks.__all__ if isinstance(getattr(tasks, n), type)
                      and issubclass(getattr(tasks, n), RecurrentTask) and n != "RecurrentTask")
    from .. import data

    return sorted(n for n in data.__all__ if n.endswith("DataModule"))


def _class_message(text: str) -> Optional[str]:
    """A ``--model`` / ``--data`` class that does not exist or is not a task / DataModule: name it, a close
    match, and the known ones in one line (not the whole config dict the parser echoes)."""
    key = _CLASS_KEY.match(text.strip())
    given = next((g for m in _CLASS_GIVEN.finditer(text) for g in m.groups() if g), None)
    if key is None or given is None:
        return None
    if "." in given and not given.startswith("lit_rnncells.") and import_problem(given) is not None:
        return None  # a user's class that does not import: _unimportable_message says why
    what = {"model": "task class", "data": "DataModule class"}[key.group(1)]
    known = _known_classes(key.group(1))
    short = given.rsplit(".", 1)[-1]
    if given.startswith("lit_rnncells.") and short in known:
        return None  # a class we ship: the report is about something else
    close = difflib.get_close_matches(short, known, n=1)
    hint = f" Did you mean '{close[0]}'?" if close else ""
    problem = (f"'{given}' is not a {what} (--{key.group(1)})" if "does not correspond to a subclass" in text
               else f"Unknown {what} '{given}' (--{key.group(1)})")
    return (f"{problem}.{hint} Known: {', '.join(known)}; a class of your own "
            f"module is named by its import path (mymodule.My{'Task' if key.group(1) == 'model' else 'DataModule'}).")


_CLASS_PATH = re.compile(r"class_path(?:=| |': )'([A-Za-z_][\w.]*[.:][A-Za-z_]\w*)'")
"""A class path in a jsonargparse report: ``class_path='x.Y'`` (a namespace), ``'class_path': 'x.Y'`` (a dict),
``class_path 'x.Y'`` (its "Problem with given class_path" line)."""


def _unimportable_message(text: str) -> Optional[str]:
    """A class path of the report that does not import (a user's module run from another folder, a typo in a
    module's name, the user's module failing while it is imported): why, and the fix. jsonargparse reports it as
    a value the key rejects, or as an unknown class."""
    for path in dict.fromkeys(_CLASS_PATH.findall(text)):
        problem = import_problem(path)
        if problem is not None:
            return f"{path} (in the config or on the command line) cannot be imported: {problem}."
    return None


_NESTED_VALUE = re.compile(r"Given value: NestedArg\(key='([\w.]+)', val=(.*)\)\s*$", re.M)
_EXPECTED = re.compile(r"Expected (.+?)(?:\. Got value: .*)?$", re.M)
_NOT_WHAT_IT_WANTS = ("a <class 'NoneType'>", "a dot import path string", "a path but")


def _wanted(text: str) -> Optional[str]:
    """What jsonargparse's ``Expected ...`` lines in ``text`` say the option takes, in words: ``an int``, ``one of
    'char', 'word'`` (every choice of every ``Literal`` alternative, then the other types: ``..., or an int``);
    ``None`` when they name only alternatives that say nothing about the option (``null``, an import path, a file)."""
    choices: List[str] = []
    kinds: List[str] = []
    for line in (found.strip() for found in _EXPECTED.findall(text)):
        if line.startswith(_NOT_WHAT_IT_WANTS):
            continue
        literal = re.fullmatch(r"a typing\.Literal\[(.*)\]", line)
        kind = re.fullmatch(r"a <class '([\w.]+)'>", line)
        if literal is not None:
            choices += [c.strip() for c in literal.group(1).split(",") if c.strip() not in choices]
        elif kind is not None:
            name = kind.group(1).rsplit(".", 1)[-1]
            kinds.append(f"{'an' if name[0] in 'aeiou' else 'a'} {name}")
        else:
            kinds.append(line)
    kinds = list(dict.fromkeys(kinds))
    if choices:
        return f"one of {', '.join(choices)}" + (f", or {' or '.join(kinds)}" if kinds else "")
    return " or ".join(kinds) if kinds else None


def _wrong_type_message(text: str) -> Optional[str]:
    """A value an option of a class given by ``class_path`` refuses (``--data.init_args.batch_size abc``,
    ``--data.init_args.level chars``, a cell's ``--model.init_args.cell.init_args.update_bias x``): jsonargparse
    reports it against the outer key with its internal ``NestedArg(key=..., val=...)``; name the option's whole
    flag, what it takes and the value."""
    import ast

    outer = re.match(r'\s*Parser key "([\w.]+)"', text)
    nested = _NESTED_VALUE.findall(text)
    if outer is None or not nested:
        return None
    key, given = nested[-1]  # the last: the outermost report's, the key as given under the outer one
    try:
        value: Any = ast.literal_eval(given)
    except (ValueError, SyntaxError):
        value = given
    if isinstance(value, dict):  # a class given whole (class_path, init_args): the class readers name its problem
        return None
    reports = [text.find(f'Parser key "{name}":') for name in (key, key.rsplit(".", 1)[-1])]
    option = max(reports)  # the report of the option itself (a dataclass field's key is dotted), if any
    if option < 0:  # e.g. an option the class does not have ("Option 'x' is not accepted")
        return None
    report = text[option:]
    end = re.search(r"(Given value|Got value)[^\n]*", report)  # the option's own report ends with the value it got
    wanted = _wanted(report[:end.end()] if end is not None else report)
    if wanted is None:
        return None
    shown = repr(value) if isinstance(value, str) else str(value)
    return (f"--{outer.group(1)}.init_args.{key} expects {wanted}, got {shown}; fix that value in the config or on "
            "the command line.")


def _from_parser_report(text: str) -> Optional[str]:
    """The actionable line of a jsonargparse report."""
    cell = _wrong_type_message(text) or _cell_option_message(text) or _required_cell_option_message(text)
    if cell is not None:
        return cell
    if re.search(r"Problem with given class_path|dot import path string|does not correspond to a subclass", text):
        named = _class_message(text)
        if named is not None:
            return named
    unimportable = _unimportable_message(text)
    if unimportable is not None:
        return unimportable
    match = _NOT_ACCEPTED.search(text)
    if match:
        class_path, option = match.groups()
        return no_option_message(class_path.rsplit('.', 1)[-1], option, _constructor_options(class_path))
    given = re.findall(r"Given value: (.*)", text)
    if text.lower().startswith("unrecognized arguments"):
        return f"{text.strip()}; {SAME_COMMAND_HELP}."
    lines: List[str] = [ln.strip().lstrip("- ").strip() for ln in text.splitlines()]
    lines = [ln for ln in lines if ln and not _NOISE.search(ln) and not ln.startswith(("Given value", "Subtypes:",
                                                                                        "Errors:"))]
    if not lines:
        return None
    # Prefer a line that reads as our own sentence (it names the fix after a semicolon or says what to do).
    for line in lines:
        if ";" in line and not line.startswith(("Parser key", "Problem with given")):
            return line
    first = lines[0].rstrip(":")
    if first.startswith("Parser key") and given:
        expected = _wanted(text)
        wanted = f" expects {expected}" if expected is not None else " rejects the value"
        key = re.fullmatch(r'Parser key "([\w.]+)"', first)
        named = f"--{key.group(1)}" if key is not None else first  # the option's flag, as given on the command line
        return f"{named}{wanted}, got {given[-1].strip()!r}; fix that value in the config or on the command line."
    return " ".join(lines[:2])


_ENUM_NOT_WRITTEN = re.compile(r"\('cannot represent an object', <(\w+)\.(\w+): '([^']*)'>\)")


def _enum_default_message(text: str) -> Optional[str]:
    """A class whose option defaults to an enum member (Lightning's ``Timer``: ``interval=Interval.step``):
    jsonargparse cannot write the default back and fails for any use of the class, though the same value given
    as text works. Name the class, the option and the text to give."""
    enum = _ENUM_NOT_WRITTEN.search(text)
    if enum is None:
        return None
    enum_name, member, value = enum.groups()
    found = re.search(r"class_path='([\w.]+)', init_args=Namespace\([^)]*?\b(\w+)=<" + re.escape(enum_name)
                      + r"\." + re.escape(member) + r":", text)
    if found is None:
        return None
    class_path, option = found.groups()
    fix = (f"right after the class: --trainer.callbacks.{option} {value}" if "Callback" in text
           else f"in the class's init_args: {option}: {value}")
    return (f"{class_path.rsplit('.', 1)[-1]}'s option {option} defaults to the enum {enum_name}.{member}, which "
            f"jsonargparse cannot write back; give it as text {fix}.")


_INTERVAL_OVER_EPOCH = re.compile(r"`val_check_interval` \((\d+)\) must be less than or equal to the number of the "
                                  r"training batches \((\d+)\)")

_LIMIT_UNDER_ONE_BATCH = re.compile(r"You requested to check (\S+) of the `(\w+)_dataloader` but \S+ \* (\d+) < 1")
_LIMIT_OF_A_STREAM = re.compile(r"When using an `IterableDataset`, `Trainer\(limit_(\w+)_batches\)` must be")
STAGE_NAMES = {"train": "training", "val": "validation", "test": "test", "predict": "predict"}


def _rounded_up(x: float) -> str:
    """``x`` > 0 rounded up to 2 significant digits (1 / 3931 → 0.00026)."""
    unit = 10.0 ** (math.floor(math.log10(x)) - 1)
    return f"{math.ceil(round(x / unit, 9)) * unit:.2g}"


def _lightning_message(text: str) -> Optional[str]:
    """Lightning's refusals of settings it can judge only once the data is loaded, at the start of the fit (before
    the first training batch), as one sentence with our option names."""
    interval = _INTERVAL_OVER_EPOCH.search(text)
    if interval is not None:
        given, batches = interval.groups()
        return (f"--trainer.val_check_interval {given} is more than the {batches} training batches of an epoch; give "
                f"at most {batches}, a fraction of an epoch (e.g. 0.5), or add --trainer.check_val_every_n_epoch "
                f"null to validate every {given} batches across epochs.")
    under = _LIMIT_UNDER_ONE_BATCH.search(text)
    if under is not None:
        given, stage, batches = under.groups()
        least = _rounded_up(1 / int(batches))
        return (f"--trainer.limit_{stage}_batches {given} is less than one of the {int(batches):,} "
                f"{STAGE_NAMES.get(stage, stage)} batches; give a number of batches (an int, e.g. 10) or a fraction "
                f"of at least {least}.")
    stream = _LIMIT_OF_A_STREAM.search(text)
    if stream is not None:
        stage = stream.group(1)
        return (f"--trainer.limit_{stage}_batches takes a number of batches here (an int, e.g. 100) or 1.0, not a "
                f"fraction: the {STAGE_NAMES.get(stage, stage)} data is a stream whose number of batches is not known "
                "in advance (e.g. a language model's variable_bptt windows).")
    return None


def user_message(error: BaseException) -> Optional[str]:
    """One sentence for a user-facing failure, or ``None`` for an internal error (show the traceback)."""
    chain = list(_chain(error))
    ours = [e for e in chain if isinstance(e, USER_ERRORS) and _raised_by_us(e)]
    if ours:
        first = ours[0]  # the outermost of ours: a KeyError deep inside may have been re-raised as a clear error
        return str(first).strip("'\"") if isinstance(first, KeyError) else str(first)
    for e in chain:
        enum_default = _enum_default_message(str(e)) or _lightning_message(str(e))
        if enum_default is not None:
            return enum_default
        if type(e).__module__.startswith("jsonargparse") or type(e).__name__ == "ArgumentError":
            return _from_parser_report(str(e))
    for e in chain:  # Lightning's word for settings that do not fit together, found where it first needs them
        if type(e).__name__ == "MisconfigurationException" and type(e).__module__.startswith("lightning"):
            return (f"Lightning refuses this run's settings: {str(e).strip().rstrip('.')}; change the options it "
                    "names.")
        if isinstance(e, ImportError) and "Requirement '" in str(e) and raised_by_lightning(e):
            return (f"{str(e).strip().rstrip('.')} (a package an option given needs); install it, or drop that "
                    "option.")
    return None


def raised_by_lightning(error: BaseException) -> bool:
    """Whether ``error`` was raised inside Lightning's own code (its last traceback frame is in ``lightning``)."""
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    module = tb.tb_frame.f_globals.get("__name__", "") if tb is not None else ""
    return module.split(".", 1)[0] in ("lightning", "lightning_fabric", "pytorch_lightning")
