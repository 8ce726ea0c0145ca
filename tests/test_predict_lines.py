"""Every task's predict input is read by one function, split at newlines only: one output line per input line."""
from __future__ import annotations

import io
import sys

import pytest

from lit_rnncells.utils.paths import read_predict_lines, split_lines


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
    assert read_predict_lines(str(path)) == ["one\u2028line", "two"]
    monkeypatch.setattr(sys, "stdin", io.StringIO("from\nstdin\n"))
    assert read_predict_lines("-") == ["from", "stdin"]
    with pytest.raises(FileNotFoundError, match=r"^predict_file '.*absent\.txt' does not exist; pass a text file "
                                                r"with one input per line, or '-' for standard input\.$"):
        read_predict_lines(str(tmp_path / "absent.txt"))
    path.write_bytes(b"caf\xe9\n")
    with pytest.raises(ValueError, match=r"^predict_file '.*in\.txt' is not UTF-8 text \(byte 3"):
        read_predict_lines(str(path))
