"""One record per dataset (:mod:`lit_rnncells.data.known`): the translation DataModule, the hub reader,
``prepare`` and ``check`` read it, and cache keys are what they were before the record existed."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Dict, List

import pytest

from lit_rnncells.data import translation as tr

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
