"""What the sentiment DataModules share (:mod:`.sentiment`): tokenisation, the word vocabulary,
packed tensors, the checkpoint-state and loader plumbing of :class:`SentimentDataModule`."""
from __future__ import annotations

import hashlib
import re
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Literal, Optional, Sequence, Tuple

import torch
from lightning.pytorch import LightningDataModule
from torch import Tensor
from torch.utils.data import DataLoader

from ..utils.arguments import check_positive
from ..utils.paths import read_predict_lines
from .batching import BucketedBatches, LengthBucketsMixin, ResumableBatchesMixin, batch_loader
from .check import SplitCheckMixin
from .checkpoint_state import FromCheckpointMixin, datamodule_state
from .language_model import check_vocabulary
from .text import UNK, Vocabulary, cached, default_cache_dir, is_hub_id, local_or_hub

PAD = "<pad>"
TOKEN_PATTERN = re.compile(r"\w+|[^\w\s]")
CACHE_VERSION = 1
Tokenizer = Literal["regex", "whitespace"]


def tokenize(text: str, *, lowercase: bool = True, tokenizer: Tokenizer = "regex") -> List[str]:
    """Tokens of one text (``<br />`` stripped, optionally lowercased, regex or whitespace split)."""
    text = text.replace("<br />", " ")
    if lowercase:
        text = text.lower()
    return TOKEN_PATTERN.findall(text) if tokenizer == "regex" else text.split()


def fit_vocabulary(texts: Iterable[Sequence[str]], max_vocab_size: Optional[int], min_frequency: int) -> Vocabulary:
    """``<pad>``, ``<unk>``, then the training words by decreasing count (ties alphabetical)."""
    counts = Counter(t for tokens in texts for t in tokens)
    words = [w for w, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
             if c >= min_frequency and w not in (PAD, UNK)]
    return Vocabulary([PAD, UNK, *words[:max_vocab_size]], level="word", unk=UNK)


def encode(tokens: Sequence[str], vocab: Vocabulary) -> List[int]:
    unk = vocab.unk_id
    return [vocab.stoi.get(t, unk) for t in tokens] or [unk]


def pack(seqs: Sequence[Sequence[int]]) -> Dict[str, Tensor]:
    """Many id lists as one flat ``int32`` tensor and ``offsets`` (fast to save and load)."""
    offsets = torch.zeros(len(seqs) + 1, dtype=torch.long)
    offsets[1:] = torch.tensor([len(s) for s in seqs], dtype=torch.long).cumsum(0)
    return {"ids": torch.tensor([i for s in seqs for i in s], dtype=torch.int32), "offsets": offsets}


class Packed:
    """Read side of :func:`pack`."""

    def __init__(self, packed: Dict[str, Tensor]) -> None:
        self.ids, self.offsets = packed["ids"], packed["offsets"]
        self.lengths = (self.offsets[1:] - self.offsets[:-1]).tolist()

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, i: int) -> Tensor:
        return self.ids[self.offsets[i]:self.offsets[i + 1]]


def vocab_digest(vocab: Vocabulary) -> str:
    return hashlib.sha256("\n".join(vocab.symbols).encode()).hexdigest()[:16]


def env_data_dir(folder: str, hub_id: str) -> str:
    """``$LIT_RNNCELLS_DATA/<folder>`` when ``LIT_RNNCELLS_DATA`` is set, else the hub id."""
    return local_or_hub(folder, hub_id)  # type: ignore[return-value]


def local_folder(data_dir: Optional[str]) -> Optional[Path]:
    """``data_dir`` as a local path; ``None`` for a hub id (or no ``data_dir``)."""
    return None if data_dir is None or is_hub_id(data_dir) else Path(data_dir).expanduser()


class SentimentDataModule(FromCheckpointMixin, SplitCheckMixin, ResumableBatchesMixin, LengthBucketsMixin,
                          LightningDataModule):
    """What the sentiment DataModules share: vocabulary, labels, checkpoint state, loaders."""

    FROM_CHECKPOINT = ("max_vocab_size", "min_frequency")
    """Options that build the vocabulary: with a checkpoint (test / predict) its vocabulary is used instead."""

    predict_line = "input"
    """What one line of ``predict_file`` holds, as its errors name it (a subclass says, e.g. ``"document"``)."""

    def __init__(self, *, data_dir: Optional[str], batch_size: int, eval_batch_size: Optional[int],
                 max_tokens: Optional[int], lowercase: bool, max_vocab_size: Optional[int], min_frequency: int,
                 cache_dir: Optional[str], checkpoint_path: Optional[str], predict_file: Optional[str],
                 seed: int, length_buckets: int = 0) -> None:
        super().__init__()
        if length_buckets:
            check_positive(length_buckets=length_buckets)
        self.length_buckets = length_buckets
        check_positive(batch_size=batch_size, min_frequency=min_frequency)
        for name, value in (("eval_batch_size", eval_batch_size), ("max_tokens", max_tokens),
                            ("max_vocab_size", max_vocab_size)):
            if value is not None:
                check_positive(**{name: value})
        self.data_dir = data_dir
        self.batch_size, self.eval_batch_size = batch_size, eval_batch_size or batch_size
        self.max_tokens, self.lowercase, self.seed = max_tokens, lowercase, seed
        self.max_vocab_size, self.min_frequency = max_vocab_size, min_frequency
        self.cache = default_cache_dir() if cache_dir is None else (Path(cache_dir) if cache_dir else None)
        self.checkpoint_path, self.predict_file = checkpoint_path, predict_file
        self.splits: Dict[str, Dict[str, Any]] = {}
        self.predict_items: Optional[List[Dict[str, Any]]] = None

    def _init_data(self, label_names: Sequence[str]) -> None:
        """Vocabulary and labels from the checkpoint (data read later, in setup) or from the data now."""
        if self.checkpoint_path:
            state = datamodule_state(self.checkpoint_path, type(self))
            self.vocab = Vocabulary.from_state_dict(state["vocab"])
            if list(state["label_names"]) != list(label_names):
                raise ValueError(f"The checkpoint {self.checkpoint_path!r} was trained with labels "
                                 f"{list(state['label_names'])}, these options give {list(label_names)}; set the "
                                 "label options (keep_conflict / granularity) the checkpoint was trained with.")
            self.label_names = list(label_names)
        else:
            self.label_names = list(label_names)
            self._load(None)

    def _load(self, vocab: Optional[Vocabulary]) -> None:
        source, build = self._source()
        key = {"name": type(self).__name__, "version": CACHE_VERSION, **self._options(), **source,
               "lowercase": self.lowercase, "max_vocab_size": self.max_vocab_size,
               "min_frequency": self.min_frequency, "vocab": vocab_digest(vocab) if vocab else None}
        corpus = cached(self.cache, key, lambda: build(vocab))
        self.vocab = Vocabulary.from_state_dict(corpus["vocab"])
        self.splits = corpus["splits"]
        self._views = {split: {k: Packed(v) if isinstance(v, dict) else v for k, v in data.items()}
                       for split, data in self.splits.items()}
        for split, data in self._views.items():
            if len(data["labels"]) == 0:
                raise ValueError(f"The {split} split has no examples{self._empty_hint()}; check its file or the "
                                 "options that filter it.")

    def _build_vocab(self, vocab: Optional[Vocabulary], train_texts: Iterable[Sequence[str]]) -> Vocabulary:
        return vocab if vocab is not None else fit_vocabulary(train_texts, self.max_vocab_size, self.min_frequency)

    # --- to implement --------------------------------------------------------------------
    def _source(self) -> Tuple[Dict[str, Any], Callable[[Optional[Vocabulary]], Dict[str, Any]]]:
        raise NotImplementedError

    def _options(self) -> Dict[str, Any]:
        raise NotImplementedError

    def _collate(self, split: str, indices: List[int]) -> Dict[str, Any]:
        raise NotImplementedError

    def token_buckets(self):
        """The ``tokens`` field's length buckets (``None`` when ``length_buckets`` is 0), from the training split's
        lengths (the loaded split's when there is no training split, e.g. testing a checkpoint)."""
        views = getattr(self, "_views", {})
        if not self.length_buckets or not views:
            return None
        split = "train" if "train" in views else next(iter(views))
        return self.buckets("tokens", lambda: self._lengths(split))

    def _predict_items(self, lines: List[str]) -> List[Dict[str, Any]]:
        raise NotImplementedError

    def _collate_predict(self, indices: List[int]) -> Dict[str, Any]:
        raise NotImplementedError

    def _empty_hint(self) -> str:
        return ""

    def _lengths(self, split: str) -> List[int]:
        return self._views[split]["tokens"].lengths

    def class_counts(self) -> Dict[str, Dict[str, int]]:
        """Examples per class of each loaded split (``{split: {label name: count}}``; empty before loading)."""
        counts: Dict[str, Dict[str, int]] = {}
        for split, data in getattr(self, "_views", {}).items():
            labels = data["labels"]
            values = labels.tolist() if hasattr(labels, "tolist") else list(labels)
            counts[split] = {name: values.count(i) for i, name in enumerate(self.label_names)}
        return counts

    # --- sizes the CLI links into the model ------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    @property
    def num_classes(self) -> int:
        return len(self.label_names)

    @property
    def pad_id(self) -> int:
        return self.vocab.stoi[PAD]

    # --- loaders ---------------------------------------------------------------------------
    def setup(self, stage: str) -> None:
        self.check_splits(stage)
        if stage in ("fit", "validate", "test") and not self.splits:
            self._load(self.vocab)  # from a checkpoint: encode the data with its vocabulary
        if stage == "predict" and self.predict_items is None:
            self.predict_items = self._predict_items(read_predict_lines(self.predict_file, self.predict_line))

    def _batches(self, split: str, shuffle: bool) -> BucketedBatches:
        rank, world = self.rank_world()
        return BucketedBatches(self._lengths(split), lambda ix: self._collate(split, ix),
                               batch_size=self.batch_size if shuffle else self.eval_batch_size,
                               max_tokens=self.max_tokens, shuffle=shuffle, seed=self.seed, rank=rank,
                               world_size=world, epoch=self.current_epoch, start_batch=self.resume_start_batch)

    def train_dataloader(self) -> DataLoader:
        return batch_loader(self._batches("train", True))

    def val_dataloader(self) -> DataLoader:
        return batch_loader(self._batches("validation", False))

    def test_dataloader(self) -> DataLoader:
        return batch_loader(self._batches("test", False))

    def predict_dataloader(self) -> DataLoader:
        rank, world = self.rank_world()
        items = self.predict_items or []
        lengths = [len(item["tokens"]) for item in items]
        return batch_loader(BucketedBatches(lengths, self._collate_predict, batch_size=self.eval_batch_size,
                                            shuffle=False, rank=rank, world_size=world))

    # --- checkpoint state --------------------------------------------------------------------
    def state_dict(self) -> Dict[str, Any]:
        return {**super().state_dict(), "vocab": self.vocab.state_dict(), "label_names": list(self.label_names)}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        check_vocabulary(Vocabulary.from_state_dict(state["vocab"]), self.vocab)
        if list(state["label_names"]) != list(self.label_names):
            raise ValueError(f"The checkpoint's labels {list(state['label_names'])} differ from this data's "
                             f"{list(self.label_names)}; use the label options it was trained with.")
        super().load_state_dict(state)
