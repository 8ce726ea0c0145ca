"""Which files a DataModule trains from, as a :class:`~lit_rnncells.data.check.Bound` layout for the
fit-time split check (:class:`~lit_rnncells.data.check.SplitCheckMixin`). ``None`` for hub data."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional

from .check import Bound, bind
from .known import Layout, layout
from .text import is_hub_id

_LM = {"ptb_word": ("ptb", "word"), "ptb_char": ("ptb", "char"), "text8": ("text8", "text8"),
       "enwik8": ("enwik8", "enwik8")}
_SEQ2SEQ = {"multi30k": ("multi30k", "de-en"), "iwslt14": ("iwslt14", "de-en"),
            "gigaword": ("gigaword", "article-title")}
_SPLIT = {"train": "train", "valid": "dev", "validation": "dev", "test": "test"}


def _folder(data_dir: Optional[str]) -> Optional[Path]:
    if data_dir is None or is_hub_id(data_dir):
        return None
    return Path(data_dir).expanduser()


def _language_model(dm: Any) -> Optional[Bound]:
    folder = _folder(dm.data_dir)
    if folder is None:
        return None
    if dm.dataset == "text":
        own = Layout("text", "lines", {"train": ("train.txt",), "dev": ("valid.txt",), "test": ("test.txt",)}, {})
        return bind(None, own, folder)
    if dm.dataset not in _LM:
        return None  # a dataset this table does not know: not checked
    name, group = _LM[dm.dataset]
    if folder.is_file():  # text8 / enwik8 given as the file itself
        return Bound(name, layout(name, group), {"all": [folder]})
    return bind(name, layout(name, group), folder)


def _translation(dm: Any) -> Optional[Bound]:
    from .translation import LOCAL_FILES

    if dm.dataset != "parallel" and dm.dataset not in _SEQ2SEQ:
        return None  # a dataset this table does not know: not checked
    languages = [dm.source_language, dm.target_language]
    paths: Dict[str, List[Path]] = {}
    folder = _folder(dm.data_dir)
    for split in ("train", "valid", "test"):
        if split in dm.files:
            paths[_SPLIT[split]] = [Path(p).expanduser() for p in dm.files[split]]
        elif folder is not None and split in LOCAL_FILES.get(dm.dataset, {}):
            paths[_SPLIT[split]] = [folder / LOCAL_FILES[dm.dataset][split].format(lang) for lang in languages]
    if not paths:
        return None
    if dm.dataset not in _SEQ2SEQ:  # parallel, iwslt17: files with no release figures here (overlap still checked)
        return Bound(None, Layout(dm.dataset, "pairs", {}, {}), paths)
    name, group = _SEQ2SEQ[dm.dataset]
    return Bound(name, layout(name, group), paths)


def _sentiment(dm: Any) -> Optional[Bound]:
    folder = _folder(dm.data_dir)
    if folder is None:
        return None
    if hasattr(dm, "domain"):
        return bind("semeval14", layout("semeval14", dm.domain), folder)  # domain: restaurants or laptops
    if dm.dataset == "sst":
        return bind("sst", layout("sst", "trees"), folder)
    if dm.dataset != "imdb":
        return None
    from .imdb import resolve_local

    try:
        source = resolve_local(folder)
    except FileNotFoundError:
        return None
    return Bound("imdb", layout("imdb", "reviews"), {"train": [source], "test": [source]})


def bound_layout(dm: Any) -> Optional[Bound]:
    """The files ``dm`` reads, bound to the known dataset's layout (or a layout of your own files)."""
    from .language_model import LanguageModelDataModule
    from .sentiment_base import SentimentDataModule
    from .translation import TranslationDataModule

    if isinstance(dm, LanguageModelDataModule):
        return _language_model(dm)
    if isinstance(dm, TranslationDataModule):
        return _translation(dm)
    if isinstance(dm, SentimentDataModule):
        return _sentiment(dm)
    return None
