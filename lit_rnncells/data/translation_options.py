"""The option groups of :class:`~lit_rnncells.data.translation.TranslationDataModule`: how the subword
tokenizers are built, which lengths are accepted, and how pairs are batched. Each field keeps the flat name it
replaces (``subwords.subword_vocab_size`` was ``subword_vocab_size``), so messages, docs and old configs name the
same thing."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Optional

from ..utils.arguments import check_positive

DEFAULT_MAX_INPUT_LENGTH = 1024
"""The longest source (subwords) accepted at validate / test / predict time unless ``max_input_length`` says."""


@dataclass(frozen=True)
class Subwords:
    """The BPE tokenizers, fitted on the training lines only (with a checkpoint, test and predict use the
    checkpoint's tokenizers instead).

    Args:
        subword_vocab_size: BPE symbols per tokenizer, the 4 specials and 256 bytes included (at least 260).
        joint_vocabulary: one tokenizer fitted on both sides' training lines (else one per side).
        pretokenized: split on whitespace first, so merges stay inside the corpus's tokens and outputs are
            Moses-detokenised for sacreBLEU (default for IWSLT14 and Gigaword), or BPE over raw text (others);
            both byte-level (:mod:`lit_rnncells.data.subword`).
        min_frequency: BPE merges need a pair seen at least this often.
    """

    subword_vocab_size: int = 8000
    joint_vocabulary: bool = True
    pretokenized: Optional[bool] = None
    min_frequency: int = 2

    def __post_init__(self) -> None:
        check_positive(subword_vocab_size=self.subword_vocab_size, min_frequency=self.min_frequency)


@dataclass(frozen=True)
class Lengths:
    """Length limits in subwords (without the added <bos> / <eos>).

    Args:
        max_source_length, max_target_length: training pairs longer than these are dropped (and counted);
            None: any length.
        max_input_length: the longest source accepted at validate / test / predict time (default 1024: a longer
            line is an error naming it, not minutes of decoding); None: any length.
    """

    max_source_length: Optional[int] = None
    max_target_length: Optional[int] = None
    max_input_length: Optional[int] = DEFAULT_MAX_INPUT_LENGTH

    def __post_init__(self) -> None:
        for f in fields(self):
            if getattr(self, f.name) is not None:
                check_positive(**{f.name: getattr(self, f.name)})


@dataclass(frozen=True)
class Batching:
    """How pairs become batches (the training batch size is the DataModule's ``batch_size``).

    Args:
        eval_batch_size: pairs per validation / test / predict batch.
        max_tokens: also at most this many padded source (or target) tokens per training batch; None: no limit.
        chunk_batches: training batches per length-sorted chunk (more: less padding, less shuffling).
        length_buckets: 0 (off: each batch padded to its longest sequence) or how many lengths sources and
            targets are padded up to (quantiles of the training lengths; ``data.batching.LengthBuckets``), so a
            ``backend: graphs`` model replays a few captured shapes; results are those of unpadded batches.
        num_workers: 0 (collate in the training process) or 1 (in one background loader process).
    """

    eval_batch_size: int = 64
    max_tokens: Optional[int] = None
    chunk_batches: int = 50
    length_buckets: int = 0
    num_workers: int = 0

    def __post_init__(self) -> None:
        check_positive(eval_batch_size=self.eval_batch_size, chunk_batches=self.chunk_batches)
        if self.max_tokens is not None:
            check_positive(max_tokens=self.max_tokens)
        if self.length_buckets:
            check_positive(length_buckets=self.length_buckets)
        if self.num_workers not in (0, 1):
            raise ValueError(f"num_workers must be 0 or 1 (the bucketed batches are not split between loader "
                             f"workers, more would repeat them), got {self.num_workers}.")


GROUPS = {"subwords": Subwords, "lengths": Lengths, "batching": Batching}
"""Each group's name and type, as the DataModule's parameters name them."""
DEPRECATED_NAMES = {f.name: f"{group}.{f.name}" for group, cls in GROUPS.items() for f in fields(cls)}
"""Old flat name → ``group.field`` (configs, command lines and checkpoints from before the groups)."""
