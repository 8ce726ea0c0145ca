"""Where a translation dataset's pairs come from: its record (:mod:`lit_rnncells.data.known`), local files or
the hub's Parquet export, read line by line with the policies of :mod:`lit_rnncells.data.translation` (aligned
files, no empty evaluation lines, Gigaword's one unknown word)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ..utils.paths import check_no_blank_lines, read_text_file, split_lines
from . import hub
from .known import KNOWN, Dataset
from .split_check import PARALLEL_FILES
from .text import file_fingerprint, is_hub_id, local_or_hub

HUB_SPLITS = {"train": "train", "valid": "validation", "test": "test"}
MOSES_LANGUAGE = {"article": "en", "title": "en"}
GIGAWORD_UNK = "UNK"  # the one unknown-word form: the release's test files and the hub's every split use it
IWSLT14_MISSING = ("iwslt14 is fairseq's IWSLT14 De-En ({{train,valid,test}}.{{de,en}}, Moses-tokenised and "
                   "lowercased), which no hub repo holds, and {where}; build it with `python -m lit_rnncells.data "
                   "prepare iwslt14` or fairseq's examples/translation/prepare-iwslt14.sh and set "
                   "data.init_args.data_dir (or LIT_RNNCELLS_DATA, which holds iwslt14/) to that folder "
                   "(the hub's IWSLT 2017 is dataset: iwslt17).")

Lines = List[str]
# The records' file patterns and hub ids as the tables this module had before them (for old imports only).
LOCAL_FILES = {**{n: r.files for n, r in KNOWN.items() if r.languages}, "parallel": PARALLEL_FILES}
HUB_IDS = {n: r.hub_id for n, r in KNOWN.items() if r.languages and r.hub_id}


def record(dataset: str) -> Optional[Dataset]:
    """The record of a named translation dataset (:mod:`lit_rnncells.data.known`); ``None`` for ``parallel``."""
    found = KNOWN.get(dataset)
    return found if found is not None and found.languages else None


def _files(dataset: str) -> Dict[str, str]:
    found = record(dataset)
    return PARALLEL_FILES if found is None else found.files


def _local_only(dataset: str) -> bool:
    """A named dataset no hub repo holds (iwslt14): a missing local copy is one error naming how to build it."""
    found = record(dataset)
    return found is not None and found.hub_id is None and found.test_only_for is None


def missing_local(dataset: str, where: str) -> str:
    """The error for a local-only dataset whose files are not there."""
    if dataset == "iwslt14":
        return IWSLT14_MISSING.format(where=where)
    names = sorted(p.format(lang) for p in _files(dataset).values() for lang in record(dataset).languages)
    return (f"{dataset} is read from local files only ({', '.join(names)}), and {where}; run `python -m "
            f"lit_rnncells.data prepare {dataset}` and set data.init_args.data_dir (or LIT_RNNCELLS_DATA, which "
            f"holds {dataset}/) to that folder.")


def default_data_dir(dataset: str) -> Optional[str]:
    """``$LIT_RNNCELLS_DATA/<dataset>`` when ``LIT_RNNCELLS_DATA`` is set, else the hub id (``None`` for
    ``parallel`` and the local-only ``iwslt14``)."""
    found = record(dataset)
    return local_or_hub(None if found is None else dataset, None if found is None else found.hub_id)


def canonical_unk(dataset: str, lines: Lines) -> Lines:
    """Gigaword's unknown word in its one form, ``UNK`` (the release's ``<unk>`` rewritten, as the hub does)."""
    if dataset != "gigaword":
        return lines
    return [line.replace("<unk>", GIGAWORD_UNK) for line in lines]


def read_lines(path: Path) -> Lines:
    """The lines of a UTF-8 text file (``split_lines``: split at newlines only; a final newline does not make an
    extra empty line)."""
    return split_lines(read_text_file(path, "The file"))


def check_parallel(source: Lines, target: Lines, source_name: str, target_name: str) -> None:
    if len(source) != len(target):
        raise ValueError(f"Parallel files differ in length: {source_name} has {len(source):,} lines and "
                         f"{target_name} has {len(target):,}; give line-aligned files (one pair per line).")


def hub_alternative(dataset: str) -> str:
    """The end of a hub error: where a local copy goes instead."""
    names = sorted(p.format(lang) for p in _files(dataset).values() for lang in record(dataset).languages)
    return hub.local_alternative(dataset, f"the folder with {', '.join(names)}")


def read_hub_split(dataset: str, hub_id: str, split: str, source_language: str, target_language: str,
                   loaded: Dict[str, Any]) -> Tuple[Lines, Lines]:
    """One split's source and target lines from the hub's Parquet export (:mod:`lit_rnncells.data.hub`), in
    the shape the local reader returns."""
    found = record(dataset)
    if "ds" not in loaded:
        ours = found.hub_id == hub.split_hub_id(hub_id)[0]  # the record's figures hold for its own repo only
        loaded["ds"] = hub.load_splits(hub_id, tuple(HUB_SPLITS.values()), hub_alternative(dataset),
                                       config=found.hub_config if ours else None,
                                       rows=found.hub_rows if ours else None)
    part = loaded["ds"][HUB_SPLITS[split]]
    if "translation" in part.column_names:  # IWSLT: {"de": ..., "en": ...} per row
        pairs = part["translation"]
        return [p[source_language] for p in pairs], [p[target_language] for p in pairs]
    columns = found.hub_columns
    return (list(part[columns.get(source_language, source_language)]),
            list(part[columns.get(target_language, target_language)]))


def test_only_for(dataset: str) -> Optional[str]:
    """The dataset whose models a test-only set (DUC-2004) is for; ``None`` for others."""
    found = record(dataset)
    return None if found is None else found.test_only_for


def default_pretokenized(dataset: str) -> bool:
    """Whether the dataset's files are already tokenised (IWSLT14, Gigaword): the DataModule's default."""
    found = record(dataset)
    return found is not None and found.pretokenized


def direction(dataset: str, source: Optional[str], target: Optional[str]) -> Tuple[str, str]:
    """The (source, target) languages of ``dataset``: the record's default direction, or one it allows."""
    if dataset == "parallel":
        if not source or not target or source == target:
            raise ValueError("dataset 'parallel' needs two different file suffixes as source_language and "
                             f"target_language, got {source!r} and {target!r}.")
        return source, target
    found = record(dataset)
    default = found.direction
    source, target = source or default[0], target or (default[1] if source in (None, default[0]) else default[0])
    known = found.languages
    allowed = [default] if found.one_way else [(a, b) for a in known for b in known if a != b]
    if (source, target) not in allowed:
        raise ValueError(f"Unknown direction {source}->{target} for {dataset}; choose source_language/"
                         f"target_language among {[f'{a}->{b}' for a, b in allowed]}.")
    return source, target


def several_references(paths: List[Path], limit: Optional[int]) -> List[Tuple[str, ...]]:
    """Every reference of every example from one file per reference (DUC-2004's ``task1_ref<k>.txt``), the first
    ``limit`` examples; an empty line is an error, as in any evaluation file."""
    streams = []
    for path in paths:
        lines = read_lines(path)
        check_no_blank_lines(lines, str(path))
        streams.append(lines[:limit] if limit is not None else lines)
    return list(zip(*streams))


def split_source(dm: Any, split: str) -> Tuple[Dict[str, Any], Any]:
    """The cache key part describing a split's inputs for the TranslationDataModule ``dm``, and a loader of its
    (source, target, names): DUC-2004's files, explicit ``files``, the hub, or the record's file names."""
    if test_only_for(dm.dataset):
        if split != "test":
            raise ValueError(f"{dm.dataset} has only a test split; validate on "
                             f"{test_only_for(dm.dataset)} and use {dm.dataset} with test --ckpt_path.")
        source, references = dm._duc2004_source()
        paths = [source, references[0]]

        def load_duc() -> Tuple[Lines, Lines, str, str]:
            return read_lines(paths[0]), read_lines(paths[1]), str(paths[0]), str(paths[1])

        return {"files": [file_fingerprint(p) for p in [source, *references]]}, load_duc
    if split in dm.files:
        paths = [Path(p).expanduser() for p in dm.files[split]]
    elif dm.data_dir is not None and is_hub_id(dm.data_dir):
        hub_id = dm.data_dir

        def load_hub() -> Tuple[Lines, Lines, str, str]:
            src, tgt = read_hub_split(dm.dataset, hub_id, split, dm.source_language,
                                      dm.target_language, dm._hub)
            return src, tgt, f"{hub_id} {split} {dm.source_language}", f"{hub_id} {split} {dm.target_language}"

        return {"hub": hub_id, "split": split}, load_hub
    else:
        if dm.data_dir is None:
            raise ValueError(f"No {split} files: set data_dir or files for dataset {dm.dataset!r}.")
        folder = Path(dm.data_dir).expanduser()
        if not folder.is_dir() and _local_only(dm.dataset):
            raise FileNotFoundError(missing_local(dm.dataset, f"{str(folder)!r} does not exist"))
        if not folder.is_dir():
            raise FileNotFoundError(f"Corpus folder {str(folder)!r} does not exist{hub.owner_hint(str(folder))}; "
                                    "set data.init_args.data_dir "
                                    f"to the folder holding the {dm.dataset} files, or a hub id.")
        pattern = _files(dm.dataset)[split]
        paths = [folder / pattern.format(lang) for lang in (dm.source_language, dm.target_language)]
    for path in paths:
        if not path.is_file() and _local_only(dm.dataset) and split not in dm.files:
            raise FileNotFoundError(missing_local(dm.dataset, f"{str(path)!r} is missing"))
        if not path.is_file():
            raise FileNotFoundError(f"Missing corpus file {str(path)!r} for the {split} split of {dm.dataset}; "
                                    "check data_dir / files and source_language / target_language.")

    def load_local() -> Tuple[Lines, Lines, str, str]:
        return read_lines(paths[0]), read_lines(paths[1]), str(paths[0]), str(paths[1])

    return {"files": [file_fingerprint(p) for p in paths]}, load_local
