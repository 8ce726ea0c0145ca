"""Propositional-logic formulas (Weissenborn & Rocktäschel, arXiv:1606.03002, §4.1): seeded generation and a DataModule.

A formula with k gates is the token sequence ``v0 v1 g1 v2 g2 … vk gk`` and
means ``((v0 g1 v1) g2 v2) …``; values are 0/1, gates are the 10 two-input
Boolean functions that depend on both inputs, and the label is the final value.
"""
from __future__ import annotations

import os
import random
from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple

import torch
from lightning.pytorch import LightningDataModule
from torch import Tensor
from torch.utils.data import DataLoader, Dataset

from .batching import BucketedBatches, ResumableBatchesMixin, batch_loader

GATES: Dict[str, Callable[[int, int], int]] = {
    "AND": lambda a, b: a & b,
    "OR": lambda a, b: a | b,
    "NAND": lambda a, b: 1 - (a & b),
    "NOR": lambda a, b: 1 - (a | b),
    "XOR": lambda a, b: a ^ b,
    "XNOR": lambda a, b: 1 - (a ^ b),
    "IMPLIES": lambda a, b: (1 - a) | b,  # A ⇒ B
    "IMPLIED_BY": lambda a, b: a | (1 - b),  # A ⇐ B
    "A_AND_NOT_B": lambda a, b: a & (1 - b),
    "NOT_A_AND_B": lambda a, b: (1 - a) & b,
}
PAD = "<pad>"
VOCAB: Tuple[str, ...] = (PAD, "0", "1", *GATES)
TOKEN_ID = {tok: i for i, tok in enumerate(VOCAB)}

Formula = Tuple[str, ...]


def evaluate(formula: Sequence[str]) -> int:
    """The truth value of ``v0 v1 g1 v2 g2 …`` evaluated left to right."""
    if len(formula) < 3 or len(formula) % 2 == 0:
        raise ValueError(f"A formula is 'v0 v1 g1 [v2 g2 ...]', got {list(formula)}.")
    value = int(formula[0])
    for i in range(1, len(formula), 2):
        value = GATES[formula[i + 1]](value, int(formula[i]))
    return value


def count_formulas(min_gates: int, max_gates: int) -> int:
    """How many distinct formulas have between ``min_gates`` and ``max_gates`` gates."""
    return sum(2 ** (k + 1) * len(GATES) ** k for k in range(min_gates, max_gates + 1))


def sample_formula(rng: random.Random, min_gates: int, max_gates: int) -> Formula:
    gates = rng.randint(min_gates, max_gates)
    tokens = [str(rng.randint(0, 1))]
    names = list(GATES)
    for _ in range(gates):
        tokens.append(str(rng.randint(0, 1)))
        tokens.append(rng.choice(names))
    return tuple(tokens)


def generate_unique(count: int, min_gates: int, max_gates: int, rng: random.Random,
                    exclude: Set[Formula]) -> List[Formula]:
    """``count`` distinct formulas not in ``exclude`` (which is updated with them)."""
    available = count_formulas(min_gates, max_gates) - sum(
        1 for f in exclude if min_gates <= (len(f) - 1) // 2 <= max_gates)
    if count > available:
        raise ValueError(f"Asked for {count} unique formulas with {min_gates}-{max_gates} gates, but only "
                         f"{available} exist (after excluding other splits); lower the count or widen the gate range.")
    out: List[Formula] = []
    while len(out) < count:
        f = sample_formula(rng, min_gates, max_gates)
        if f not in exclude:
            exclude.add(f)
            out.append(f)
    return out


class FormulaDataset(Dataset):
    """Formulas as token-id tensors with their truth values."""

    def __init__(self, formulas: Sequence[Formula]) -> None:
        self.formulas = list(formulas)
        self.labels = [evaluate(f) for f in self.formulas]

    def __len__(self) -> int:
        return len(self.formulas)

    def __getitem__(self, i: int) -> Tuple[Tensor, int]:
        return torch.tensor([TOKEN_ID[t] for t in self.formulas[i]]), self.labels[i]


def collate(items: Sequence[Tuple[Tensor, int]]) -> Dict[str, Tensor]:
    seqs = [s for s, _ in items]
    lengths = torch.tensor([len(s) for s in seqs])
    tokens = torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True, padding_value=TOKEN_ID[PAD])
    return {"tokens": tokens, "lengths": lengths, "labels": torch.tensor([y for _, y in items])}


class LogicDataModule(ResumableBatchesMixin, LightningDataModule):
    """Seeded propositional-logic splits (Weissenborn & Rocktäschel, arXiv:1606.03002, §4.1): train on short formulas, test on long.

    Args:
        train_size, val_size, test_size: formulas per split (paper: 1,000 train, 1,000 test).
        train_gates, test_gates: inclusive ``[min, max]`` gate counts (paper: 5–10 and 11–20);
            validation uses the training range.
        seed: generation seed; the same seed gives the same formulas.
        batch_size: formulas per batch (per device).
        shuffle_seed: the training order's seed; ``None`` (default): the run's ``seed_everything``
            value, so runs with different seeds also see the formulas in different orders.

    No formula appears in two splits. Training batches are random (not grouped by length) and come from
    :class:`~lit_rnncells.data.batching.BucketedBatches`: a resumed run continues with exactly the
    batches it would have seen, and ``W`` devices with ``batch_size=B`` train on the batches one device
    with ``W·B`` does.
    """

    vocab_size = len(VOCAB)
    num_classes = 2
    pad_id = TOKEN_ID[PAD]

    def __init__(self, train_size: int = 1000, val_size: int = 200, test_size: int = 1000,
                 train_gates: Tuple[int, int] = (5, 10), test_gates: Tuple[int, int] = (11, 20),
                 seed: int = 1234, batch_size: int = 32, num_workers: int = 0,
                 shuffle_seed: Optional[int] = None) -> None:
        super().__init__()
        for name, value in [("train_size", train_size), ("val_size", val_size), ("test_size", test_size),
                            ("batch_size", batch_size)]:
            if value <= 0:
                raise ValueError(f"{name} must be positive, got {value}.")
        if num_workers > 1:
            raise ValueError(f"num_workers={num_workers}: the resumable training batches are made in one process; "
                             "set num_workers to 0 or 1 (the formulas are tiny, loading is never the bottleneck).")
        for name, (lo, hi) in [("train_gates", train_gates), ("test_gates", test_gates)]:
            if not 1 <= lo <= hi:
                raise ValueError(f"{name} must be [min, max] with 1 <= min <= max, got {[lo, hi]}.")
        self.save_hyperparameters(logger=False)  # the task logs them as data/...
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.shuffle_seed = int(os.environ.get("PL_GLOBAL_SEED", 0)) if shuffle_seed is None else shuffle_seed
        rng = random.Random(seed)
        seen: Set[Formula] = set()
        self.splits: Dict[str, List[Formula]] = {}
        self.splits["train"] = generate_unique(train_size, *train_gates, rng, seen)
        self.splits["val"] = generate_unique(val_size, *train_gates, rng, seen)
        self.splits["test"] = generate_unique(test_size, *test_gates, rng, seen)

    def dataset(self, split: str) -> FormulaDataset:
        return FormulaDataset(self.splits[split])

    def _loader(self, split: str, shuffle: bool, with_index: bool = False) -> DataLoader:
        data = self.dataset(split)
        rank, world = self.rank_world()
        options = dict(shuffle=True, seed=self.shuffle_seed, chunk_batches=1, epoch=self.current_epoch,
                       start_batch=self.resume_start_batch) if shuffle else dict(shuffle=False)
        def make_batch(idx: List[int]) -> Dict[str, Tensor]:
            batch = collate([data[i] for i in idx])
            return {**batch, "index": torch.tensor(idx)} if with_index else batch

        batches = BucketedBatches([len(f) for f in data.formulas], make_batch,
                                  batch_size=self.batch_size, rank=rank, world_size=world, **options)
        return batch_loader(batches, self.num_workers)

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val", False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", False)

    def predict_dataloader(self) -> DataLoader:
        """The test formulas; each batch carries ``index``, the formulas' positions in the split."""
        return self._loader("test", False, with_index=True)
