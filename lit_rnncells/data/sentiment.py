"""Sentiment DataModules: SemEval-2014 aspect terms (ABSA), IMDB and SST documents.

Shared policy (readers in :mod:`.semeval`, :mod:`.imdb`, :mod:`.sst`):

* Tokenisation: IMDB's ``<br />`` becomes a space, text is lowercased (``lowercase``), then the
  ``regex`` tokenizer takes ``\\w+|[^\\w\\s]`` (words, and each other non-space character alone:
  ``don't`` → ``don ' t``); the ``whitespace`` tokenizer splits on spaces (SST's default: its
  leaves are already PTB tokens such as ``n't``). A text with no token becomes ``<unk>``.
* Vocabulary: ``<pad>`` = 0, ``<unk>`` = 1, then training words by decreasing count (ties
  alphabetical), at least ``min_frequency`` times, at most ``max_vocab_size`` words; fitted on the
  training split only (after the validation split is held out), saved in checkpoints.
* Processed tensors are cached with :func:`.text.cached`, keyed by the input files (path, size,
  mtime) or hub id and every option that changes them.
* Batches come from :class:`.batching.BucketedBatches` (grouped by length, sharded by rank,
  resumable mid-epoch).
* ``checkpoint_path`` (the CLI passes ``--ckpt_path``): the vocabulary and labels come from the
  checkpoint, so ``predict`` needs no training files.
"""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Callable, Dict, List, Literal, Optional, Sequence, Tuple

import torch
from torch import Tensor

from ..utils.arguments import check_positive
from ..utils.paths import predict_input_name
from . import imdb, semeval, sst
from .batching import pad_batch
from .check import Bound, bind
from .known import KNOWN, layout
from .text import is_hub_id
from .sentiment_base import (PAD, TOKEN_PATTERN, SentimentDataModule, Tokenizer, Vocabulary, encode, env_data_dir,
                             local_folder, pack, tokenize)
from .text import file_fingerprint

__all__ = ["AspectSentimentDataModule", "DocumentSentimentDataModule", "PAD", "TOKEN_PATTERN", "tokenize"]


class AspectSentimentDataModule(SentimentDataModule):
    """SemEval-2014 Task 4 aspect terms (Meng et al., AAAI 2020, §ABSA, Table 6): one example per (sentence, aspect term).

    Args:
        domain: ``restaurants`` or ``laptops``.
        data_dir: folder with the official XML (``Restaurants_Train_v2.xml``, ``Restaurants_Test_Gold.xml``;
            ``Laptop_Train_v2.xml``, ``Laptops_Test_Gold.xml``) or a hub id in the
            ``alexcadillon/SemEval2014Task4`` schema. Default: ``$LIT_RNNCELLS_DATA/semeval14`` if it
            exists, else that hub id.
        subset: ``ds`` (every aspect term) or ``hds`` (only sentences with several aspect terms of
            different polarity, one example per term; Xue and Li 2018).
        hds_train: with ``hds``, also train on the hard subset (``False``: train on DS, evaluate on HDS).
        keep_conflict: keep ``conflict`` as a fourth class (the paper does) or drop those terms.
        val_fraction, split_seed: the share of training sentences held out (whole sentences) for validation.
        batch_size, eval_batch_size, max_tokens: batch limits (training / evaluation).
        lowercase, max_vocab_size, min_frequency: tokenisation and vocabulary (see the module doc).
        cache_dir: tensor cache (default ``$LIT_RNNCELLS_CACHE`` or ``~/.cache/lit_rnncells``; ``""``: off).
        checkpoint_path: take vocabulary and labels from this checkpoint (the CLI fills it from ``--ckpt_path``).
        predict_file: lines ``sentence<TAB>aspect term`` (``-``: stdin).
        seed: seeds the training order.
        length_buckets: 0 (off) or how many lengths ``tokens`` is padded up to (``data.batching.LengthBuckets``).

    The vocabulary is fitted on every training-side sentence (with or without aspect terms, not the
    held-out validation sentences). Batches: ``tokens`` (B, T), ``lengths`` (B,), ``aspect`` (B, A) the aspect term's token ids,
    ``aspect_lengths`` (B,), ``labels`` (B,) (not in predict), ``index`` (B,), ``epoch``, ``batch``.
    """

    predict_line = "sentence<TAB>aspect term"

    def __init__(self, domain: Literal["restaurants", "laptops"] = "restaurants", data_dir: Optional[str] = None,
                 subset: Literal["ds", "hds"] = "ds", hds_train: bool = True, keep_conflict: bool = True,
                 val_fraction: float = 0.1, split_seed: int = 1234, batch_size: int = 32,
                 eval_batch_size: Optional[int] = None, max_tokens: Optional[int] = None, lowercase: bool = True,
                 max_vocab_size: Optional[int] = None, min_frequency: int = 1, cache_dir: Optional[str] = None,
                 checkpoint_path: Optional[str] = None, predict_file: Optional[str] = None, seed: int = 0,
                 length_buckets: int = 0) -> None:
        if domain not in semeval.domains():
            raise ValueError(f"Unknown domain {domain!r}; choose one of {sorted(semeval.domains())}.")
        if subset not in ("ds", "hds"):
            raise ValueError(f"Unknown subset {subset!r}; choose 'ds' (all aspect terms) or 'hds' (hard subset).")
        if not 0.0 < val_fraction < 1.0:
            raise ValueError(f"val_fraction must be between 0 and 1, got {val_fraction}; e.g. 0.1.")
        super().__init__(data_dir=data_dir or env_data_dir("semeval14", semeval.HUB_ID), batch_size=batch_size,
                         eval_batch_size=eval_batch_size, max_tokens=max_tokens, lowercase=lowercase,
                         max_vocab_size=max_vocab_size, min_frequency=min_frequency, cache_dir=cache_dir,
                         checkpoint_path=checkpoint_path, predict_file=predict_file, seed=seed,
                         length_buckets=length_buckets)
        self.save_hyperparameters(logger=False)  # the task logs them as data/...
        self.domain, self.subset, self.hds_train, self.keep_conflict = domain, subset, hds_train, keep_conflict
        self.val_fraction, self.split_seed = val_fraction, split_seed
        labels = [p for p in semeval.POLARITIES if keep_conflict or p != "conflict"]
        self._init_data(labels)

    def _options(self) -> Dict[str, Any]:
        return {"domain": self.domain, "subset": self.subset, "hds_train": self.hds_train,
                "keep_conflict": self.keep_conflict, "val_fraction": self.val_fraction, "split_seed": self.split_seed}

    def _empty_hint(self) -> str:
        return f" ({self.domain}, subset {self.subset}, keep_conflict {self.keep_conflict})"

    def _source(self) -> Tuple[Dict[str, Any], Callable[[Optional[Vocabulary]], Dict[str, Any]]]:
        if is_hub_id(self.data_dir):
            hub_id = self.data_dir
            return {"hub": hub_id}, lambda vocab: self._build(semeval.read_hub(hub_id, self.domain), vocab)
        paths = semeval.local_paths(Path(self.data_dir).expanduser(), self.domain)
        return ({"files": [file_fingerprint(p) for p in paths.values()]},
                lambda vocab: self._build({s: semeval.read_xml(p) for s, p in paths.items()}, vocab))

    def _tokens(self, text: str) -> List[str]:
        return tokenize(text, lowercase=self.lowercase, tokenizer="regex")

    def split_files(self) -> Optional[Bound]:
        """The domain's XML files (the record's file group of that name) under ``data_dir``; ``None`` for the hub."""
        folder = local_folder(self.data_dir)
        return None if folder is None else bind("semeval14", layout("semeval14", self.domain), folder)

    def _build(self, raw: Dict[str, List[semeval.Sentence]], vocab: Optional[Vocabulary]) -> Dict[str, Any]:
        train, val = semeval.split_sentences(raw["train"], self.val_fraction, self.split_seed)
        hard = self.subset == "hds"
        sets = {"train": semeval.examples(train, keep_conflict=self.keep_conflict, hard=hard and self.hds_train),
                "validation": semeval.examples(val, keep_conflict=self.keep_conflict, hard=hard),
                "test": semeval.examples(raw["test"], keep_conflict=self.keep_conflict, hard=hard)}
        vocab = self._build_vocab(vocab, (self._tokens(s.text) for s in train))
        label_id = {name: i for i, name in enumerate(self.label_names)}
        splits = {}
        for split, pairs in sets.items():
            splits[split] = {"tokens": pack([encode(self._tokens(s.text), vocab) for s, _ in pairs]),
                             "aspect": pack([encode(self._tokens(a.term), vocab) for _, a in pairs]),
                             "labels": torch.tensor([label_id[a.polarity] for _, a in pairs], dtype=torch.long)}
        return {"vocab": vocab.state_dict(), "splits": splits}

    def _collate(self, split: str, indices: List[int]) -> Dict[str, Any]:
        view = self._views[split]
        batch = self._collate_items([{"tokens": view["tokens"][i], "aspect": view["aspect"][i]} for i in indices],
                                    indices)
        batch["labels"] = view["labels"][indices]
        return batch

    def _collate_items(self, items: List[Dict[str, Any]], indices: List[int]) -> Dict[str, Any]:
        tokens, lengths = pad_batch([item["tokens"] for item in items], self.pad_id, self.token_buckets())
        aspect, aspect_lengths = pad_batch([item["aspect"] for item in items], self.pad_id)
        return {"tokens": tokens, "lengths": lengths, "aspect": aspect, "aspect_lengths": aspect_lengths,
                "index": torch.tensor(indices, dtype=torch.long)}

    def _predict_items(self, lines: List[str]) -> List[Dict[str, Any]]:
        items = []
        for number, line in enumerate(lines, 1):
            sentence, tab, term = line.partition("\t")
            if not tab or not term.strip() or not sentence.strip():
                raise ValueError(f"Line {number} of {predict_input_name(self.predict_file)} is not 'sentence<TAB>"
                                 "aspect term'; write each input as the sentence, a tab, then the aspect term.")
            items.append({"tokens": encode(self._tokens(sentence), self.vocab),
                          "aspect": encode(self._tokens(term), self.vocab)})
        return items

    def _collate_predict(self, indices: List[int]) -> Dict[str, Any]:
        assert self.predict_items is not None
        return self._collate_items([self.predict_items[i] for i in indices], indices)


class DocumentSentimentDataModule(SentimentDataModule):
    """Document sentiment: IMDB (Chan et al., ICONIP 2020, §3.1) or the Stanford Sentiment Treebank
    (Weissenborn & Rocktäschel, arXiv:1606.03002, §4.3).

    Args:
        dataset: ``imdb`` or ``sst``.
        data_dir: IMDB: ``aclImdb_v1.tar.gz`` (read in place), the extracted ``aclImdb`` folder, a folder
            holding either, or a hub id (``stanfordnlp/imdb``). SST: the official tree folder
            (``train.txt``, ``dev.txt``, ``test.txt``) or a hub id (``stanfordnlp/sst2``, binary only; its
            test labels are hidden, so ``test`` reports its validation split, with a warning). Default:
            ``$LIT_RNNCELLS_DATA/{imdb,sst}`` if it exists, else the hub id.
        granularity: SST ``binary`` (neutral 2 dropped; 0, 1 → negative, 3, 4 → positive) or ``fine`` (5 classes).
        train_phrases: SST: train on every labelled phrase of the training trees, deduplicated by their
            token sequence (the first tree's label is kept), and evaluate on whole sentences (MuFuRU);
            ``False``: whole training sentences only. Ignored for IMDB.
        val_size, split_seed: IMDB: training reviews held out (seeded) for validation (SST uses ``dev.txt``).
        max_length, truncation: keep at most ``max_length`` tokens: the first (``head``), the last
            (``tail``), or the first quarter and the last three quarters of the budget (``head_tail``,
            Sun et al. 2019 §5.3). Applied when batching; the cache holds whole texts.
        tokenizer: ``regex`` (IMDB default) or ``whitespace`` (SST default: PTB tokens).
        Other arguments: as for :class:`AspectSentimentDataModule`; ``predict_file`` holds one document per line.

    Batches: ``tokens`` (B, T), ``lengths`` (B,), ``labels`` (B,) (not in predict), ``index`` (B,),
    ``epoch``, ``batch``.
    """

    predict_line = "document"

    def __init__(self, dataset: Literal["imdb", "sst"] = "imdb", data_dir: Optional[str] = None,
                 granularity: Literal["binary", "fine"] = "binary", train_phrases: bool = True,
                 val_size: int = 2500, split_seed: int = 1234, max_length: Optional[int] = None,
                 truncation: Literal["head", "tail", "head_tail"] = "head", tokenizer: Optional[Tokenizer] = None,
                 batch_size: int = 64, eval_batch_size: Optional[int] = None, max_tokens: Optional[int] = None,
                 lowercase: bool = True, max_vocab_size: Optional[int] = None, min_frequency: int = 1,
                 cache_dir: Optional[str] = None, checkpoint_path: Optional[str] = None,
                 predict_file: Optional[str] = None, seed: int = 0, length_buckets: int = 0) -> None:
        hubs = {"imdb": imdb.HUB_ID, "sst": sst.HUB_ID}
        if dataset not in hubs:
            raise ValueError(f"Unknown dataset {dataset!r}; choose 'imdb' or 'sst'.")
        if granularity not in ("binary", "fine"):
            raise ValueError(f"Unknown granularity {granularity!r}; choose 'binary' or 'fine'.")
        if truncation not in ("head", "tail", "head_tail"):
            raise ValueError(f"Unknown truncation {truncation!r}; choose 'head', 'tail' or 'head_tail'.")
        if tokenizer not in (None, "regex", "whitespace"):
            raise ValueError(f"Unknown tokenizer {tokenizer!r}; choose 'regex' or 'whitespace'.")
        check_positive(val_size=val_size)
        if max_length is not None:
            check_positive(max_length=max_length)
        data_dir = data_dir or env_data_dir(dataset, hubs[dataset])
        if dataset == "sst" and is_hub_id(data_dir) and not train_phrases:
            raise ValueError(f"The hub's {data_dir} train split is already phrase level (sentences cannot be told "
                             "apart); set train_phrases: true or data_dir to the SST trees folder.")
        if granularity == "fine" and (dataset == "imdb" or is_hub_id(data_dir)):
            raise ValueError(f"granularity 'fine' needs the SST tree files ({dataset} from {data_dir!r} has binary "
                             "labels only); set granularity: binary or data_dir to the SST trees folder.")
        super().__init__(data_dir=data_dir, batch_size=batch_size, eval_batch_size=eval_batch_size,
                         max_tokens=max_tokens, lowercase=lowercase, max_vocab_size=max_vocab_size,
                         min_frequency=min_frequency, cache_dir=cache_dir, checkpoint_path=checkpoint_path,
                         predict_file=predict_file, seed=seed, length_buckets=length_buckets)
        self.save_hyperparameters(logger=False)  # the task logs them as data/...
        self.dataset, self.granularity, self.train_phrases = dataset, granularity, train_phrases
        self.val_size, self.split_seed = val_size, split_seed
        self.max_length, self.truncation = max_length, truncation
        self.tokenizer: Tokenizer = tokenizer or ("whitespace" if dataset == "sst" else "regex")
        if dataset == "sst" and is_hub_id(data_dir):
            warnings.warn(f"The hub's {data_dir} test labels are hidden: test reports its validation split "
                          "(the SST dev sentences); use the official tree files for the real test set.", stacklevel=2)
        fine = dataset == "sst" and granularity == "fine"
        self._init_data(sst.FINE_LABELS if fine else imdb.LABELS)

    def _options(self) -> Dict[str, Any]:
        return {"dataset": self.dataset, "granularity": self.granularity, "tokenizer": self.tokenizer,
                "train_phrases": self.train_phrases if self.dataset == "sst" else None,
                "val_size": self.val_size if self.dataset == "imdb" else None, "split_seed": self.split_seed}

    def _tokens(self, text: str) -> List[str]:
        return tokenize(text, lowercase=self.lowercase, tokenizer=self.tokenizer)

    def split_files(self) -> Optional[Bound]:
        """The files this DataModule reads, by the dataset's record: SST's tree files; IMDB's archive (or its
        extracted folder), which holds both splits. ``None`` for the hub or a missing IMDB source."""
        folder = local_folder(self.data_dir)
        if folder is None:
            return None
        group = KNOWN[self.dataset].layouts[0]
        if self.dataset == "sst":
            return bind(self.dataset, group, folder)
        try:
            source = imdb.resolve_local(folder)
        except FileNotFoundError:
            return None  # the reader names what is missing
        return Bound(self.dataset, group, {split: [source] for split in group.files})

    def _source(self) -> Tuple[Dict[str, Any], Callable[[Optional[Vocabulary]], Dict[str, Any]]]:
        hub = is_hub_id(self.data_dir)
        if self.dataset == "imdb":
            if hub:
                hub_id = self.data_dir
                return {"hub": hub_id}, lambda vocab: self._build_imdb(imdb.read_hub(hub_id), vocab)
            source = imdb.resolve_local(Path(self.data_dir).expanduser())
            prints = ([file_fingerprint(source)] if source.is_file() else
                      [file_fingerprint(p) for p in imdb.local_class_folders(source).values() if p.is_dir()])
            return {"files": prints}, lambda vocab: self._build_imdb(imdb.read_local(source), vocab)
        if hub:
            hub_id = self.data_dir
            return {"hub": hub_id}, lambda vocab: self._build_sst_hub(sst.read_hub(hub_id), vocab)
        paths = sst.local_paths(Path(self.data_dir).expanduser())
        return ({"files": [file_fingerprint(p) for p in paths.values()]},
                lambda vocab: self._build_sst({s: sst.read_trees(p) for s, p in paths.items()}, vocab))

    def _encode_splits(self, sets: Dict[str, List[Tuple[int, List[str]]]], vocab: Optional[Vocabulary]
                       ) -> Dict[str, Any]:
        """(label, tokens) per split → vocabulary (fitted on train unless given) and packed tensors."""
        vocab = self._build_vocab(vocab, (tokens for _, tokens in sets["train"]))
        splits = {split: {"tokens": pack([encode(tokens, vocab) for _, tokens in items]),
                          "labels": torch.tensor([label for label, _ in items], dtype=torch.long)}
                  for split, items in sets.items()}
        return {"vocab": vocab.state_dict(), "splits": splits}

    def _build_imdb(self, raw: Dict[str, List[imdb.Review]], vocab: Optional[Vocabulary]) -> Dict[str, Any]:
        train = raw["train"]
        if self.val_size >= len(train):
            raise ValueError(f"val_size={self.val_size} holds out every one of the {len(train)} training reviews; "
                             "lower val_size.")
        order = torch.randperm(len(train), generator=torch.Generator().manual_seed(self.split_seed)).tolist()
        held = sorted(order[:self.val_size])
        kept = sorted(order[self.val_size:])
        tok = self._tokens
        return self._encode_splits({"train": [(train[i][0], tok(train[i][1])) for i in kept],
                                    "validation": [(train[i][0], tok(train[i][1])) for i in held],
                                    "test": [(label, tok(text)) for label, text in raw["test"]]}, vocab)

    def _sst_label(self, label: int) -> int:
        return label if self.granularity == "fine" else sst.binary_label(label)

    def _sst_tokens(self, tokens: Sequence[str]) -> List[str]:
        return self._tokens(" ".join(tokens))

    def _build_sst(self, trees: Dict[str, List[List[sst.Phrase]]], vocab: Optional[Vocabulary]) -> Dict[str, Any]:
        sets: Dict[str, List[Tuple[int, List[str]]]] = {}
        for split, items in trees.items():
            spans = [p for tree in items for p in tree] if split == "train" and self.train_phrases else [
                tree[0] for tree in items]
            seen, out = set(), []
            for label, tokens in spans:
                if split == "train" and self.train_phrases:
                    if tokens in seen:
                        continue
                    seen.add(tokens)
                label = self._sst_label(label)
                if label >= 0:
                    out.append((label, self._sst_tokens(tokens)))
            sets[split] = out
        return self._encode_splits(sets, vocab)

    def _build_sst_hub(self, raw: Dict[str, List[Tuple[int, str]]], vocab: Optional[Vocabulary]) -> Dict[str, Any]:
        def items(split: str) -> List[Tuple[int, List[str]]]:
            return [(label, self._sst_tokens([sst.unescape(t.upper()) if t.upper() in sst.PTB_ESCAPES else t
                                              for t in text.split()])) for label, text in raw[split]]
        return self._encode_splits({"train": items("train"), "validation": items("validation"),
                                    "test": items("validation")}, vocab)

    def _truncate(self, ids: Tensor) -> Tensor:
        limit = self.max_length
        if limit is None or len(ids) <= limit:
            return ids
        if self.truncation == "head":
            return ids[:limit]
        if self.truncation == "tail":
            return ids[len(ids) - limit:]
        head = limit // 4
        return torch.cat([ids[:head], ids[len(ids) - (limit - head):]])

    def _lengths(self, split: str) -> List[int]:
        lengths = self._views[split]["tokens"].lengths
        return lengths if self.max_length is None else [min(n, self.max_length) for n in lengths]

    def _collate(self, split: str, indices: List[int]) -> Dict[str, Any]:
        view = self._views[split]
        tokens, lengths = pad_batch([self._truncate(view["tokens"][i]) for i in indices], self.pad_id,
                                    self.token_buckets())
        return {"tokens": tokens, "lengths": lengths, "labels": view["labels"][indices],
                "index": torch.tensor(indices, dtype=torch.long)}

    def _predict_items(self, lines: List[str]) -> List[Dict[str, Any]]:
        return [{"tokens": self._truncate(torch.tensor(encode(self._tokens(line), self.vocab)))} for line in lines]

    def _collate_predict(self, indices: List[int]) -> Dict[str, Any]:
        assert self.predict_items is not None
        tokens, lengths = pad_batch([self.predict_items[i]["tokens"] for i in indices], self.pad_id)
        return {"tokens": tokens, "lengths": lengths, "index": torch.tensor(indices, dtype=torch.long)}
