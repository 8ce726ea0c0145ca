"""SubwordTokenizer: fixed special ids, exact round trips, train-split-only fitting, serialisation."""
from __future__ import annotations

import io

import pytest
import torch

from lit_rnncells.data.subword import BOS_ID, EOS_ID, PAD_ID, UNK_ID, SubwordTokenizer

RAW = ["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee.", "Eine Frau liest ein Buch im Park."] * 20
TOKENIZED = ["we do n't know .", "it &apos;s a &quot; big &quot; idea , isn &apos;t it ?", "thank you ."] * 20


def test_special_ids_are_fixed() -> None:
    for pretokenized, lines in ((False, RAW), (True, TOKENIZED)):
        tok = SubwordTokenizer.train(lines, 300, pretokenized=pretokenized)
        assert tok.tokens([PAD_ID, UNK_ID, BOS_ID, EOS_ID]) == ["<pad>", "<unk>", "<bos>", "<eos>"]
        assert len(tok) <= 300 and min(min(tok.encode(x)) for x in lines) >= 4  # no special inside a line


def test_byte_level_round_trips_any_text() -> None:
    tok = SubwordTokenizer.train(RAW, 300, pretokenized=False, language="de")
    for text in RAW[:3] + ["Ünbekannte ☃ Zeichen  und   Räume", "x"]:  # unseen characters and spacing too
        assert tok.decode(tok.encode(text)) == text.strip()
    assert tok.decode([BOS_ID] + tok.encode("Ein Mann") + [EOS_ID, PAD_ID, PAD_ID]) == "Ein Mann"
    assert tok.detokenize("Ein Mann .") == "Ein Mann ."  # raw corpora: identity


def test_whitespace_bpe_keeps_corpus_tokens_and_detokenizes() -> None:
    tok = SubwordTokenizer.train(TOKENIZED, 200, pretokenized=True, language="en")
    line = TOKENIZED[1]
    ids = tok.encode(line)
    assert tok.decode(ids) == line
    assert all(t.endswith("</w>") for t in tok.tokens(ids)[-1:])  # words end with the end-of-word marker
    # a merge never crosses a corpus token boundary: every token's pieces are contiguous in it
    pieces = "".join(t for t in tok.tokens(ids)).replace("</w>", " ").split()
    assert pieces == line.split()
    assert tok.detokenize(line) == 'it\'s a "big" idea, isn\'t it?'
    assert tok.detokenize("we don &apos;t know .") == "we don't know."  # Moses splits don 't
    assert tok.decode(tok.encode("know ☃")) == "know"  # unseen characters → <unk>, dropped by decode
    assert UNK_ID in tok.encode("☃")


def test_fitted_only_on_given_lines_and_size_is_configurable() -> None:
    small = SubwordTokenizer.train(TOKENIZED, 60, pretokenized=True)
    large = SubwordTokenizer.train(TOKENIZED, 200, pretokenized=True)
    assert len(small) == 60 and len(small) < len(large)
    assert len(large.encode(TOKENIZED[1])) < len(small.encode(TOKENIZED[1]))
    assert "banana</w>" not in large.tokenizer.get_vocab()


def test_json_round_trip_loads_with_weights_only() -> None:
    tok = SubwordTokenizer.train(RAW, 300, pretokenized=False, language="de")
    buffer = io.BytesIO()
    torch.save({"tok": tok.to_json()}, buffer)
    buffer.seek(0)
    back = SubwordTokenizer.from_json(torch.load(buffer, weights_only=True)["tok"])
    assert back == tok and back.encode(RAW[2]) == tok.encode(RAW[2]) and back.language == "de"
    assert back != SubwordTokenizer.train(RAW, 250, pretokenized=False, language="de")


def test_bad_vocab_size_is_one_clear_error() -> None:
    with pytest.raises(ValueError, match="vocab_size must be an integer above 4"):
        SubwordTokenizer.train(RAW, 4, pretokenized=False)
