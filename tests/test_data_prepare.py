"""``python -m lit_rnncells.data list | prepare | check``, the download code, the IWSLT14 build from the
official release, and the fit-time split check (a train split holding the whole dev split is an error)."""
from __future__ import annotations

import dataclasses

import gzip
import hashlib
import http.server
import io
import tarfile
import threading
import zipfile
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import pytest

from lit_rnncells.data import known
from lit_rnncells.data.__main__ import main
from lit_rnncells.data.fetch import PrepareError, download
from lit_rnncells.data.iwslt14 import prepare as build_iwslt14
from lit_rnncells.data.known import Dataset, Layout, Source


def run(capsys, *argv: str) -> Tuple[int, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out + out.err


# --- check: each planted fault ----------------------------------------------------------------------------
TOY_TRAIN = [("ein hund .", "a dog ."), ("eine katze .", "a cat ."), ("ein haus .", "a house ."),
             ("zwei hunde .", "two dogs ."), ("ein baum .", "a tree ."), ("kinder spielen .", "children play .")]
TOY_DEV = [("ein rad .", "a bike ."), ("ein buch .", "a book .")]
TOY_TEST = [("eine frau .", "a woman ."), ("ein mann .", "a man .")]


@pytest.fixture
def toy(monkeypatch, tmp_path) -> Path:
    """A known dataset ``toy`` (aligned de/en pairs, 6 / 2 / 2) and a correct copy of it."""
    layout = Layout("de-en", "pairs", {"train": ("train.de", "train.en"), "dev": ("valid.de", "valid.en"),
                                       "test": ("test.de", "test.en")}, {"train": 6, "dev": 2, "test": 2})
    monkeypatch.setitem(known.KNOWN, "toy", Dataset("toy", "a toy corpus", "TranslationDataModule", (), (layout,),
                                                   "nothing"))
    return write_pairs(tmp_path / "toy", {"train": TOY_TRAIN, "valid": TOY_DEV, "test": TOY_TEST})


def write_pairs(folder: Path, splits: Dict[str, List[Tuple[str, str]]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for split, pairs in splits.items():
        for side, lang in enumerate(("de", "en")):
            (folder / f"{split}.{lang}").write_text("".join(p[side] + "\n" for p in pairs), encoding="utf-8")
    return folder


def test_a_correct_copy_has_no_faults(toy, capsys):
    code, out = run(capsys, "check", "toy", "--dest", str(toy))
    assert code == 0, out
    assert "found: toy de-en: train 6, dev 2, test 2 pairs" in out and "no faults" in out


def test_check_takes_the_folder_by_the_datamodules_name_for_it_too(toy, capsys):
    """``--data_dir`` is what the DataModules call the folder: it was "unrecognized arguments" here."""
    code, out = run(capsys, "check", "toy", "--data_dir", str(toy))
    assert code == 0 and "no faults" in out, out


def test_check_finds_a_missing_file(toy, capsys):
    (toy / "valid.en").unlink()
    code, out = run(capsys, "check", "toy", "--dest", str(toy))
    assert code == 1
    assert f"error: missing file {toy / 'valid.en'}; run `python -m lit_rnncells.data prepare toy`" in out


def test_check_finds_a_wrong_count(toy, capsys):
    write_pairs(toy, {"train": TOY_TRAIN[:5]})
    code, out = run(capsys, "check", "toy", "--dest", str(toy))
    assert code == 1
    assert "error: toy de-en train has 5 pairs, the official release 6; run `python -m lit_rnncells.data prepare" in out


def test_check_finds_an_overlap(toy, capsys):
    write_pairs(toy, {"test": [TOY_TRAIN[0], TOY_TEST[1]]})
    code, out = run(capsys, "check", "toy", "--dest", str(toy))
    assert code == 1
    assert "error: 1 of the 2 pairs of toy de-en test also occur in train (the official release has 0); remove " \
           "them from train (train.de, train.en)" in out


def test_check_finds_a_train_split_that_holds_the_dev_split(toy, capsys):
    write_pairs(toy, {"train": TOY_TRAIN[:4] + TOY_DEV})
    code, out = run(capsys, "check", "toy", "--dest", str(toy))
    assert code == 1
    assert "error: the train split of toy (train.de, train.en) contains all 2 pairs of the dev split (valid.de, " \
           "valid.en), so validation would score training data" in out


def test_check_finds_bad_encoding(toy, capsys):
    (toy / "test.de").write_bytes("eine frau .\nein m\u00e4nnchen .\n".encode("latin-1"))
    code, out = run(capsys, "check", "toy", "--dest", str(toy))
    assert code == 1
    assert f"error: {toy / 'test.de'} is not UTF-8 (byte 0xe4 at offset 17, line 2); run `python -m " in out
    assert "convert the file to UTF-8" in out


def test_usage_mistakes_exit_2(toy, capsys, monkeypatch):
    assert run(capsys, "check", "nosuch")[0] == 2
    monkeypatch.delenv("LIT_RNNCELLS_DATA", raising=False)
    code, out = run(capsys, "check", "toy")
    assert code == 2 and "set LIT_RNNCELLS_DATA" in out
    assert run(capsys, "frobnicate")[0] == 2


def test_a_datamodules_dataset_name_stands_for_its_release_and_a_typo_gets_a_suggestion(capsys, monkeypatch,
                                                                                       tmp_path):
    """The configs say ``dataset: ptb_char``; prepare and check take it for the ptb release it is read from."""
    from lit_rnncells.data.known import dataset

    assert dataset("ptb_char").name == dataset("ptb_word").name == "ptb"
    monkeypatch.setenv("LIT_RNNCELLS_DATA", str(tmp_path))
    code, out = run(capsys, "check", "ptb_char")
    assert code == 1 and f"the folder {tmp_path / 'ptb'} does not exist" in out  # checked as ptb, in ptb/
    code, out = run(capsys, "check", "ptb_wrd")
    assert code == 2 and "error: Unknown dataset 'ptb_wrd' (did you mean 'ptb_word'?); choose one of" in out


@pytest.mark.parametrize("mirror", ["ftp://mirror.example.org/data", "mirror.example.org/data"])
def test_a_mirror_that_is_no_url_prepare_reads_is_refused_before_anything_is_written(capsys, tmp_path, mirror):
    """It failed at the download with urllib's "unknown url type" (no fix named), after making the folder."""
    code, out = run(capsys, "prepare", "ptb", "--dest", str(tmp_path / "ptb"), "--mirror", mirror)
    assert code == 1 and f"error: --mirror {mirror!r} is not an http://, https:// or file:// URL" in out
    assert not (tmp_path / "ptb").exists()


def test_check_names_a_dest_that_is_a_file(capsys, tmp_path):
    (tmp_path / "notes.txt").write_text("mine\n")
    code, out = run(capsys, "check", "ptb", "--dest", str(tmp_path / "notes.txt"))
    assert code == 1 and f"the folder {tmp_path / 'notes.txt'} is a file, not a folder" in out


def test_the_default_destination_is_the_data_root(toy, capsys, monkeypatch):
    monkeypatch.setenv("LIT_RNNCELLS_DATA", str(toy.parent))
    assert run(capsys, "check", "toy")[0] == 0


def test_list_names_every_known_dataset(capsys):
    code, out = run(capsys, "list")
    assert code == 0
    for name in ("ptb", "text8", "enwik8", "multi30k", "iwslt14", "gigaword", "semeval14", "imdb", "sst"):
        assert f"\n{name} " in "\n" + out


def test_every_known_checksum_has_a_provenance():
    for dataset in known.KNOWN.values():
        for source in dataset.sources:
            assert source.provenance, source.url
            assert source.sha256 is None or len(source.sha256) == 64


@pytest.mark.real_data
@pytest.mark.parametrize("name", ["ptb", "multi30k", "semeval14", "imdb"])
def test_the_real_copies_pass_check(name, data_dir, capsys):
    code, out = run(capsys, "check", name, "--dest", str(Path(data_dir) / name))
    assert code == 0, out
    assert "note:" not in out.replace("note: semeval14 laptops: not present (optional)", "")


@pytest.mark.real_data
def test_the_iwslt14_train_sample_is_reported_as_a_subset(data_dir, capsys):
    code, out = run(capsys, "check", "iwslt14", "--dest", str(Path(data_dir) / "iwslt14"))
    assert code == 1
    assert "iwslt14 de-en train has 9,485 pairs, the official release 160,239" in out
    assert "dev 7,283, test 6,750 pairs" in out  # valid/test are the standard sets


# --- the fit-time check -------------------------------------------------------------------------------------
SST_TRAIN = ["(3 (2 a) (4 (3 good) (2 film)))", "(1 (2 a) (0 (1 bad) (2 film)))", "(3 (3 nice) (2 story))"]
SST_DEV = ["(4 (3 good) (2 story))", "(0 (1 bad) (2 story))"]
SST_TEST = ["(3 (2 a) (3 nice))", "(1 (2 a) (1 dull))"]


def sst(folder: Path, train: List[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, lines in (("train.txt", train), ("dev.txt", SST_DEV), ("test.txt", SST_TEST)):
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def test_fit_refuses_a_train_file_that_holds_the_dev_file(tmp_path):
    from lit_rnncells.data import DocumentSentimentDataModule

    dm = DocumentSentimentDataModule("sst", str(sst(tmp_path / "sst", SST_TRAIN + SST_DEV)), cache_dir="")
    dm.setup("validate")  # only fit checks
    with pytest.raises(ValueError, match=r"the train split of sst \(train.txt\) contains all 2 trees of the dev split "
                                         r"\(dev.txt\), so validation would score training data"):
        dm.setup("fit")


def test_fit_warns_about_an_overlap_and_a_count(tmp_path):
    from lit_rnncells.data import DocumentSentimentDataModule

    dm = DocumentSentimentDataModule("sst", str(sst(tmp_path / "sst", SST_TRAIN + SST_DEV[:1])), cache_dir="")
    with pytest.warns(UserWarning) as caught:
        dm.setup("fit")
    messages = [str(w.message) for w in caught]
    assert any("1 of the 2 trees of sst trees dev also occur in train (more than 1% of the split, the release's "
               "own figure is not measured)" in m
               for m in messages), messages
    assert any("sst trees train has 4 trees, the official release 8,544" in m for m in messages), messages


def test_fit_checks_your_own_parallel_files(tmp_path):
    from lit_rnncells.data import TranslationDataModule

    folder = write_pairs(tmp_path / "par", {"train": TOY_TRAIN + TOY_DEV, "valid": TOY_DEV, "test": TOY_TEST})
    dm = TranslationDataModule("parallel", str(folder), source_language="de", target_language="en",
                               subword_vocab_size=300, min_frequency=1, cache_dir="")
    with pytest.raises(ValueError, match="remove the dev examples from the train files"):
        dm.setup("fit")


def test_the_fit_check_uses_the_cache(tmp_path):
    from lit_rnncells.data import DocumentSentimentDataModule

    cache = tmp_path / "cache"
    folder = sst(tmp_path / "sst", SST_TRAIN)
    with pytest.warns(UserWarning):
        DocumentSentimentDataModule("sst", str(folder), cache_dir=str(cache)).setup("fit")
    assert list(cache.glob("split-check-*.pt"))


# --- downloads ----------------------------------------------------------------------------------------------
class _Handler(http.server.BaseHTTPRequestHandler):
    """Serves ``files`` (name → bytes) with ``Range`` support; ``html`` names get an HTML page."""
    files: Dict[str, bytes] = {}
    ranges: List[Optional[str]] = []
    honour_ranges = True

    def do_GET(self) -> None:  # noqa: N802
        name = self.path.lstrip("/")
        self.ranges.append(self.headers.get("Range"))
        if name == "page.zip":
            self._send(200, b"<!DOCTYPE html><html><body>Virus scan warning</body></html>", "text/html")
            return
        if name not in self.files:
            self._send(404, b"not found", "text/plain")
            return
        data = self.files[name]
        spec = self.headers.get("Range") if self.honour_ranges else None
        if spec:
            start = int(spec.split("=")[1].split("-")[0])
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            data = data[start:]
        else:
            self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _send(self, code: int, body: bytes, kind: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    _Handler.files, _Handler.ranges, _Handler.honour_ranges = {}, [], True
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


PAYLOAD = bytes(range(256)) * 64


def payload_source(url: str, **kw) -> Source:
    kw.setdefault("size", len(PAYLOAD))
    kw.setdefault("sha256", hashlib.sha256(PAYLOAD).hexdigest())
    return Source(url, "data.bin", provenance="the test", **kw)


def test_a_download_resumes_from_its_part_file(server, tmp_path):
    _Handler.files["data.bin"] = PAYLOAD
    (tmp_path / "data.bin.part").write_bytes(PAYLOAD[:5000])
    path = download(payload_source(f"{server}/data.bin"), tmp_path, log=lambda _: None)
    assert path.read_bytes() == PAYLOAD and not (tmp_path / "data.bin.part").exists()
    assert _Handler.ranges == ["bytes=5000-"]


def test_a_server_that_ignores_ranges_sends_the_whole_file_again(server, tmp_path):
    _Handler.files["data.bin"], _Handler.honour_ranges = PAYLOAD, False
    (tmp_path / "data.bin.part").write_bytes(PAYLOAD[:5000])
    path = download(payload_source(f"{server}/data.bin"), tmp_path, log=lambda _: None)
    assert path.read_bytes() == PAYLOAD and _Handler.ranges == ["bytes=5000-"]


def test_a_mirror_replaces_the_official_url(server, tmp_path):
    _Handler.files["data.bin"] = PAYLOAD
    path = download(payload_source("http://unreachable.invalid/data.bin"), tmp_path, mirror=server + "/",
                    log=lambda _: None)
    assert path.read_bytes() == PAYLOAD and _Handler.ranges == [None]


def test_a_file_url_mirror(tmp_path):
    (tmp_path / "mirror").mkdir()
    (tmp_path / "mirror" / "data.bin").write_bytes(PAYLOAD)
    path = download(payload_source("http://unreachable.invalid/data.bin"), tmp_path / "out",
                    mirror=(tmp_path / "mirror").as_uri(), log=lambda _: None)
    assert path.read_bytes() == PAYLOAD


def test_an_html_page_is_refused(server, tmp_path):
    with pytest.raises(PrepareError, match="returned an HTML page, not page.zip"):
        download(Source(f"{server}/page.zip", "page.zip", provenance="t"), tmp_path, log=lambda _: None)
    assert not (tmp_path / "page.zip").exists()


def test_a_wrong_checksum_is_refused_and_the_part_removed(server, tmp_path):
    _Handler.files["data.bin"] = PAYLOAD[::-1]
    with pytest.raises(PrepareError, match="data.bin has sha256 .*, the release .* \\(the test\\)"):
        download(payload_source(f"{server}/data.bin"), tmp_path, log=lambda _: None)
    assert not (tmp_path / "data.bin").exists() and not (tmp_path / "data.bin.part").exists()


def test_an_http_error_names_the_url_and_the_ways_out(server, tmp_path):
    with pytest.raises(PrepareError, match=r"answered HTTP 404 .*--mirror.*--source"):
        download(payload_source(f"{server}/missing.bin"), tmp_path, log=lambda _: None)


def test_prepare_without_internet_says_where_to_run_it(capsys, tmp_path):
    code, out = run(capsys, "prepare", "sst", "--dest", str(tmp_path / "sst"), "--mirror", "http://unreachable.invalid")
    assert code == 1 and "run prepare where there is internet (a login node), pass --mirror" in out
    assert not (tmp_path / "sst").exists()  # it left sst/.downloads/, empty, behind
    (tmp_path / "mine").mkdir()  # a folder the user made stays, even empty
    code, out = run(capsys, "prepare", "sst", "--dest", str(tmp_path / "mine"), "--mirror", "http://unreachable.invalid")
    assert code == 1 and (tmp_path / "mine").is_dir() and not any((tmp_path / "mine").iterdir())


def test_prepare_sst_from_a_mirror_then_check(server, capsys, tmp_path, monkeypatch):
    """The whole prepare path over HTTP: download, verify, unpack, check (with a test archive's checksum)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, lines in (("train.txt", SST_TRAIN), ("dev.txt", SST_DEV), ("test.txt", SST_TEST)):
            zf.writestr(f"trees/{name}", "\n".join(lines) + "\n")
    data = buffer.getvalue()
    _Handler.files["trainDevTestTrees_PTB.zip"] = data
    real = known.KNOWN["sst"]
    layout = Layout("trees", "sst", real.layouts[0].files, {"train": 3, "dev": 2, "test": 2})
    source = Source(real.sources[0].url, real.sources[0].filename, len(data), hashlib.sha256(data).hexdigest(),
                    provenance="the test")
    monkeypatch.setitem(known.KNOWN, "sst", dataclasses.replace(real, sources=(source,), layouts=(layout,)))
    dest = tmp_path / "sst"
    code, out = run(capsys, "prepare", "sst", "--dest", str(dest), "--mirror", server)
    assert code == 0, out
    assert (dest / "dev.txt").read_text().splitlines() == SST_DEV and not (dest / ".downloads").exists()
    code, out = run(capsys, "prepare", "sst", "--dest", str(dest), "--mirror", server)
    assert code == 1 and "already holds" in out and "--force" in out


@pytest.mark.real_data
def test_prepare_ptb_and_multi30k_from_release_files_give_the_real_copies(data_dir, capsys, tmp_path):
    """simple-examples.tgz and the multi30k .gz files, rebuilt from the real files, prepared with --source."""
    data = Path(data_dir)
    release = tmp_path / "release"
    release.mkdir()
    with tarfile.open(release / "simple-examples.tgz", "w:gz") as tar:
        for path in sorted((data / "ptb").glob("ptb.*txt")):
            tar.add(path, arcname=f"./simple-examples/data/{path.name}")
    for path in sorted((data / "multi30k").iterdir()):
        (release / (path.name + ".gz")).write_bytes(gzip.compress(path.read_bytes()))
    for name in ("ptb", "multi30k"):
        code, out = run(capsys, "prepare", name, "--source", str(release), "--dest", str(tmp_path / name))
        assert code == 0, out
        for path in (data / name).iterdir():
            assert (tmp_path / name / path.name).read_bytes() == path.read_bytes()


def test_semeval_needs_a_source_folder(capsys, tmp_path):
    code, out = run(capsys, "prepare", "semeval14", "--dest", str(tmp_path / "s"))
    assert code == 1 and "cannot be downloaded automatically" in out and "--source" in out


# --- IWSLT14 from the official release ----------------------------------------------------------------------
# Each training pair: (de line, en line, expected de, expected en); None = dropped by clean-corpus-n.perl.
# The expected lines are the perl pipeline worked by hand: grep -v / sed on the tags, tokenizer.perl -l <lang>
# (escaping on, no -a; German's nonbreaking prefixes hold single letters and digits, so "6." and "s." stay
# whole; English splits "It's" as "It 's"), clean-corpus-n.perl -ratio 1.5 (1..175 tokens), lowercase.perl.
HEADER = [("<url>http://www.ted.com/talks/lang/de/jane_doe.html</url>",
           "<url>http://www.ted.com/talks/jane_doe.html</url>", None, None),
          ("<keywords>talks, books</keywords>", "<keywords>talks, books</keywords>", None, None),
          ("<talkid>1</talkid>", "<talkid>1</talkid>", None, None),
          ("<title>Jane Doe: Über Bücher</title>", "<title>Jane Doe: On books</title>",
           "jane doe : über bücher", "jane doe : on books"),
          ("<description>TED Talk Untertitel und Transkript: Ein Vortrag.</description>",
           "<description>TED Talk Subtitles and Transcript: A talk.</description>",
           "ted talk untertitel und transkript : ein vortrag .", "ted talk subtitles and transcript : a talk .")]
SPECIAL = [("Es ist 5 & 6.", "It's 5 & 6.", "es ist 5 &amp; 6.", "it &apos;s 5 &amp; 6 ."),
           ("Ja.", "Yes, of course it is.", None, None),  # 2 vs 6 tokens: ratio 3 > 1.5
           ("Gut so.", "Good.", "gut so .", "good ."),  # 3 vs 2 tokens: ratio exactly 1.5 is kept
           ("", "", None, None),  # empty pair
           ("Hallo.", "", None, None),  # one empty side
           ("  Viele   Leerzeichen  hier. ", "Many spaces here.", "viele leerzeichen hier .", "many spaces here ."),
           ("ÜBER ALLES.", "ABOVE ALL.", "über alles .", "above all ."),
           ("wort " * 175 + ".", "word " * 175 + ".", None, None),  # 176 tokens: too long
           ("wort " * 174 + ".", "word " * 174 + ".", ("wort " * 174 + ".").strip(), ("word " * 174 + ".").strip())]
NUMBERED = [(f"Satz Nummer {i} ist hier.", f"Sentence number {i} is here.", f"satz nummer {i} ist hier .",
             f"sentence number {i} is here .") for i in range(1, 41)]
TRAIN = HEADER + SPECIAL[:5] + NUMBERED[:20] + SPECIAL[5:] + NUMBERED[20:]
# Evaluation sets: (name, de segs, en segs, expected de, expected en). The XML's own entities are not decoded by
# the script, so "&amp;" is tokenised as "& amp ;" and escaped again.
EVAL = [("IWSLT14.TED.dev2010", [' Das ist’s. '], [" That’s it. "], ["das ist &apos; s."], ["that &apos;s it ."]),
        ("IWSLT14.TEDX.dev2012", ["Zweiter   Satz &amp; mehr."], ["Second   sentence &amp; more."],
         ["zweiter satz &amp; amp ; mehr ."], ["second sentence &amp; amp ; more ."]),
        ("IWSLT14.TED.tst2010", ["Eins.", "Zwei."], ["One.", "Two."], ["eins .", "zwei ."], ["one .", "two ."]),
        ("IWSLT14.TED.tst2011", ["Drei."], ["Three."], ["drei ."], ["three ."]),
        ("IWSLT14.TED.tst2012", ["Vier!"], ["Four!"], ["vier !"], ["four !"])]


def xml(setid: str, segs: List[str], lang: str) -> str:
    body = "".join(f'<seg id="{i}">{text}</seg>\n' for i, text in enumerate(segs, 1))
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<mteval>\n<srcset setid="{setid}" srclang="{lang}">\n'
            f'<doc docid="1" genre="lectures">\n<url>http://www.ted.com/talks/x.html</url>\n'
            f"<talkid>1</talkid>\n<title>A title</title>\n{body}</doc>\n</srcset>\n</mteval>\n")


def release_archive(path: Path) -> Path:
    """``de-en.tgz`` in the release's layout: ``de-en/train.tags.de-en.{de,en}`` and the evaluation XML."""
    files = {f"de-en/train.tags.de-en.{lang}": "".join(pair[side] + "\n" for pair in TRAIN)
             for side, lang in enumerate(("de", "en"))}
    for name, de, en, _, _ in EVAL:
        files[f"de-en/{name}.de-en.de.xml"] = xml(name, de, "de")
        files[f"de-en/{name}.de-en.en.xml"] = xml(name, en, "en")
    files["de-en/README"] = "IWSLT 2014 evaluation campaign\n"
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_iwslt14_from_a_release_archive_gives_fairseqs_lines(tmp_path):
    out = tmp_path / "iwslt14"
    build_iwslt14(release_archive(tmp_path / "de-en.tgz"), out, log=lambda _: None)
    kept = [(de, en) for _, _, de, en in TRAIN if de is not None]
    assert len(kept) == 47  # title and description lines, 5 special pairs, 40 numbered pairs
    valid = [pair for i, pair in enumerate(kept, 1) if i % 23 == 0]
    train = [pair for i, pair in enumerate(kept, 1) if i % 23 != 0]
    # line 23 of the cleaned corpus is "satz nummer 19" (after title, description, 2 special pairs and 18 numbered
    # pairs); line 46 is "satz nummer 39" (then 1 more numbered, 3 special pairs, 19 numbered pairs)
    assert valid == [NUMBERED[18][2:], NUMBERED[38][2:]]
    for split, pairs in (("train", train), ("valid", valid)):
        for side, lang in enumerate(("de", "en")):
            assert (out / f"{split}.{lang}").read_text(encoding="utf-8").splitlines() == [p[side] for p in pairs]
    for side, lang in enumerate(("de", "en")):
        expected = [line for item in EVAL for line in item[3 + side]]
        assert (out / f"test.{lang}").read_text(encoding="utf-8").splitlines() == expected


def test_prepare_iwslt14_from_a_source_folder(tmp_path, capsys):
    release_archive(tmp_path / "de-en.tgz")
    code, out = run(capsys, "prepare", "iwslt14", "--source", str(tmp_path), "--dest", str(tmp_path / "out"))
    assert code == 1  # written, then check: a toy release has other counts than the real one
    assert "iwslt14 de-en train has 45 pairs, the official release 160,239" in out
    assert (tmp_path / "out" / "test.en").read_text().startswith("that &apos;s it .\n")


def test_an_archive_that_is_not_the_release(tmp_path, capsys):
    with tarfile.open(tmp_path / "de-en.tgz", "w:gz") as tar:
        info = tarfile.TarInfo("de-en/README")
        tar.addfile(info, io.BytesIO(b""))
    code, out = run(capsys, "prepare", "iwslt14", "--source", str(tmp_path), "--dest", str(tmp_path / "out"))
    assert code == 1 and "it is not the IWSLT 2014 de-en release" in out


def test_each_datamodule_kind_maps_to_its_files(tmp_path):
    """Which files the fit-time check reads for each DataModule configuration (hub ids: none)."""
    from types import SimpleNamespace as NS

    from lit_rnncells.data import split_check as sc

    ptb = sc._language_model(NS(dataset="ptb_char", data_dir=str(tmp_path)))
    assert (ptb.name, ptb.layout.name, ptb.paths["dev"]) == ("ptb", "char", [tmp_path / "ptb.char.valid.txt"])
    (tmp_path / "text8").write_text("a b")
    text8 = sc._language_model(NS(dataset="text8", data_dir=str(tmp_path / "text8")))
    assert text8.paths == {"all": [tmp_path / "text8"]} and text8.layout.kind == "bytes"
    own = sc._language_model(NS(dataset="text", data_dir=str(tmp_path)))
    assert own.name is None and own.paths["dev"] == [tmp_path / "valid.txt"]
    assert sc._language_model(NS(dataset="ptb_word", data_dir="ptb-text-only/ptb_text_only")) is None
    giga = sc._translation(NS(dataset="gigaword", data_dir=str(tmp_path), files={}, source_language="article",
                              target_language="title"))
    assert giga.paths["dev"] == [tmp_path / "valid.article.filter.txt", tmp_path / "valid.title.filter.txt"]
    en_de = sc._translation(NS(dataset="multi30k", data_dir=str(tmp_path), files={}, source_language="en",
                               target_language="de"))
    assert en_de.paths["test"] == [tmp_path / "test_2016_flickr.en", tmp_path / "test_2016_flickr.de"]
    files = sc._translation(NS(dataset="parallel", data_dir=None, files={"train": ["a.x", "a.y"]},
                               source_language="x", target_language="y"))
    assert files.name is None and files.paths == {"train": [Path("a.x"), Path("a.y")]}
    assert sc._translation(NS(dataset="iwslt14", data_dir="IWSLT/iwslt2017", files={}, source_language="de",
                              target_language="en")) is None
    # the sentiment DataModules say it themselves (split_files), from their records
    from lit_rnncells.data import AspectSentimentDataModule as Aspect, DocumentSentimentDataModule as Document

    absa = Aspect.split_files(NS(domain="laptops", data_dir=str(tmp_path)))
    assert absa.paths["test"] == [tmp_path / "Laptops_Test_Gold.xml"]
    (tmp_path / "aclImdb_v1.tar.gz").write_bytes(b"")
    imdb = Document.split_files(NS(dataset="imdb", data_dir=str(tmp_path)))
    assert imdb.paths == {"train": [tmp_path / "aclImdb_v1.tar.gz"], "test": [tmp_path / "aclImdb_v1.tar.gz"]}
    assert Document.split_files(NS(dataset="sst", data_dir="stanfordnlp/sst2")) is None


def test_a_release_file_given_with_source_is_verified(tmp_path, capsys):
    with zipfile.ZipFile(tmp_path / "enwik8.zip", "w") as zf:
        zf.writestr("enwik8", "<mediawiki>not the real thing</mediawiki>")
    code, out = run(capsys, "prepare", "enwik8", "--source", str(tmp_path), "--dest", str(tmp_path / "out"))
    assert code == 1 and "enwik8.zip has" in out and "the release 36,445,475" in out
    assert not (tmp_path / "out" / "enwik8").exists()


def test_prepare_text8_writes_the_member_and_check_counts_its_bytes(tmp_path, capsys):
    with zipfile.ZipFile(tmp_path / "text8.zip", "w") as zf:
        zf.writestr("text8", " anarchism originated as a term")
    code, out = run(capsys, "prepare", "text8", "--source", str(tmp_path), "--dest", str(tmp_path / "out"))
    assert (tmp_path / "out" / "text8").read_text() == " anarchism originated as a term"
    assert code == 1 and "text8 text8 all has 31 bytes, the official release 100,000,000" in out
    (tmp_path / "out" / "text8").write_text(" anarchism 0riginated as a term")
    code, out = run(capsys, "check", "text8", "--dest", str(tmp_path / "out"))
    assert code == 1 and "holds characters other than a-z and space ('0')" in out


def test_prepare_gigaword_lays_out_the_harvardnlp_archive(tmp_path, capsys, monkeypatch):
    """summary.tar.gz: sumdata/train/*.txt.gz and sumdata/Giga/{input,task1_ref0}.txt → the local layout."""
    members = {"sumdata/train/train.article.txt.gz": gzip.compress(b"a b c\nd e f\n"),
               "sumdata/train/train.title.txt.gz": gzip.compress(b"a b\nd e\n"),
               "sumdata/train/valid.article.filter.txt.gz": gzip.compress(b"g h i\n"),
               "sumdata/train/valid.title.filter.txt.gz": gzip.compress(b"g h\n"),
               "sumdata/Giga/input.txt": b"j k l\n", "sumdata/Giga/task1_ref0.txt": b"j UNK\n",
               "sumdata/DUC2004/input.txt": b"m n o\n"}
    with tarfile.open(tmp_path / "summary.tar.gz", "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    real = known.KNOWN["gigaword"]
    source = Source(real.sources[0].url, "summary.tar.gz", provenance="the test")
    monkeypatch.setitem(known.KNOWN, "gigaword", dataclasses.replace(real, sources=(source,)))
    code, out = run(capsys, "prepare", "gigaword", "--source", str(tmp_path), "--dest", str(tmp_path / "out"))
    written = {p.name: p.read_text() for p in (tmp_path / "out").iterdir()}
    assert written == {"train.article.txt": "a b c\nd e f\n", "train.title.txt": "a b\nd e\n",
                       "valid.article.filter.txt": "g h i\n", "valid.title.filter.txt": "g h\n",
                       "test.article.txt": "j k l\n", "test.title.txt": "j UNK\n"}
    assert code == 1 and "gigaword article-title train has 2 pairs, the official release 3,803,957" in out


# --- issue 33, section 4: prepare's messages about the user's own files and a short mirror copy -----------------
def test_a_non_release_archive_in_the_folder_the_project_reads_is_never_to_be_deleted(tmp_path, capsys):
    """``prepare imdb --source <the folder the DataModule reads>`` with an archive that is not the release: the
    archive is the user's own copy, kept, and the message does not tell them to delete it."""
    folder = tmp_path / "imdb"
    folder.mkdir()
    (folder / "aclImdb_v1.tar.gz").write_bytes(b"my own archive\n")
    code, out = run(capsys, "prepare", "imdb", "--source", str(folder), "--dest", str(folder), "--force")
    errors = [line for line in out.splitlines() if line.startswith("error: ")]
    assert code == 1 and len(errors) == 1, out
    assert "aclImdb_v1.tar.gz has 15 bytes, the release 84,125,825" in errors[0]
    assert "is your own copy and was left as it is" in errors[0] and "delete" not in errors[0]
    assert (folder / "aclImdb_v1.tar.gz").read_bytes() == b"my own archive\n"


def test_an_archive_without_the_release_members_given_with_source_is_kept(tmp_path, capsys):
    with tarfile.open(tmp_path / "de-en.tgz", "w:gz") as tar:
        tar.addfile(tarfile.TarInfo("de-en/README"), io.BytesIO(b""))
    code, out = run(capsys, "prepare", "iwslt14", "--source", str(tmp_path), "--dest", str(tmp_path / "out"))
    assert code == 1 and "is your own copy and was left as it is" in out and "delete" not in out
    assert (tmp_path / "de-en.tgz").is_file()


def test_source_given_a_file_says_it_takes_a_folder(tmp_path, capsys):
    (tmp_path / "aclImdb_v1.tar.gz").write_bytes(b"x")
    code, out = run(capsys, "prepare", "imdb", "--source", str(tmp_path / "aclImdb_v1.tar.gz"), "--dest",
                    str(tmp_path / "out"))
    assert code == 1 and out.count("error: ") == 1, out
    assert f"--source takes the folder that holds the release files: pass --source {tmp_path}" in out


def sst_from(monkeypatch, data: bytes, size: int) -> None:
    """``sst``'s release file is ``data`` as far as prepare knows (size ``size``, the sha256 of ``data``)."""
    real = known.KNOWN["sst"]
    source = Source(real.sources[0].url, real.sources[0].filename, size, hashlib.sha256(data).hexdigest(),
                    provenance="the test")
    monkeypatch.setitem(known.KNOWN, "sst", Dataset("sst", real.title, real.datamodule, (source,), real.layouts, ""))


@pytest.mark.parametrize("mirror_kind", ["file", "http"])
def test_a_truncated_file_on_a_mirror_says_the_mirrors_copy_is_short(mirror_kind, server, capsys, tmp_path,
                                                                       monkeypatch):
    """The mirror's copy is short: every run says so, with both sizes (not "run prepare again to resume it",
    which can never complete it)."""
    sst_from(monkeypatch, PAYLOAD, len(PAYLOAD))
    if mirror_kind == "file":
        (tmp_path / "mirror").mkdir()
        (tmp_path / "mirror" / "trainDevTestTrees_PTB.zip").write_bytes(PAYLOAD[:5000])
        mirror = (tmp_path / "mirror").as_uri()
    else:
        _Handler.files["trainDevTestTrees_PTB.zip"] = PAYLOAD[:5000]
        mirror = server
    for _ in range(2):
        code, out = run(capsys, "prepare", "sst", "--dest", str(tmp_path / "sst"), "--mirror", mirror)
        errors = [line for line in out.splitlines() if line.startswith("error: ")]
        assert code == 1 and len(errors) == 1, out
        assert "the copy of trainDevTestTrees_PTB.zip has 5,000 bytes, the release 16,384" in errors[0]
        assert "that copy is short (truncated)" in errors[0] and "resume" not in errors[0]



def laptops_xml(sentences: List[Tuple[str, str]]) -> str:
    body = "".join(f'<sentence id="{i}"><text>{text}</text><aspectTerms><aspectTerm term="{term}" polarity="positive" '
                   f'from="{text.index(term)}" to="{text.index(term) + len(term)}"/></aspectTerms></sentence>'
                   for i, (text, term) in enumerate(sentences))
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<sentences>{body}</sentences>\n'


@pytest.fixture
def semeval_counts(monkeypatch) -> None:
    """semeval14 as known, but with the counts of the tiny files below (2 train / 2 test aspect terms a domain)."""
    real = known.KNOWN["semeval14"]
    layouts = tuple(Layout(lay.name, lay.kind, lay.files, {"train": 2, "test": 2}, optional=lay.optional)
                    for lay in real.layouts)
    monkeypatch.setitem(known.KNOWN, "semeval14", Dataset("semeval14", real.title, real.datamodule, (), layouts,
                                                         real.steps, manual=real.manual))


def test_check_semeval_with_only_the_laptops_files_has_no_faults(semeval_counts, tmp_path, capsys):
    """A user who has only the Laptops domain: its files are checked, the Restaurants files (which that user
    does not need) are a note, not a fault; exit 0 (issue 33). Half a domain is still a fault."""
    folder = tmp_path / "semeval14"
    folder.mkdir()
    (folder / "Laptop_Train_v2.xml").write_text(laptops_xml([("The screen is bright.", "screen"),
                                                             ("The keyboard is fine.", "keyboard")]))
    (folder / "Laptops_Test_Gold.xml").write_text(laptops_xml([("The battery lasts.", "battery"),
                                                               ("The fan is loud.", "fan")]))
    code, out = run(capsys, "check", "semeval14", "--dest", str(folder))
    assert code == 0 and "error:" not in out, out
    assert "found: semeval14 laptops: train 2, test 2 aspect terms" in out
    assert "restaurants: not present (this folder holds laptops); to use restaurants too, add " \
           "Restaurants_Test_Gold.xml, Restaurants_Train_v2.xml" in out
    (folder / "Laptops_Test_Gold.xml").unlink()
    code, out = run(capsys, "check", "semeval14", "--dest", str(folder))
    assert code == 1 and "missing file" in out and "Laptops_Test_Gold.xml" in out


def test_check_an_empty_semeval_folder_still_names_the_required_files(semeval_counts, tmp_path, capsys):
    (tmp_path / "semeval14").mkdir()
    code, out = run(capsys, "check", "semeval14", "--dest", str(tmp_path / "semeval14"))
    assert code == 1 and "Restaurants_Train_v2.xml" in out
