"""``prepare``'s builders: from a dataset's release files (downloaded or from ``--source``) to the folder layout
its DataModule reads. Each :class:`~lit_rnncells.data.known.Dataset` record names its builder."""
from __future__ import annotations

import gzip
import hashlib
import shutil
import tarfile
import zipfile
from pathlib import Path
from typing import Callable, Dict, List, Optional

from . import iwslt14 as iwslt14_release

Log = Callable[[str], None]
PTB_MD5 = {"ptb.train.txt": "f26c4b92c5fdc7b3f8c7cdcb991d8420", "ptb.valid.txt": "aa0affc06ff7c36e977d7cd49e3839bf",
           "ptb.test.txt": "8b80168b89c18661a38ef683c0dc3721"}  # torchtext's published MD5s


class PrepareError(Exception):
    """A failure of ``prepare``: one sentence naming the problem and the fix."""


DOWNLOADS = ".downloads"
"""The folder (inside the destination) that prepare downloads into and removes when done."""


def redo(archive: Path) -> str:
    """The fix for a release file that is not the release: one prepare downloaded may be deleted; a user's own
    copy (given with ``--source``) is never ours to delete."""
    if archive.parent.name == DOWNLOADS:
        return f"delete {archive} and run prepare again, or fetch it from another --mirror"
    return (f"{archive} is your own copy and was left as it is: put the release file in --source instead, or run "
            "prepare without --source to download it")


def write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def verify_md5(name: str, data: bytes, expected: Optional[str], archive: Path, publisher: str) -> None:
    """Raise :class:`PrepareError` if the member ``name`` of ``archive`` differs from its published MD5."""
    if not expected:
        return
    got = hashlib.md5(data).hexdigest()
    if got != expected:
        raise PrepareError(f"{name} in {archive.name} has MD5 {got}, {publisher} {expected}; {redo(archive)}")


def members(archive: Path, wanted: Dict[str, str]) -> Dict[str, bytes]:
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


def ptb(archives: List[Path], folder: Path, log: Log) -> None:
    names = [f"ptb.{s}.txt" for s in ("train", "valid", "test")] + [f"ptb.char.{s}.txt" for s in
                                                                    ("train", "valid", "test")]
    for name, data in members(archives[0], {f"data/{n}": n for n in names}).items():
        verify_md5(name, data, PTB_MD5.get(name), archives[0], "torchtext's published")
        write(folder / name, data)


def single(member: str, md5: Optional[str] = None) -> Callable[[List[Path], Path, Log], None]:
    def unpack(archives: List[Path], folder: Path, log: Log) -> None:
        data = members(archives[0], {member: member})[member]
        verify_md5(member, data, md5, archives[0], "the published")
        write(folder / member, data)
    return unpack


def gunzip(archives: List[Path], folder: Path, log: Log) -> None:
    for archive in archives:
        with gzip.open(archive, "rb") as f:
            write(folder / archive.name[:-3], f.read())


def iwslt14(archives: List[Path], folder: Path, log: Log) -> None:
    try:
        iwslt14_release.prepare(archives[0], folder, log)
    except (ValueError, tarfile.TarError) as err:
        raise PrepareError(f"{err}; {redo(archives[0])}") from None


def gigaword(archives: List[Path], folder: Path, log: Log) -> None:
    wanted = {"Giga/input.txt": "test.article.txt", "Giga/task1_ref0.txt": "test.title.txt"}
    names = ["train.article.txt", "train.title.txt", "valid.article.filter.txt", "valid.title.filter.txt"]
    with tarfile.open(archives[0], "r:*") as tar:
        listed = {m.name for m in tar.getmembers() if m.isfile()}
    for name in names:
        gz = any(m.endswith(f"train/{name}.gz") for m in listed)
        wanted[f"train/{name}.gz" if gz else f"train/{name}"] = name + (".gz" if gz else "")
    for name, data in members(archives[0], wanted).items():
        if name.endswith(".gz"):
            name, data = name[:-3], gzip.decompress(data)
        write(folder / name, data)


def keep(archives: List[Path], folder: Path, log: Log) -> None:
    for archive in archives:
        if archive.parent != folder:
            shutil.copyfile(archive, folder / (archive.name + ".tmp"))
            (folder / (archive.name + ".tmp")).replace(folder / archive.name)


def extract(wanted: Dict[str, str]) -> Callable[[List[Path], Path, Log], None]:
    """A builder writing the release archive's members (paths ending with each key of ``wanted``) into the
    folder under their output names (``wanted``'s values): SST's ``trees/dev.txt`` as ``dev.txt``."""
    def unpack(archives: List[Path], folder: Path, log: Log) -> None:
        for name, data in members(archives[0], wanted).items():
            write(folder / name, data)
    return unpack
