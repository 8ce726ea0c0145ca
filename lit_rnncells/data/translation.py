"""Parallel corpora for sequence-to-sequence tasks (translation, headline generation) as subword batches.

Datasets (``dataset``), each from a local folder in its official format or from the hub:

* ``multi30k`` (Elliott et al. 2016, task 1; the CARU paper's translation task): raw text,
  ``{train,val,test_2016_flickr}.{en,de}``; hub ``bentrevett/multi30k`` (columns ``en``, ``de``).
* ``iwslt14`` (De-En TED talks, fairseq's ``prepare-iwslt14.sh`` before BPE; MC-RNN Table 2):
  Moses-tokenised lowercased ``{train,valid,test}.{de,en}``, 160,239 / 7,283 / 6,750 pairs. Local only:
  no hub repo holds this corpus (a missing copy is one error naming how to build it).
* ``iwslt17`` (IWSLT 2017 De-En, raw cased text): hub ``IWSLT/iwslt2017`` config ``iwslt2017-de-en``
  (column ``translation``), 206,112 / 888 / 8,079 pairs, or a local ``{train,valid,test}.{de,en}`` of it.
* ``gigaword`` (Rush et al. 2015 headline generation, harvardnlp release; MC-RNN Table 3):
  ``{train,test}.{article,title}.txt`` and ``valid.{article,title}.filter.txt``; hub ``Harvard/gigaword``
  (``document`` → article, ``summary`` → title). The unknown word is ``UNK`` on both paths (the release
  writes ``<unk>`` in train and valid, ``UNK`` in test; the hub's script rewrites train and valid to
  ``UNK``); ``valid_size`` keeps the first pairs of its 189,651-pair validation split.
* ``duc2004`` (DUC-2004 task 1, :mod:`lit_rnncells.data.duc`): a test set only, for a Gigaword-trained
  checkpoint (``test --ckpt_path``): ``input.txt`` and ``task1_ref0.txt`` ... ``task1_ref3.txt``, 4 references
  per document, all of them scored; ROUGE reads the first 75 bytes unless the model says otherwise.
* ``parallel``: your own aligned files, ``{train,valid,test}.{src}`` / ``.{tgt}`` under ``data_dir``
  or explicit ``files: {split: [source_path, target_path]}``.

Processing, the same for hub and local inputs: lines are read (``\\n`` separated, ``\\r`` stripped), a
BPE :class:`~lit_rnncells.data.subword.SubwordTokenizer` is fitted on the training lines only (one joint
tokenizer for both sides, or one per side), every split is encoded and the result cached on disk keyed
by the inputs and options. Batches are length-bucketed (:class:`~lit_rnncells.data.batching.BucketedBatches`):
``source`` = x <eos>, ``target`` = <bos> y <eos>, right-padded with ``pad_id`` 0.

Policies:

* empty lines: a training pair with an empty side is dropped and counted; an empty line in a
  validation / test file or in the predict input is an error naming the file and line;
* length: training pairs longer than ``max_source_length`` / ``max_target_length`` subwords (without
  the added <bos>/<eos>) are dropped and counted; at validate / test / predict time a source longer than
  ``max_input_length`` is an error naming the line (nothing is silently truncated);
* parallel files with different line counts: an error naming both files and their counts.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Dict, List, Literal, Optional, Sequence, Tuple

import torch
from lightning.pytorch import LightningDataModule
from lightning.pytorch.utilities import rank_zero_info
from torch import Tensor
from torch.utils.data import DataLoader

from ..cells.base import check_positive
from . import hub
from ..paths import check_no_blank_lines, read_stdin, read_text_file
from .check import SplitCheckMixin
from . import duc
from .batching import BucketedBatches, ResumableBatchesMixin, batch_loader, pad_batch
from .checkpoint_state import datamodule_state
from .subword import BOS_ID, EOS_ID, PAD_ID, SubwordTokenizer, check_tokenizer
from .text import cached, default_cache_dir, file_fingerprint, is_hub_id, local_or_hub

DatasetName = Literal["multi30k", "iwslt14", "iwslt17", "gigaword", "duc2004", "parallel"]
SPLITS = ("train", "valid", "test")
DEFAULT_MAX_INPUT_LENGTH = 1024
"""The longest source (subwords) accepted at validate / test / predict time unless ``max_input_length`` says."""
LANGUAGES = {"multi30k": ("de", "en"), "iwslt14": ("de", "en"), "iwslt17": ("de", "en"),
             "gigaword": ("article", "title"), "duc2004": ("article", "title")}
DEFAULT_DIRECTION = {"multi30k": ("de", "en"), "iwslt14": ("de", "en"), "iwslt17": ("de", "en"),
                     "gigaword": ("article", "title"), "duc2004": ("article", "title")}
LOCAL_FILES = {
    "multi30k": {"train": "train.{}", "valid": "val.{}", "test": "test_2016_flickr.{}"},
    "iwslt14": {"train": "train.{}", "valid": "valid.{}", "test": "test.{}"},
    "iwslt17": {"train": "train.{}", "valid": "valid.{}", "test": "test.{}"},
    "gigaword": {"train": "train.{}.txt", "valid": "valid.{}.filter.txt", "test": "test.{}.txt"},
    "parallel": {"train": "train.{}", "valid": "valid.{}", "test": "test.{}"},
    "duc2004": {"test": duc.INPUT_FILE},  # and task1_ref<k>.txt: read by _duc2004_source
}
TEST_ONLY = {"duc2004": "gigaword"}
"""Test sets with no training or validation split, and the dataset their models are trained on."""
ROUGE_MAX_BYTES = {"duc2004": 75}
"""The standard truncation of ROUGE on a dataset (ROUGE-1.5.5 ``-b``): DUC-2004 scores the first 75 bytes."""
HUB_IDS = {"multi30k": "bentrevett/multi30k", "iwslt17": "IWSLT/iwslt2017", "gigaword": "Harvard/gigaword"}
LOCAL_ONLY = {"iwslt14"}  # named datasets no hub repo reproduces
HUB_SPLITS = {"train": "train", "valid": "validation", "test": "test"}
HUB_COLUMNS = {"gigaword": {"article": "document", "title": "summary"}}
PRETOKENIZED = {"multi30k": False, "iwslt14": True, "iwslt17": False, "gigaword": True, "duc2004": True,
                "parallel": False}
MOSES_LANGUAGE = {"article": "en", "title": "en"}
GIGAWORD_UNK = "UNK"  # the one unknown-word form: the release's test files and the hub's every split use it
CACHE_VERSION = 2
IWSLT14_MISSING = ("iwslt14 is fairseq's IWSLT14 De-En ({{train,valid,test}}.{{de,en}}, Moses-tokenised and "
                   "lowercased), which no hub repo holds, and {where}; build it with `python -m lit_rnncells.data "
                   "prepare iwslt14` or fairseq's examples/translation/prepare-iwslt14.sh and set "
                   "data.init_args.data_dir (or LIT_RNNCELLS_DATA, which holds iwslt14/) to that folder "
                   "(the hub's IWSLT 2017 is dataset: iwslt17).")

Lines = List[str]


def default_data_dir(dataset: str) -> Optional[str]:
    """``$LIT_RNNCELLS_DATA/<dataset>`` when ``LIT_RNNCELLS_DATA`` is set, else the hub id (``None`` for
    ``parallel`` and the local-only ``iwslt14``)."""
    named = dataset in HUB_IDS or dataset in LOCAL_ONLY or dataset in TEST_ONLY
    return local_or_hub(dataset if named else None, HUB_IDS.get(dataset))


def canonical_unk(dataset: str, lines: Lines) -> Lines:
    """Gigaword's unknown word in its one form, ``UNK`` (the release's ``<unk>`` rewritten, as the hub does)."""
    if dataset != "gigaword":
        return lines
    return [line.replace("<unk>", GIGAWORD_UNK) for line in lines]


def read_lines(path: Path) -> Lines:
    """The lines of a UTF-8 text file (a final newline does not make an extra empty line)."""
    text = read_text_file(path, "The file")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.rstrip("\r") for line in lines]


def check_parallel(source: Lines, target: Lines, source_name: str, target_name: str) -> None:
    if len(source) != len(target):
        raise ValueError(f"Parallel files differ in length: {source_name} has {len(source):,} lines and "
                         f"{target_name} has {len(target):,}; give line-aligned files (one pair per line).")


def check_no_empty(lines: Lines, name: str) -> None:
    """Evaluation and predict inputs may not hold empty lines (the policy for those splits)."""
    check_no_blank_lines(lines, name)


def hub_alternative(dataset: str) -> str:
    """The end of a hub error: where a local copy goes instead."""
    names = sorted(p.format(lang) for p in LOCAL_FILES[dataset].values() for lang in LANGUAGES[dataset])
    return hub.local_alternative(dataset, f"the folder with {', '.join(names)}")


def read_hub_split(dataset: str, hub_id: str, split: str, source_language: str, target_language: str,
                   loaded: Dict[str, Any]) -> Tuple[Lines, Lines]:
    """One split's source and target lines from the hub's Parquet export (:mod:`lit_rnncells.data.hub`), in
    the shape the local reader returns."""
    if "ds" not in loaded:
        loaded["ds"] = hub.load_splits(hub_id, tuple(HUB_SPLITS.values()), hub_alternative(dataset))
    part = loaded["ds"][HUB_SPLITS[split]]
    if "translation" in part.column_names:  # IWSLT: {"de": ..., "en": ...} per row
        pairs = part["translation"]
        return [p[source_language] for p in pairs], [p[target_language] for p in pairs]
    columns = HUB_COLUMNS.get(dataset, {})
    return (list(part[columns.get(source_language, source_language)]),
            list(part[columns.get(target_language, target_language)]))


class TranslationDataModule(SplitCheckMixin, ResumableBatchesMixin, LightningDataModule):
    """A parallel corpus as length-bucketed subword batches, from a local folder or the hub.

    Args:
        dataset: ``multi30k``, ``iwslt14`` (local only), ``iwslt17``, ``gigaword`` or ``parallel`` (your own files).
        data_dir: local folder in the official format, or a hub id (``owner/name``, or ``owner/name@commit`` to
            pin the Parquet export's revision). Default: ``$LIT_RNNCELLS_DATA/<dataset>`` when
            ``LIT_RNNCELLS_DATA`` is set, else the hub id.
        files: for ``parallel``, explicit ``{split: [source_path, target_path]}`` (instead of ``data_dir``).
        source_language, target_language: direction (Multi30k/IWSLT14: ``de``/``en`` either way; Gigaword:
            ``article`` → ``title``; ``parallel``: the file suffixes, required).
        subword_vocab_size: BPE symbols per tokenizer, the 4 specials and 256 bytes included (at least 260).
        joint_vocabulary: one tokenizer fitted on both sides' training lines (else one per side).
        pretokenized: split on whitespace first, so merges stay inside the corpus's tokens and outputs are
            Moses-detokenised for sacreBLEU (default for IWSLT14 and Gigaword), or BPE over raw text (others);
            both byte-level (:mod:`lit_rnncells.data.subword`).
        min_frequency: BPE merges need a pair seen at least this often.
        batch_size, eval_batch_size: pairs per batch; max_tokens: also at most this many padded source
            (or target) tokens per training batch.
        max_source_length, max_target_length: training pairs longer than these (subwords) are dropped.
        max_input_length: the longest source (subwords) accepted at validate / test / predict time (default
            1024: a longer line is an error naming it, not minutes of decoding); None: any length.
        limit: use only the first ``limit`` pairs of every split (quick runs).
        valid_size: use only the first ``valid_size`` validation pairs (Gigaword's hub validation split has
            189,651; the harvardnlp release's filtered valid file as many); ``None`` keeps them all.
        predict_file: lines to translate / summarise in ``predict``; ``-`` reads standard input.
        checkpoint_path: take the tokenizers from this checkpoint (the CLI fills it from ``--ckpt_path``
            in test / predict), so predict needs no training files.
        cache_dir: where encoded splits are cached (default ``$LIT_RNNCELLS_CACHE`` or
            ``~/.cache/lit_rnncells``); ``""`` disables the cache.
        seed: seeds the training batch order (with the epoch); chunk_batches: batches per sorted chunk.
        num_workers: 0 (collate in the training process) or 1 (in one background loader process).
    """

    FROM_CHECKPOINT = ("subword_vocab_size", "joint_vocabulary", "pretokenized", "min_frequency")
    """Options that build the tokenizers: with a checkpoint (test / predict) its tokenizers are used instead."""

    def __init__(self, dataset: DatasetName = "multi30k", data_dir: Optional[str] = None,
                 files: Optional[Dict[str, List[str]]] = None, source_language: Optional[str] = None,
                 target_language: Optional[str] = None, subword_vocab_size: int = 8000, joint_vocabulary: bool = True,
                 pretokenized: Optional[bool] = None, min_frequency: int = 2, batch_size: int = 64,
                 eval_batch_size: int = 64, max_tokens: Optional[int] = None,
                 max_source_length: Optional[int] = None, max_target_length: Optional[int] = None,
                 max_input_length: Optional[int] = DEFAULT_MAX_INPUT_LENGTH, limit: Optional[int] = None,
                 valid_size: Optional[int] = None,
                 predict_file: Optional[str] = None, checkpoint_path: Optional[str] = None,
                 cache_dir: Optional[str] = None, seed: int = 0, chunk_batches: int = 50, num_workers: int = 0
                 ) -> None:
        super().__init__()
        if dataset not in LOCAL_FILES:
            raise ValueError(f"Unknown dataset {dataset!r}; choose one of {sorted(LOCAL_FILES)}.")
        if dataset in TEST_ONLY and checkpoint_path is None:
            raise ValueError(f"{dataset} is a test set only (no training split); test a model trained on "
                             f"{TEST_ONLY[dataset]}: python -m lit_rnncells test --config <its config> --ckpt_path "
                             f"<its checkpoint> --data.init_args.dataset {dataset}.")
        check_positive(subword_vocab_size=subword_vocab_size, batch_size=batch_size,
                       eval_batch_size=eval_batch_size, min_frequency=min_frequency, chunk_batches=chunk_batches)
        for name, value in (("max_tokens", max_tokens), ("max_source_length", max_source_length),
                            ("max_target_length", max_target_length), ("max_input_length", max_input_length),
                            ("limit", limit), ("valid_size", valid_size)):
            if value is not None:
                check_positive(**{name: value})
        if num_workers not in (0, 1):
            raise ValueError(f"num_workers must be 0 or 1 (the bucketed batches are not split between loader "
                             f"workers, more would repeat them), got {num_workers}.")
        self.save_hyperparameters(logger=False)  # the task logs them as data/...
        self.dataset = dataset
        self.source_language, self.target_language = self._direction(dataset, source_language, target_language)
        self.files = {s: list(p) for s, p in (files or {}).items()}
        for split, pair in self.files.items():
            if split not in SPLITS or len(pair) != 2:
                raise ValueError(f"files must map splits {list(SPLITS)} to [source_path, target_path], got "
                                 f"{split!r}: {pair!r}.")
        self.data_dir = data_dir if data_dir is not None else default_data_dir(dataset)
        if dataset in LOCAL_ONLY and checkpoint_path is None and not self.files and (
                self.data_dir is None or is_hub_id(self.data_dir)):
            where = ("no data_dir is set" if self.data_dir is None else
                     f"data_dir {self.data_dir!r} is not a local folder")
            raise FileNotFoundError(IWSLT14_MISSING.format(where=where))
        if self.data_dir is None and not self.files and checkpoint_path is None and dataset not in TEST_ONLY:
            raise ValueError("dataset 'parallel' needs data_dir (a folder with {train,valid,test}.<language> "
                             "files) or files: {split: [source_path, target_path]}.")
        if dataset in TEST_ONLY:
            self._duc2004_source()  # a missing folder or file is named now, before the checkpoint loads
        self.pretokenized = PRETOKENIZED[dataset] if pretokenized is None else bool(pretokenized)
        self.subword_vocab_size, self.joint_vocabulary, self.min_frequency = (
            subword_vocab_size, joint_vocabulary, min_frequency)
        self.batch_size, self.eval_batch_size, self.max_tokens = batch_size, eval_batch_size, max_tokens
        self.max_source_length, self.max_target_length = max_source_length, max_target_length
        self.max_input_length, self.limit, self.valid_size = max_input_length, limit, valid_size
        self.predict_file, self.checkpoint_path = predict_file, checkpoint_path
        self.seed, self.chunk_batches, self.num_workers = seed, chunk_batches, num_workers
        self.cache = default_cache_dir() if cache_dir is None else (Path(cache_dir) if cache_dir else None)
        self._hub: Dict[str, Any] = {}
        self._splits: Dict[str, Dict[str, Any]] = {}
        self._predict_cache: Optional[Tuple[str, Lines]] = None
        self.dropped: Dict[str, int] = {"empty": 0, "too_long": 0}
        if checkpoint_path is not None:  # test / predict from a checkpoint: its tokenizers, files read lazily
            state = datamodule_state(checkpoint_path, type(self))
            self.source_tokenizer = SubwordTokenizer.from_json(state["source_tokenizer"])
            self.target_tokenizer = SubwordTokenizer.from_json(state["target_tokenizer"])
            self.pretokenized = self.target_tokenizer.pretokenized
        else:
            self.source_tokenizer, self.target_tokenizer = self._fit_tokenizers()
            for split in SPLITS:  # fail now (bad files, empty lines), not after the first epoch
                self.split(split)

    # --- configuration -----------------------------------------------------------------
    @staticmethod
    def _direction(dataset: str, source: Optional[str], target: Optional[str]) -> Tuple[str, str]:
        if dataset == "parallel":
            if not source or not target or source == target:
                raise ValueError("dataset 'parallel' needs two different file suffixes as source_language and "
                                 f"target_language, got {source!r} and {target!r}.")
            return source, target
        default = DEFAULT_DIRECTION[dataset]
        source, target = source or default[0], target or (default[1] if source in (None, default[0]) else default[0])
        known = LANGUAGES[dataset]
        one_way = dataset in ("gigaword", "duc2004")  # summaries: article -> title only
        allowed = [default] if one_way else [(a, b) for a in known for b in known if a != b]
        if (source, target) not in allowed:
            raise ValueError(f"Unknown direction {source}->{target} for {dataset}; choose source_language/"
                             f"target_language among {[f'{a}->{b}' for a, b in allowed]}.")
        return source, target

    def _moses_language(self, language: str) -> str:
        return MOSES_LANGUAGE.get(language, language)

    def _duc2004_source(self) -> Tuple[Path, List[Path]]:
        """The DUC-2004 input and reference files (:mod:`lit_rnncells.data.duc`)."""
        if self.data_dir is None:
            raise FileNotFoundError(f"No DUC-2004 folder: LIT_RNNCELLS_DATA is not set and data_dir is empty; "
                                    f"{duc.SOURCE}.")
        return duc.duc2004_files(Path(self.data_dir).expanduser())

    def references(self, split: str) -> Optional[List[Tuple[str, ...]]]:
        """Every reference of every example of a split that has several per example (DUC-2004), else None
        (the target is the one reference). Empty lines are an error, as in any evaluation file."""
        if self.dataset not in TEST_ONLY or split != "test":
            return None
        _, paths = self._duc2004_source()
        streams = []
        for path in paths:
            lines = read_lines(path)
            check_no_empty(lines, str(path))
            streams.append(lines[:self.limit] if self.limit is not None else lines)
        return list(zip(*streams))

    @property
    def rouge_max_bytes(self) -> Optional[int]:
        """The dataset's standard ROUGE truncation in bytes (75 for DUC-2004), read by the task; None: none."""
        return ROUGE_MAX_BYTES.get(self.dataset)

    def _split_source(self, split: str) -> Tuple[Dict[str, Any], Any]:
        """The cache key part describing a split's inputs, and a loader of its (source, target, names)."""
        if self.dataset in TEST_ONLY:
            if split != "test":
                raise ValueError(f"{self.dataset} has only a test split; validate on {TEST_ONLY[self.dataset]} and "
                                 f"use {self.dataset} with test --ckpt_path.")
            source, references = self._duc2004_source()
            paths = [source, references[0]]

            def load_duc() -> Tuple[Lines, Lines, str, str]:
                return read_lines(paths[0]), read_lines(paths[1]), str(paths[0]), str(paths[1])

            return {"files": [file_fingerprint(p) for p in [source, *references]]}, load_duc
        if split in self.files:
            paths = [Path(p).expanduser() for p in self.files[split]]
        elif self.data_dir is not None and is_hub_id(self.data_dir):
            hub_id = self.data_dir

            def load_hub() -> Tuple[Lines, Lines, str, str]:
                src, tgt = read_hub_split(self.dataset, hub_id, split, self.source_language,
                                          self.target_language, self._hub)
                return src, tgt, f"{hub_id} {split} {self.source_language}", f"{hub_id} {split} {self.target_language}"

            return {"hub": hub_id, "split": split}, load_hub
        else:
            if self.data_dir is None:
                raise ValueError(f"No {split} files: set data_dir or files for dataset {self.dataset!r}.")
            folder = Path(self.data_dir).expanduser()
            if not folder.is_dir() and self.dataset in LOCAL_ONLY:
                raise FileNotFoundError(IWSLT14_MISSING.format(where=f"{str(folder)!r} does not exist"))
            if not folder.is_dir():
                raise FileNotFoundError(f"Corpus folder {str(folder)!r} does not exist{hub.owner_hint(str(folder))}; "
                                        "set data.init_args.data_dir "
                                        f"to the folder holding the {self.dataset} files, or a hub id.")
            pattern = LOCAL_FILES[self.dataset][split]
            paths = [folder / pattern.format(lang) for lang in (self.source_language, self.target_language)]
        for path in paths:
            if not path.is_file() and self.dataset in LOCAL_ONLY and split not in self.files:
                raise FileNotFoundError(IWSLT14_MISSING.format(where=f"{str(path)!r} is missing"))
            if not path.is_file():
                raise FileNotFoundError(f"Missing corpus file {str(path)!r} for the {split} split of {self.dataset}; "
                                        "check data_dir / files and source_language / target_language.")

        def load_local() -> Tuple[Lines, Lines, str, str]:
            return read_lines(paths[0]), read_lines(paths[1]), str(paths[0]), str(paths[1])

        return {"files": [file_fingerprint(p) for p in paths]}, load_local

    def _raw(self, split: str) -> Tuple[Dict[str, Any], Lines, Lines, str, str]:
        key, load = self._split_source(split)
        source, target, source_name, target_name = load()
        check_parallel(source, target, source_name, target_name)
        source, target = canonical_unk(self.dataset, source), canonical_unk(self.dataset, target)
        if split == "valid" and self.valid_size is not None:
            source, target = source[:self.valid_size], target[:self.valid_size]
        if self.limit is not None:
            source, target = source[:self.limit], target[:self.limit]
        return key, source, target, source_name, target_name

    def _options(self) -> Dict[str, Any]:
        return {"dataset": self.dataset, "direction": [self.source_language, self.target_language],
                "limit": self.limit, "valid_size": self.valid_size, "version": CACHE_VERSION}

    def _fit_tokenizers(self) -> Tuple[SubwordTokenizer, SubwordTokenizer]:
        """BPE on the training lines only (pairs with an empty side excluded), cached."""
        key, load = self._split_source("train")
        options = {"vocab": self.subword_vocab_size, "joint": self.joint_vocabulary,
                   "pretokenized": self.pretokenized, "min_frequency": self.min_frequency}

        def build() -> Dict[str, Any]:
            _, source, target, _, _ = self._raw("train")
            kept = [(s, t) for s, t in zip(source, target) if s.strip() and t.strip()]
            src_lines, tgt_lines = [s for s, _ in kept], [t for _, t in kept]
            train = lambda texts, lang: SubwordTokenizer.train(  # noqa: E731
                texts, self.subword_vocab_size, pretokenized=self.pretokenized,
                language=self._moses_language(lang), min_frequency=self.min_frequency)
            if self.joint_vocabulary:
                joint = train(src_lines + tgt_lines, self.target_language)
                src_tok = SubwordTokenizer(joint.tokenizer, joint.pretokenized,
                                           self._moses_language(self.source_language))
                return {"source": src_tok.to_json(), "target": joint.to_json()}
            return {"source": train(src_lines, self.source_language).to_json(),
                    "target": train(tgt_lines, self.target_language).to_json()}

        saved = cached(self.cache, {"name": f"{self.dataset}-bpe", **key, **self._options(), **options}, build)
        return SubwordTokenizer.from_json(saved["source"]), SubwordTokenizer.from_json(saved["target"])

    # --- splits -----------------------------------------------------------------------------
    def split(self, split: str) -> Dict[str, Any]:
        """One split encoded: ``source`` / ``target`` id lists, raw ``source_text`` / ``target_text``, and
        ``line`` (1-based line numbers in the files). Training pairs are filtered (empty side, length)."""
        if split in self._splits:
            return self._splits[split]
        key, _ = self._split_source(split)
        tokenizers = [self.source_tokenizer.to_json(), self.target_tokenizer.to_json()]
        digest = hashlib.sha256("\n".join(tokenizers).encode()).hexdigest()[:16]

        def build() -> Dict[str, Any]:
            _, source, target, source_name, target_name = self._raw(split)
            lines = list(range(1, len(source) + 1))
            empty = 0
            if split == "train":
                keep = [i for i, (s, t) in enumerate(zip(source, target)) if s.strip() and t.strip()]
                empty = len(source) - len(keep)
                source, target, lines = [source[i] for i in keep], [target[i] for i in keep], [lines[i] for i in keep]
            else:
                check_no_empty(source, source_name)
                check_no_empty(target, target_name)
            built = {"source": self.source_tokenizer.encode_batch(source),
                     "target": self.target_tokenizer.encode_batch(target),
                     "source_text": source, "target_text": target, "line": lines, "empty": empty,
                     "source_name": source_name}
            references = self.references(split)
            if references is not None:  # several per example; the target (loss) is the first
                built["references"] = references
            return built

        data = dict(cached(self.cache, {"name": f"{self.dataset}-{split}", **key, **self._options(),
                                        "tokenizers": digest}, build))
        if split == "train":
            self.dropped["empty"] = int(data["empty"])
            keep = [i for i, (s, t) in enumerate(zip(data["source"], data["target"]))
                    if (self.max_source_length is None or len(s) <= self.max_source_length)
                    and (self.max_target_length is None or len(t) <= self.max_target_length)]
            self.dropped["too_long"] = len(data["source"]) - len(keep)
            if self.dropped["too_long"]:
                for field in ("source", "target", "source_text", "target_text", "line"):
                    data[field] = [data[field][i] for i in keep]
            if any(self.dropped.values()):
                rank_zero_info(f"{self.dataset} train: dropped {self.dropped['empty']:,} pairs with an empty side and "
                               f"{self.dropped['too_long']:,} longer than max_source_length={self.max_source_length}"
                               f" / max_target_length={self.max_target_length} subwords; "
                               f"{len(data['source']):,} pairs remain.")
            if not data["source"]:
                raise ValueError(f"No {self.dataset} training pairs remain after the empty-line and length filters; "
                                 "raise max_source_length / max_target_length or check the files.")
        else:
            self._check_input_length(data["source"], data["line"], data["source_name"])
        self._splits[split] = data
        return data

    def _check_input_length(self, sources: Sequence[Sequence[int]], lines: Sequence[int], name: str) -> None:
        if self.max_input_length is None:
            return
        for ids, line in zip(sources, lines):
            if len(ids) > self.max_input_length:
                raise ValueError(f"Line {line} of {name} has {len(ids)} source subwords, more than max_input_length="
                                 f"{self.max_input_length}; shorten or split that line, or raise max_input_length "
                                 "(--data.init_args.max_input_length).")

    def predict_lines(self) -> Lines:
        """The predict input's lines (standard input is read once and kept); empty lines are an error."""
        if self.predict_file is None:
            raise ValueError("predict needs data.init_args.predict_file: a file of source lines, or '-' for stdin.")
        name = "standard input" if self.predict_file == "-" else str(Path(self.predict_file).expanduser())
        if self._predict_cache is None or self._predict_cache[0] != self.predict_file:
            if self.predict_file == "-":
                lines = read_stdin("predict_file").split("\n")
                if lines and lines[-1] == "":
                    lines.pop()
                lines = [line.rstrip("\r") for line in lines]
            else:
                path = Path(self.predict_file).expanduser()
                if not path.is_file():
                    raise FileNotFoundError(f"predict_file {str(path)!r} does not exist; pass a file of source lines "
                                            "or '-' for stdin.")
                lines = read_lines(path)
            self._predict_cache = (self.predict_file, lines)
        lines = self._predict_cache[1]
        if not lines:
            raise ValueError(f"{name} has no lines to {'summarise' if self.dataset == 'gigaword' else 'translate'}; "
                             "give one source sentence per line.")
        check_no_empty(lines, name)
        return lines

    # --- what the CLI links into the model ---------------------------------------------
    @property
    def source_vocab_size(self) -> int:
        return len(self.source_tokenizer)

    @property
    def target_vocab_size(self) -> int:
        return len(self.target_tokenizer)

    @property
    def pad_id(self) -> int:
        return PAD_ID

    @property
    def bos_id(self) -> int:
        return BOS_ID

    @property
    def eos_id(self) -> int:
        return EOS_ID

    # --- batches -----------------------------------------------------------------------------
    def collate(self, data: Dict[str, Any], indices: List[int], references: bool) -> Dict[str, Any]:
        """The batch of examples ``indices`` of a split: source x <eos>, target <bos> y <eos>, padded."""
        source, source_lengths = pad_batch([data["source"][i] + [EOS_ID] for i in indices], PAD_ID)
        batch: Dict[str, Any] = {"source": source, "source_lengths": source_lengths,
                                 "index": torch.tensor(indices, dtype=torch.long)}
        if "target" in data:
            target, target_lengths = pad_batch([[BOS_ID] + data["target"][i] + [EOS_ID] for i in indices], PAD_ID)
            batch.update(target=target, target_lengths=target_lengths)
        if references:  # one string per example, or a tuple of several references
            batch["references"] = [data["references"][i] if "references" in data else data["target_text"][i]
                                   for i in indices]
        return batch

    def setup(self, stage: str) -> None:
        self.check_splits(stage)
        needed = {"fit": ("train", "valid"), "validate": ("valid",), "test": ("test",)}.get(stage, ())
        for split in needed:
            self.split(split)

    def train_dataloader(self) -> DataLoader:
        data = self.split("train")
        rank, world = self.rank_world()
        lengths = [max(len(s), len(t)) + 2 for s, t in zip(data["source"], data["target"])]
        batches = BucketedBatches(lengths, lambda idx: self.collate(data, idx, False), batch_size=self.batch_size,
                                  max_tokens=self.max_tokens, shuffle=True, seed=self.seed,
                                  chunk_batches=self.chunk_batches, rank=rank, world_size=world,
                                  epoch=self.current_epoch, start_batch=self.resume_start_batch)
        return batch_loader(batches, self.num_workers)

    def _eval_loader(self, data: Dict[str, Any], references: bool) -> DataLoader:
        rank, world = self.rank_world()
        lengths = [len(s) + 1 for s in data["source"]]
        batches = BucketedBatches(lengths, lambda idx: self.collate(data, idx, references),
                                  batch_size=self.eval_batch_size, shuffle=False, rank=rank, world_size=world)
        return batch_loader(batches, self.num_workers)

    def val_dataloader(self) -> DataLoader:
        return self._eval_loader(self.split("valid"), True)

    def test_dataloader(self) -> DataLoader:
        return self._eval_loader(self.split("test"), True)

    def predict_dataloader(self) -> DataLoader:
        lines = self.predict_lines()
        sources = self.source_tokenizer.encode_batch(lines)
        name = "standard input" if self.predict_file == "-" else str(self.predict_file)
        self._check_input_length(sources, range(1, len(lines) + 1), name)
        return self._eval_loader({"source": sources, "source_text": lines}, False)

    # --- checkpoint --------------------------------------------------------------------------
    def state_dict(self) -> Dict[str, Any]:
        return {**super().state_dict(), "source_tokenizer": self.source_tokenizer.to_json(),
                "target_tokenizer": self.target_tokenizer.to_json()}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        saved = [SubwordTokenizer.from_json(state[f"{side}_tokenizer"]) for side in ("source", "target")]
        saved_joint = saved[0].tokenizer.to_str() == saved[1].tokenizer.to_str()
        current_joint = self.source_tokenizer.tokenizer.to_str() == self.target_tokenizer.tokenizer.to_str()
        if saved_joint != current_joint:
            from .text import VocabularyMismatchError
            raise VocabularyMismatchError(
                f"The checkpoint was trained with joint_vocabulary={saved_joint}, this data has "
                f"joint_vocabulary={current_joint} (one tokenizer for both sides or one per side); set "
                f"--data.init_args.joint_vocabulary {str(saved_joint).lower()} as it was trained.")
        check_tokenizer(saved[0], self.source_tokenizer, "source")
        check_tokenizer(saved[1], self.target_tokenizer, "target")
        super().load_state_dict(state)

    def decode(self, ids: Tensor | Sequence[int]) -> str:
        """Target ids → the corpus's text form (specials dropped)."""
        return self.target_tokenizer.decode(ids.tolist() if isinstance(ids, Tensor) else ids)
