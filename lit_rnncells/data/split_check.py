"""Which files a DataModule trains from, as a :class:`~lit_rnncells.data.check.Bound` layout for the
fit-time split check (:class:`~lit_rnncells.data.check.SplitCheckMixin`). ``None`` for hub data.

Each DataModule's ``split_files()`` calls the function of its kind here; translation datasets are read from
their records (:mod:`lit_rnncells.data.known`)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional

from .check import Bound, bind
from .known import KNOWN, Layout, variant
from .text import is_hub_id

PARALLEL_FILES = {"train": "train.{}", "valid": "valid.{}", "test": "test.{}"}
"""``parallel``'s file names under ``data_dir`` (``{}`` is the language suffix)."""
_SPLIT = {"train": "train", "valid": "dev", "validation": "dev", "test": "test"}


def _folder(data_dir: Optional[str]) -> Optional[Path]:
    if data_dir is None or is_hub_id(data_dir):
        return None
    return Path(data_dir).expanduser()


def language_model_files(dm: Any) -> Optional[Bound]:
    """A language-model DataModule's files (``dataset``, ``data_dir``): a known corpus or your own ``text``."""
    folder = _folder(dm.data_dir)
    if folder is None:
        return None
    if dm.dataset == "text":
        own = Layout("text", "lines", {"train": ("train.txt",), "dev": ("valid.txt",), "test": ("test.txt",)}, {})
        return bind(None, own, folder)
    found = variant(dm.dataset)
    if found is None:
        return None  # a dataset no record knows: not checked
    record, group = found
    if folder.is_file():  # text8 / enwik8 given as the file itself
        return Bound(record.name, group, {"all": [folder]})
    return bind(record.name, group, folder)


def translation_files(dm: Any) -> Optional[Bound]:
    """A translation DataModule's files (``dataset``, ``data_dir``, ``files``, the two languages), by its record."""
    record = KNOWN.get(dm.dataset)
    if dm.dataset != "parallel" and not (record and record.layouts):
        return None  # a dataset with no release figures (iwslt17, duc2004): not checked
    patterns = PARALLEL_FILES if record is None else record.files
    languages = [dm.source_language, dm.target_language]
    paths: Dict[str, List[Path]] = {}
    folder = _folder(dm.data_dir)
    for split in ("train", "valid", "test"):
        if split in dm.files:
            paths[_SPLIT[split]] = [Path(p).expanduser() for p in dm.files[split]]
        elif folder is not None and split in patterns:
            paths[_SPLIT[split]] = [folder / patterns[split].format(lang) for lang in languages]
    if not paths:
        return None
    if record is None:  # parallel: your own files, no release figures (overlap still checked)
        return Bound(None, Layout(dm.dataset, "pairs", {}, {}), paths)
    return Bound(record.name, record.layouts[0], paths)


def sentiment_files(dm: Any) -> Optional[Bound]:
    """A sentiment DataModule's files: its own ``split_files()`` (each reads its dataset's record)."""
    return dm.split_files()


_language_model, _translation, _sentiment = language_model_files, translation_files, sentiment_files  # old names
