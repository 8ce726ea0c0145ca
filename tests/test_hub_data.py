"""Every hub id read from a hub-shaped Parquet export (tests/hub_stub.py) gives what its local files give.

The hub is out of reach here: each test publishes the repo's Parquet export, built from local files the way
the real repo builds its rows, into a local hub cache with HF_HUB_OFFLINE on, and the DataModule reads it
through its real ``huggingface_hub`` / ``datasets`` calls. Same splits, counts and token ids as the local
path; no loading script is ever handed to ``load_dataset``.
"""
from __future__ import annotations

import logging
import random
import shutil
from pathlib import Path
from typing import Dict, List

import pytest
import torch

from lit_rnncells.data import AspectSentimentDataModule, DocumentSentimentDataModule, LanguageModelDataModule
from lit_rnncells.data import TranslationDataModule, hub, imdb, semeval
from lit_rnncells.data import language_model as lm_data
from lit_rnncells.data import translation as tr
from lit_rnncells.command.errors import user_message

from .hub_stub import (COMMIT, HubStub, LoadDatasetSpy, gigaword_rows, imdb_rows, pair_rows, ptb_rows, reset_sessions,
                       semeval_rows, sst2_rows, text_rows, translation_rows)
from .test_sentiment_data import imdb_archive, semeval_folder, tiny

PTB = "ptb-text-only/ptb_text_only"
HUB_SPLITS = (("train", "train"), ("validation", "valid"), ("test", "test"))


@pytest.fixture
def stub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    yield HubStub(tmp_path, monkeypatch)
    monkeypatch.undo()
    reset_sessions()  # no offline HTTP session left behind for later tests (older huggingface_hub)


def lines(path: Path) -> List[str]:
    return tr.read_lines(path)


def publish_ptb(stub: HubStub, folder: Path, release: bool = True, **kwargs) -> None:
    stub.publish(PTB, "penn_treebank", {h: ptb_rows(lines(folder / f"ptb.{s}.txt")) for h, s in HUB_SPLITS},
                 release=release, script="ptb_text_only.py", **kwargs)


# --- language models --------------------------------------------------------------------------------
@pytest.mark.real_data
def test_ptb_export_gives_the_local_ids_and_no_script_reaches_load_dataset(data_dir: Path, stub: HubStub,
                                                                          monkeypatch: pytest.MonkeyPatch,
                                                                          caplog: pytest.LogCaptureFixture) -> None:
    """The whole release (42,068 / 3,370 / 3,761 rows, the counts checked), word and char level. The repo's
    main revision holds ptb_text_only.py, which datasets >= 4 refuses: load_dataset only ever sees
    ``"parquet"``."""
    publish_ptb(stub, data_dir / "ptb")
    spy = LoadDatasetSpy(monkeypatch)
    with caplog.at_level(logging.INFO):
        for dataset in ("ptb_word", "ptb_char"):
            from_hub = LanguageModelDataModule(dataset, PTB, cache_dir="")
            local = LanguageModelDataModule(dataset, str(data_dir / "ptb"), cache_dir="")
            assert from_hub.vocab == local.vocab
            for split, tokens in local.splits.items():
                assert torch.equal(from_hub.splits[split], tokens), (dataset, split)
    assert spy.calls == ["parquet"] * 6 and PTB not in spy.calls
    assert f"commit {COMMIT}" in caplog.text and f"data_dir: {PTB}@{COMMIT}" in caplog.text


def ptb_like(folder: Path, n: Dict[str, int]) -> Path:
    rng = random.Random(0)
    words = ["the", "a", "<unk>", "N", "bank", "rates", "fell", "said", "mr.", "'s"]
    folder.mkdir(parents=True, exist_ok=True)
    for split, count in n.items():
        text = "".join(" " + " ".join(rng.choice(words) for _ in range(rng.randint(3, 9))) + " \n"
                       for _ in range(count))
        (folder / f"ptb.{split}.txt").write_text(text)
    return folder


def test_a_pinned_revision_is_read_and_a_wrong_row_count_is_an_error(tmp_path: Path, stub: HubStub,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    folder = ptb_like(tmp_path / "ptb", {"train": 40, "valid": 8, "test": 8})
    other = "feed" + "0" * 36
    publish_ptb(stub, folder, release=False)
    stub.publish(PTB, "penn_treebank", {h: ptb_rows(lines(folder / f"ptb.{s}.txt")[:5]) for h, s in HUB_SPLITS},
                 release=False, commit=other)  # now the branch points to a later, shorter export
    (stub.cache / f"datasets--{PTB.replace('/', '--')}" / "refs" / hub.PARQUET_REVISION).write_text(COMMIT)
    small = dict(batch_size=2, eval_batch_size=2, bptt=5, cache_dir="")
    pinned = LanguageModelDataModule("ptb_word", f"{PTB}@{other}", **small)
    assert int((pinned.splits["train"] == pinned.vocab.stoi["<eos>"]).sum()) == 5  # the pinned commit's 5 lines
    monkeypatch.setitem(hub.ROWS, (PTB, "penn_treebank"), {"train": 42_068, "validation": 3_370, "test": 3_761})
    with pytest.raises(hub.HubError) as error:
        LanguageModelDataModule("ptb_word", PTB, **small)
    assert str(error.value).startswith(f"Could not load '{PTB}' from the Hugging Face hub: its penn_treebank/train "
                                       "has 40 rows where the release has 42,068")
    assert "LIT_RNNCELLS_DATA" in str(error.value) and user_message(error.value) == str(error.value)


def test_offline_with_nothing_cached_names_repo_cause_and_local_alternative(stub: HubStub) -> None:
    with pytest.raises(hub.HubError) as error:
        LanguageModelDataModule("ptb_char", PTB, cache_dir="")
    message = str(error.value)
    assert message.startswith(f"Could not load '{PTB}' from the Hugging Face hub: the hub is unreachable "
                              "(OfflineModeIsEnabled: offline?) and no copy of penn_treebank/train/ at revision "
                              "'refs/convert/parquet' is in the local hub cache; to use a local copy set "
                              "data.init_args.data_dir (or LIT_RNNCELLS_DATA, which holds ptb/) to the folder with")
    assert "ptb.char.train.txt" in message and "\n" not in message


def byte_corpus(size: int, seed: int = 0) -> bytes:
    """enwik8-like: XML-ish UTF-8 text with multi-byte characters, cut to exactly ``size`` bytes."""
    rng = random.Random(seed)
    words = ["<page>", "</page>", "the", "Zürich", "naïve", "Москва", "東京", "[[link]]", "&amp;", "\n", "  "]
    data = b""
    while len(data) < size + 16:
        data += (" ".join(rng.choice(words) for _ in range(50))).encode()
    data = data[:size]
    while True:  # end on a whole character, as the real file does (it reads as UTF-8 on the hub)
        try:
            data.decode("utf-8")
            return data
        except UnicodeDecodeError:
            data = data[:-1] + b" "


def test_enwik8_from_the_raw_config_row_gives_the_local_bytes(tmp_path: Path, stub: HubStub,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """enwik8-raw is one row: enwik8.py's ``open(path, encoding="utf-8").read()``. Its UTF-8 bytes are the
    file, split by bytes like the local one (here a 3,000-byte stand-in for the 100,000,000 bytes)."""
    raw = byte_corpus(3_000)
    (tmp_path / "enwik8").write_bytes(raw)
    with open(tmp_path / "enwik8", encoding="utf-8") as f:
        stub.publish("LTCB/enwik8", "enwik8-raw", {"train": text_rows([f.read()])}, release=True,
                     script="enwik8.py")
    monkeypatch.setitem(lm_data.HUB_BYTES, "enwik8", len(raw))
    sizes = (2_400, 300, 300)
    from_hub = LanguageModelDataModule("enwik8", "LTCB/enwik8", split_sizes=sizes, bptt=10, cache_dir="")
    local = LanguageModelDataModule("enwik8", str(tmp_path / "enwik8"), split_sizes=sizes, bptt=10, cache_dir="")
    assert from_hub.vocab == local.vocab and "\xc3" in local.vocab.stoi and "ü" not in local.vocab.stoi  # bytes
    for split in ("train", "valid", "test"):
        assert torch.equal(from_hub.splits[split], local.splits[split])
    assert [len(local.splits[s]) for s in ("train", "valid", "test")] == list(sizes)
    monkeypatch.setitem(lm_data.HUB_BYTES, "enwik8", 100_000_000)
    with pytest.raises(hub.HubError, match=r"its enwik8-raw text is 3,000 bytes, not enwik8's 100,000,000"):
        LanguageModelDataModule("enwik8", "LTCB/enwik8", split_sizes=sizes, bptt=10, cache_dir="")


def test_text8_splits_rejoined_give_the_local_split(tmp_path: Path, stub: HubStub,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(1)
    text = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz     ") for _ in range(5_000))
    (tmp_path / "text8").write_text(text)
    stub.publish("afmck/text8", "default", {"train": text_rows([text[:4_500]]),
                                           "validation": text_rows([text[4_500:4_750]]),
                                           "test": text_rows([text[4_750:]])})
    monkeypatch.setitem(lm_data.HUB_BYTES, "text8", len(text))
    sizes = (4_000, 500, 500)  # not the hub's own cut: the rejoined text is split like the local file
    from_hub = LanguageModelDataModule("text8", "afmck/text8", split_sizes=sizes, bptt=10, cache_dir="")
    local = LanguageModelDataModule("text8", str(tmp_path / "text8"), split_sizes=sizes, bptt=10, cache_dir="")
    assert from_hub.vocab == local.vocab
    assert all(torch.equal(from_hub.splits[s], local.splits[s]) for s in ("train", "valid", "test"))


# --- translation and summarisation -------------------------------------------------------------------
def same_pairs(a: TranslationDataModule, b: TranslationDataModule, counts: tuple) -> None:
    assert a.source_tokenizer == b.source_tokenizer and a.target_tokenizer == b.target_tokenizer
    for split, count in zip(("train", "valid", "test"), counts):
        assert a.split(split)["source"] == b.split(split)["source"], split
        assert a.split(split)["target"] == b.split(split)["target"], split
        assert len(a.split(split)["source"]) == count


@pytest.mark.real_data
def test_multi30k_export_gives_the_local_ids(data_dir: Path, stub: HubStub) -> None:
    folder = data_dir / "multi30k"
    names = tr.LOCAL_FILES["multi30k"]
    stub.publish("bentrevett/multi30k", "default",
                 {h: pair_rows(lines(folder / names[s].format("en")), lines(folder / names[s].format("de")),
                               ("en", "de")) for h, s in HUB_SPLITS}, release=True)  # 29,000 / 1,014 / 1,000 checked
    kw = dict(subword_vocab_size=500, cache_dir="", limit=300)
    same_pairs(TranslationDataModule("multi30k", data_dir="bentrevett/multi30k", **kw),
               TranslationDataModule("multi30k", data_dir=str(folder), **kw), (300, 300, 300))


@pytest.mark.real_data
def test_gigaword_export_and_release_agree_on_unk_and_valid_size(data_dir: Path, stub: HubStub) -> None:
    """The hub's script writes UNK where the release's train and valid files write <unk>: both paths give
    UNK, hence one BPE model and the same ids; ``valid_size`` takes the first validation pairs of either."""
    folder = data_dir / "gigaword"
    names = tr.LOCAL_FILES["gigaword"]
    stub.publish("Harvard/gigaword", "default",
                 {h: gigaword_rows(lines(folder / names[s].format("article")), lines(folder / names[s].format("title")),
                                   replace_unk=(s != "test")) for h, s in HUB_SPLITS}, script="gigaword.py")
    kw = dict(subword_vocab_size=500, cache_dir="", limit=2_000, valid_size=200)
    from_hub = TranslationDataModule("gigaword", data_dir="Harvard/gigaword", **kw)
    local = TranslationDataModule("gigaword", data_dir=str(folder), **kw)
    same_pairs(from_hub, local, (2_000, 200, 1_951))
    texts = [t for s in ("train", "valid", "test") for t in local.split(s)["source_text"]]
    assert not any("<unk>" in t for t in texts) and sum("UNK" in t for t in texts) > 50
    assert "<unk>" in (folder / names["train"].format("article")).read_text()[:2_000_000]  # the release's form


IWSLT17 = {"de": ["Vielen Dank, Chris.", "Das ist wirklich eine große Ehre.", "Ich bin begeistert!",
                  "Wir haben 2017 „neue“ Ideen.", "Es war einmal ein Kind."],
           "en": ["Thank you so much, Chris.", "It's truly a great honor.", "I'm thrilled!",
                  "In 2017 we have \"new\" ideas.", "Once upon a time there was a child."]}


def test_iwslt17_export_gives_the_ids_of_the_same_raw_text_locally(tmp_path: Path, stub: HubStub,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """IWSLT 2017 under its own name: raw cased text (pretokenized false by default), ``translation`` rows."""
    monkeypatch.delenv("LIT_RNNCELLS_DATA", raising=False)
    folder = tmp_path / "iwslt17"
    folder.mkdir()
    splits = {"train": slice(0, 5), "valid": slice(0, 2), "test": slice(2, 5)}
    for split, part in splits.items():
        for lang in ("de", "en"):
            (folder / f"{split}.{lang}").write_text("\n".join(IWSLT17[lang][part]) + "\n", encoding="utf-8")
    stub.publish("IWSLT/iwslt2017", "iwslt2017-de-en",
                 {h: translation_rows(IWSLT17["de"][splits[s]], IWSLT17["en"][splits[s]]) for h, s in HUB_SPLITS},
                 script="iwslt2017.py")
    kw = dict(subword_vocab_size=300, min_frequency=1, cache_dir="")
    from_hub = TranslationDataModule("iwslt17", **kw)  # the default data_dir is the hub id
    assert from_hub.data_dir == "IWSLT/iwslt2017" and not from_hub.pretokenized
    same_pairs(from_hub, TranslationDataModule("iwslt17", data_dir=str(folder), **kw), (5, 2, 3))
    en_de = TranslationDataModule("iwslt17", source_language="en", target_language="de", **kw)
    assert en_de.split("test")["source_text"] == IWSLT17["en"][2:5]


def test_iwslt14_is_local_only_and_a_missing_copy_names_both_ways_to_build_it(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LIT_RNNCELLS_DATA", raising=False)
    messages = []
    for data_dir in (None, "IWSLT/iwslt2017", str(tmp_path / "nowhere")):
        with pytest.raises(FileNotFoundError) as error:
            TranslationDataModule("iwslt14", data_dir=data_dir, cache_dir="")
        messages.append(str(error.value))
    for message in messages:
        assert message.startswith("iwslt14 is fairseq's IWSLT14 De-En ({train,valid,test}.{de,en}, Moses-tokenised "
                                  "and lowercased), which no hub repo holds")
        assert "python -m lit_rnncells.data prepare iwslt14" in message and "prepare-iwslt14.sh" in message
        assert "dataset: iwslt17" in message and "\n" not in message
    assert "no data_dir is set" in messages[0] and "'IWSLT/iwslt2017' is not a local folder" in messages[1]
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "train.de").write_text("hallo\n")
    with pytest.raises(FileNotFoundError, match=r"train\.en' is missing; build it with `python -m lit_rnncells"):
        TranslationDataModule("iwslt14", data_dir=str(tmp_path / "half"), cache_dir="")


# --- sentiment ---------------------------------------------------------------------------------------
def publish_semeval(stub: HubStub, folder: Path, release: bool) -> None:
    files = semeval.local_files("restaurants")
    stub.publish(semeval.HUB_ID, "restaurants", {s: semeval_rows(semeval.read_xml(folder / files[s]))
                                                 for s in ("train", "test")}, release=release, script="SemEval2014Task4.py")


def same_sentiment(a, b, splits=("train", "validation", "test"), keys=("tokens",)) -> None:
    assert a.vocab == b.vocab
    for split in splits:
        for key in keys:
            assert torch.equal(a.splits[split][key]["ids"], b.splits[split][key]["ids"]), (split, key)
        assert torch.equal(a.splits[split]["labels"], b.splits[split]["labels"])


def test_semeval_list_of_dict_rows_with_string_offsets_give_the_xml_tensors(tmp_path: Path, stub: HubStub) -> None:
    folder = semeval_folder(tmp_path / "semeval")
    publish_semeval(stub, folder, release=False)
    same_sentiment(AspectSentimentDataModule(data_dir=semeval.HUB_ID, **tiny(val_fraction=0.2)),
                   AspectSentimentDataModule(data_dir=str(folder), **tiny(val_fraction=0.2)), keys=("tokens", "aspect"))


@pytest.mark.real_data
def test_semeval_restaurants_export_gives_the_xml_tensors(data_dir: Path, stub: HubStub, tmp_path: Path) -> None:
    publish_semeval(stub, data_dir / "semeval14", release=True)  # 3,041 / 800 sentences checked
    same_sentiment(AspectSentimentDataModule(data_dir=semeval.HUB_ID, cache_dir=""),
                   AspectSentimentDataModule(data_dir=str(data_dir / "semeval14"), cache_dir=""),
                   keys=("tokens", "aspect"))


def test_imdb_export_in_another_order_gives_the_archive_ids(tmp_path: Path, stub: HubStub) -> None:
    archive = imdb_archive(tmp_path)
    reviews = imdb.read_local(archive)
    stub.publish("stanfordnlp/imdb", "plain_text", {s: imdb_rows(list(reversed(reviews[s]))) for s in ("train", "test")})
    same_sentiment(DocumentSentimentDataModule(data_dir="stanfordnlp/imdb", val_size=2, split_seed=7, **tiny()),
                   DocumentSentimentDataModule(data_dir=str(archive), val_size=2, split_seed=7, **tiny()))


def test_sst2_export_is_binary_and_tests_on_its_validation_split(stub: HubStub) -> None:
    stub.publish("stanfordnlp/sst2", "default", {
        "train": sst2_rows([("it 's a charming -lrb- and -rrb- ", 1), ("dull ", 0)]),
        "validation": sst2_rows([("simply wonderful ", 1)]), "test": sst2_rows([("hidden ", -1)])})
    with pytest.warns(UserWarning, match="test labels are hidden"):
        dm = DocumentSentimentDataModule(dataset="sst", data_dir="stanfordnlp/sst2", **tiny())
    assert dm.vocab.decode(dm._views["train"]["tokens"][0]) == ["it", "'s", "a", "charming", "(", "and", ")"]
    assert dm._views["test"]["labels"].tolist() == [1]
    with pytest.raises(ValueError, match="granularity 'fine' needs the SST tree files"):
        DocumentSentimentDataModule(dataset="sst", data_dir="stanfordnlp/sst2", granularity="fine", **tiny())
    with pytest.raises(ValueError, match="train split is already phrase level"):
        DocumentSentimentDataModule(dataset="sst", data_dir="stanfordnlp/sst2", train_phrases=False, **tiny())


def test_every_hub_id_the_library_names_has_a_known_export() -> None:
    named = {*lm_data.HUB_IDS.values(), *tr.HUB_IDS.values(), semeval.HUB_ID, imdb.HUB_ID, "stanfordnlp/sst2"}
    assert named == set(hub.KNOWN)
    assert {repo for repo, info in hub.KNOWN.items() if info.script} == {
        PTB, "LTCB/enwik8", "IWSLT/iwslt2017", "Harvard/gigaword", semeval.HUB_ID}


# --- the online path, against a hub over HTTP on localhost -------------------------------------------------
@pytest.fixture
def live(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from .hub_stub import LiveHub

    server = LiveHub(tmp_path, monkeypatch)
    yield server
    monkeypatch.undo()
    server.close()


def test_online_the_listing_is_fetched_size_checked_and_each_failure_named(tmp_path: Path, live) -> None:
    folder = ptb_like(tmp_path / "ptb", {"train": 40, "valid": 8, "test": 8})
    live.publish(PTB, "penn_treebank", {h: ptb_rows(lines(folder / f"ptb.{s}.txt")) for h, s in HUB_SPLITS})
    small = dict(batch_size=2, eval_batch_size=2, bptt=5, cache_dir="")
    from_hub = LanguageModelDataModule("ptb_word", PTB, **small)
    local = LanguageModelDataModule("ptb_word", str(folder), **small)
    assert all(torch.equal(from_hub.splits[s], local.splits[s]) for s in ("train", "valid", "test"))
    storage = Path(hub._storage(PTB))
    assert (storage / "refs" / hub.PARQUET_REVISION).is_file()  # fetched into the usual hub cache

    def failure(data_dir: str, **kwargs) -> str:
        with pytest.raises(hub.HubError) as error:
            LanguageModelDataModule("ptb_word", data_dir, **{**small, **kwargs})
        return str(error.value)

    assert "no such dataset repo (or it is private or gated)" in failure("someone/nothing")
    assert failure(f"{PTB}@v0").startswith(  # a script repo with no such revision of its export
        f"Could not load '{PTB}' from the Hugging Face hub: it has no revision 'v0' (the repo holds a loading "
        "script, which datasets >= 4 no longer runs, so only its Parquet export can be read); to use a local copy")
    live.repos[PTB][hub.PARQUET_REVISION].pop("penn_treebank/test/0000.parquet")
    assert "its revision 'refs/convert/parquet' has no penn_treebank/test/ (missing config or split)" in failure(PTB)
    live.publish(PTB, "penn_treebank", {h: ptb_rows(lines(folder / f"ptb.{s}.txt")) for h, s in HUB_SPLITS})
    live.listed_size["penn_treebank/train/0000.parquet"] = 123
    shutil.rmtree(storage)
    assert "penn_treebank/train/0000.parquet has" in failure(PTB) and "but the hub lists 123" in failure(PTB)
