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

ARCHIVE = KNOWN["imdb"].layouts[0].files["train"][0]  # aclImdb_v1.tar.gz, as the record has it
HUB_ID = KNOWN["imdb"].hub_id
LABELS = ("negative", "positive")
_MEMBER = re.compile(r"(?:^|/)aclImdb/(train|test)/(pos|neg)/\d+_\d+\.txt$")

Review = Tuple[int, str]
"""(label: 0 negative / 1 positive, text)."""


def _canonical(reviews: Dict[str, List[Review]], where: Callable[[str, str], str]) -> Dict[str, List[Review]]:
    """Sorted reviews; a split without reviews, or without one of the two classes, is an error naming the
    folder (``where(split, "pos" | "neg")``) that should hold them."""
    for split, items in reviews.items():
        if not items:
            raise ValueError(f"The IMDB {split} split is empty; check that the archive or folder holds "
                             f"aclImdb/{split}/pos and aclImdb/{split}/neg reviews.")
        present = {label for label, _ in items}
        for label, name in enumerate(("neg", "pos")):
            if label not in present:
                raise ValueError(f"The IMDB {split} split has no {LABELS[label]} reviews: {where(split, name)} is "
                                 f"empty, so the classifier could only learn one class; put the {split} reviews of "
                                 f"both classes in aclImdb/{split}/pos and aclImdb/{split}/neg.")
        items.sort()
    return reviews


def read_archive(path: Path) -> Dict[str, List[Review]]:
    """Reviews of both splits from ``aclImdb_v1.tar.gz``, streamed (``tarfile`` mode ``r|gz``)."""
    out: Dict[str, List[Review]] = {"train": [], "test": []}
    try:
        with tarfile.open(path, "r|gz") as archive:
            for member in archive:
                match = _MEMBER.search(member.name)
                if match and member.isfile():
                    text = archive.extractfile(member).read().decode("utf-8")  # type: ignore[union-attr]
                    out[match.group(1)].append((int(match.group(2) == "pos"), text))
    except (tarfile.TarError, OSError, EOFError) as err:
        raise ValueError(f"{str(path)!r} is not a readable aclImdb_v1.tar.gz ({err}); download the official "
                         "archive again.") from None
    return _canonical(out, lambda split, name: f"aclImdb/{split}/{name} of {str(path)!r}")


def read_folder(folder: Path) -> Dict[str, List[Review]]:
    """Reviews of both splits from the extracted ``aclImdb/`` folder."""
    out: Dict[str, List[Review]] = {}
    for split in ("train", "test"):
        out[split] = []
        for label, name in enumerate(("neg", "pos")):
            sub = folder / split / name
            if not sub.is_dir():
                raise FileNotFoundError(f"Missing IMDB folder {str(sub)!r}; the aclImdb folder must hold "
                                        "{train,test}/{pos,neg}/<id>_<rating>.txt.")
            out[split].extend((label, p.read_text(encoding="utf-8")) for p in sub.glob("*_*.txt"))
    return _canonical(out, lambda split, name: repr(str(folder / split / name)))


def resolve_local(path: Path) -> Path:
    """The archive or ``aclImdb`` folder that ``path`` names or holds."""
    if path.is_file():
        return path
    for candidate in (path / ARCHIVE, path / "aclImdb", path):
        if candidate.is_file() or (candidate / "train").is_dir():
            return candidate
    from . import hub

    raise FileNotFoundError(f"No IMDB data at {str(path)!r}{hub.owner_hint(str(path))}; data_dir must be {ARCHIVE}, "
                            "the extracted aclImdb folder, or a folder holding either.")


def read_local(path: Path) -> Dict[str, List[Review]]:
    source = resolve_local(path)
    return read_archive(source) if source.is_file() else read_folder(source)


def read_hub(hub_id: str) -> Dict[str, List[Review]]:
    """Train/test reviews from the Parquet export (:mod:`lit_rnncells.data.hub`) of a hub dataset in the
    ``stanfordnlp/imdb`` schema (``text``, ``label``), 25,000 each checked."""
    ds = hub.load_splits(hub_id, ("train", "test"),
                         hub.local_alternative("imdb", f"{ARCHIVE} or the extracted aclImdb folder"))
    return _canonical({split: [(int(label), text) for label, text in zip(ds[split]["label"], ds[split]["text"])]
                       for split in ("train", "test")},
                      lambda split, name: f"the {split} split of {hub_id!r} (label {int(name == 'pos')})")
