"""Language-model data: vocabularies, streams for TBPTT and DDP, caching, errors, real PTB sizes."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from lit_rnncells.data import LanguageModelDataModule, Vocabulary, VocabularyMismatchError
from lit_rnncells.data import language_model as lm_data
from lit_rnncells.data import text as text_mod
from lit_rnncells.data.language_model import EvalStreams, TrainStreams


def write_corpus(folder: Path, train: str, valid: str, test: str, names=("train.txt", "valid.txt", "test.txt")) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in zip(names, (train, valid, test)):
        (folder / name).write_text(text)
    return folder


def ptb_char_format(text: str) -> str:
    """Mikolov's character format: characters separated by spaces, ``_`` between words, `` \\n`` line ends."""
    return "".join(" " + " ".join("_".join(line.split())) + " \n" for line in text.splitlines())


@pytest.fixture
def char_dir(tmp_path: Path) -> Path:
    return write_corpus(tmp_path / "corpus", "abcab cab\nbca\n" * 40, "cab ab\n" * 5, "abc\n" * 5)


def module(folder: Path, **kw) -> LanguageModelDataModule:
    kw.setdefault("dataset", "text")
    kw.setdefault("level", "char")
    kw.setdefault("batch_size", 4)
    kw.setdefault("eval_batch_size", 3)
    kw.setdefault("bptt", 7)
    kw.setdefault("cache_dir", "")
    return LanguageModelDataModule(data_dir=str(folder), **kw)


def test_vocabulary_from_train_only_and_explicit_unk(tmp_path: Path) -> None:
    folder = write_corpus(tmp_path / "c", "abab\n" * 20, "abz\n", "ab\n")
    with pytest.warns(UserWarning, match="<unk>"):
        dm = module(folder, batch_size=2)
    assert dm.vocab.symbols == ["\n", "a", "b", "<unk>"] and dm.vocab.unk == "<unk>"
    assert dm.splits["valid"].tolist() == [1, 2, 3, 0]  # 'z' (valid only) maps to <unk>
    clean = module(write_corpus(tmp_path / "d", "abab\n" * 20, "ab\n", "ba\n"), batch_size=2)
    assert clean.vocab.unk is None and clean.vocab_size == 3  # no <unk> when nothing is unknown


def test_word_level_keeps_existing_unk_and_eos(tmp_path: Path) -> None:
    folder = write_corpus(tmp_path / "w", "the cat <unk>\nthe dog\n" * 10, "the bird\n", "a cat\n")
    dm = module(folder, level="word", batch_size=2, bptt=3)
    assert dm.vocab.unk == "<unk>" and "<eos>" in dm.vocab.stoi and dm.vocab_size == 5
    unk, eos = dm.vocab.stoi["<unk>"], dm.vocab.stoi["<eos>"]
    assert dm.splits["valid"].tolist() == [dm.vocab.stoi["the"], unk, eos]
    assert dm.vocab.detokenize(["the", "cat", "<eos>", "the"]) == "the cat\nthe"


def test_ptb_char_format_line_ends_and_spaces(tmp_path: Path) -> None:
    text = "the cat sat\non a mat\n"
    folder = write_corpus(tmp_path / "ptb", ptb_char_format(text * 30), ptb_char_format(text), ptb_char_format(text),
                          names=tuple(f"ptb.char.{s}.txt" for s in ("train", "valid", "test")))
    dm = module(folder, dataset="ptb_char", level=None)
    assert "".join(dm.vocab.decode(dm.splits["valid"])) == "the_cat_sat\non_a_mat\n"  # '\n' is a symbol
    assert dm.vocab.tokenize("a cat") == ["a", "_", "c", "a", "t"]
    assert dm.vocab.detokenize(["a", "_", "c"]) == "a c"


def test_train_streams_are_contiguous_and_ranks_disjoint() -> None:
    data = torch.arange(103, dtype=torch.int32)
    one = TrainStreams(data, batch_size=4, bptt=5)
    assert one.length == 25
    windows = list(one)
    assert [w["seq_len"] for w in windows] == [5] * 5 and [w["window"] for w in windows] == list(range(5))
    inputs = torch.cat([w["inputs"] for w in windows], 1)
    targets = torch.cat([w["targets"] for w in windows], 1)
    assert torch.equal(inputs, torch.arange(100).view(4, 25)) and torch.equal(targets, inputs + 1)
    ranks = [torch.cat([w["inputs"] for w in TrainStreams(data, 2, 5, rank=r, world_size=2)], 1) for r in (0, 1)]
    assert torch.equal(torch.cat(ranks), inputs)  # rank r owns streams [2r, 2r + 2)
    assert len(TrainStreams(data, 4, 7)) == 4  # the last window is shorter (25 = 3 * 7 + 4)


def test_variable_bptt_covers_the_stream_and_is_seeded() -> None:
    data = torch.arange(2001, dtype=torch.int32)
    streams = TrainStreams(data, 2, 20, variable_bptt=True, seed=3)
    plan = streams.windows(0)
    assert sum(size for _, size in plan) == streams.length and all(s >= 5 or o + s == streams.length
                                                                   for o, s in plan)
    assert len({s for _, s in plan}) > 3
    assert plan == TrainStreams(data, 2, 20, variable_bptt=True, seed=3).windows(0) != streams.windows(1)
    with pytest.raises(TypeError):
        len(streams)


def test_eval_streams_cover_every_target_once_across_ranks() -> None:
    data = torch.arange(50, dtype=torch.int32) * 3
    seen_inputs, seen_targets = [], []
    for rank in (0, 1):
        ev = EvalStreams(data, batch_size=3, bptt=4, rank=rank, world_size=2)
        windows = list(ev)
        assert len(windows) == len(ev)
        for row in range(3):
            n = int(ev.sizes[row])
            seen_inputs.append(torch.cat([w["inputs"][row, :int(w["lengths"][row])] for w in windows])[:n])
            seen_targets.append(torch.cat([w["targets"][row, :int(w["lengths"][row])] for w in windows]))
    assert torch.equal(torch.cat(seen_targets), data[1:].long())  # 49 targets in 6 streams, none lost
    assert torch.equal(torch.cat(seen_inputs), data[:-1].long())


def test_cache_is_reused_and_keyed_by_inputs(tmp_path: Path, char_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    first = module(char_dir, cache_dir=str(cache))
    assert len(list(cache.glob("*.pt"))) == 1

    def fail(*a, **k):
        raise AssertionError("re-tokenized despite the cache")

    monkeypatch.setattr(lm_data, "build_corpus", fail)
    second = module(char_dir, cache_dir=str(cache))
    assert second.vocab == first.vocab and torch.equal(second.splits["train"], first.splits["train"])
    monkeypatch.undo()
    (char_dir / "test.txt").write_text("abcabc\n" * 9)  # a changed input makes a new entry
    module(char_dir, cache_dir=str(cache))
    assert len(list(cache.glob("*.pt"))) == 2


def test_single_file_corpora_use_the_standard_split_shape(tmp_path: Path) -> None:
    (tmp_path / "text8").write_text("anarchism originated as a term " * 40)
    dm = module(tmp_path, dataset="text8", level=None, split_sizes=(1000, 100, 100))
    assert [len(dm.splits[s]) for s in ("train", "valid", "test")] == [1000, 100, 100]
    assert dm.vocab.level == "char" and " " in dm.vocab.stoi
    (tmp_path / "enwik8").write_bytes(bytes(range(256)) * 5)
    dm8 = module(tmp_path, dataset="enwik8", level=None, split_sizes=(1000, 100, 100))
    assert dm8.vocab_size == 256  # bytes are the symbols
    with pytest.raises(ValueError, match="split_sizes"):
        module(tmp_path, dataset="text8", level=None)  # 90M/5M/5M does not fit a tiny file


def test_bad_inputs_fail_at_start_with_one_clear_error(tmp_path: Path, char_dir: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        module(tmp_path / "nowhere")
    (char_dir / "valid.txt").unlink()
    with pytest.raises(FileNotFoundError, match="Missing corpus file .*valid.txt"):
        module(char_dir)
    (char_dir / "valid.txt").write_text("")
    with pytest.raises(ValueError, match="is empty"):
        module(char_dir)
    (char_dir / "valid.txt").write_text("   \n\n")
    with pytest.raises(ValueError, match="valid split is empty"):
        module(char_dir)
    (char_dir / "valid.txt").write_text("abc\n")
    with pytest.raises(ValueError, match="bptt=500 is longer than each training stream"):
        module(char_dir, bptt=500)
    with pytest.raises(ValueError, match="needs level"):
        module(char_dir, level=None)


def test_state_dict_saves_vocabulary_and_position(char_dir: Path, tmp_path: Path) -> None:
    dm = module(char_dir)
    dm._position = {"epoch": 0, "window": 3, "world_size": 1, "batch_size": 4}
    state = dm.state_dict()
    fresh = module(char_dir)
    fresh.load_state_dict(state)
    windows = [b["window"] for b in fresh.train_dataloader()]
    assert windows[0] == 3  # resumes mid-epoch
    assert [b["window"] for b in fresh.train_dataloader()][0] == 0  # then starts epochs afresh
    other = module(write_corpus(tmp_path / "other", "xyzxy\n" * 40, "xy\n", "yx\n"))
    with pytest.raises(VocabularyMismatchError, match="vocabulary"):
        other.load_state_dict(state)


def test_vocabulary_round_trip_and_unknown_prompt() -> None:
    v = Vocabulary(["a", "b", "\n"], "char")
    assert Vocabulary.from_state_dict(v.state_dict()) == v
    assert v.encode(v.tokenize("ab\n")).tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match="not in the vocabulary"):
        v.encode(["q"])


@pytest.mark.real_data
def test_real_ptb_char_and_word_sizes(data_dir: Path, tmp_path: Path) -> None:
    dm = LanguageModelDataModule("ptb_char", str(data_dir / "ptb"), cache_dir=str(tmp_path))
    eol = dm.vocab.stoi["\n"]
    lines = {"train": 42_068, "valid": 3_370, "test": 3_761}
    chars = {"train": 4_975_414, "valid": 389_672, "test": 438_662}
    for split in lines:
        ends = int((dm.splits[split] == eol).sum())
        assert ends == lines[split] and len(dm.splits[split]) - ends == chars[split]
    assert dm.vocab_size == 50 and dm.vocab.unk is None  # 49 symbols + the line end, nothing unknown
    word = LanguageModelDataModule("ptb_word", str(data_dir / "ptb"), bptt=35, cache_dir=str(tmp_path))
    assert word.vocab_size == 10_000 and word.vocab.unk == "<unk>"
    assert [len(word.splits[s]) for s in ("train", "valid", "test")] == [929_589, 73_760, 82_430]


def test_default_data_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("LIT_RNNCELLS_DATA", raising=False)
    assert lm_data.default_data_dir("ptb_char") == "ptb-text-only/ptb_text_only"
    assert lm_data.default_data_dir("text8") == "afmck/text8"
    (tmp_path / "ptb").mkdir()
    monkeypatch.setenv("LIT_RNNCELLS_DATA", str(tmp_path))
    assert lm_data.default_data_dir("ptb_word") == str(tmp_path / "ptb")
    assert lm_data.default_data_dir("text8") == str(tmp_path / "text8")  # set means local: missing is reported
    assert lm_data.is_hub_id("LTCB/enwik8") and not lm_data.is_hub_id("/data/enwik8")
    monkeypatch.chdir(tmp_path)
    assert not lm_data.is_hub_id("ptb/ptbb")  # a typo next to an existing folder is a local path
    assert text_mod.default_cache_dir().name in ("lit_rnncells",) or "LIT_RNNCELLS_CACHE" in __import__("os").environ
