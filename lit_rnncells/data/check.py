"""Checking a dataset folder: files present, counts per split, UTF-8, and overlap between splits.

Two users of the same code:

* ``python -m lit_rnncells.data check NAME [--dest FOLDER]`` (:func:`check_folder`) reports every fault
  with its fix and exits 1 if there is one;
* every DataModule's ``setup("fit")`` calls :meth:`SplitCheckMixin.check_splits`, which runs the count
  and overlap checks on the files it trains from and warns; a train split that contains every example
  of the dev split (e.g. an SST ``train.txt`` that is train + dev, 9,645 lines) is an error, since the
  model would be validated on its own training data.

Overlap compares whole examples: a line (language-model corpora, SST trees), an aligned pair
(translation, summarisation), a sentence's text (SemEval), a review (IMDB). Official releases repeat a
few short examples across splits (PTB: 85 of the 3,370 valid lines occur in train); the figure measured
on each release is in :mod:`.known`, and only more than that is reported. Where no figure was measured,
and for files of your own (``text``, ``parallel``, whose counts are not compared), more than 1% of a
split is reported.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from lightning.pytorch.utilities import rank_zero_warn

from . import imdb, semeval
from .known import Layout, dataset
from .text import cached, default_cache_dir, file_fingerprint

PAIRS = (("train", "dev"), ("train", "test"), ("dev", "test"))
UNIT = {"lines": "lines", "pairs": "pairs", "semeval": "aspect terms", "sst": "trees", "imdb": "reviews",
        "bytes": "bytes"}
KEY_UNIT = {"semeval": "sentences"}
CHECK_VERSION = 1


@dataclass
class Fault:
    """One thing wrong with a folder: ``kind`` is missing, encoding, format, count, overlap or contains_dev."""
    kind: str
    problem: str
    fix: str

    def __str__(self) -> str:
        return f"{self.problem}; {self.fix}"


@dataclass
class Bound:
    """A layout bound to real files: which dataset (``name``, ``None`` for your own files), its file
    group, and the paths of each split."""
    name: Optional[str]
    layout: Layout
    paths: Dict[str, List[Path]]

    @property
    def title(self) -> str:
        return self.name or "your corpus"

    def fix(self) -> str:
        if self.name is None:
            return "fix the files"  # only for missing / unreadable files of your own
        return f"run `python -m lit_rnncells.data prepare {self.name}` to get the official release"


def bind(name: Optional[str], layout: Layout, folder: Path) -> Bound:
    """The layout's file names under ``folder``."""
    return Bound(name, layout, {split: [folder / f for f in files] for split, files in layout.files.items()})


# --- reading examples -------------------------------------------------------------------------------
class EncodingFault(Exception):
    pass


def _iter_lines(path: Path) -> Iterator[str]:
    """The lines of a UTF-8 file, streamed (line ends and a final ``\r`` removed); a byte that is not UTF-8
    raises :class:`EncodingFault` naming its offset and line."""
    offset = 0
    with path.open("rb") as f:
        for number, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise EncodingFault(f"{path} is not UTF-8 (byte 0x{raw[err.start]:02x} at offset "
                                    f"{offset + err.start:,}, line {number})") from None
            offset += len(raw)
            yield line.rstrip("\n").rstrip("\r")


def _key(text: str) -> bytes:
    """A compact stand-in for an example (8-byte BLAKE2b): Gigaword's 3.8M pairs fit in memory."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()


def read_examples(kind: str, paths: Mapping[str, Sequence[Path]]) -> Tuple[Dict[str, int], Dict[str, List[bytes]]]:
    """(count, example keys) of every split. Raises :class:`EncodingFault` for a file that is not UTF-8
    and ``ValueError`` for aligned files of different lengths."""
    counts: Dict[str, int] = {}
    keys: Dict[str, List[bytes]] = {}
    if kind == "imdb":
        archive = Path(next(iter(paths.values()))[0])
        try:
            reviews = imdb.read_local(archive)
        except UnicodeDecodeError as err:
            raise EncodingFault(f"a review in {archive} is not UTF-8 ({err.reason})") from None
        return ({s: len(r) for s, r in reviews.items()}, {s: [_key(t) for _, t in r] for s, r in reviews.items()})
    for split, files in paths.items():
        if kind == "bytes":
            counts[split] = files[0].stat().st_size
            continue
        if kind == "pairs":
            n, keys[split] = 0, []
            for source, target in zip_longest(_iter_lines(files[0]), _iter_lines(files[1])):
                if source is None or target is None:
                    lengths = [sum(1 for _ in _iter_lines(f)) for f in files]
                    raise ValueError(f"{files[0]} has {lengths[0]:,} lines and {files[1]} {lengths[1]:,}")
                n += 1
                if source.strip() or target.strip():
                    keys[split].append(_key(f"{source.strip()}\t{target.strip()}"))
            counts[split] = n
        elif kind == "semeval":
            for _ in _iter_lines(files[0]):  # encoding first: the XML parser's error would not name it
                pass
            sentences = semeval.read_xml(files[0], warn_offsets=False)  # the DataModule's own read warns once
            counts[split] = sum(len(s.aspects) for s in sentences)
            keys[split] = [_key(s.text.strip()) for s in sentences]
        else:  # lines, sst: one example per non-blank line
            keys[split] = [_key(line.strip()) for line in _iter_lines(files[0]) if line.strip()]
            counts[split] = len(keys[split])
    return counts, keys


def overlaps(keys: Mapping[str, Sequence[bytes]]) -> Dict[str, Tuple[int, int]]:
    """For each split pair ``a|b``: (examples of ``b`` that occur in ``a``, examples of ``b``)."""
    out = {}
    for a, b in PAIRS:
        if a in keys and b in keys:
            seen = set(keys[a])
            out[f"{a}|{b}"] = (sum(1 for k in keys[b] if k in seen), len(keys[b]))
    return out


def measure(bound: Bound) -> Dict[str, Any]:
    """Counts and overlaps of a bound layout's files (no fault judgement)."""
    counts, keys = read_examples(bound.layout.kind, bound.paths)
    return {"counts": counts, "overlap": {k: list(v) for k, v in overlaps(keys).items()}}


# --- judging -------------------------------------------------------------------------------------------
def judge(bound: Bound, measured: Mapping[str, Any]) -> List[Fault]:
    """Count, overlap and train-contains-dev faults of measured figures against the known ones."""
    layout, faults = bound.layout, []
    unit = UNIT[layout.kind]
    for split, expected in layout.counts.items():
        got = measured["counts"].get(split)
        if got is not None and got != expected:
            faults.append(Fault("count", f"{bound.title} {layout.name} {split} has {got:,} {unit}, the official "
                                         f"release {expected:,}",
                                f"{bound.fix()} (a subset or an altered copy is not comparable with published "
                                "results)"))
    key_unit = KEY_UNIT.get(layout.kind, unit)
    for pair, (shared, total) in measured["overlap"].items():
        a, b = pair.split("|")
        if pair == "train|dev" and total and shared == total:
            faults.append(Fault("contains_dev", f"the train split of {bound.title} ({_names(bound, a)}) contains "
                                                f"all {total:,} {key_unit} of the dev split ({_names(bound, b)}), so "
                                                "validation would score training data (an SST train.txt of 9,645 "
                                                "lines is train + dev)",
                                f"use the official train file without the dev examples ({bound.fix()})"
                                if bound.name else "remove the dev examples from the train files"))
            continue
        known = layout.overlap.get((a, b), 0) if bound.name is not None else None
        if shared > (known if known is not None else total // 100):
            where = (f"the official release has {known:,}" if known is not None else "more than 1% of the split"
                     + (", the release's own figure is not measured" if bound.name is not None else ""))
            faults.append(Fault("overlap", f"{shared:,} of the {total:,} {key_unit} of {bound.title} {layout.name} "
                                           f"{b} also occur in {a} ({where})",
                                f"remove them from {a} ({_names(bound, a)})"
                                + (f", or {bound.fix()}" if bound.name else "")))
    return faults


def _names(bound: Bound, split: str) -> str:
    return ", ".join(p.name for p in bound.paths.get(split, []))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass
class Report:
    """What ``check`` found: faults (exit 1), notes (informative), and the counts of each file group."""
    faults: List[Fault]
    notes: List[str]
    ok: List[str]


def check_bound(bound: Bound) -> Report:
    """Every check of one file group: files present, UTF-8, counts, overlap, and checksums (notes)."""
    layout, report = bound.layout, Report([], [], [])
    files = sorted({p for paths in bound.paths.values() for p in paths})
    missing = [p for p in files if not p.is_file()]
    if layout.optional and len(missing) == len(files):
        report.notes.append(f"{bound.title} {layout.name}: not present (optional)")
        return report
    for path in missing:
        report.faults.append(Fault("missing", f"missing file {path}", bound.fix()))
    if missing:
        return report
    try:
        measured = measure(bound)
    except EncodingFault as err:
        report.faults.append(Fault("encoding", str(err), f"{bound.fix()}, or convert the file to UTF-8 "
                                                         "(e.g. iconv -f latin1 -t utf-8)"))
        return report
    except ValueError as err:
        report.faults.append(Fault("format", str(err), bound.fix()))
        return report
    report.faults.extend(judge(bound, measured))
    if not any(f.kind == "count" for f in report.faults):
        for name, expected in layout.sha256.items():
            path = next((p for p in files if p.name == name), None)
            if path is not None and _sha256(path) != expected:
                report.notes.append(f"{path.name} differs from the release's bytes (sha256 {expected[:12]}…) "
                                    "although its counts match")
    if layout.kind == "bytes" and bound.name == "text8":
        other = set(files[0].read_bytes().translate(None, b"abcdefghijklmnopqrstuvwxyz "))
        if other:
            shown = "".join(sorted(chr(c) for c in other))[:20]
            report.faults.append(Fault("format", f"{files[0]} holds characters other than a-z and space "
                                                 f"({shown!r})", bound.fix()))
    counts = ", ".join(f"{s} {n:,}" for s, n in measured["counts"].items())
    report.ok.append(f"{bound.title} {layout.name}: {counts} {UNIT[layout.kind]}")
    return report


def check_folder(name: str, folder: Path) -> Report:
    """``check NAME``: every file group of a known dataset in ``folder``."""
    known = dataset(name)
    report = Report([], [], [])
    if not folder.is_dir():
        what = "is a file, not a folder" if folder.exists() else "does not exist"
        report.faults.append(Fault("missing", f"the folder {folder} {what}",
                                   f"run `python -m lit_rnncells.data prepare {name}`, or pass --dest"))
        return report
    bounds = [bind(name, layout, folder) for layout in known.layouts]
    absent = [not any(p.is_file() for paths in b.paths.values() for p in paths) for b in bounds]
    held = [b.layout.name for b, gone in zip(bounds, absent) if not gone]
    for bound, gone in zip(bounds, absent):
        if gone and held and not bound.layout.optional:
            # Each file group is read on its own (e.g. SemEval's Laptops without the Restaurants): one the folder
            # does not hold at all is no fault when another is there; only a group with some files missing is.
            files = sorted({p.name for paths in bound.paths.values() for p in paths})
            report.notes.append(f"{bound.title} {bound.layout.name}: not present (this folder holds "
                                f"{', '.join(held)}); to use {bound.layout.name} too, add {', '.join(files)}")
            continue
        part = check_bound(bound)
        report.faults.extend(part.faults)
        report.notes.extend(part.notes)
        report.ok.extend(part.ok)
    return report


# --- the fit-time hook ----------------------------------------------------------------------------------
class SplitCheckMixin:
    """Mixed into every file-backed DataModule: ``setup`` calls :meth:`check_splits`.

    It asks the DataModule which files it reads (:meth:`split_files`, which each DataModule overrides with
    the helpers of :mod:`lit_rnncells.data.split_check`), measures counts and overlaps (cached by the files'
    path, size and mtime), warns about each fault, and raises one ``ValueError`` if the train split contains
    the whole dev split. Hub data is not checked (no local files)."""

    _splits_checked = False

    def split_files(self) -> Optional[Bound]:
        """The files this DataModule reads, bound to its dataset's layout; ``None``: nothing to check."""
        return None

    def check_splits(self, stage: Optional[str]) -> None:
        if stage != "fit" or self._splits_checked:
            return
        bound = self.split_files()
        self._splits_checked = True
        if bound is None:
            return
        files = sorted({p for paths in bound.paths.values() for p in paths})
        if not all(p.exists() for p in files):
            return  # the DataModule's own reader names a missing file
        cache = getattr(self, "cache", default_cache_dir())
        key = {"name": "split-check", "version": CHECK_VERSION, "kind": bound.layout.kind,
               "splits": {s: [str(p) for p in ps] for s, ps in bound.paths.items()},
               "files": [file_fingerprint(p) for p in files]}
        try:
            measured = cached(cache, key, lambda: measure(bound))
        except (EncodingFault, ValueError):
            return  # the DataModule's reader reports these
        faults = judge(bound, measured)
        more = f"; `python -m lit_rnncells.data check {bound.name}` checks the whole folder" if bound.name else ""
        for fault in faults:
            if fault.kind != "contains_dev":
                rank_zero_warn(f"{fault}{more}.")
        for fault in faults:
            if fault.kind == "contains_dev":
                raise ValueError(str(fault) + ".")
