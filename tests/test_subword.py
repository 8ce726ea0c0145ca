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
    newline = tok.encode("a\nb")  # a model can emit the newline byte: the output stays one line
    assert tok.decode(newline) == "a b"


def test_whitespace_bpe_keeps_corpus_tokens_and_detokenizes() -> None:
    tok = SubwordTokenizer.train(TOKENIZED, 400, pretokenized=True, language="en")
    line = TOKENIZED[1]
    ids = tok.encode(line)
    assert tok.decode(ids) == line
    # a merge never crosses a corpus token boundary, and never splits at punctuation inside a token
    pieces = "".join(t for t in tok.tokens(ids)).replace("Ġ", " ").split()
    assert pieces == line.split() and sum(t.startswith("Ġ") for t in tok.tokens(ids)) == len(line.split())
    assert any(t == "Ġ&apos;s" for t in tok.tokens(ids))  # frequent corpus tokens become one symbol
    assert tok.detokenize(line) == 'it\'s a "big" idea, isn\'t it?'
    assert tok.detokenize("we don &apos;t know .") == "we don't know."  # Moses splits don 't
    assert tok.decode(tok.encode("know ☃ UNK")) == "know ☃ UNK"  # unseen characters stay encodable


def test_fitted_only_on_given_lines_and_size_is_configurable() -> None:
    small = SubwordTokenizer.train(TOKENIZED, 280, pretokenized=True)
    large = SubwordTokenizer.train(TOKENIZED, 400, pretokenized=True)
    assert len(small) == 280 and len(small) < len(large)
    assert len(large.encode(TOKENIZED[1])) < len(small.encode(TOKENIZED[1]))
    assert not any("banana" in t for t in large.tokenizer.get_vocab())


def test_json_round_trip_loads_with_weights_only() -> None:
    tok = SubwordTokenizer.train(RAW, 300, pretokenized=False, language="de")
    buffer = io.BytesIO()
    torch.save({"tok": tok.to_json()}, buffer)
    buffer.seek(0)
    back = SubwordTokenizer.from_json(torch.load(buffer, weights_only=True)["tok"])
    assert back == tok and back.encode(RAW[2]) == tok.encode(RAW[2]) and back.language == "de"
    assert back != SubwordTokenizer.train(RAW, 290, pretokenized=False, language="de")


def test_bad_vocab_size_is_one_clear_error() -> None:
    with pytest.raises(ValueError, match="vocab_size must be an integer of at least 260"):
        SubwordTokenizer.train(RAW, 259, pretokenized=False)


def test_training_is_deterministic_and_ids_do_not_change_segmentation() -> None:
    import json

    from tokenizers import Tokenizer

    lines = TOKENIZED + ["die katze sitzt auf der matte .", "der hund bellt laut ."] * 7
    a = SubwordTokenizer.train(lines, 320, pretokenized=True)
    assert all(SubwordTokenizer.train(lines, 320, pretokenized=True) == a for _ in range(3))
    state = json.loads(a.tokenizer.to_str())  # the same model with permuted ids segments identically
    vocab = state["model"]["vocab"]
    keys = sorted(vocab, key=vocab.get)[4:]
    state["model"]["vocab"].update({k: vocab[keys[-1 - i]] for i, k in enumerate(keys)})
    permuted = Tokenizer.from_str(json.dumps(state))
    assert all(permuted.encode(x).tokens == a.tokenizer.encode(x).tokens for x in lines)
