"""Every task's predict input is read by one function, split at newlines only: one output line per input line."""
from __future__ import annotations

import io
import re
import sys
from pathlib import Path
from typing import Callable, Dict, Optional, Tuple

import pytest

from lit_rnncells.data import AspectSentimentDataModule, DocumentSentimentDataModule, TranslationDataModule
from lit_rnncells.utils.paths import read_predict_lines, split_lines

from .test_language_model import data as language_model_data, ptb_char_corpus
from .test_sentiment_data import imdb_folder, semeval_folder, tiny
from .test_translation_data import _checkpoint, module as translation_module, write_parallel


def test_lines_split_at_newlines_only_as_wc_counts_them():
    assert split_lines("a\nb\n") == ["a", "b"]  # a final newline makes no empty line
    assert split_lines("a\r\nb") == ["a", "b"]  # Windows line ends
    assert split_lines("a\n\nb\n") == ["a", "", "b"]  # a blank line is kept (the callers refuse it, naming it)
    assert split_lines("") == []
    inside = "x\u2028y\x85z\x0cw\x1dv"  # str.splitlines would make five lines of it
    assert split_lines(inside + "\n") == [inside]


def test_a_predict_file_standard_input_and_their_errors(tmp_path, monkeypatch):
    path = tmp_path / "in.txt"
    path.write_text("one\u2028line\ntwo\n", encoding="utf-8")
    assert read_predict_lines(str(path), "input") == ["one\u2028line", "two"]
    monkeypatch.setattr(sys, "stdin", io.StringIO("from\nstdin\n"))
    assert read_predict_lines("-", "input") == ["from", "stdin"]
    with pytest.raises(FileNotFoundError, match=r"^predict_file '.*absent\.txt' does not exist; pass a text file "
                                                r"with one input per line, or '-' for standard input\.$"):
        read_predict_lines(str(tmp_path / "absent.txt"), "input")
    path.write_bytes(b"caf\xe9\n")
    with pytest.raises(ValueError, match=r"^predict_file '.*in\.txt' is not UTF-8 text \(byte 3"):
        read_predict_lines(str(path), "input")


def test_standard_input_is_read_once_and_kept(monkeypatch):
    """Lightning may ask for the predict loader twice: the second read sees the same lines, not an empty stream."""
    monkeypatch.setattr(sys, "stdin", io.StringIO("a\nb\n"))
    assert read_predict_lines("-", "input") == ["a", "b"] == read_predict_lines("-", "input")
    monkeypatch.setattr(sys, "stdin", io.StringIO("c\n"))  # another stream (another process's input) is read anew
    assert read_predict_lines("-", "input") == ["c"]


def _translation(tmp_path: Path, predict_file: Optional[str]) -> Callable[[], object]:
    checkpoint = _checkpoint(translation_module(write_parallel(tmp_path / "pairs")), tmp_path / "m.ckpt")
    dm = TranslationDataModule("parallel", source_language="de", target_language="en", cache_dir="",
                               checkpoint_path=str(checkpoint), predict_file=predict_file)
    return dm.predict_dataloader


def _language_model(tmp_path: Path, predict_file: Optional[str]) -> Callable[[], object]:
    dm = language_model_data(ptb_char_corpus(tmp_path / "ptb"), predict_file=predict_file)
    return dm.predict_dataloader


def _documents(tmp_path: Path, predict_file: Optional[str]) -> Callable[[], object]:
    dm = DocumentSentimentDataModule(data_dir=str(imdb_folder(tmp_path / "imdb")), val_size=2,
                                     predict_file=predict_file, **tiny())
    return lambda: dm.setup("predict")


def _aspects(tmp_path: Path, predict_file: Optional[str]) -> Callable[[], object]:
    dm = AspectSentimentDataModule(data_dir=str(semeval_folder(tmp_path / "semeval")), predict_file=predict_file,
                                   **tiny(val_fraction=0.2))
    return lambda: dm.setup("predict")


TASKS: Dict[str, Tuple[Callable[[Path, Optional[str]], Callable[[], object]], str]] = {
    "translation": (_translation, "source sentence"),
    "language model": (_language_model, "prompt"),
    "document sentiment": (_documents, "document"),
    "aspect sentiment": (_aspects, "sentence<TAB>aspect term"),
}


@pytest.mark.parametrize("task", list(TASKS))
def test_every_task_refuses_a_predict_input_the_same_way(task, tmp_path, monkeypatch):
    """No lines and a blank line are one sentence each, the same for every task but for what one line holds (the
    translation task said 'has no lines to translate', the classifiers named a blank line before noticing an
    empty file, each in its own words)."""
    build, each = TASKS[task]
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(ValueError, match=rf"^predict_file '.*empty\.txt' has no lines; give one {re.escape(each)} "
                                         r"per line\.$"):
        build(tmp_path, str(empty))()
    blank = tmp_path / "blank.txt"
    blank.write_text("first\tone\n \nthird\tone\n")
    with pytest.raises(ValueError, match=r"^Line 2 of predict_file '.*blank\.txt' is empty; evaluation and predict "
                                         r"inputs need text on every line \(remove the line, or give it text\)\.$"):
        build(tmp_path, str(blank))()
    monkeypatch.setattr(sys, "stdin", io.StringIO("first\tone\n\n"))
    read = build(tmp_path, "-")
    for _ in range(2):  # the same error however often the loader is asked for
        with pytest.raises(ValueError, match=r"^Line 2 of standard input is empty"):
            read()


@pytest.mark.parametrize("task", ["translation", "document sentiment", "aspect sentiment"])
def test_predict_without_a_predict_file_names_the_option(task, tmp_path):
    build, each = TASKS[task]
    with pytest.raises(ValueError, match=rf"^predict needs data\.init_args\.predict_file: a text file with one "
                                         rf"{re.escape(each)} per line, or '-' for standard input\.$"):
        build(tmp_path, None)()
