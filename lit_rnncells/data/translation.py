"""Parallel corpora for sequence-to-sequence tasks (translation, headline generation) as subword batches.

Datasets (``dataset``), each from a local folder in its official format or from the hub; what the library
knows of each (file names, languages, hub id and columns, test-only) is its record in
:mod:`lit_rnncells.data.known`, and :mod:`lit_rnncells.data.parallel_text` reads the pairs:

* ``multi30k`` (Elliott et al. 2016, task 1; the CARU paper's translation task): raw text; hub
  ``bentrevett/multi30k``.
* ``iwslt14`` (De-En TED talks, fairseq's ``prepare-iwslt14.sh`` before BPE; MC-RNN Table 2):
  Moses-tokenised lowercased, 160,239 / 7,283 / 6,750 pairs. Local only (``prepare iwslt14`` builds it).
* ``iwslt17`` (IWSLT 2017 De-En, raw cased text): hub ``IWSLT/iwslt2017``, 206,112 / 888 / 8,079 pairs, or a
  local ``{train,valid,test}.{de,en}`` of it.
* ``gigaword`` (Rush et al. 2015 headline generation, harvardnlp release; MC-RNN Table 3): hub
  ``Harvard/gigaword``. The unknown word is ``UNK`` on both paths (the release writes ``<unk>`` in train and
  valid, ``UNK`` in test); ``valid_size`` keeps the first pairs of its 189,651-pair validation split.
* ``duc2004`` (DUC-2004 task 1, :mod:`lit_rnncells.data.duc`): a test set only, for a Gigaword-trained
  checkpoint (``test --ckpt_path``), 4 references per document, all of them scored; ROUGE reads the first
  75 bytes unless the model says otherwise.
* ``parallel``: your own aligned files, ``{train,valid,test}.{src}`` / ``.{tgt}`` under ``data_dir``
  or explicit ``files: {split: [source_path, target_path]}``; any dataset registered in
  :mod:`lit_rnncells.data.known` (docs/data.md, "Adding a dataset").

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
from typing import Any, ClassVar, Dict, List, Optional, Sequence, Tuple

import torch
from lightning.pytorch import LightningDataModule
from lightning.pytorch.utilities import rank_zero_info
from torch import Tensor
from torch.utils.data import DataLoader

from ..utils.arguments import apply_deprecated_names, check_positive, group_as_dict, option_group
from ..utils.paths import check_no_blank_lines, predict_input_name, read_predict_lines
from . import duc
from .check import SplitCheckMixin
from .batching import BucketedBatches, LengthBucketsMixin, ResumableBatchesMixin, batch_loader, pad_batch
from .checkpoint_state import FromCheckpointMixin, datamodule_state
from .known import translation_datasets
from .parallel_text import (MOSES_LANGUAGE, Lines, _local_only, canonical_unk, check_parallel,
                            default_data_dir, default_pretokenized, direction, missing_local,
                            record, several_references, split_source, test_only_for)
from .parallel_text import (HUB_IDS, IWSLT14_MISSING, LOCAL_FILES, hub_alternative, read_hub_split,  # noqa: F401
                            read_lines)  # kept importable from here
from .split_check import translation_files
from .subword import BOS_ID, EOS_ID, PAD_ID, SubwordTokenizer, check_tokenizer
from .text import VocabularyMismatchError, cached, default_cache_dir, is_hub_id
from .translation_options import (DEFAULT_MAX_INPUT_LENGTH, DEPRECATED_NAMES, Batching, Lengths,  # noqa: F401
                                  Subwords)

SPLITS = ("train", "valid", "test")
CACHE_VERSION = 2


class TranslationDataModule(FromCheckpointMixin, SplitCheckMixin, ResumableBatchesMixin, LengthBucketsMixin,
                            LightningDataModule):
    """A parallel corpus as length-bucketed subword batches, from a local folder or the hub.

    Args:
        dataset: ``multi30k``, ``iwslt14`` (local only), ``iwslt17``, ``gigaword``, ``duc2004`` (test only), any
            dataset registered in :mod:`lit_rnncells.data.known`, or ``parallel`` (your own files).
        data_dir: local folder in the official format, or a hub id (``owner/name``, or ``owner/name@commit`` to
            pin the Parquet export's revision). Default: ``$LIT_RNNCELLS_DATA/<dataset>`` when
            ``LIT_RNNCELLS_DATA`` is set, else the hub id.
        files: for ``parallel``, explicit ``{split: [source_path, target_path]}`` (instead of ``data_dir``).
        source_language, target_language: direction (Multi30k/IWSLT14: ``de``/``en`` either way; Gigaword:
            ``article`` → ``title``; ``parallel``: the file suffixes, required).
        batch_size: pairs per training batch.
        subwords: the BPE tokenizers (:class:`~lit_rnncells.data.translation_options.Subwords`).
        lengths: the length limits (:class:`~lit_rnncells.data.translation_options.Lengths`).
        batching: evaluation batches, token budget, chunks, length buckets, loader workers
            (:class:`~lit_rnncells.data.translation_options.Batching`).
        limit: use only the first ``limit`` pairs of every split (quick runs).
        valid_size: use only the first ``valid_size`` validation pairs (Gigaword's hub validation split has
            189,651; the harvardnlp release's filtered valid file as many); ``None`` keeps them all.
        predict_file: lines to translate / summarise in ``predict``; ``-`` reads standard input.
        checkpoint_path: take the tokenizers from this checkpoint (the CLI fills it from ``--ckpt_path``
            in test / predict), so predict needs no training files.
        cache_dir: where encoded splits are cached (default ``$LIT_RNNCELLS_CACHE`` or
            ``~/.cache/lit_rnncells``); ``""`` disables the cache.
        seed: seeds the training batch order (with the epoch).
        **deprecated: the old flat names of the groups' fields (``subword_vocab_size``, ``max_tokens``, ...), for
            one release; each prints one line naming its new key (:attr:`DEPRECATED_NAMES`).
    """

    FROM_CHECKPOINT = ("subwords.subword_vocab_size", "subwords.joint_vocabulary", "subwords.pretokenized",
                       "subwords.min_frequency")
    """Options that build the tokenizers: with a checkpoint (test / predict) its tokenizers are used instead."""
    DEPRECATED_NAMES: ClassVar[Dict[str, str]] = DEPRECATED_NAMES
    """Old flat name → its key in a group (configs, command lines and checkpoints from before the groups)."""

    def __init__(self, dataset: str = "multi30k", data_dir: Optional[str] = None,
                 files: Optional[Dict[str, List[str]]] = None, source_language: Optional[str] = None,
                 target_language: Optional[str] = None, batch_size: int = 64, subwords: Subwords = Subwords(),
                 lengths: Lengths = Lengths(), batching: Batching = Batching(),
                 limit: Optional[int] = None, valid_size: Optional[int] = None,
                 predict_file: Optional[str] = None, checkpoint_path: Optional[str] = None,
                 cache_dir: Optional[str] = None, seed: int = 0, **deprecated: Any) -> None:
        super().__init__()
        groups = apply_deprecated_names(type(self).__name__, DEPRECATED_NAMES, deprecated, {
            "subwords": option_group(Subwords, subwords, "subwords"),
            "lengths": option_group(Lengths, lengths, "lengths"),
            "batching": option_group(Batching, batching, "batching")})
        if dataset not in translation_datasets():
            raise ValueError(f"Unknown dataset {dataset!r}; choose one of {translation_datasets()}.")
        trained_on = test_only_for(dataset)
        if trained_on and checkpoint_path is None:
            raise ValueError(f"{dataset} is a test set only (no training split); test a model trained on "
                             f"{trained_on}: python -m lit_rnncells test --config <its config> --ckpt_path "
                             f"<its checkpoint> --data.init_args.dataset {dataset}.")
        check_positive(batch_size=batch_size)
        for name, value in (("limit", limit), ("valid_size", valid_size)):
            if value is not None:
                check_positive(**{name: value})
        # the groups saved as dicts under their names only (not the old flat names a caller gave)
        self.save_hyperparameters(ignore=list(deprecated), logger=False)  # the task logs them as data/...
        for name in deprecated:
            self.hparams.pop(name, None)
        self.hparams.update({name: group_as_dict(group) for name, group in groups.items()})
        self.dataset = dataset
        self._set_options(groups["subwords"], groups["lengths"], groups["batching"])
        self.source_language, self.target_language = direction(dataset, source_language, target_language)
        self.files = {s: list(p) for s, p in (files or {}).items()}
        for split, pair in self.files.items():
            if split not in SPLITS or len(pair) != 2:
                raise ValueError(f"files must map splits {list(SPLITS)} to [source_path, target_path], got "
                                 f"{split!r}: {pair!r}.")
        self.data_dir = data_dir if data_dir is not None else default_data_dir(dataset)
        self._check_location(checkpoint_path)
        self.batch_size, self.limit, self.valid_size = batch_size, limit, valid_size
        self.predict_file, self.checkpoint_path, self.seed = predict_file, checkpoint_path, seed
        self.cache = default_cache_dir() if cache_dir is None else (Path(cache_dir) if cache_dir else None)
        self._hub: Dict[str, Any] = {}
        self._splits: Dict[str, Dict[str, Any]] = {}
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
    def _set_options(self, subwords: Subwords, lengths: Lengths, batching: Batching) -> None:
        """The groups, and each of their fields as an attribute of its flat name (what the cache keys, the
        batches and the split check read)."""
        self.subwords, self.lengths, self.batching = subwords, lengths, batching
        self.subword_vocab_size, self.joint_vocabulary, self.min_frequency = (
            subwords.subword_vocab_size, subwords.joint_vocabulary, subwords.min_frequency)
        self.pretokenized = (default_pretokenized(self.dataset) if subwords.pretokenized is None
                             else bool(subwords.pretokenized))
        self.max_source_length, self.max_target_length = lengths.max_source_length, lengths.max_target_length
        self.max_input_length = lengths.max_input_length
        self.eval_batch_size, self.max_tokens = batching.eval_batch_size, batching.max_tokens
        self.chunk_batches, self.length_buckets = batching.chunk_batches, batching.length_buckets
        self.num_workers = batching.num_workers

    def _check_location(self, checkpoint_path: Optional[str]) -> None:
        """Name a missing local copy (or a parallel corpus without files) now, before anything is read."""
        trained_on = test_only_for(self.dataset)
        if _local_only(self.dataset) and checkpoint_path is None and not self.files and (
                self.data_dir is None or is_hub_id(self.data_dir)):
            where = ("no data_dir is set" if self.data_dir is None else
                     f"data_dir {self.data_dir!r} is not a local folder")
            raise FileNotFoundError(missing_local(self.dataset, where))
        if self.data_dir is None and not self.files and checkpoint_path is None and not trained_on:
            raise ValueError("dataset 'parallel' needs data_dir (a folder with {train,valid,test}.<language> "
                             "files) or files: {split: [source_path, target_path]}.")
        if trained_on:
            self._duc2004_source()  # a missing folder or file is named now, before the checkpoint loads

    def split_files(self):
        """The files the fit-time split check reads (:func:`lit_rnncells.data.split_check.translation_files`)."""
        return translation_files(self)

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
        if not test_only_for(self.dataset) or split != "test":
            return None
        return several_references(self._duc2004_source()[1], self.limit)

    @property
    def rouge_max_bytes(self) -> Optional[int]:
        """The dataset's standard ROUGE truncation in bytes (75 for DUC-2004), read by the task; None: none."""
        found = record(self.dataset)
        return None if found is None else found.rouge_max_bytes

    @property
    def rouge_multiref(self) -> Optional[str]:
        """The dataset's standard multi-reference ROUGE (``pooled`` for DUC-2004), read by the task; None: the
        task's default."""
        found = record(self.dataset)
        return None if found is None else found.rouge_multiref

    def _split_source(self, split: str) -> Tuple[Dict[str, Any], Any]:
        """The cache key part describing a split's inputs, and a loader of its (source, target, names)."""
        return split_source(self, split)

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
                check_no_blank_lines(source, source_name)
                check_no_blank_lines(target, target_name)
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
        """The predict input's lines, refused as every task's are (:func:`read_predict_lines`)."""
        return read_predict_lines(self.predict_file, "article" if self.dataset == "gigaword" else "source sentence")

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
        train = lambda: data if "target" not in data or test_only_for(self.dataset) else self.split("train")
        source, source_lengths = pad_batch([data["source"][i] + [EOS_ID] for i in indices], PAD_ID,
                                           self.buckets("source", lambda: [len(s) + 1 for s in train()["source"]]))
        batch: Dict[str, Any] = {"source": source, "source_lengths": source_lengths,
                                 "index": torch.tensor(indices, dtype=torch.long)}
        if "target" in data:
            target, target_lengths = pad_batch([[BOS_ID] + data["target"][i] + [EOS_ID] for i in indices], PAD_ID,
                                               self.buckets("target", lambda: [len(t) + 2 for t in train()["target"]]))
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
        self._check_input_length(sources, range(1, len(lines) + 1), predict_input_name(self.predict_file))
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
