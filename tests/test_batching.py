"""Bucketed batches, the resumable position, checkpoint-state reading and the prediction writer."""
from __future__ import annotations

import io
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Dict, List

import numpy as np
import pytest
import torch
from lightning.pytorch import LightningDataModule

from lit_rnncells.command.callbacks import PredictionWriter
from lit_rnncells.data.batching import BucketedBatches, ResumableBatchesMixin, pad_batch
from lit_rnncells.data.checkpoint_state import datamodule_state, read_checkpoint


def _lengths(n: int = 203, seed: int = 0) -> List[int]:
    return list(np.random.default_rng(seed).integers(1, 60, size=n))


def _ids(batch: Dict[str, Any]) -> List[int]:
    return batch["index"].tolist()


def _dataset(lengths, **options) -> BucketedBatches:
    return BucketedBatches(lengths, lambda idx: {"index": torch.tensor(idx)}, **options)


def test_pad_batch_pads_right_and_returns_lengths():
    padded, lengths = pad_batch([[5, 6, 7], [8], []], pad_id=0)
    assert padded.tolist() == [[5, 6, 7], [8, 0, 0], [0, 0, 0]]
    assert lengths.tolist() == [3, 1, 0]


def test_evaluation_batches_cover_every_example_once_across_ranks_sorted_by_length():
    lengths = _lengths()
    seen = []
    for rank in range(3):
        ds = _dataset(lengths, batch_size=16, shuffle=False, rank=rank, world_size=3)
        for batch in ds:
            got = [lengths[i] for i in _ids(batch)]
            assert got == sorted(got)
            seen.extend(_ids(batch))
    assert sorted(seen) == list(range(len(lengths)))


def test_a_split_smaller_than_one_batch_per_device_still_gives_every_rank_a_batch():
    parts = [[_ids(b) for b in _dataset([5, 3, 9], batch_size=100, shuffle=False, rank=r, world_size=2)] for r in range(2)]
    assert all(len(p) == 1 for p in parts)
    assert sorted(i for p in parts for b in p for i in b) == [0, 1, 2]


def test_training_batches_are_bucketed_seeded_per_epoch_and_equal_across_ranks():
    lengths = _lengths(1000)
    ds = _dataset(lengths, batch_size=10, shuffle=True, seed=3, chunk_batches=10)
    epoch0 = [tuple(_ids(b)) for b in ds]
    assert sorted(i for b in epoch0 for i in b) == list(range(1000))
    spread = np.mean([np.ptp([lengths[i] for i in b]) for b in epoch0])
    assert spread < 10  # random batches of lengths 1-59 would spread by ~50
    again = [tuple(_ids(b)) for b in _dataset(lengths, batch_size=10, shuffle=True, seed=3, chunk_batches=10)]
    assert again == epoch0
    other = _dataset(lengths, batch_size=10, shuffle=True, seed=3, chunk_batches=10, epoch=lambda: 1)
    assert [tuple(_ids(b)) for b in other] != epoch0
    shares = [len(_dataset(lengths[:995], batch_size=10, shuffle=True, rank=r, world_size=3)) for r in range(3)]
    assert shares == [34, 34, 34]  # 33 global batches of 30 and one of 5: every rank steps alike


@pytest.mark.parametrize("max_tokens", [None, 300])
def test_ranks_together_train_on_the_batches_one_device_with_the_global_batch_size_does(max_tokens):
    """W ranks × batch_size B take, step by step, the examples of one rank with batch_size W·B (and W·max_tokens),
    split as evenly as possible: what makes DDP's averaged gradient the single device's."""
    lengths = _lengths(1000)
    one = [_ids(b) for b in _dataset(lengths, batch_size=12, max_tokens=None if max_tokens is None else 3 * max_tokens,
                                     shuffle=True, seed=5, chunk_batches=4)]
    ranks = [[_ids(b) for b in _dataset(lengths, batch_size=4, max_tokens=max_tokens, shuffle=True, seed=5,
                                        chunk_batches=4, rank=r, world_size=3)] for r in range(3)]
    shared = [b for b in one if len(b) >= 3]  # a global batch of fewer examples than ranks is dropped
    assert len(ranks[0]) == len(ranks[1]) == len(ranks[2]) == len(shared) > 0
    for step, together in enumerate(zip(*ranks)):
        assert sorted(i for part in together for i in part) == sorted(shared[step])
        sizes = [len(part) for part in together]
        assert max(sizes) - min(sizes) <= 1


def test_max_tokens_bounds_padded_tokens():
    lengths = _lengths(500)
    for batch in _dataset(lengths, batch_size=64, max_tokens=200, shuffle=True):
        ids = _ids(batch)
        assert len(ids) == 1 or max(lengths[i] for i in ids) * len(ids) <= 200


def test_start_batch_skips_and_batches_carry_their_position():
    lengths = _lengths()
    full = list(_dataset(lengths, batch_size=8, shuffle=True))
    resumed = list(_dataset(lengths, batch_size=8, shuffle=True, start_batch=lambda epoch: 5))
    assert [b["batch"] for b in resumed] == list(range(5, len(full)))
    assert [_ids(b) for b in resumed] == [_ids(b) for b in full[5:]]


def test_too_few_training_examples_for_the_devices_fail_at_construction():
    with pytest.raises(ValueError, match="fewer than the 4 devices"):
        _dataset([3, 4, 5], batch_size=2, shuffle=True, world_size=4)
    with pytest.raises(ValueError, match="no examples"):
        _dataset([], batch_size=2, shuffle=False)


class _Data(ResumableBatchesMixin, LightningDataModule):
    def __init__(self, batch_size: int) -> None:
        super().__init__()
        self.batch_size = batch_size

    def state_dict(self) -> Dict[str, Any]:
        return {**super().state_dict(), "vocab": ["a", "b"]}


def test_mixin_records_the_training_position_and_resumes_after_it():
    data = _Data(batch_size=8)
    data.trainer = SimpleNamespace(training=True, global_rank=0, world_size=1, current_epoch=2)
    data.on_after_batch_transfer({"epoch": 2, "batch": 6}, 0)
    state = data.state_dict()
    assert state == {"position": {"epoch": 2, "batch": 7, "world_size": 1, "batch_size": 8}, "vocab": ["a", "b"]}
    fresh = _Data(batch_size=8)
    fresh.load_state_dict(state)
    assert fresh.resume_start_batch(2) == 7
    assert fresh.resume_start_batch(2) == 0  # used once: the next epoch starts at its beginning


def test_mixin_restarts_the_epoch_with_a_warning_when_the_batch_size_changed():
    data = _Data(batch_size=16)
    data.load_state_dict({"position": {"epoch": 0, "batch": 3, "world_size": 1, "batch_size": 8}})
    with pytest.warns(UserWarning, match="batch_size=8 .* batch_size=16 on 1: epoch 0 restarts"):
        assert data.resume_start_batch(0) == 0


def test_checkpoint_state_reading_errors_are_one_sentence(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_checkpoint(str(tmp_path / "missing.ckpt"))
    junk = tmp_path / "junk.ckpt"
    junk.write_bytes(b"not a checkpoint at all")
    with pytest.raises(ValueError, match="is not a readable checkpoint"):
        read_checkpoint(str(junk))
    good = tmp_path / "good.ckpt"
    torch.save({"state_dict": {}, "_Data": {"vocab": ["a"]}, "OtherDataModule": {}}, good)
    assert datamodule_state(str(good), _Data) == {"vocab": ["a"]}

    class TranslationDataModule:
        pass

    with pytest.raises(ValueError, match="was trained with OtherDataModule, not TranslationDataModule"):
        datamodule_state(str(good), TranslationDataModule)


def test_prediction_writer_writes_records_in_input_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    trainer = SimpleNamespace(world_size=1, global_rank=0)
    out = tmp_path / "out.txt"
    writer = PredictionWriter(str(out))
    writer.on_predict_epoch_start(trainer, None)
    writer.write_on_batch_end(trainer, None, [{"index": 2, "text": "c"}, {"index": 0, "text": "a"}], None, None, 0, 0)
    writer.write_on_batch_end(trainer, None, "a language-model sample, printed by the model", None, None, 1, 0)
    writer.write_on_batch_end(trainer, None, [{"index": 1, "text": "b"}], None, None, 2, 0)
    writer.on_predict_epoch_end(trainer, None)
    assert out.read_text() == "a\nb\nc\n"
    stdout = io.StringIO()
    monkeypatch.setattr(sys, "stdout", stdout)
    PredictionWriter().on_predict_epoch_end(trainer, None)  # nothing predicted: nothing written
    writer = PredictionWriter()
    writer.write_on_batch_end(trainer, None, [{"index": 0, "text": "only"}], None, None, 0, 0)
    writer.on_predict_epoch_end(trainer, None)
    assert stdout.getvalue() == "only\n"
