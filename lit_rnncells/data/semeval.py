"""SemEval-2014 Task 4 aspect terms (Pontiki et al. 2014): the official XML and the hub schema.

Each ``<sentence id=…>`` has a ``<text>`` and optionally ``<aspectTerms>`` with ``<aspectTerm term=
polarity= from= to=/>``. Sentences without aspect terms are read and yield no example. XML entities
(``&amp;``, ``&quot;``) are decoded by the parser; text is kept as Unicode. The term is trusted: its
``from``/``to`` offsets are checked against the text and a mismatch only warns (with the count),
because the classifier reads the term's words, not its position.

The hard subset (HDS; Xue and Li 2018, Meng et al., AAAI 2020, §ABSA) keeps only sentences with at least two aspect
terms of different polarity, one example per aspect term.
"""
from __future__ import annotations

import random
import warnings
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Sequence, Tuple

from . import hub
from .known import KNOWN
from .text import split_files

POLARITIES = ("negative", "neutral", "positive", "conflict")
HUB_ID = KNOWN["semeval14"].hub_id  # configs "restaurants" / "laptops"; splits train, test


def domains() -> List[str]:
    """The domains the dataset record (:mod:`.known`) has a file group for: ``restaurants``, ``laptops``."""
    return [group.name for group in KNOWN["semeval14"].layouts]


def local_files(domain: str) -> Dict[str, str]:
    """The XML file of each split of ``domain``, as the dataset record names them."""
    group = next(group for group in KNOWN["semeval14"].layouts if group.name == domain)
    return {split: files[0] for split, files in group.files.items()}


@dataclass(frozen=True)
class Aspect:
    term: str
    polarity: str
    start: int = -1
    end: int = -1


@dataclass(frozen=True)
class Sentence:
    id: str
    text: str
    aspects: Tuple[Aspect, ...] = field(default_factory=tuple)


def _check_polarity(polarity: str, source: str, sentence_id: str) -> str:
    if polarity not in POLARITIES:
        raise ValueError(f"Unknown polarity {polarity!r} in {source}, sentence id {sentence_id}; "
                         f"aspect polarities must be one of {list(POLARITIES)}.")
    return polarity


def _check_offsets(sentences: Sequence[Sentence], source: str) -> None:
    bad = [(s.id, a.term) for s in sentences for a in s.aspects
           if a.start >= 0 and s.text[a.start:a.end] != a.term]
    if bad:
        warnings.warn(f"{len(bad)} aspect terms in {source} do not match their from/to offsets "
                      f"(e.g. sentence {bad[0][0]}, term {bad[0][1]!r}); the term itself is used.", stacklevel=3)


def read_xml(path: Path, warn_offsets: bool = True) -> List[Sentence]:
    """Sentences of one official SemEval-2014 Task 4 XML file (aspect categories are ignored); ``warn_offsets``:
    warn about terms whose from/to offsets do not match the text (the split check reads the same files and
    passes False, so a fit warns once)."""
    if not path.is_file():
        raise FileNotFoundError(f"Missing SemEval-2014 file {str(path)!r}; expected the official XML "
                                "(<sentences><sentence><text/><aspectTerms/>…) there.")
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as err:
        line, column = err.position
        reason = str(err).rsplit(":", 1)[0]
        raise ValueError(f"Malformed XML in {path} at line {line}, column {column} ({reason}); "
                         "fix the file or download the official one again.") from None
    sentences = []
    for node in root.iter("sentence"):
        sid = node.get("id", "?")
        text_node = node.find("text")
        if text_node is None or text_node.text is None:
            raise ValueError(f"Sentence id {sid} in {path} has no <text>; every <sentence> needs one.")
        aspects = []
        for term in node.findall("aspectTerms/aspectTerm"):
            polarity = _check_polarity(term.get("polarity", ""), str(path), sid)
            aspects.append(Aspect(term.get("term", ""), polarity, int(term.get("from", -1)),
                                  int(term.get("to", -1))))
        sentences.append(Sentence(sid, text_node.text, tuple(aspects)))
    if warn_offsets:
        _check_offsets(sentences, str(path))
    return sentences


def _hub_terms(row: Mapping[str, Any]) -> List[Dict[str, Any]]:
    terms = row.get("aspectTerms") or []
    if isinstance(terms, Mapping):  # datasets.Sequence of a dict: a dict of lists
        keys = list(terms)
        return [dict(zip(keys, values)) for values in zip(*(terms[k] for k in keys))]
    return list(terms)


def read_hub(hub_id: str, domain: str) -> Dict[str, List[Sentence]]:
    """Train/test sentences from the Parquet export (:mod:`lit_rnncells.data.hub`) of a hub dataset in the
    ``alexcadillon/SemEval2014Task4`` schema (``sentenceId``, ``text``, ``aspectTerms`` a list of
    {term, polarity, from, to} with string offsets; config = domain), sentence counts checked."""
    local = hub.local_alternative("semeval14", f"the folder with {', '.join(sorted(local_files(domain).values()))}")
    ds = hub.load_splits(hub_id, ("train", "test"), local, config=domain)
    out = {}
    for split in ("train", "test"):
        sentences = []
        for row in ds[split]:
            sid = str(row.get("sentenceId", row.get("id", "?")))
            aspects = tuple(Aspect(t["term"], _check_polarity(t["polarity"], f"hub {hub_id} {split}", sid),
                                   int(t.get("from", -1)), int(t.get("to", -1))) for t in _hub_terms(row))
            sentences.append(Sentence(sid, row["text"], aspects))
        _check_offsets(sentences, f"hub {hub_id} {split}")
        out[split] = sentences
    return out


def local_paths(folder: Path, domain: str) -> Dict[str, Path]:
    """The train/test XML files of ``domain`` in ``folder``; one clear error if one is missing."""
    return split_files(folder, local_files(domain), f"SemEval-2014 {domain}", "official XML files")


def read_local(folder: Path, domain: str) -> Dict[str, List[Sentence]]:
    """Train/test sentences from a folder holding the official XML files of ``domain``."""
    return {split: read_xml(path) for split, path in local_paths(folder, domain).items()}


def split_sentences(sentences: Sequence[Sentence], val_fraction: float, seed: int
                    ) -> Tuple[List[Sentence], List[Sentence]]:
    """(train, validation): a seeded ``val_fraction`` of the sentences (by position) held out whole,
    so no sentence has aspects on both sides. Only sentences with aspect terms are drawn."""
    with_aspects = [i for i, s in enumerate(sentences) if s.aspects]
    n_val = round(len(with_aspects) * val_fraction)
    held = set(random.Random(seed).sample(with_aspects, n_val))
    return ([s for i, s in enumerate(sentences) if i not in held], [s for i, s in enumerate(sentences) if i in held])


def examples(sentences: Sequence[Sentence], *, keep_conflict: bool, hard: bool) -> List[Tuple[Sentence, Aspect]]:
    """One (sentence, aspect) example per aspect term; conflict terms dropped unless kept (first), then,
    for HDS, only sentences whose remaining terms number ≥ 2 with ≥ 2 different polarities."""
    out = []
    for s in sentences:
        aspects = [a for a in s.aspects if keep_conflict or a.polarity != "conflict"]
        if hard and (len(aspects) < 2 or len({a.polarity for a in aspects}) < 2):
            continue
        out.extend((s, a) for a in aspects)
    return out
