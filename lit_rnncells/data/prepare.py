"""``prepare NAME``: fetch a dataset's official release, verify it, and write the local layout the
DataModules read into ``$LIT_RNNCELLS_DATA/<NAME>`` (or ``--dest``).

Release files are downloaded into ``<dest>/.downloads/`` (resumable, see :mod:`.fetch`), or taken from
``--source`` (a folder where you put them), verified against :mod:`.known`, unpacked or built
(:mod:`.iwslt14`), written atomically (``.tmp`` then rename), and the download folder is removed. Files
already in the destination are kept unless ``--force``. The result is then run through ``check``.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from urllib.parse import urlsplit
from typing import List, Optional

from .builders import Log, PrepareError
from .fetch import download, from_source
from .known import KNOWN, Dataset

__all__ = ["PrepareError", "prepare"]


def _copy(source: Optional[Path], folder: Path, known: Dataset) -> None:
    """A dataset with no download (``sources`` empty, e.g. SemEval-2014): its layouts' files from ``--source``."""
    if source is None:
        raise PrepareError(f"{known.name} cannot be downloaded automatically; {known.manual}")
    copied = 0
    for layout in known.layouts:
        names = {f for files in layout.files.values() for f in files}
        present = [n for n in names if (source / n).is_file()]
        if not present and layout.optional:
            continue
        for name in sorted(names):
            if not (source / name).is_file():
                raise PrepareError(f"{source / name} does not exist; {known.manual}")
            shutil.copyfile(source / name, folder / (name + ".tmp"))
            (folder / (name + ".tmp")).replace(folder / name)
            copied += 1
    if not copied:
        raise PrepareError(f"no {known.title.split(' (')[0]} file in {source}; {known.manual}")


def _outputs(known: Dataset) -> List[str]:
    return sorted({f for layout in known.layouts if not layout.optional for files in layout.files.values()
                   for f in files})


def _remove_if_empty(folder: Path) -> None:
    if folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()


def prepare(name: str, folder: Path, mirror: Optional[str] = None, source: Optional[Path] = None,
            force: bool = False, log: Log = print) -> None:
    """Fetch (or take from ``source``), verify and write dataset ``name`` into ``folder``."""
    known = KNOWN[name]
    if mirror is not None and source is None and urlsplit(mirror).scheme not in ("http", "https", "file"):
        raise PrepareError(f"--mirror {mirror!r} is not an http://, https:// or file:// URL; give the base URL of a "
                           "folder holding the release files, e.g. https://mirror.example.org/datasets")
    present = [f for f in _outputs(known) if (folder / f).exists()]
    if present and not force:
        raise PrepareError(f"{folder} already holds {present}; verify it with `python -m lit_rnncells.data check "
                           f"{name} --dest {folder}`, or pass --force to write over it")
    created = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    if not known.sources:
        _copy(source, folder, known)
        return
    downloads = folder / ".downloads"
    archives: List[Path] = []
    try:
        for item in known.sources:
            if source is not None:
                archives.append(from_source(item, source))
            else:
                archives.append(download(item, downloads, mirror, log))
    except BaseException:  # nothing fetched: no empty folders left behind (a partial download stays, to resume)
        _remove_if_empty(downloads)
        if created:
            _remove_if_empty(folder)
        raise
    log(f"writing {name} into {folder}")
    if known.builder is None:
        raise PrepareError(f"{name} has no builder in its record (lit_rnncells.data.known)")
    known.builder(archives, folder, log)
    if downloads.is_dir():
        shutil.rmtree(downloads)
