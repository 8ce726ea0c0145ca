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


# --- several references (DUC-2004 has four per document) ---------------------------------------------------
DOCS_HYPS = ["cambodian leader hun sen rejects opposition demands for talks in beijing",
             "israel approves wye accord after cabinet delays vote on security",
             "hurricane mitch kills thousands in honduras and nicaragua"]
DOCS_REFS = [("Cambodian leader Hun Sen rejects opposition's demand for talks outside the country.",
              "Hun Sen refuses to hold talks in Beijing with opposition leaders.",
              "Cambodia's Hun Sen turns down Ranariddh and Rainsy's request for Beijing summit.",
              "Opposition demands talks abroad; Hun Sen says no."),
             ("Israeli cabinet approves Wye River accord with conditions on security.",
              "Netanyahu's cabinet delays then approves the Wye agreement.",
              "Israel ratifies land-for-security deal after long delay.",
              "Wye accord approved by Israeli cabinet, 8 to 4."),
             ("Hurricane Mitch leaves thousands dead in Honduras and Nicaragua.",
              "Mitch, deadliest Atlantic storm in two centuries, devastates Central America.",
              "Floods and mudslides from Mitch kill over 10,000 in Central America.",
              "Honduras and Nicaragua hardest hit as Mitch kills thousands.")]


def test_multi_reference_bleu_equals_sacrebleu_called_directly() -> None:
    import sacrebleu
    from sacrebleu.metrics import BLEU

    from lit_rnncells.metrics import reference_streams, tokenized_bleu_corpus

    streams = [list(s) for s in zip(*DOCS_REFS)]  # sacreBLEU's layout: one stream per reference
    assert reference_streams(DOCS_REFS) == streams
    score, signature = sacrebleu_corpus(DOCS_HYPS, DOCS_REFS)
    assert score == pytest.approx(sacrebleu.corpus_bleu(DOCS_HYPS, streams).score)
    assert "nrefs:4" in signature and "tok:13a" in signature
    assert score > sacrebleu_corpus(DOCS_HYPS, [r[0] for r in DOCS_REFS])[0]  # the other references count
    tok, tok_signature = tokenized_bleu_corpus(DOCS_HYPS, DOCS_REFS)
    assert tok == pytest.approx(BLEU(tokenize="none", force=True).corpus_score(DOCS_HYPS, streams).score)
    assert "nrefs:4" in tok_signature and "tok:none" in tok_signature
    assert tokenized_bleu(DOCS_HYPS, DOCS_REFS) == tok


def test_a_varying_number_of_references_is_sacrebleus_none_padding() -> None:
    import sacrebleu

    refs = [DOCS_REFS[0][:1], DOCS_REFS[1][:3], DOCS_REFS[2]]
    score, signature = sacrebleu_corpus(DOCS_HYPS, refs)
    padded = [[r[k] if k < len(r) else None for r in refs] for k in range(4)]
    assert score == pytest.approx(sacrebleu.corpus_bleu(DOCS_HYPS, padded).score)
    assert "nrefs:var" in signature


def test_multi_reference_rouge_equals_rouge_score_called_directly() -> None:
    from rouge_score import rouge_scorer

    from lit_rnncells.metrics import rouge_corpus

    scores, signature = rouge_corpus(DOCS_HYPS, DOCS_REFS, multiref="best")
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    direct = [scorer.score_multi(list(refs), hyp) for hyp, refs in zip(DOCS_HYPS, DOCS_REFS)]
    for key in ("rouge1", "rouge2", "rougeL"):
        assert scores[key] == pytest.approx(100 * sum(d[key].fmeasure for d in direct) / 3)
        assert scores[f"{key}_recall"] == pytest.approx(100 * sum(d[key].recall for d in direct) / 3)
        assert scores[f"{key}_precision"] == pytest.approx(100 * sum(d[key].precision for d in direct) / 3)
    single = rouge_corpus(DOCS_HYPS, [r[-1] for r in DOCS_REFS])[0]
    assert scores["rouge2"] > single["rouge2"]  # the best of four references, not any one of them
    assert "nrefs:4" in signature and "multiref:best-f1-per-metric" in signature and "trunc:none" in signature
    assert rouge_f1(DOCS_HYPS, DOCS_REFS, multiref="best") == {k: scores[k] for k in ("rouge1", "rouge2", "rougeL")}


def test_several_references_are_pooled_by_default() -> None:
    from lit_rnncells.metrics import rouge_corpus
    from lit_rnncells.metrics.rouge155 import pooled_rouge

    scores, signature = rouge_corpus(DOCS_HYPS, DOCS_REFS)  # several references: ROUGE-1.5.5's -f A
    assert scores == pytest.approx(pooled_rouge(DOCS_HYPS, DOCS_REFS))
    assert "multiref:pooled(rouge-1.5.5 -f A)" in signature and "nrefs:4" in signature
    assert scores["rouge1_recall"] < rouge_corpus(DOCS_HYPS, DOCS_REFS, multiref="best")[0]["rouge1_recall"]
    single, signature = rouge_corpus(DOCS_HYPS, [r[0] for r in DOCS_REFS])  # one: rouge-score, as before
    assert "multiref:best-f1-per-metric" in signature
    with pytest.raises(ValueError, match="Unknown ROUGE multiref 'mean'"):
        rouge_corpus(DOCS_HYPS, DOCS_REFS, multiref="mean")


def test_rouge_picks_the_best_reference_per_metric_by_f1() -> None:
    from lit_rnncells.metrics import rouge_corpus

    # "a b c d": ROUGE-1 is best against ref 1 (4 of 4 words, in another order), ROUGE-2 against ref 2
    scores, _ = rouge_corpus(["a b c d"], [("d c b a", "a b x y z")], multiref="best")
    assert scores["rouge1"] == pytest.approx(100.0) and scores["rouge1_recall"] == pytest.approx(100.0)
    # ref 1 has no bigram of the hypothesis; ref 2 has "a b": P 1/3, R 1/4, F 2/7
    assert scores["rouge2"] == pytest.approx(200 / 7)
    assert scores["rouge2_recall"] == pytest.approx(25.0) and scores["rouge2_precision"] == pytest.approx(100 / 3)


def test_75_byte_truncation_cuts_hypotheses_and_references_alike() -> None:
    from rouge_score import rouge_scorer

    from lit_rnncells.metrics import rouge_corpus, truncate_bytes

    hyps = [h + " and many more words after the limit that a summary should not be credited for" for h in DOCS_HYPS]
    scores, signature = rouge_corpus(hyps, DOCS_REFS, max_bytes=75, multiref="best")
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    direct = [scorer.score_multi([r[:75] for r in refs], hyp[:75]) for hyp, refs in zip(hyps, DOCS_REFS)]
    for key in ("rouge1", "rouge2", "rougeL"):
        assert scores[f"{key}_recall"] == pytest.approx(100 * sum(d[key].recall for d in direct) / 3)
        assert scores[key] == pytest.approx(100 * sum(d[key].fmeasure for d in direct) / 3)
    assert "trunc:75bytes" in signature
    assert scores["rouge1_precision"] > rouge_corpus(hyps, DOCS_REFS, multiref="best")[0]["rouge1_precision"]
    # bytes, not characters (ROUGE-1.5.5 counts bytes): a cut two-byte character is dropped, a word may be cut
    assert truncate_bytes("café au lait", 4) == "caf" and truncate_bytes("café au lait", 5) == "café"
    assert truncate_bytes("headline words", 10) == "headline w" and truncate_bytes("short", None) == "short"
    with pytest.raises(ValueError, match="max_bytes"):
        rouge_corpus(hyps, DOCS_REFS, max_bytes=0)
