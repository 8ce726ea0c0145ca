"""The sentiment datasets' files live in their records (:mod:`lit_rnncells.data.known`): every file the
SemEval-2014, SST and IMDB readers, ``data check`` and ``prepare`` open is one the record names, each
DataModule says which files it reads (``split_files``), and the tensor cache keys are what they were before
the records held the readers' file tables (a changed key rebuilds every user's cache)."""
from __future__ import annotations

import hashlib
import json
import sys
import zipfile
from pathlib import Path
from typing import Any, Dict, Iterator, List, Set

import pytest

from lit_rnncells.data import AspectSentimentDataModule, DocumentSentimentDataModule, known
from lit_rnncells.data import sentiment_base
from lit_rnncells.data.check import check_folder
from lit_rnncells.data.prepare import prepare
from tests.test_sentiment_data import (SST_DEV, SST_TEST, SST_TRAIN, TEST_SENTENCES, TRAIN_SENTENCES, imdb_archive,
                                       imdb_folder, semeval_folder, sst_folder, tiny, write_xml)

# --- every file a reader opens ----------------------------------------------------------------------------
_OPENED: List[str] = []
_WATCHING: List[bool] = [False]


def _audit(event: str, args: tuple) -> None:
    if _WATCHING[0] and event == "open" and isinstance(args[0], (str, bytes, Path)):
        _OPENED.append(str(args[0] if not isinstance(args[0], bytes) else args[0].decode()))


sys.addaudithook(_audit)  # audit hooks cannot be removed: this one records only while a test watches


class _Opened:
    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.paths: Set[Path] = set()

    def __enter__(self) -> "_Opened":
        _OPENED.clear()
        _WATCHING[0] = True
        return self

    def __exit__(self, *exc: Any) -> None:
        _WATCHING[0] = False
        for name in _OPENED:
            path = Path(name).resolve()
            if path.is_file() and self.root in path.parents:
                self.paths.add(path.relative_to(self.root))


def _record_files(name: str) -> Set[str]:
    """Every file name the record gives its dataset: its file groups' files and its release members."""
    record = known.KNOWN[name]
    names = {f for layout in record.layouts for files in layout.files.values() for f in files}
    return names | {pattern.format(c) for pattern in record.members.values() for c in (record.classes or ("",))}


def _named_by_record(name: str, relative: Path) -> bool:
    """``relative`` (a file under the data folder) is a file the record names, or a review file of a folder
    the record names (IMDB's ``aclImdb/train/pos/<id>_<rating>.txt``, read from the extracted release)."""
    text, folder = relative.as_posix(), relative.parent.as_posix()
    return any(text == entry or relative.name == entry or folder == entry or ("/" + folder).endswith("/" + entry)
               or ("/" + folder).endswith("/" + entry.split("/", 1)[-1]) for entry in _record_files(name))


def test_the_records_name_the_sentiment_files_and_members() -> None:
    assert _record_files("semeval14") == {"Restaurants_Train_v2.xml", "Restaurants_Test_Gold.xml",
                                          "Laptop_Train_v2.xml", "Laptops_Test_Gold.xml"}
    assert _record_files("sst") == {"train.txt", "dev.txt", "test.txt", "trees/train.txt", "trees/dev.txt",
                                    "trees/test.txt"}
    imdb = known.KNOWN["imdb"]
    assert imdb.members == {"train": "aclImdb/train/{}", "test": "aclImdb/test/{}"} and imdb.classes == ("neg", "pos")


def _laptops(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    write_xml(root / "Laptop_Train_v2.xml", TRAIN_SENTENCES)
    write_xml(root / "Laptops_Test_Gold.xml", TEST_SENTENCES)
    return root


def _sources(tmp_path: Path) -> Iterator[tuple]:
    """(record name, DataModule class, its arguments, the folder it reads) for each local form of each dataset."""
    yield "semeval14", AspectSentimentDataModule, {}, semeval_folder(tmp_path / "restaurants")
    yield "semeval14", AspectSentimentDataModule, {"domain": "laptops"}, _laptops(tmp_path / "laptops")
    yield "sst", DocumentSentimentDataModule, {"dataset": "sst"}, sst_folder(tmp_path / "sst")
    yield "imdb", DocumentSentimentDataModule, {"dataset": "imdb", "val_size": 2}, imdb_archive(tmp_path / "archive")
    yield "imdb", DocumentSentimentDataModule, {"dataset": "imdb", "val_size": 2}, imdb_folder(tmp_path / "folder")
    yield "imdb", DocumentSentimentDataModule, {"dataset": "imdb", "val_size": 2}, tmp_path / "folder"


def test_every_file_the_readers_and_the_split_check_open_is_in_the_record(tmp_path: Path) -> None:
    for name, cls, kwargs, data_dir in _sources(tmp_path):
        root = data_dir if data_dir.is_dir() else data_dir.parent
        with _Opened(root) as opened:
            dm = cls(data_dir=str(data_dir), **tiny(**kwargs))
            dm.setup("fit")  # the fit-time split check reads the files too
        assert opened.paths, (name, data_dir)  # the watch saw the reads
        stray = [p for p in opened.paths if not _named_by_record(name, p)]
        assert not stray, f"{name} from {data_dir} opened {stray}, which its record does not name"
        bound = dm.split_files()  # the DataModule's own answer: its record's files, under its folder
        assert bound is not None and bound.name == name and bound.layout in known.KNOWN[name].layouts
        named = _record_files(name) | {entry.split("/")[0] for entry in _record_files(name)}  # IMDB: aclImdb/
        assert all(p.name in named for paths in bound.paths.values() for p in paths), bound.paths


def test_data_check_and_prepare_open_only_the_records_files(tmp_path: Path) -> None:
    folder = semeval_folder(tmp_path / "semeval14")
    with _Opened(folder) as opened:
        report = check_folder("semeval14", folder)  # tiny files: count faults, but every file read
    assert report.ok == ["semeval14 restaurants: train 13, test 3 aspect terms"], report
    assert opened.paths and all(_named_by_record("semeval14", p) for p in opened.paths), opened.paths
    release = tmp_path / "release"
    release.mkdir()
    with zipfile.ZipFile(release / "trainDevTestTrees_PTB.zip", "w") as zf:  # the release's layout: trees/*.txt
        for split, lines in (("train", SST_TRAIN), ("dev", SST_DEV), ("test", SST_TEST)):
            zf.writestr(f"trees/{split}.txt", "\n".join(lines) + "\n")
    record = known.KNOWN["sst"]
    size = (release / "trainDevTestTrees_PTB.zip").stat().st_size
    sha = hashlib.sha256((release / "trainDevTestTrees_PTB.zip").read_bytes()).hexdigest()
    source = known.Source(record.sources[0].url, record.sources[0].filename, size, sha)
    original = known.KNOWN["sst"]
    known.KNOWN["sst"] = known.Dataset(**{**original.__dict__, "sources": (source,)})
    try:
        prepare("sst", tmp_path / "sst", source=release, log=lambda _: None)
    finally:
        known.KNOWN["sst"] = original
    assert sorted(p.name for p in (tmp_path / "sst").iterdir()) == ["dev.txt", "test.txt", "train.txt"]
    assert (tmp_path / "sst" / "dev.txt").read_text().splitlines() == SST_DEV


# --- cache keys -------------------------------------------------------------------------------------------
def _key_digest(monkeypatch: pytest.MonkeyPatch, root: Path, cls: type, data_dir: Path, kwargs: Dict) -> str:
    """A digest of the cache key the DataModule asks for, with the test's folder and the files' mtimes and sizes
    replaced by constants (a folder's size depends on the file system, a tar.gz's on its time stamps): the key's
    structure, paths and options are what is compared."""
    seen: List[Any] = []
    real = sentiment_base.cached

    def spy(cache_dir, key, build):
        seen.append(json.loads(json.dumps(key, sort_keys=True, default=str)))
        return real(cache_dir, key, build)

    monkeypatch.setattr(sentiment_base, "cached", spy)
    cls(data_dir=str(data_dir), **tiny(**kwargs))
    for key in seen:
        for part in key.get("files", []):
            part["mtime_ns"] = part["size"] = 0
    text = json.dumps(seen, sort_keys=True).replace(str(root.resolve()), "<folder>")
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# Computed with this test's code on commit 5c2cff1, before the records held the readers' file tables.
KEYS_BEFORE = {"semeval14": "50ffaddcad189b36", "semeval14/laptops": "2cd346fd46a199f8", "sst": "980206ab073e72cf",
               "imdb/archive": "55c47d463805bf71", "imdb/folder": "276c26bd71f39098",
               "imdb/holding": "276c26bd71f39098"}


def test_cache_keys_are_unchanged(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    labels = ["semeval14", "semeval14/laptops", "sst", "imdb/archive", "imdb/folder", "imdb/holding"]
    got = {label: _key_digest(monkeypatch, tmp_path, cls, data_dir, kwargs)
           for label, (_, cls, kwargs, data_dir) in zip(labels, _sources(tmp_path))}
    assert got == KEYS_BEFORE
