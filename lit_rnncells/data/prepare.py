"""``prepare NAME``: fetch a dataset's official release, verify it, and write the local layout the
DataModules read into ``$LIT_RNNCELLS_DATA/<NAME>`` (or ``--dest``).

Release files are downloaded into ``<dest>/.downloads/`` (resumable, see :mod:`.fetch`), or taken from
``--source`` (a folder where you put them), verified against :mod:`.known`, unpacked or built
(:mod:`.iwslt14`), written atomically (``.tmp`` then rename), and the download folder is removed. Files
already in the destination are kept unless ``--force``. The result is then run through ``check``.
"""
from __future__ import annotations

import gzip
import hashlib
import shutil
import tarfile
import zipfile
from pathlib import Path
from typing import Callable, Dict, List, Optional

from .fetch import PrepareError, download, from_source, redo
from .known import ENWIK8_MD5, KNOWN, Dataset

__all__ = ["PrepareError", "prepare"]
Log = Callable[[str], None]
_PTB_MD5 = {"ptb.train.txt": "f26c4b92c5fdc7b3f8c7cdcb991d8420", "ptb.valid.txt": "aa0affc06ff7c36e977d7cd49e3839bf",
            "ptb.test.txt": "8b80168b89c18661a38ef683c0dc3721"}  # torchtext's published MD5s


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def _verify_md5(name: str, data: bytes, expected: Optional[str], archive: Path, publisher: str) -> None:
    """Raise :class:`PrepareError` if the member ``name`` of ``archive`` differs from its published MD5."""
    if not expected:
        return
    got = hashlib.md5(data).hexdigest()
    if got != expected:
        raise PrepareError(f"{name} in {archive.name} has MD5 {got}, {publisher} {expected}; {redo(archive)}")


def _members(archive: Path, wanted: Dict[str, str]) -> Dict[str, bytes]:
    """Contents of the tar / zip members whose path ends with each key of ``wanted`` (→ output name)."""
    found: Dict[str, bytes] = {}
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            for name in zf.namelist():
                for suffix, out in wanted.items():
                    if name == suffix or name.endswith("/" + suffix):
                        found[out] = zf.read(name)
    else:
        with tarfile.open(archive, "r:*") as tar:
            for member in tar:
                for suffix, out in wanted.items():
                    if member.isfile() and (member.name == suffix or member.name.endswith("/" + suffix)):
                        found[out] = tar.extractfile(member).read()  # type: ignore[union-attr]
    missing = sorted(set(wanted.values()) - set(found))
    if missing:
        raise PrepareError(f"{archive.name} lacks the members for {missing}; it is not the expected release: "
                           f"{redo(archive)}")
    return found


def _ptb(archives: List[Path], folder: Path, log: Log) -> None:
    names = [f"ptb.{s}.txt" for s in ("train", "valid", "test")] + [f"ptb.char.{s}.txt" for s in
                                                                    ("train", "valid", "test")]
    for name, data in _members(archives[0], {f"data/{n}": n for n in names}).items():
        _verify_md5(name, data, _PTB_MD5.get(name), archives[0], "torchtext's published")
        _write(folder / name, data)


def _single(member: str, md5: Optional[str] = None) -> Callable[[List[Path], Path, Log], None]:
    def unpack(archives: List[Path], folder: Path, log: Log) -> None:
        data = _members(archives[0], {member: member})[member]
        _verify_md5(member, data, md5, archives[0], "the published")
        _write(folder / member, data)
    return unpack


def _gunzip(archives: List[Path], folder: Path, log: Log) -> None:
    for archive in archives:
        with gzip.open(archive, "rb") as f:
            _write(folder / archive.name[:-3], f.read())


def _iwslt14(archives: List[Path], folder: Path, log: Log) -> None:
    from . import iwslt14

    try:
        iwslt14.prepare(archives[0], folder, log)
    except (ValueError, tarfile.TarError) as err:
        raise PrepareError(f"{err}; {redo(archives[0])}") from None


def _gigaword(archives: List[Path], folder: Path, log: Log) -> None:
    wanted = {"Giga/input.txt": "test.article.txt", "Giga/task1_ref0.txt": "test.title.txt"}
    names = ["train.article.txt", "train.title.txt", "valid.article.filter.txt", "valid.title.filter.txt"]
    with tarfile.open(archives[0], "r:*") as tar:
        listed = {m.name for m in tar.getmembers() if m.isfile()}
    for name in names:
        gz = any(m.endswith(f"train/{name}.gz") for m in listed)
        wanted[f"train/{name}.gz" if gz else f"train/{name}"] = name + (".gz" if gz else "")
    for name, data in _members(archives[0], wanted).items():
        if name.endswith(".gz"):
            name, data = name[:-3], gzip.decompress(data)
        _write(folder / name, data)


def _keep(archives: List[Path], folder: Path, log: Log) -> None:
    for archive in archives:
        if archive.parent != folder:
            shutil.copyfile(archive, folder / (archive.name + ".tmp"))
            (folder / (archive.name + ".tmp")).replace(folder / archive.name)


def _sst(archives: List[Path], folder: Path, log: Log) -> None:
    for name, data in _members(archives[0], {f"trees/{n}": n for n in ("train.txt", "dev.txt", "test.txt")}).items():
        _write(folder / name, data)


def _semeval(source: Optional[Path], folder: Path, known: Dataset) -> None:
    if source is None:
        raise PrepareError(f"semeval14 cannot be downloaded automatically; {known.manual}")
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
        raise PrepareError(f"no SemEval-2014 XML file in {source}; {known.manual}")


BUILDERS: Dict[str, Callable[[List[Path], Path, Log], None]] = {
    "ptb": _ptb, "text8": _single("text8"), "enwik8": _single("enwik8", ENWIK8_MD5), "multi30k": _gunzip,
    "iwslt14": _iwslt14, "gigaword": _gigaword, "imdb": _keep, "sst": _sst}


def _outputs(known: Dataset) -> List[str]:
    return sorted({f for layout in known.layouts if not layout.optional for files in layout.files.values()
                   for f in files})


def prepare(name: str, folder: Path, mirror: Optional[str] = None, source: Optional[Path] = None,
            force: bool = False, log: Log = print) -> None:
    """Fetch (or take from ``source``), verify and write dataset ``name`` into ``folder``."""
    known = KNOWN[name]
    present = [f for f in _outputs(known) if (folder / f).exists()]
    if present and not force:
        raise PrepareError(f"{folder} already holds {present}; verify it with `python -m lit_rnncells.data check "
                           f"{name} --dest {folder}`, or pass --force to write over it")
    folder.mkdir(parents=True, exist_ok=True)
    if name == "semeval14":
        _semeval(source, folder, known)
        return
    downloads = folder / ".downloads"
    archives: List[Path] = []
    for item in known.sources:
        if source is not None:
            archives.append(from_source(item, source))
        else:
            archives.append(download(item, downloads, mirror, log))
    log(f"writing {name} into {folder}")
    BUILDERS[name](archives, folder, log)
    if downloads.is_dir():
        shutil.rmtree(downloads)
