"""Length-bucketed, rank-sharded, resumable batches for the example-level DataModules.

Seq2seq and classification data are sets of examples of very different lengths. Batching
examples of similar length wastes little compute on padding; doing it inside large shuffled
chunks keeps the batches random (fairseq / torchtext's ``BucketIterator`` habit).
:class:`BucketedBatches` yields collated batches that carry their epoch and position, so a
DataModule mixing in :class:`ResumableBatchesMixin` can save the training position in the
checkpoint and a resumed run continues with exactly the batches it would have seen.
"""
from __future__ import annotations

import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from lightning.pytorch.utilities import rank_zero_warn
from torch import Tensor
from torch.utils.data import DataLoader, IterableDataset

from ..utils.arguments import check_positive

Batch = Dict[str, Any]


class LengthBuckets:
    """A few lengths that padded batches are padded up to, so a run sees a bounded number of batch shapes
    (what lets CUDA graphs replay instead of recording one per length; ``Recurrent(backend='graphs')``).

    The bucket lengths are the ``count`` quantiles of the training lengths (the largest is the longest training
    example), so each bucket holds about as many examples. A batch longer than every bucket (an evaluation
    example longer than any training one) keeps its own length. The layers' masks keep every result that of
    the unpadded batch (tested)."""

    def __init__(self, lengths: Sequence[int], count: int) -> None:
        check_positive(length_buckets=count)
        values = np.asarray(lengths, dtype=np.int64)
        if values.size == 0:
            raise ValueError("Length buckets need the training lengths; the training split has no examples.")
        quantiles = np.quantile(values, np.arange(1, count + 1) / count, method="inverted_cdf")
        self.lengths: Tuple[int, ...] = tuple(sorted({int(q) for q in quantiles}))

    def __len__(self) -> int:
        return len(self.lengths)

    def length_for(self, longest: int) -> int:
        """The padded length of a batch whose longest sequence has ``longest`` steps."""
        for length in self.lengths:
            if length >= longest:
                return length
        return longest

    def __repr__(self) -> str:
        return f"{len(self)} length buckets ({', '.join(map(str, self.lengths))})"


class LengthBucketsMixin:
    """Mix into a DataModule with a ``length_buckets`` option (0: off, batches padded to their longest
    sequence): :meth:`buckets` builds each padded field's :class:`LengthBuckets` once, from the training
    lengths, and says how many there are."""

    length_buckets: int = 0

    def buckets(self, field: str, training_lengths: Callable[[], Sequence[int]]) -> Optional[LengthBuckets]:
        """The buckets of ``field`` (``None`` when off), built on first use from ``training_lengths()``."""
        if not self.length_buckets:
            return None
        store = self.__dict__.setdefault("_length_buckets", {})
        if field not in store:
            store[field] = LengthBuckets(training_lengths(), self.length_buckets)
            print(f"lit_rnncells: {field}: {store[field]}", file=sys.stderr, flush=True)  # stdout: predictions
        return store[field]


def pad_batch(seqs: Sequence[Union[Sequence[int], Tensor]], pad_id: int,
              buckets: Optional[LengthBuckets] = None) -> Tuple[Tensor, Tensor]:
    """Right-pad id sequences into a ``(B, T)`` long tensor; also return the lengths ``(B,)``. ``T`` is the
    longest sequence's length, or with ``buckets`` the bucket length it falls in."""
    lengths = torch.tensor([len(s) for s in seqs], dtype=torch.long)
    longest = int(lengths.max()) if len(seqs) else 0
    width = buckets.length_for(longest) if buckets is not None and longest else longest
    out = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    for row, seq in enumerate(seqs):
        if len(seq):
            out[row, :len(seq)] = torch.as_tensor(seq, dtype=torch.long)
    return out, lengths


def batch_loader(batches: Any, num_workers: int = 0) -> DataLoader:
    """A ``DataLoader`` over a dataset that yields whole batches, with a generator of its own.

    A ``DataLoader`` draws a seed from its generator each time it starts iterating; without one of its
    own it draws from torch's global generator, which dropout also uses, so a resumed run (which starts
    its loaders at other moments) would draw other dropout masks than the uninterrupted run."""
    return DataLoader(batches, batch_size=None, num_workers=num_workers, generator=torch.Generator())


class BucketedBatches(IterableDataset):
    """One rank's batches of a split, grouped by length; use with ``DataLoader(ds, batch_size=None)``.

    Args:
        lengths: the length of every example (what padding depends on, e.g. source length).
        collate: builds the batch dict from a list of example indices.
        batch_size: examples per batch (at most).
        max_tokens: if set, also at most this many padded tokens (``longest × count``) per batch.
        shuffle: training order. ``True``: examples shuffled by ``(seed, epoch)``, sorted by length
            within chunks of ``chunk_batches × global batch``, cut into global batches of
            ``world_size × batch_size`` examples (and ``world_size × max_tokens`` tokens), the global
            batches shuffled; rank ``r`` takes examples ``r, r + world_size, ...`` of each global batch
            (a global batch too small to give every rank an example is dropped). So ``W`` devices with
            ``batch_size=B`` train on exactly the batches one device with ``batch_size=W·B`` does, as
            ``DistributedSampler`` does for plain loaders, and DDP's averaged gradient is that device's.
            ``False`` (evaluation): sorted by length, batches dealt to ranks in turn, every example once.
        epoch: returns the current epoch; start_batch: the batch to start at for an epoch (resume).

    Each yielded batch also holds ``"epoch"`` and ``"batch"`` (its position in this rank's epoch).
    """

    def __init__(self, lengths: Sequence[int], collate: Callable[[List[int]], Batch], *, batch_size: int,
                 max_tokens: Optional[int] = None, shuffle: bool, seed: int = 0, chunk_batches: int = 50,
                 rank: int = 0, world_size: int = 1, epoch: Callable[[], int] = lambda: 0,
                 start_batch: Callable[[int], int] = lambda epoch: 0) -> None:
        check_positive(batch_size=batch_size, chunk_batches=chunk_batches, world_size=world_size)
        if max_tokens is not None:
            check_positive(max_tokens=max_tokens)
        self.lengths = np.asarray(lengths, dtype=np.int64)
        if len(self.lengths) == 0:
            raise ValueError("A split has no examples; check its files or the filters that dropped them.")
        self.collate, self.batch_size, self.max_tokens = collate, batch_size, max_tokens
        self.shuffle, self.seed, self.chunk_batches = shuffle, seed, chunk_batches
        self.rank, self.world_size = rank, world_size
        self.epoch, self.start_batch = epoch, start_batch
        self._cache: Optional[Tuple[int, List[np.ndarray]]] = None
        if shuffle and len(self.batches(0)) == 0:
            raise ValueError(f"{len(self.lengths)} training examples are fewer than the {world_size} devices; "
                             "use fewer devices.")

    def _cut(self, order: np.ndarray, scale: int = 1) -> List[np.ndarray]:
        """Consecutive batches of ``order`` within the size limits (times ``scale``: global batches)."""
        batch_size = self.batch_size * scale
        if self.max_tokens is None:
            return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
        max_tokens = self.max_tokens * scale
        batches, start, longest = [], 0, 0
        for i, index in enumerate(order):
            longest_if = max(longest, int(self.lengths[index]))
            if i > start and (i - start >= batch_size or longest_if * (i - start + 1) > max_tokens):
                batches.append(order[start:i])
                start, longest_if = i, int(self.lengths[index])
            longest = longest_if
        batches.append(order[start:])
        return batches

    def batches(self, epoch: int) -> List[np.ndarray]:
        """This rank's batches (arrays of example indices) of an epoch, in order."""
        if self._cache is not None and self._cache[0] == epoch:
            return self._cache[1]
        if not self.shuffle:
            order = np.argsort(self.lengths, kind="stable")
            everything = self._cut(order)
            if len(everything) < self.world_size:  # a small split: smaller batches, so every rank has one
                everything = np.array_split(order, min(self.world_size, len(order)))
            mine = everything[self.rank::self.world_size]
        else:
            rng = np.random.default_rng([self.seed, epoch])
            order = rng.permutation(len(self.lengths))
            world = self.world_size
            chunk = self.chunk_batches * self.batch_size * world
            everything = []
            for start in range(0, len(order), chunk):
                part = order[start:start + chunk]
                everything.extend(self._cut(part[np.argsort(self.lengths[part], kind="stable")], world))
            everything = [everything[i] for i in rng.permutation(len(everything))]
            mine = [batch[self.rank::world] for batch in everything if len(batch) >= world]
        self._cache = (epoch, mine)
        return mine

    def __len__(self) -> int:
        return len(self.batches(self.epoch()))

    def __iter__(self):
        epoch = self.epoch()
        start = self.start_batch(epoch)
        for position, indices in enumerate(self.batches(epoch)):
            if position < start:
                continue
            batch = self.collate([int(i) for i in indices])
            batch["epoch"], batch["batch"] = epoch, position
            yield batch


class ResumableBatchesMixin:
    """Mix into a LightningDataModule (before it in the bases) whose training batches come from
    :class:`BucketedBatches`: the training position goes into the checkpoint, and a resumed run
    starts the epoch at the next batch it had not trained on.

    The DataModule passes ``epoch=self.current_epoch`` and ``start_batch=self.resume_start_batch``
    to its training :class:`BucketedBatches`, sets ``self.batch_size``, and merges
    ``super().state_dict()`` into its own state.
    """

    batch_size: int
    resumes_mid_epoch = True  # a checkpoint saved mid-epoch resumes exactly (lit_rnncells.utils.quiet)

    def _resume_store(self) -> Dict[str, Any]:
        store = self.__dict__.get("_resumable")
        if store is None:
            store = self.__dict__["_resumable"] = {"position": {}, "resume": None}
        return store

    def rank_world(self) -> Tuple[int, int]:
        """This process's rank and the world size (0, 1 without a trainer)."""
        trainer = getattr(self, "trainer", None)
        return (trainer.global_rank, trainer.world_size) if trainer is not None else (0, 1)

    def current_epoch(self) -> int:
        trainer = getattr(self, "trainer", None)
        return trainer.current_epoch if trainer is not None else 0

    def resume_start_batch(self, epoch: int) -> int:
        """The batch a resumed epoch starts at (used once; 0 otherwise)."""
        store = self._resume_store()
        resume, store["resume"] = store["resume"], None
        if resume is None or resume["epoch"] != epoch:
            return 0
        if (resume["world_size"], resume["batch_size"]) != (self.rank_world()[1], self.batch_size):
            rank_zero_warn(f"The checkpoint was trained with batch_size={resume['batch_size']} on "
                           f"{resume['world_size']} device(s), this run uses batch_size={self.batch_size} on "
                           f"{self.rank_world()[1]}: epoch {epoch} restarts from its first batch.")
            return 0
        return int(resume["batch"])

    def on_after_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        """Record the position of the training batch about to be trained on."""
        trainer = getattr(self, "trainer", None)
        if trainer is not None and trainer.training and isinstance(batch, dict) and "batch" in batch:
            self._resume_store()["position"] = {"epoch": int(batch["epoch"]), "batch": int(batch["batch"]) + 1,
                                                "world_size": self.rank_world()[1], "batch_size": self.batch_size}
        return batch

    def state_dict(self) -> Dict[str, Any]:
        state = super().state_dict()  # type: ignore[misc]
        return {**state, "position": dict(self._resume_store()["position"])}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self._resume_store()["resume"] = dict(state["position"]) if state.get("position") else None
