"""Large Movie Review Dataset v1.0 (Maas et al. 2011): the archive, the folder, or the hub.

The official release is ``aclImdb/{train,test}/{pos,neg}/<id>_<rating>.txt`` (``unsup/`` is not
used), 25,000 / 25,000 balanced reviews. It is read from the extracted ``aclImdb/`` folder or from
``aclImdb_v1.tar.gz`` in place (one streaming pass over the gzip, nothing extracted to disk), or
from the hub's ``stanfordnlp/imdb`` (``text``, ``label``: 0 negative, 1 positive).

Every source is put in one canonical order (label, then text), so local and hub inputs give
the same examples, splits and ids whatever order the files come in.
"""
from __future__ import annotations

import re
import tarfile
from pathlib import Path
from typing import Callable, Dict, List, Tuple

from . import hub
from .known import KNOWN

HUB_ID = KNOWN["imdb"].hub_id
LABELS = ("negative", "positive")
REVIEW_NAME = r"\d+_\d+\.txt"
"""A review's file name in the release: ``<id>_<rating>.txt``."""

Review = Tuple[int, str]
"""(label: 0 negative / 1 positive, text)."""


def archive_name() -> str:
    """The release archive the dataset record (:mod:`.known`) names: ``aclImdb_v1.tar.gz``."""
    return KNOWN["imdb"].layouts[0].files["train"][0]


def class_folders() -> Dict[Tuple[str, str], str]:
    """``(split, class folder)`` → that folder inside the release (``aclImdb/train/neg``), as the record's
    ``members`` and ``classes`` say, splits and classes in the record's order (label = the class's position)."""
    record = KNOWN["imdb"]
    return {(split, name): pattern.format(name) for split, pattern in record.members.items()
            for name in record.classes}


def extracted_folder() -> str:
    """The folder the release extracts to (``aclImdb``): the first part of the record's member folders."""
    return next(iter(class_folders().values())).split("/")[0]


def local_class_folders(folder: Path) -> Dict[Tuple[str, str], Path]:
    """``(split, class folder)`` → its path under the extracted folder ``folder`` (``aclImdb/``)."""
    return {key: folder.joinpath(*inside.split("/")[1:]) for key, inside in class_folders().items()}


def _label(name: str) -> int:
    return KNOWN["imdb"].classes.index(name)


def _canonical(reviews: Dict[str, List[Review]], where: Callable[[str, str], str]) -> Dict[str, List[Review]]:
    """Sorted reviews; a split without reviews, or without one of the two classes, is an error naming the
    folder (``where(split, "pos" | "neg")``) that should hold them."""
    for split, items in reviews.items():
        if not items:
            raise ValueError(f"The IMDB {split} split is empty; check that the archive or folder holds "
                             f"aclImdb/{split}/pos and aclImdb/{split}/neg reviews.")
        present = {label for label, _ in items}
        for label, name in enumerate(KNOWN["imdb"].classes):
            if label not in present:
                raise ValueError(f"The IMDB {split} split has no {LABELS[label]} reviews: {where(split, name)} is "
                                 f"empty, so the classifier could only learn one class; put the {split} reviews of "
                                 f"both classes in aclImdb/{split}/pos and aclImdb/{split}/neg.")
        items.sort()
    return reviews


def read_archive(path: Path) -> Dict[str, List[Review]]:
    """Reviews of both splits from ``aclImdb_v1.tar.gz``, streamed (``tarfile`` mode ``r|gz``)."""
    inside = class_folders()
    by_folder = {folder: key for key, folder in inside.items()}
    member_name = re.compile(f"(?:^|/)({'|'.join(re.escape(f) for f in inside.values())})/{REVIEW_NAME}$")
    out: Dict[str, List[Review]] = {split: [] for split, _ in inside}
    try:
        with tarfile.open(path, "r|gz") as archive:
            for member in archive:
                match = member_name.search(member.name)
                if match and member.isfile():
                    text = archive.extractfile(member).read().decode("utf-8")  # type: ignore[union-attr]
                    split, name = by_folder[match.group(1)]
                    out[split].append((_label(name), text))
    except (tarfile.TarError, OSError, EOFError) as err:
        raise ValueError(f"{str(path)!r} is not a readable aclImdb_v1.tar.gz ({err}); download the official "
                         "archive again.") from None
    return _canonical(out, lambda split, name: f"aclImdb/{split}/{name} of {str(path)!r}")


def read_folder(folder: Path) -> Dict[str, List[Review]]:
    """Reviews of both splits from the extracted ``aclImdb/`` folder."""
    out: Dict[str, List[Review]] = {}
    for (split, name), sub in local_class_folders(folder).items():
        out.setdefault(split, [])
        if not sub.is_dir():
            raise FileNotFoundError(f"Missing IMDB folder {str(sub)!r}; the aclImdb folder must hold "
                                    "{train,test}/{pos,neg}/<id>_<rating>.txt.")
        out[split].extend((_label(name), p.read_text(encoding="utf-8")) for p in sub.glob("*_*.txt"))
    return _canonical(out, lambda split, name: repr(str(local_class_folders(folder)[(split, name)])))


def resolve_local(path: Path) -> Path:
    """The archive or ``aclImdb`` folder that ``path`` names or holds."""
    if path.is_file():
        return path
    archive = archive_name()
    for candidate in (path / archive, path / extracted_folder(), path):
        if candidate.is_file() or next(iter(local_class_folders(candidate).values())).parent.is_dir():
            return candidate
    raise FileNotFoundError(f"No IMDB data at {str(path)!r}{hub.owner_hint(str(path))}; data_dir must be {archive}, "
                            "the extracted aclImdb folder, or a folder holding either.")


def read_local(path: Path) -> Dict[str, List[Review]]:
    source = resolve_local(path)
    return read_archive(source) if source.is_file() else read_folder(source)


def read_hub(hub_id: str) -> Dict[str, List[Review]]:
    """Train/test reviews from the Parquet export (:mod:`lit_rnncells.data.hub`) of a hub dataset in the
    ``stanfordnlp/imdb`` schema (``text``, ``label``), 25,000 each checked."""
    ds = hub.load_splits(hub_id, ("train", "test"),
                         hub.local_alternative("imdb", f"{archive_name()} or the extracted aclImdb folder"))
    return _canonical({split: [(int(label), text) for label, text in zip(ds[split]["label"], ds[split]["text"])]
                       for split in ("train", "test")},
                      lambda split, name: f"the {split} split of {hub_id!r} (label {int(name == 'pos')})")
