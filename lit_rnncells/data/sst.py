"""Stanford Sentiment Treebank (Socher et al. 2013): the official PTB-style tree files and the hub.

Each line of ``train.txt`` / ``dev.txt`` / ``test.txt`` is one fully labelled binary tree, e.g.
``(3 (2 It) (4 (2 (2 's) (2 a)) (3 charming)))``: every node is ``(label child child)`` or
``(label word)`` with labels 0-4 (very negative … very positive). Leaves are PTB tokens; the
bracket escapes ``-LRB-``/``-RRB-`` (and ``-LSB-``, ``-RSB-``, ``-LCB-``, ``-RCB-``) and the
backslash escapes ``\\/`` and ``\\*`` are undone, other tokens (``--``, ``n't``, ``...``) kept.
The hub's ``stanfordnlp/sst2`` (GLUE SST-2) holds binary labels only: its train split is already
phrases, its test labels are hidden (-1).
"""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Tuple

from . import hub
from .known import KNOWN
from .text import split_files

HUB_ID = KNOWN["sst"].hub_id
FINE_LABELS = ("very negative", "negative", "neutral", "positive", "very positive")
BINARY_LABELS = ("negative", "positive")
PTB_ESCAPES = {"-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-LCB-": "{", "-RCB-": "}"}

Phrase = Tuple[int, Tuple[str, ...]]
"""A labelled span: (label 0-4, its tokens)."""


def unescape(token: str) -> str:
    """A PTB leaf as plain text: ``-LRB-`` → ``(``, ``\\/`` → ``/``, ``\\*`` → ``*``."""
    return PTB_ESCAPES.get(token, token.replace("\\/", "/").replace("\\*", "*"))


class TreeError(ValueError):
    pass


def parse_tree(line: str) -> List[Phrase]:
    """Every labelled node of one tree as (label, tokens), the whole sentence first, then in pre-order."""
    text = line.strip()
    pos = 0
    phrases: List[Phrase] = []

    def skip() -> None:
        nonlocal pos
        while pos < len(text) and text[pos] == " ":
            pos += 1

    def node() -> Tuple[str, ...]:
        nonlocal pos
        skip()
        if pos >= len(text) or text[pos] != "(":
            raise TreeError(f"expected '(' at character {pos + 1}")
        pos += 1
        end = pos
        while end < len(text) and text[end] not in " ()":
            end += 1
        label = text[pos:end]
        if not (len(label) == 1 and label in "01234"):
            raise TreeError(f"label {label!r} at character {pos + 1} is not one of 0-4")
        pos = end
        slot = len(phrases)
        phrases.append((int(label), ()))
        skip()
        if pos < len(text) and text[pos] == "(":
            tokens: Tuple[str, ...] = ()
            while True:
                tokens += node()
                skip()
                if pos < len(text) and text[pos] == ")":
                    break
                if pos >= len(text):
                    raise TreeError("unbalanced brackets (a node is not closed)")
        else:
            end = pos
            while end < len(text) and text[end] not in " ()":
                end += 1
            if end == pos:
                raise TreeError(f"node at character {pos} has neither a word nor children")
            tokens = (unescape(text[pos:end]),)
            pos = end
            skip()
            if pos >= len(text) or text[pos] != ")":
                raise TreeError(f"expected ')' after the word {text[end - 1:end]!r} at character {pos + 1}")
        pos += 1
        phrases[slot] = (phrases[slot][0], tokens)
        return tokens

    if not text:
        raise TreeError("the line is empty")
    node()
    skip()
    if pos != len(text):
        raise TreeError(f"text after the tree ends at character {pos + 1}")
    return phrases


def read_trees(path: Path) -> List[List[Phrase]]:
    """The labelled phrases of every tree of one file; a malformed line fails naming file and line."""
    if not path.is_file():
        raise FileNotFoundError(f"Missing SST file {str(path)!r}; expected the official PTB-style trees "
                                "(one labelled binary tree per line) there.")
    trees = []
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                trees.append(parse_tree(line))
            except TreeError as err:
                raise ValueError(f"Malformed tree in {path} line {number}: {err}; each line must be one "
                                 "tree like '(3 (2 It) (4 works))'.") from None
    return trees


def local_files() -> Dict[str, str]:
    """The tree file of each split, as the dataset record (:mod:`.known`) names them, by the DataModule's split
    names (``dev.txt`` is ``validation``)."""
    return {("validation" if split == "dev" else split): files[0]
            for split, files in KNOWN["sst"].layouts[0].files.items()}


def local_paths(folder: Path) -> Dict[str, Path]:
    """The three tree files in ``folder``; one clear error if one is missing."""
    return split_files(folder, local_files(), "SST", "official tree files (trees/)")


def read_local(folder: Path) -> Dict[str, List[List[Phrase]]]:
    """Trees of the three splits from the official ``trees/`` folder."""
    return {split: read_trees(path) for split, path in local_paths(folder).items()}


def read_hub(hub_id: str) -> Dict[str, List[Tuple[int, str]]]:
    """(label 0/1, sentence) of the hub's train and validation splits (GLUE SST-2 schema), read from its
    Parquet export (:mod:`lit_rnncells.data.hub`), row counts checked."""
    ds = hub.load_splits(hub_id, ("train", "validation"), hub.local_alternative(
        "sst", f"the folder with {', '.join(sorted(local_files().values()))}"))
    out = {}
    for split in ("train", "validation"):
        out[split] = [(int(r["label"]), r["sentence"]) for r in ds[split]]
    return out


def binary_label(label: int) -> int:
    """0, 1 → 0 (negative); 3, 4 → 1 (positive); 2 (neutral) → -1 (dropped)."""
    return 0 if label < 2 else 1 if label > 2 else -1
