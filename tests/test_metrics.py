"""Corpus metrics against hand-computed values and the libraries' own references."""
from __future__ import annotations

import math

import pytest

from lit_rnncells.metrics import rouge_f1, sacrebleu_corpus, tokenized_bleu


def test_tokenized_bleu_matches_hand_computation() -> None:
    # n-gram precisions 5/6, 3/5, 2/4, 1/3; same length so no brevity penalty
    expected = 100 * math.exp(sum(math.log(p) for p in (5 / 6, 3 / 5, 2 / 4, 1 / 3)) / 4)
    assert tokenized_bleu(["the cat sat on a mat"], ["the cat sat on the mat"]) == pytest.approx(expected)


def test_tokenized_bleu_brevity_penalty_and_no_retokenisation() -> None:
    # hypothesis 4 tokens, reference 6: BP = exp(1 - 6/4); every n-gram of the hypothesis matches
    assert tokenized_bleu(["a b c d"], ["a b c d e f"]) == pytest.approx(100 * math.exp(1 - 6 / 4))
    # "don't" vs "do n't": tokenize none keeps them different tokens; sacreBLEU 13a splits neither
    assert tokenized_bleu(["we do n't know ."], ["we do n't know ."]) == pytest.approx(100.0)
    assert tokenized_bleu(["we don't know."], ["we do n't know ."]) < 50


def test_sacrebleu_is_corpus_level_with_signature() -> None:
    hyps = ["The cat sat on the mat.", "A dog runs."]
    refs = ["The cat sat on the mat.", "A dog is running."]
    score, signature = sacrebleu_corpus(hyps, refs)
    from sacrebleu.metrics import BLEU

    assert score == pytest.approx(BLEU().corpus_score(hyps, [refs]).score)
    assert "tok:13a" in signature and "nrefs:1" in signature
    mean_of_parts = (sacrebleu_corpus(hyps[:1], refs[:1])[0] + sacrebleu_corpus(hyps[1:], refs[1:])[0]) / 2
    assert score != pytest.approx(mean_of_parts)  # a corpus score, not a mean of sentence scores
    assert sacrebleu_corpus(["The cat sat on the mat."], ["The cat sat on the mat."])[0] == pytest.approx(100.0)


def test_rouge_f1_hand_computed() -> None:
    scores = rouge_f1(["the cat sat"], ["the cat sat on the mat"])
    # ROUGE-1: P 3/3, R 3/6 → F 2/3; ROUGE-2: P 2/2, R 2/5 → F 4/7; ROUGE-L: LCS 3 → F 2/3
    assert scores["rouge1"] == pytest.approx(200 / 3)
    assert scores["rouge2"] == pytest.approx(400 / 7)
    assert scores["rougeL"] == pytest.approx(200 / 3)
    two = rouge_f1(["the cat sat", "dogs run"], ["the cat sat on the mat", "dogs run"])
    assert two["rouge1"] == pytest.approx((200 / 3 + 100) / 2)  # mean over sentences
    assert rouge_f1(["running dogs"], ["run dog"])["rouge1"] == pytest.approx(100.0)  # Porter stemming


def test_mismatched_lists_are_one_clear_error() -> None:
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        sacrebleu_corpus(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="No hypotheses"):
        rouge_f1([], [])
