"""Corpus metrics for sequence-to-sequence tasks, from maintained implementations.

* :func:`sacrebleu_corpus`: corpus BLEU (Papineni et al. 2002) on detokenised text with sacreBLEU's
  default 13a tokenisation, and its signature (Post 2018, "A Call for Clarity in Reporting BLEU").
* :func:`tokenized_bleu`: BLEU on the whitespace tokens as given (sacreBLEU ``tokenize="none"``), the
  "tokenised BLEU" the IWSLT14 / Gigaword papers report on Moses / PTB-tokenised text (multi-bleu.perl style).
* :func:`rouge_f1`: ROUGE-1/2/L F1 (Lin 2004) × 100 with Google's ``rouge-score`` (Porter stemming, as in
  Rush et al. 2015's ROUGE-1.5.5 ``-m`` runs), averaged over sentences.

All take hypotheses and single references as parallel lists of strings and score whole corpora:
under DDP gather every rank's strings first (a corpus BLEU is not a mean of per-rank scores).
"""
from __future__ import annotations

from typing import Dict, Sequence, Tuple


def _check(hyps: Sequence[str], refs: Sequence[str]) -> None:
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references; score parallel lists.")
    if not len(hyps):
        raise ValueError("No hypotheses to score; the evaluation split produced no outputs.")


def sacrebleu_corpus(hyps: Sequence[str], refs: Sequence[str]) -> Tuple[float, str]:
    """Corpus sacreBLEU of detokenised ``hyps`` against ``refs`` and the metric's signature string."""
    from sacrebleu.metrics import BLEU

    _check(hyps, refs)
    bleu = BLEU()
    score = bleu.corpus_score(list(hyps), [list(refs)])
    return float(score.score), str(bleu.get_signature())


def tokenized_bleu(hyps: Sequence[str], refs: Sequence[str]) -> float:
    """Corpus BLEU on whitespace tokens exactly as given (no further tokenisation), case-sensitive."""
    from sacrebleu.metrics import BLEU

    _check(hyps, refs)
    return float(BLEU(tokenize="none", force=True).corpus_score(list(hyps), [list(refs)]).score)


def rouge_f1(hyps: Sequence[str], refs: Sequence[str], stemmer: bool = True) -> Dict[str, float]:
    """Mean sentence ROUGE-1, ROUGE-2 and ROUGE-L F1 × 100 (keys ``rouge1``, ``rouge2``, ``rougeL``)."""
    from rouge_score import rouge_scorer

    _check(hyps, refs)
    keys = ("rouge1", "rouge2", "rougeL")
    scorer = rouge_scorer.RougeScorer(list(keys), use_stemmer=stemmer)
    totals = dict.fromkeys(keys, 0.0)
    for hyp, ref in zip(hyps, refs):
        scores = scorer.score(ref, hyp)  # (target, prediction)
        for k in keys:
            totals[k] += scores[k].fmeasure
    return {k: 100.0 * v / len(hyps) for k, v in totals.items()}
