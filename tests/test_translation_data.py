"""TranslationDataModule: formats, direction, policies (empty lines, lengths, line counts), hub path,
bucketed batches, checkpoint tokenizers, predict input, and the real corpora's pair counts."""
from __future__ import annotations

import io
import logging
from pathlib import Path
from typing import Dict, List

import pytest
import torch

from lit_rnncells.data import TranslationDataModule, VocabularyMismatchError
from lit_rnncells.data import translation as tr
from lit_rnncells.data.subword import BOS_ID, EOS_ID, PAD_ID, UNK_ID, SubwordTokenizer

DE = ["ein mann fährt rad .", "zwei hunde spielen .", "eine frau liest ein langes buch im park .", "kinder lachen ."]
EN = ["a man rides a bike .", "two dogs play .", "a woman reads a long book in the park .", "children laugh ."]


def write_parallel(folder: Path, splits: Dict[str, tuple] | None = None, src: str = "de", tgt: str = "en") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    splits = splits or {"train": (DE * 10, EN * 10), "valid": (DE, EN), "test": (DE[::-1], EN[::-1])}
    for split, (s, t) in splits.items():
        (folder / f"{split}.{src}").write_text("".join(x + "\n" for x in s), encoding="utf-8")
        (folder / f"{split}.{tgt}").write_text("".join(x + "\n" for x in t), encoding="utf-8")
    return folder


def module(folder: Path, **kw) -> TranslationDataModule:
    kw.setdefault("dataset", "parallel")
    kw.setdefault("source_language", "de")
    kw.setdefault("target_language", "en")
    kw.setdefault("subword_vocab_size", 330)
    kw.setdefault("min_frequency", 1)
    kw.setdefault("batch_size", 4)
    kw.setdefault("eval_batch_size", 3)
    kw.setdefault("cache_dir", "")
    return TranslationDataModule(data_dir=str(folder), **kw)


def test_batches_hold_source_eos_and_bos_target_eos(tmp_path: Path) -> None:
    dm = module(write_parallel(tmp_path / "c"))
    assert dm.pad_id == PAD_ID == 0 and (dm.bos_id, dm.eos_id) == (BOS_ID, EOS_ID) == (2, 3)
    assert dm.source_vocab_size == dm.target_vocab_size == len(dm.source_tokenizer)  # joint by default
    batches = list(dm.test_dataloader())
    seen = torch.cat([b["index"] for b in batches]).tolist()
    assert sorted(seen) == [0, 1, 2, 3]  # every test pair once
    for b in batches:
        for row, i in enumerate(b["index"].tolist()):
            n, m = int(b["source_lengths"][row]), int(b["target_lengths"][row])
            src, tgt = b["source"][row].tolist(), b["target"][row].tolist()
            assert src[:n] == dm.source_tokenizer.encode(DE[::-1][i]) + [EOS_ID] and set(src[n:]) <= {PAD_ID}
            assert tgt[:m] == [BOS_ID] + dm.target_tokenizer.encode(EN[::-1][i]) + [EOS_ID]
            assert set(tgt[m:]) <= {PAD_ID}
            assert b["references"][row] == EN[::-1][i]
            assert dm.decode(tgt) == EN[::-1][i]


def test_training_batches_are_length_bucketed_and_cover_the_epoch(tmp_path: Path) -> None:
    lines = [" ".join(["wort"] * n) for n in range(1, 41)]
    folder = write_parallel(tmp_path / "b", {"train": (lines, lines), "valid": (DE, EN), "test": (DE, EN)})
    dm = module(folder, batch_size=4, chunk_batches=10, subword_vocab_size=300)
    batches = list(dm.train_dataloader())
    assert sorted(torch.cat([b["index"] for b in batches]).tolist()) == list(range(40))
    for b in batches:  # one chunk of 40 sorted by length (= line number here): neighbours share a batch
        idx = sorted(b["index"].tolist())
        assert idx == list(range(idx[0], idx[0] + 4)) and idx[0] % 4 == 0
    assert [sorted(b["index"].tolist())[0] for b in batches] != list(range(0, 40, 4))  # batch order shuffled
    assert [b["batch"] for b in batches] == list(range(10)) and all(b["epoch"] == 0 for b in batches)
    assert "references" not in batches[0]


def test_separate_vocabularies_option(tmp_path: Path) -> None:
    dm = module(write_parallel(tmp_path / "s"), joint_vocabulary=False, subword_vocab_size=300)
    assert dm.source_tokenizer != dm.target_tokenizer
    english = " " + " ".join(EN)

    def merged(tok: SubwordTokenizer) -> list:
        return [t.replace("Ġ", " ") for t, i in tok.tokenizer.get_vocab().items() if i >= 260]

    assert merged(dm.target_tokenizer) and all(t in english for t in merged(dm.target_tokenizer))  # English only
    assert any(t not in english for t in merged(dm.source_tokenizer))
    joint = module(write_parallel(tmp_path / "j"), joint_vocabulary=True)
    assert joint.source_tokenizer.tokenizer.get_vocab() == joint.target_tokenizer.tokenizer.get_vocab()
    assert any(t not in english for t in merged(joint.target_tokenizer))  # fitted on both sides


def test_different_line_counts_name_both_files(tmp_path: Path) -> None:
    folder = write_parallel(tmp_path / "c", {"train": (DE * 3, EN * 3), "valid": (DE, EN[:3]), "test": (DE, EN)})
    with pytest.raises(ValueError, match=r"valid\.de has 4 lines and .*valid\.en has 3"):
        module(folder)


def test_empty_lines_dropped_in_training_error_in_evaluation(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    train_de, train_en = DE * 5 + ["", "ein hund ."], EN * 5 + ["a lonely line .", "  "]
    folder = write_parallel(tmp_path / "e", {"train": (train_de, train_en), "valid": (DE, EN), "test": (DE, EN)})
    with caplog.at_level(logging.INFO):
        dm = module(folder)
    assert dm.dropped == {"empty": 2, "too_long": 0} and len(dm.split("train")["source"]) == 20
    assert "dropped 2 pairs with an empty side" in caplog.text
    bad = write_parallel(tmp_path / "v", {"train": (DE * 5, EN * 5), "valid": (DE, EN[:2] + [""] + EN[3:]),
                                          "test": (DE, EN)})
    with pytest.raises(ValueError, match=r"Line 3 of .*valid\.en is empty"):
        module(bad)


def test_training_length_filter_counts_and_logs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    folder = write_parallel(tmp_path / "l")
    free = module(folder)
    lengths = [len(s) for s in free.split("train")["source"]]
    limit = sorted(set(lengths))[-2]  # drops the longest sentence's 10 copies
    with caplog.at_level(logging.INFO):
        dm = module(folder, max_source_length=limit)
    assert dm.dropped["too_long"] == lengths.count(max(lengths)) == 10
    assert max(len(s) for s in dm.split("train")["source"]) <= limit and "10 longer than" in caplog.text
    short = min(len(t) for t in free.split("train")["target"])
    kept = module(folder, max_target_length=short).split("train")["target"]
    assert kept and all(len(t) == short for t in kept) and len(kept) < len(free.split("train")["target"])
    with pytest.raises(ValueError, match="No parallel training pairs remain"):
        module(folder, max_source_length=1)


def test_too_long_source_at_test_and_predict_time(tmp_path: Path) -> None:
    folder = write_parallel(tmp_path / "t")
    longest = max(len(module(folder).source_tokenizer.encode(x)) for x in DE)
    with pytest.raises(ValueError, match=r"Line 3 of .*valid\.de has \d+ source subwords, more than max_input_length"):
        module(folder, max_input_length=longest - 1)
    dm = module(folder, max_input_length=longest)
    (tmp_path / "in.txt").write_text(DE[2] + " " + DE[2] + "\n")
    dm.predict_file = str(tmp_path / "in.txt")
    with pytest.raises(ValueError, match=r"Line 1 of predict_file '.*in\.txt' has \d+ source subwords.* raise "
                                         r"max_input_length"):
        dm.predict_dataloader()


@pytest.mark.parametrize("dataset,source,target,match", [
    ("multi30k", "de", "fr", r"Unknown direction de->fr for multi30k"),
    ("iwslt14", "en", "en", r"Unknown direction en->en"),
    ("gigaword", "title", "article", r"Unknown direction title->article for gigaword"),
    ("parallel", "de", None, r"needs two different file suffixes"),
])
def test_unknown_direction_is_one_clear_error(tmp_path: Path, dataset, source, target, match) -> None:
    with pytest.raises(ValueError, match=match):
        TranslationDataModule(dataset, data_dir=str(tmp_path), source_language=source, target_language=target,
                              cache_dir="")


def test_bad_sizes_fail_at_construction(tmp_path: Path) -> None:
    folder = write_parallel(tmp_path / "c")
    with pytest.raises(ValueError, match="num_workers must be 0 or 1"):
        module(folder, num_workers=2)
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        module(folder, batch_size=0)
    with pytest.raises(ValueError, match="Unknown dataset 'wmt'"):
        TranslationDataModule("wmt", cache_dir="")  # type: ignore[arg-type]


def test_direction_defaults_and_reverse(tmp_path: Path) -> None:
    folder = write_parallel(tmp_path / "m", {"train": (DE * 10, EN * 10), "valid": (DE, EN), "test": (DE, EN)})
    multi30k_names = {"train": "train", "valid": "val", "test": "test_2016_flickr"}
    for name, new in multi30k_names.items():
        for lang in ("de", "en"):
            (folder / f"{name}.{lang}").rename(folder / f"{new}.{lang}")
    kw = dict(data_dir=str(folder), cache_dir="", subword_vocab_size=330, min_frequency=1)
    de_en = TranslationDataModule("multi30k", **kw)
    en_de = TranslationDataModule("multi30k", source_language="en", **kw)
    assert (de_en.source_language, de_en.target_language) == ("de", "en")
    assert (en_de.source_language, en_de.target_language) == ("en", "de")
    assert en_de.split("valid")["target_text"] == DE and de_en.split("valid")["target_text"] == EN
    assert not de_en.pretokenized  # Multi30k is raw text: byte-level BPE


def test_tokenizer_mismatch_on_load_is_one_clear_error(tmp_path: Path) -> None:
    folder = write_parallel(tmp_path / "c")
    saved = module(folder, pretokenized=True).state_dict()
    other = module(folder, pretokenized=True, subword_vocab_size=300)
    with pytest.raises(VocabularyMismatchError, match="checkpoint's source tokenizer differs from this data's: "
                                                      "the checkpoint's has \\d+ symbols, this data's 300"):
        other.load_state_dict(saved)
    same = module(folder, pretokenized=True)
    same.load_state_dict(saved)  # identical tokenizers load
    assert set(saved) >= {"source_tokenizer", "target_tokenizer", "position"}


def _checkpoint(dm: TranslationDataModule, path: Path) -> Path:
    torch.save({"state_dict": {}, type(dm).__qualname__: dm.state_dict()}, path)
    return path


def test_predict_from_checkpoint_alone_file_and_stdin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = write_parallel(tmp_path / "c")
    trained = module(folder)
    ckpt = _checkpoint(trained, tmp_path / "m.ckpt")
    lines = [DE[2], DE[0], DE[3] + " " + DE[1], DE[1]]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n")
    dm = TranslationDataModule("parallel", source_language="de", target_language="en", checkpoint_path=str(ckpt),
                               predict_file=str(tmp_path / "in.txt"), eval_batch_size=2, cache_dir="")
    assert dm.source_tokenizer == trained.source_tokenizer  # no training files read
    batches = list(dm.predict_dataloader())
    assert sorted(torch.cat([b["index"] for b in batches]).tolist()) == [0, 1, 2, 3]
    for b in batches:
        for row, i in enumerate(b["index"].tolist()):
            assert b["source"][row, :int(b["source_lengths"][row])].tolist() == (
                trained.source_tokenizer.encode(lines[i]) + [EOS_ID])
        assert "target" not in b
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(lines[:3]) + "\n"))
    dm.predict_file = "-"
    assert sorted(torch.cat([b["index"] for b in dm.predict_dataloader()]).tolist()) == [0, 1, 2]
    assert sorted(torch.cat([b["index"] for b in dm.predict_dataloader()]).tolist()) == [0, 1, 2]  # read once
    monkeypatch.setattr("sys.stdin", io.StringIO("ein mann .\n\nzwei .\n"))
    fresh = TranslationDataModule("parallel", source_language="de", target_language="en", checkpoint_path=str(ckpt),
                                  predict_file="-", cache_dir="")
    for _ in range(2):  # the same error however often Lightning asks for the loader
        with pytest.raises(ValueError, match="Line 2 of standard input is empty"):
            fresh.predict_dataloader()
    with pytest.raises(ValueError, match="is not a readable checkpoint"):
        (tmp_path / "bad.ckpt").write_bytes(b"garbage")
        TranslationDataModule("parallel", source_language="de", target_language="en",
                              checkpoint_path=str(tmp_path / "bad.ckpt"))


def test_test_split_from_checkpoint_uses_its_tokenizers(tmp_path: Path) -> None:
    trained = module(write_parallel(tmp_path / "a"), subword_vocab_size=300, pretokenized=True)
    ckpt = _checkpoint(trained, tmp_path / "m.ckpt")
    other = write_parallel(tmp_path / "b", {"test": (DE, EN)})  # test files only
    dm = module(other, checkpoint_path=str(ckpt))
    dm.setup("test")
    b = next(iter(dm.test_dataloader()))
    assert dm.target_tokenizer == trained.target_tokenizer and len(dm.target_tokenizer) == 300
    assert b["references"][0] in EN


def test_cache_is_reused_and_keyed_by_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = write_parallel(tmp_path / "c")
    first = module(folder, cache_dir=str(tmp_path / "cache"))

    def fail(*a, **k):
        raise AssertionError("retrained although cached")

    monkeypatch.setattr(SubwordTokenizer, "train", fail)
    again = module(folder, cache_dir=str(tmp_path / "cache"))
    assert again.source_tokenizer == first.source_tokenizer
    assert again.split("train")["source"] == first.split("train")["source"]
    with pytest.raises(AssertionError, match="retrained"):
        module(folder, cache_dir=str(tmp_path / "cache"), subword_vocab_size=300)


# --- real data -----------------------------------------------------------------------------
COUNTS = {"multi30k": (29_000, 1_014, 1_000), "iwslt14": (9_485, 7_283, 6_750), "gigaword": (10_000, 1_000, 1_951)}


@pytest.mark.real_data
@pytest.mark.parametrize("dataset", sorted(COUNTS))
def test_real_pair_counts(dataset: str, data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    dm = TranslationDataModule(dataset, data_dir=str(data_dir / dataset), subword_vocab_size=8000,
                               cache_dir=str(tmp_path_factory.getbasetemp() / "s2s_cache"))
    assert tuple(len(dm.split(s)["source"]) for s in ("train", "valid", "test")) == COUNTS[dataset]
    assert dm.dropped == {"empty": 0, "too_long": 0}
    assert dm.pretokenized == (dataset != "multi30k")
    test = dm.split("test")
    for i in range(200):  # the encoding round-trips the corpus's text form (unseen characters too)
        assert UNK_ID not in test["source"][i] + test["target"][i]
        assert dm.target_tokenizer.decode(test["target"][i]) == " ".join(test["target_text"][i].split())


def test_default_data_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("LIT_RNNCELLS_DATA", raising=False)
    assert tr.default_data_dir("gigaword") == "Harvard/gigaword" and tr.default_data_dir("parallel") is None
    assert tr.default_data_dir("iwslt14") is None and tr.default_data_dir("iwslt17") == "IWSLT/iwslt2017"
    (tmp_path / "multi30k").mkdir()
    monkeypatch.setenv("LIT_RNNCELLS_DATA", str(tmp_path))
    assert tr.default_data_dir("multi30k") == str(tmp_path / "multi30k")
    assert tr.default_data_dir("iwslt14") == str(tmp_path / "iwslt14")  # set means local: a missing folder is named
