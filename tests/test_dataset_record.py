"""One record per dataset (:mod:`lit_rnncells.data.known`): the translation DataModule, the hub reader,
``prepare`` and ``check`` read it, and cache keys are what they were before the record existed."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Dict, List

import pytest

from lit_rnncells.data import translation as tr

ROOT = Path(__file__).resolve().parents[1]

LINES = ["ein mann fährt rad .", "zwei hunde spielen .", "eine frau liest ein buch .", "kinder lachen ."]


def _write(folder: Path, names: Dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i, name in enumerate(sorted(names)):
        (folder / name).write_text("".join(f"{line} {names[name]}\n" for line in LINES * 3), encoding="utf-8")


def _keys(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **kw: Any) -> str:
    """A digest of every cache key a TranslationDataModule asks for, with the test's folder and the files'
    mtimes replaced by constants (the same files give the same key on any machine)."""
    seen: List[Dict[str, Any]] = []
    real = tr.cached

    def spy(cache_dir, key, build):
        seen.append(json.loads(json.dumps(key, sort_keys=True, default=str)))
        return real(cache_dir, key, build)

    monkeypatch.setattr(tr, "cached", spy)
    tr.TranslationDataModule(data_dir=str(tmp_path), subword_vocab_size=300, min_frequency=1, cache_dir="", **kw)
    text = json.dumps(seen, sort_keys=True).replace(str(tmp_path.resolve()), "<folder>")
    for key in seen:
        for part in key.get("files", []):
            text = text.replace(f'"mtime_ns": {part["mtime_ns"]}', '"mtime_ns": 0')
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# Computed with this test's code on commit 5707de1, before the record held the translation tables:
# a key that changes rebuilds every user's cached tokenizers and splits.
KEYS_BEFORE = {"multi30k": "2e828bf03e73238a", "gigaword": "2598a90f2507e1b7", "parallel": "429188c07cf79c96"}


@pytest.mark.parametrize("dataset,files,kw", [
    ("multi30k", {"train.de": "d", "train.en": "e", "val.de": "d", "val.en": "e", "test_2016_flickr.de": "d",
                  "test_2016_flickr.en": "e"}, {"source_language": "en"}),
    ("gigaword", {"train.article.txt": "a", "train.title.txt": "t", "valid.article.filter.txt": "a",
                  "valid.title.filter.txt": "t", "test.article.txt": "a", "test.title.txt": "t"}, {}),
    ("parallel", {"train.x": "x", "train.y": "y", "valid.x": "x", "valid.y": "y", "test.x": "x", "test.y": "y"},
     {"source_language": "x", "target_language": "y"}),
])
def test_cache_keys_are_unchanged(monkeypatch, tmp_path, dataset, files, kw):
    _write(tmp_path, files)
    assert _keys(monkeypatch, tmp_path, dataset=dataset, **kw) == KEYS_BEFORE[dataset]


# --- adding a dataset: one record, nothing else ----------------------------------------------------------
TOY_FILES = {"train": "toy-train.{}", "valid": "toy-dev.{}", "test": "toy-test.{}"}
TOY_PAIRS = {"train": [(f"xa{i} xb{i % 3} xc", f"ya{i} yb{i % 3} yc") for i in range(12)],
             "valid": [("xa1 xb2 xc", "ya1 yb2 yc"), ("xb2 xc", "yb2 yc")],
             "test": [("xa0 xb2", "ya0 yb2"), ("xc xa1", "yc ya1")]}


def _toy_release(folder: Path) -> Path:
    """The toy corpus's "release": one tar of the six files (as a dataset's download would be)."""
    import io
    import tarfile

    folder.mkdir(parents=True, exist_ok=True)
    with tarfile.open(folder / "toy.tar.gz", "w:gz") as tar:
        for split, pairs in TOY_PAIRS.items():
            for side, language in enumerate(("xx", "yy")):
                data = "".join(pair[side] + "\n" for pair in pairs).encode()
                info = tarfile.TarInfo(f"toy/{TOY_FILES[split].format(language)}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return folder / "toy.tar.gz"


def _untar(archives: List[Path], folder: Path, log) -> None:
    """The toy record's builder: the archive's files into the dataset folder."""
    import tarfile

    with tarfile.open(archives[0]) as tar:
        for member in tar.getmembers():
            (folder / Path(member.name).name).write_bytes(tar.extractfile(member).read())


@pytest.fixture
def toy_record(monkeypatch, tmp_path):
    """The one place the toy dataset is added: its record."""
    from lit_rnncells.data import known

    archive = _toy_release(tmp_path / "release")
    record = known.Dataset(
        "toy_pairs", "a toy parallel corpus (xx-yy)", "TranslationDataModule (toy_pairs)",
        sources=(known.Source("https://example.invalid/toy.tar.gz", "toy.tar.gz", archive.stat().st_size,
                              hashlib.sha256(archive.read_bytes()).hexdigest(), provenance="made by the test"),),
        layouts=(known.pair_layout("xx-yy", TOY_FILES, ("xx", "yy"), {"train": 12, "dev": 2, "test": 2}),),
        steps="extracts toy/*", builder=_untar, languages=("xx", "yy"), files=TOY_FILES)
    monkeypatch.setitem(known.KNOWN, record.name, record)
    return archive.parent


def test_a_dataset_added_by_its_record_prepares_checks_and_trains(toy_record, tmp_path, capsys, monkeypatch):
    from lit_rnncells.cli import run
    from lit_rnncells.data.__main__ import main as data_main

    dest = tmp_path / "data" / "toy_pairs"
    assert data_main(["list"]) == 0 and "toy_pairs" in capsys.readouterr().out
    assert data_main(["prepare", "toy_pairs", "--source", str(toy_record), "--dest", str(dest)]) == 0
    assert "toy_pairs written to" in capsys.readouterr().out
    assert (dest / "toy-dev.yy").read_text().splitlines() == ["ya1 yb2 yc", "yb2 yc"]
    assert data_main(["check", "toy_pairs", "--dest", str(dest)]) == 0
    out = capsys.readouterr().out
    assert "found: toy_pairs xx-yy: train 12, dev 2, test 2 pairs" in out and "no faults" in out, out
    (dest / "toy-test.xx").write_text("xa0 xb2\n")  # one line short: check names the fault
    assert data_main(["check", "toy_pairs", "--dest", str(dest)]) == 1
    assert "toy-test.xx has 1 lines and" in capsys.readouterr().out
    (dest / "toy-test.xx").write_text("xa0 xb2\nxc xa1\n")

    monkeypatch.setenv("LIT_RNNCELLS_DATA", str(tmp_path / "data"))  # the default data_dir: $DATA/toy_pairs
    root = tmp_path / "runs"
    args = ["fit", "--config", str(ROOT / "configs" / "seq2seq" / "multi30k_de_en_gru.yaml"),
            "--data.init_args.dataset", "toy_pairs", "--data.init_args.source_language", "yy",
            "--data.init_args.target_language", "xx", "--data.init_args.subword_vocab_size", "280",
            "--data.init_args.min_frequency", "1", "--data.init_args.cache_dir", "",
            "--data.init_args.batch_size", "4", "--model.init_args.hidden_size", "8",
            "--model.init_args.embedding_size", "8", "--model.init_args.eval_metrics", "[]",
            "--trainer.max_steps", "2", "--trainer.logger", "false", "--trainer.enable_progress_bar", "false",
            "--trainer.default_root_dir", str(root)]
    assert run(args) == 0, capsys.readouterr().err[-2000:]
    assert list(root.rglob("last.ckpt"))


def _lm_keys(monkeypatch: pytest.MonkeyPatch, folder: Path, **kw: Any) -> str:
    """As :func:`_keys`, for the language-model DataModule."""
    from lit_rnncells.data import language_model as lm

    seen: List[Dict[str, Any]] = []
    real = lm.cached

    def spy(cache_dir, key, build):
        seen.append(json.loads(json.dumps(key, sort_keys=True, default=str)))
        return real(cache_dir, key, build)

    monkeypatch.setattr(lm, "cached", spy)
    lm.LanguageModelDataModule(data_dir=str(folder), cache_dir="", batch_size=2, eval_batch_size=2, bptt=3, **kw)
    text = json.dumps(seen, sort_keys=True).replace(str(folder.resolve()), "<folder>")
    for key in seen:
        for part in key.get("files", []):
            text = text.replace(f'"mtime_ns": {part["mtime_ns"]}', '"mtime_ns": 0')
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# Computed on commit 49e3d97, before the language-model DataModule read the records.
LM_KEYS_BEFORE = {"ptb_word": "15ea3b4fc6a532d8", "ptb_char": "dccddbcd22848c95", "text8": "8f486816dd1d198d"}


@pytest.mark.parametrize("dataset,files,kw", [
    ("ptb_word", {f"ptb.{s}.txt": "" for s in ("train", "valid", "test")}, {}),
    ("ptb_char", {f"ptb.char.{s}.txt": "" for s in ("train", "valid", "test")}, {}),
    ("text8", {"text8": ""}, {"split_sizes": (200, 30, 30)}),
])
def test_language_model_cache_keys_are_unchanged(monkeypatch, tmp_path, dataset, files, kw):
    _write(tmp_path, files)
    assert _lm_keys(monkeypatch, tmp_path, dataset=dataset, **kw) == LM_KEYS_BEFORE[dataset]


def test_the_readers_tables_from_the_records_are_the_old_tables():
    """File names and hub ids the readers take from the records are what they held before (cache keys and
    error messages name them)."""
    from lit_rnncells.data import imdb, language_model as lm, semeval, sst

    splits = ("train", "valid", "test")
    assert lm.LOCAL_FILES == {"ptb_char": {s: f"ptb.char.{s}.txt" for s in splits},
                              "ptb_word": {s: f"ptb.{s}.txt" for s in splits},
                              "text": {s: f"{s}.txt" for s in splits}, "text8": {"all": "text8"},
                              "enwik8": {"all": "enwik8"}}
    assert list(lm.LOCAL_FILES["ptb_word"]) == list(splits)  # the order the files are fingerprinted in
    assert lm.HUB_IDS == {"ptb_char": "ptb-text-only/ptb_text_only", "ptb_word": "ptb-text-only/ptb_text_only",
                          "text8": "afmck/text8", "enwik8": "LTCB/enwik8"}
    assert lm.ENV_FOLDERS == {"ptb_char": "ptb", "ptb_word": "ptb", "text8": "text8", "enwik8": "enwik8"}
    assert {domain: semeval.local_files(domain) for domain in semeval.domains()} == {
        "restaurants": {"train": "Restaurants_Train_v2.xml", "test": "Restaurants_Test_Gold.xml"},
        "laptops": {"train": "Laptop_Train_v2.xml", "test": "Laptops_Test_Gold.xml"}}
    assert (semeval.HUB_ID, imdb.HUB_ID, sst.HUB_ID) == ("alexcadillon/SemEval2014Task4", "stanfordnlp/imdb",
                                                         "stanfordnlp/sst2")
    assert imdb.archive_name() == "aclImdb_v1.tar.gz"
    assert list(imdb.class_folders().values()) == ["aclImdb/train/neg", "aclImdb/train/pos", "aclImdb/test/neg",
                                                   "aclImdb/test/pos"]  # the order they are fingerprinted in
    assert sst.local_files() == {"train": "train.txt", "validation": "dev.txt", "test": "test.txt"}
    assert tr.LOCAL_FILES["gigaword"] == {"train": "train.{}.txt", "valid": "valid.{}.filter.txt",
                                          "test": "test.{}.txt"}
    assert tr.HUB_IDS == {"multi30k": "bentrevett/multi30k", "iwslt17": "IWSLT/iwslt2017",
                          "gigaword": "Harvard/gigaword"}
