"""Corpus metrics for sequence-to-sequence tasks, from maintained implementations, each with a signature.

* :func:`sacrebleu_corpus`: corpus BLEU (Papineni et al. 2002) on detokenised text with sacreBLEU's
  default 13a tokenisation, and its signature (Post 2018, "A Call for Clarity in Reporting BLEU").
* :func:`tokenized_bleu_corpus`: BLEU on the whitespace tokens as given (sacreBLEU ``tokenize="none"``), the
  "tokenised BLEU" the IWSLT14 / Gigaword papers report on Moses / PTB-tokenised text (multi-bleu.perl style).
* :func:`rouge_corpus`: ROUGE-1/2/L (Lin 2004) F1, recall and precision × 100, averaged over documents;
  optionally on the first ``max_bytes`` bytes of hypothesis and references (ROUGE-1.5.5 ``-b 75``, the DUC-2004
  task 1 rule). Two ways to score several references (``multiref``):

  - ``"pooled"``: ROUGE-1.5.5's default ``-f A`` (:mod:`lit_rnncells.metrics.rouge155`): hits and reference n-grams
    summed over all references of a document, as the published DUC-2004 tables (``-m -b 75 -n 2``) score;
  - ``"best"``: Google's ``rouge-score`` (Porter stemming) against each reference, keeping per metric the
    reference with the best F1 (its ``score_multi``); recall and precision are that reference's. With several
    references its recall is far above the pooled one (the most similar reference is picked per document).

  By default several references are pooled and a single one goes to ``rouge-score``.

References: one string per hypothesis, or a sequence of strings per hypothesis (several references, as
DUC-2004's four). BLEU uses every reference (sacreBLEU's reference streams; a hypothesis with fewer
references than others leaves ``None`` in the missing streams, which sacreBLEU skips and signs
``nrefs:var``). ROUGE scores each hypothesis against each of its references and keeps, per metric, the
reference with the best F1 (``rouge-score``'s ``score_multi``); its recall and precision are that reference's.
Whole corpora are scored: under DDP gather every rank's strings first (a corpus BLEU is not a mean of
per-rank scores). Every scorer returns a signature string naming what it did; tasks print and log it.
"""
from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Dict, List, Optional, Sequence, Tuple, Union

Reference = Union[str, Sequence[str]]
MULTIREF_MODES = ("pooled", "best")
"""How ROUGE scores a document with several references: ROUGE-1.5.5's ``-f A``, or the best-F1 reference."""
"""The reference(s) of one hypothesis: a string, or a sequence of strings."""

ROUGE_KEYS = ("rouge1", "rouge2", "rougeL")


def as_reference_lists(refs: Sequence[Reference]) -> List[Tuple[str, ...]]:
    """Each hypothesis' references as a tuple of strings (a single string becomes a 1-tuple)."""
    lists = [(r,) if isinstance(r, str) else tuple(r) for r in refs]
    for number, group in enumerate(lists, 1):
        if not group or not all(isinstance(r, str) for r in group):
            raise ValueError(f"Hypothesis {number} has no reference strings ({group!r}); give each hypothesis one "
                             "reference string or a list of them.")
    return lists


def _check(hyps: Sequence[str], refs: Sequence[Reference]) -> List[Tuple[str, ...]]:
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references; score parallel lists.")
    if not len(hyps):
        raise ValueError("No hypotheses to score; the evaluation split produced no outputs.")
    return as_reference_lists(refs)


def reference_streams(refs: Sequence[Reference]) -> List[List[Optional[str]]]:
    """sacreBLEU's layout: stream ``k`` holds every hypothesis' ``k``-th reference (``None`` where it has fewer)."""
    lists = as_reference_lists(refs)
    width = max((len(r) for r in lists), default=1)
    return [[r[k] if k < len(r) else None for r in lists] for k in range(width)]


def _bleu(hyps: Sequence[str], refs: Sequence[Reference], **options: object) -> Tuple[float, str]:
    from sacrebleu.metrics import BLEU

    _check(hyps, refs)
    bleu = BLEU(**options)
    score = bleu.corpus_score(list(hyps), reference_streams(refs))
    return float(score.score), str(bleu.get_signature())


def sacrebleu_corpus(hyps: Sequence[str], refs: Sequence[Reference]) -> Tuple[float, str]:
    """Corpus sacreBLEU of detokenised ``hyps`` against one or several references each, and its signature."""
    return _bleu(hyps, refs)


def tokenized_bleu_corpus(hyps: Sequence[str], refs: Sequence[Reference]) -> Tuple[float, str]:
    """Corpus BLEU on whitespace tokens exactly as given (no further tokenisation), case-sensitive, and the
    sacreBLEU signature (``tok:none``)."""
    return _bleu(hyps, refs, tokenize="none", force=True)


def tokenized_bleu(hyps: Sequence[str], refs: Sequence[Reference]) -> float:
    """:func:`tokenized_bleu_corpus` without the signature."""
    return tokenized_bleu_corpus(hyps, refs)[0]


def truncate_bytes(text: str, max_bytes: Optional[int]) -> str:
    """The first ``max_bytes`` bytes of ``text`` in UTF-8 (ROUGE-1.5.5 ``-b``: a word may be cut; a cut
    multi-byte character is dropped); ``None`` keeps the whole text."""
    if max_bytes is None:
        return text
    return text.encode("utf-8")[:max_bytes].decode("utf-8", errors="ignore")


def _package_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:  # pragma: no cover - installed with the package's requirements
        return "unknown"


def rouge_signature(nrefs: str, stemmer: bool = True, max_bytes: Optional[int] = None,
                    multiref: str = "best") -> str:
    """The description printed and logged with ROUGE scores (sacreBLEU's ``key:value|...`` style): the
    references, how several are combined, stemming, truncation, averaging and the implementation."""
    trunc = f"trunc:{f'{max_bytes}bytes' if max_bytes is not None else 'none'}"
    if multiref == "pooled":
        return "|".join([f"nrefs:{nrefs}", "multiref:pooled(rouge-1.5.5 -f A)",
                         f"stem:{'porter+wordnet' if stemmer else 'none'}", trunc, "avg:document",
                         "impl:lit_rnncells.metrics.rouge155"])
    return "|".join([f"nrefs:{nrefs}", "multiref:best-f1-per-metric", f"stem:{'porter' if stemmer else 'none'}",
                     trunc, "avg:sentence", f"rouge-score:{_package_version('rouge-score')}"])


def rouge_corpus(hyps: Sequence[str], refs: Sequence[Reference], stemmer: bool = True,
                 max_bytes: Optional[int] = None, multiref: Optional[str] = None) -> Tuple[Dict[str, float], str]:
    """Mean per-document ROUGE-1/2/L × 100 and the signature. Keys ``rouge1``, ``rouge2``, ``rougeL`` are F1;
    ``<key>_recall`` and ``<key>_precision`` recall and precision. ``max_bytes`` truncates hypotheses and
    references alike before scoring (ROUGE-1.5.5 ``-b``). ``multiref``: ``"pooled"`` (ROUGE-1.5.5 ``-f A``,
    every reference counted) or ``"best"`` (the reference with the best F1, per metric); ``None``: ``"pooled"``
    when a hypothesis has several references, ``"best"`` (``rouge-score``, as before) when each has one."""
    lists = _check(hyps, refs)
    if max_bytes is not None and max_bytes < 1:
        raise ValueError(f"max_bytes must be a positive number of bytes (75 for DUC-2004), got {max_bytes}.")
    if multiref is None:
        multiref = "pooled" if any(len(g) > 1 for g in lists) else "best"
    if multiref not in MULTIREF_MODES:
        raise ValueError(f"Unknown ROUGE multiref {multiref!r}; use 'pooled' (ROUGE-1.5.5 -f A, every reference "
                         "counted) or 'best' (the best-F1 reference).")
    counts = {len(g) for g in lists}
    nrefs = str(counts.pop()) if len(counts) == 1 else "var"
    signature = rouge_signature(nrefs, stemmer, max_bytes, multiref)
    if multiref == "pooled":
        from .rouge155 import pooled_rouge

        return pooled_rouge(hyps, lists, max_bytes=max_bytes, stem=stemmer), signature
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(list(ROUGE_KEYS), use_stemmer=stemmer)
    totals = {f"{k}{part}": 0.0 for k in ROUGE_KEYS for part in ("", "_recall", "_precision")}
    for hyp, group in zip(hyps, lists):
        scores = scorer.score_multi([truncate_bytes(r, max_bytes) for r in group], truncate_bytes(hyp, max_bytes))
        for k in ROUGE_KEYS:
            totals[k] += scores[k].fmeasure
            totals[f"{k}_recall"] += scores[k].recall
            totals[f"{k}_precision"] += scores[k].precision
    return {k: 100.0 * v / len(hyps) for k, v in totals.items()}, signature


def rouge_f1(hyps: Sequence[str], refs: Sequence[Reference], stemmer: bool = True,
             multiref: Optional[str] = None) -> Dict[str, float]:
    """Mean sentence ROUGE-1, ROUGE-2 and ROUGE-L F1 × 100 (keys ``rouge1``, ``rouge2``, ``rougeL``)."""
    scores, _ = rouge_corpus(hyps, refs, stemmer, multiref=multiref)
    return {k: scores[k] for k in ROUGE_KEYS}
