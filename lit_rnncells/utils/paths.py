"""Checking the paths a command will write to before any work starts, and reading users' text files, so a
mistake is one sentence naming the path (not a traceback from deep inside a write at the end of a run)."""
from __future__ import annotations

import os
import tempfile
import weakref
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Union

PathLike = Union[str, Path]


def _file_ancestor(path: Path) -> Optional[Path]:
    """The first existing ancestor of ``path`` that is not a folder (so nothing can be written under it)."""
    for parent in reversed(path.parents):
        if parent.exists() and not parent.is_dir():
            return parent
    return None


def check_output_file(path: PathLike, option: str) -> Path:
    """``path`` as a file to write: its folders may not exist yet, but none of them may be a file, and the
    path itself may not be a folder. Raises one sentence naming ``option``."""
    target = Path(path).expanduser()
    blocking = _file_ancestor(target)
    if blocking is not None:
        raise NotADirectoryError(f"{option} {str(path)!r} is under {str(blocking)!r}, which is a file, not a folder; "
                                 f"choose a {option} path inside a folder.")
    if target.is_dir():
        raise IsADirectoryError(f"{option} {str(path)!r} is a folder; give a file name inside it, e.g. "
                                f"{str(target / 'output.txt')!r}.")
    return target


def check_not_an_input(path: PathLike, option: str, inputs: Dict[str, Optional[PathLike]]) -> None:
    """``path``, a file a command will write, is none of the files it reads (``inputs``: option -> path; None
    or ``-``, standard input, are skipped), also when a different spelling or a link leads to the same file."""
    target = Path(path).expanduser()
    for input_option, source in inputs.items():
        if source is None or str(source) == "-":
            continue
        other = Path(source).expanduser()
        try:
            same = target.resolve() == other.resolve() or (target.exists() and other.exists()
                                                           and os.path.samefile(target, other))
        except OSError:
            same = False
        if same:
            raise ValueError(f"{option} {str(path)!r} is the file {input_option} reads ({str(source)!r}); writing "
                             f"it would overwrite the input: choose another {option} file.")


def check_output_folder(path: PathLike, option: str) -> Path:
    """``path`` as a folder to write into (it may not exist yet): neither it nor any folder above it may be a file."""
    target = Path(path).expanduser()
    if target.exists() and not target.is_dir():
        raise NotADirectoryError(f"{option} {str(path)!r} is a file, not a folder; choose another {option}.")
    blocking = _file_ancestor(target)
    if blocking is not None:
        raise NotADirectoryError(f"{option} {str(path)!r} is under {str(blocking)!r}, which is a file, not a folder; "
                                 f"choose another {option}.")
    return target


def check_writable_folder(path: PathLike, option: str) -> Path:
    """:func:`check_output_folder`, and the folder (or the nearest one above it that exists) takes a new file:
    a temporary file is made there and removed, so a read-only or foreign folder, a read-only file system or a
    pseudo file system is one sentence naming ``option`` before any work starts (a traceback from a ``mkdir``
    once the work was done, before)."""
    target = check_output_folder(path, option)
    existing = next((p for p in (target, *target.parents) if p.exists()), None)
    if existing is None:
        return target
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as error:
        where = "" if existing == target else f": {str(existing)!r} does not take new files"
        raise PermissionError(f"{option} {str(path)!r} cannot be written ({error.strerror or error}{where}); "
                              f"choose a {option} folder you can write to.") from None
    return target


def read_text_file(path: PathLike, what: str) -> str:
    """The text of a UTF-8 file; a binary or otherwise non-UTF-8 file is one sentence naming it."""
    try:
        return Path(path).expanduser().read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"{what} {str(path)!r} is not UTF-8 text (byte {error.start}: {error.reason}); give a UTF-8 "
                         "text file with one input per line.") from None


_STDIN_TEXT: "weakref.WeakKeyDictionary[object, str]" = weakref.WeakKeyDictionary()


def read_stdin(what: str) -> str:
    """Standard input as text, read once and kept (a stream is empty once read, and Lightning may ask a DataModule
    for its predict loader more than once); input that is not UTF-8 is one sentence."""
    import sys
    stream = sys.stdin
    if stream not in _STDIN_TEXT:
        try:
            _STDIN_TEXT[stream] = stream.read()
        except UnicodeDecodeError as error:
            raise ValueError(f"{what} (standard input) is not UTF-8 text (byte {error.start}: {error.reason}); pipe "
                             "in UTF-8 text with one input per line.") from None
    return _STDIN_TEXT[stream]


def split_lines(text: str) -> List[str]:
    """The lines of ``text`` split at ``\\n`` only (``\\r\\n`` too), as ``wc -l`` and line-aligned files count
    them; a final newline makes no extra empty line. ``str.splitlines`` also splits at characters a line of
    text may hold (``\\x0c``, ``\\x1c``-``\\x1e``, ``\\x85``, U+2028, U+2029), which would give one input line
    two predictions and misalign the output with it."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.rstrip("\r") for line in lines]


def predict_input_name(predict_file: str) -> str:
    """How errors name a predict input: ``standard input`` for ``"-"``, else ``predict_file '<path>'``."""
    return "standard input" if predict_file == "-" else f"predict_file {str(Path(predict_file).expanduser())!r}"


def read_predict_lines(predict_file: Optional[str], each: str, what: str = "predict_file") -> List[str]:
    """The lines of a predict input (:func:`split_lines`): a UTF-8 file, or standard input for ``"-"``. Every
    task's ``predict_file`` is read here, and refused here the same way when it is not given, does not exist, has
    no lines or has a blank one (``each`` names what one line holds, e.g. ``"prompt"``)."""
    if not predict_file:
        raise ValueError(f"predict needs data.init_args.predict_file: a text file with one {each} per line, or '-' "
                         "for standard input.")
    if predict_file == "-":
        lines = split_lines(read_stdin(what))
    else:
        path = Path(predict_file).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"{what} {str(path)!r} does not exist; pass a text file with one {each} per "
                                    "line, or '-' for standard input.")
        lines = split_lines(read_text_file(path, what))
    name = predict_input_name(predict_file)
    if not lines:
        raise ValueError(f"{name} has no lines; give one {each} per line.")
    check_no_blank_lines(lines, name, fix="remove the line, or give it text")
    return lines


def check_no_blank_lines(lines: Sequence[str], name: str, fix: str = "remove the line, or its pair in both files"
                         ) -> None:
    """Evaluation and predict inputs hold text on every line: a blank line is an error naming it and ``fix`` (every
    task's predict refuses it the same way, rather than predicting for an empty input)."""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            raise ValueError(f"Line {number} of {name} is empty; evaluation and predict inputs need text on "
                             f"every line ({fix}).")
