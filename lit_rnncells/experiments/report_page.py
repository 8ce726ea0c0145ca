"""Writing a reproduction report without losing what a person wrote in it.

The generated parts of a page sit between markers, one block per part (the header, each experiment, the notes)::

    <!-- generated: ptb_char -->
    ## PTB character LM, test BPC (Table 1)
    ...
    <!-- end generated -->

:func:`merge` replaces the content of the blocks it is given and keeps everything outside them byte for byte.
A page without markers (written before they existed) first gets them around the lines the generator writes
(:func:`mark_unmarked`): the page's title paragraph, and under each ``## `` heading a generated part has, that
heading and the lines after it shaped as the generator writes them (its fixed bullets, tables, verdicts and
figures), up to the first other line. Every other line stays outside the markers, so is kept.
"""
from __future__ import annotations

import re
from typing import Dict, List, Optional, Sequence, Tuple

END = "<!-- end generated -->"
_START = re.compile(r"^<!-- generated: (\S+) -->$")
_GENERATED_LINE = re.compile(
    r"^(\s*$|\|.*\|$|- Config `|- Paper setting: |- Our setting: |Paper: .*The paper's (ordering|claim) |"
    r"The paper gives no numbers |Validation .* over the last quarter of the budget |!\[[^\]]*\]\([^)]*\)$|"
    r"Not run yet: |Reached.*: |- [^ ]+ [^ ]+: best first )")
"""The shapes of the lines :func:`..reproduce.experiment_markdown` writes below a section's heading."""

Part = Tuple[str, Optional[str]]
"""A generated part: its key and its text, or ``None`` to keep the block the page already has."""


def start(key: str) -> str:
    """The line that opens the generated block ``key``."""
    return f"<!-- generated: {key} -->\n"


def wrap(key: str, text: str) -> str:
    """``text`` as the generated block ``key`` (markers on lines of their own)."""
    return start(key) + text.rstrip("\n") + "\n" + END + "\n"


def demote(text: str) -> str:
    """``text`` with each markdown heading one level lower (``# `` → ``## ``), to sit inside another page."""
    return re.sub(r"(?m)^(#+) ", r"#\1 ", text)


def _spans(text: str) -> List[Tuple[str, int, int]]:
    """``(key, start, end)`` character spans of each block, markers included (``end`` after the end line)."""
    spans, key, begin, pos = [], None, 0, 0
    for line in text.splitlines(keepends=True):
        bare = line.rstrip("\r\n")
        found = _START.match(bare)
        if found and key is None:
            key, begin = found.group(1), pos
        elif bare == END and key is not None:
            spans.append((key, begin, pos + len(line)))
            key = None
        pos += len(line)
    return spans


def blocks(text: str) -> Dict[str, str]:
    """The content of each generated block of ``text``, by key (markers left out)."""
    out = {}
    for key, begin, end in _spans(text):
        inner = text[begin:end].splitlines(keepends=True)[1:-1]
        out[key] = "".join(inner)
    return out


def mark_unmarked(text: str, headings: Dict[str, str], fixed: Optional[Dict[str, str]] = None) -> str:
    """``text`` (a page without markers) with markers around its generated lines: ``headings`` maps each part's
    key to the first line of its text (a ``# `` title: the page's title paragraph); a part in ``fixed`` (a text
    that does not change, such as a note) is marked where the page holds that text whole. Lines not recognised as
    generated stay outside the blocks; a part whose heading is not on the page gets no block (:func:`merge` adds
    it)."""
    lines = text.splitlines(keepends=True)
    marks: List[Tuple[int, int, str]] = []
    for key, heading in headings.items():
        at = next((i for i, ln in enumerate(lines) if heading and ln.rstrip("\n") == heading), None)
        if at is None:
            continue
        stop = at + 1
        whole = (fixed or {}).get(key, "").rstrip("\n").splitlines(keepends=True)
        if whole and [ln.rstrip("\n") for ln in lines[at:at + len(whole)]] == [w.rstrip("\n") for w in whole]:
            stop = at + len(whole)
        elif heading.startswith("# "):  # the title and its paragraph, to the first section
            while stop < len(lines) and not lines[stop].startswith("#"):
                stop += 1
        else:
            while stop < len(lines) and _GENERATED_LINE.match(lines[stop]) and not lines[stop].startswith("#"):
                stop += 1
        while stop > at + 1 and not lines[stop - 1].strip():
            stop -= 1  # trailing blank lines stay outside
        marks.append((at, stop, key))
    for at, stop, key in sorted(marks, reverse=True):
        lines[at:stop] = [wrap(key, "".join(lines[at:stop]))]
    return "".join(lines)


def current_blocks(existing: Optional[str], headings: Dict[str, str],
                   fixed: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The generated blocks of a page by key, those of a page without markers as :func:`mark_unmarked` finds them."""
    if not existing:
        return {}
    return blocks(existing if _spans(existing) else mark_unmarked(existing, headings, fixed))


def merge(existing: Optional[str], parts: Sequence[Part], headings: Optional[Dict[str, str]] = None) -> str:
    """The page with each part's block set to its text (``None``: the block as it is), every text outside the
    blocks kept byte for byte. A page without markers is marked first (:func:`mark_unmarked`; ``headings``
    default: each part's first line). A part the page has no block for goes after the block of the nearest part before
    it, else before that of the nearest part after it, else at the end."""
    if not existing:
        return "\n".join(wrap(key, text) for key, text in parts if text is not None)
    if not _spans(existing):
        existing = mark_unmarked(existing, headings or {k: t.splitlines()[0] for k, t in parts if t},
                                 {k: t for k, t in parts if t})
    page = existing
    for index, (key, text) in enumerate(parts):
        spans = {k: (b, e) for k, b, e in _spans(page)}
        if key in spans:
            if text is not None:
                begin, end = spans[key]
                page = page[:begin] + wrap(key, text) + page[end:]
            continue
        if text is None:
            continue
        before = [spans[k] for k, _ in parts[:index] if k in spans]
        after = [spans[k] for k, _ in parts[index + 1:] if k in spans]
        if before:
            at = before[-1][1]
            page = page[:at] + "\n" + wrap(key, text) + page[at:]
        elif after:
            at = after[0][0]
            page = page[:at] + wrap(key, text) + "\n" + page[at:]
        else:
            page = page.rstrip("\n") + "\n\n" + wrap(key, text)
    return page
