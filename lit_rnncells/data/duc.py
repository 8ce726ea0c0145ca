"""DUC-2004 task 1 (very short single-document summaries), the second test set of Gigaword headline models.

Rush, Chopra & Weston 2015 ("A Neural Attention Model for Abstractive Sentence Summarization", EMNLP) test
their Gigaword-trained models on DUC-2004 task 1: 500 news documents, each with 4 human summaries, scored
with ROUGE recall on the first 75 bytes (ROUGE-1.5.5 ``-b 75``). The documents and summaries come from NIST
(https://duc.nist.gov/, on request, after signing its data agreement); what code built on that paper reads is
the preprocessed layout of ``sumdata/DUC2004/``, which this module reads:

* ``input.txt``: one document per line, the model's input, preprocessed like the Gigaword articles;
* ``task1_ref0.txt`` ... ``task1_ref3.txt``: reference ``k`` of every document, line-aligned with it.

Every reference file ``task1_ref<k>.txt`` is used; they are numbered from 0 without gaps (a gap is an error
naming the missing file, never a silently shorter set), and each has one line per line of ``input.txt``.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import List, Tuple

INPUT_FILE = "input.txt"
REFERENCE_FILE = "task1_ref{}.txt"
REFERENCE_PATTERN = re.compile(r"task1_ref(\d+)\.txt")
SOURCE = ("DUC-2004 comes from NIST on request (https://duc.nist.gov/data.html, past-data agreement); put its "
          "task 1 in the common sumdata/DUC2004 layout (input.txt, task1_ref0.txt ... task1_ref3.txt, one document "
          "per line) and set data.init_args.data_dir to that folder (or $LIT_RNNCELLS_DATA/duc2004)")


def duc2004_files(folder: Path) -> Tuple[Path, List[Path]]:
    """The input file and the reference files of a DUC-2004 folder; one clear error if they are missing."""
    if not folder.is_dir():
        raise FileNotFoundError(f"DUC-2004 folder {str(folder)!r} does not exist; {SOURCE}.")
    source = folder / INPUT_FILE
    missing = [p.name for p in (source, folder / REFERENCE_FILE.format(0)) if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"DUC-2004 folder {str(folder)!r} has no {' or '.join(missing)}; {SOURCE}.")
    references = _numbered_references(folder)
    lengths = {path.name: _count_lines(path) for path in [source, *references]}
    if len(set(lengths.values())) != 1:
        listed = ", ".join(f"{name} {count:,} lines" for name, count in lengths.items())
        raise ValueError(f"The DUC-2004 files in {str(folder)!r} differ in length ({listed}); every file needs one "
                         "line per document, in the same order.")
    return source, references


def _numbered_references(folder: Path) -> List[Path]:
    """``task1_ref0.txt`` ... ``task1_ref<n>.txt``; one clear error naming a file missing from that sequence."""
    numbers = sorted(int(m.group(1)) for p in folder.iterdir()
                     if p.is_file() and (m := REFERENCE_PATTERN.fullmatch(p.name)))
    gaps = [REFERENCE_FILE.format(k) for k in range(numbers[-1] + 1) if k not in numbers]
    if gaps:
        found = ", ".join(REFERENCE_FILE.format(k) for k in numbers)
        raise FileNotFoundError(f"DUC-2004 folder {str(folder)!r} has no {', '.join(gaps)} but has {found}; the "
                                "references are numbered from 0 without gaps and every one is scored: put the "
                                "missing file back (or renumber the others).")
    return [folder / REFERENCE_FILE.format(k) for k in numbers]


def _count_lines(path: Path) -> int:
    """Lines of a text file as the readers count them (a final newline adds no line)."""
    data = path.read_bytes()
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
