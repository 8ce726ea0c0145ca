"""Logic-evaluation data (Weissenborn & Rocktäschel, arXiv:1606.03002, §4.1) and the LogicEvaluator task."""
from __future__ import annotations

import itertools

import lightning as L
import pytest
import torch

from lit_rnncells.data.logic import GATES, LogicDataModule, count_formulas, evaluate
from lit_rnncells.tasks import LogicEvaluator


def test_evaluate_paper_example():
    # [1, 0, ∧, 0, ∨, 1, ⇒] = ((1 ∧ 0) ∨ 0) ⇒ 1 = 1
    assert evaluate(("1", "0", "AND", "0", "OR", "1", "IMPLIES")) == 1
    # ((1 ∧ 1) XOR 1) = 0 ; left to right, first operand is the running value
    assert evaluate(("1", "1", "AND", "1", "XOR")) == 0
    assert evaluate(("1", "0", "A_AND_NOT_B")) == 1 and evaluate(("0", "1", "A_AND_NOT_B")) == 0
    assert evaluate(("0", "1", "IMPLIES")) == 1 and evaluate(("1", "0", "IMPLIES")) == 0
    assert evaluate(("1", "0", "IMPLIED_BY")) == 1 and evaluate(("0", "1", "IMPLIED_BY")) == 0


def test_ten_distinct_gates_each_depending_on_both_inputs():
    tables = {name: tuple(fn(a, b) for a, b in itertools.product((0, 1), repeat=2)) for name, fn in GATES.items()}
    assert len(GATES) == 10 and len(set(tables.values())) == 10
    for name, fn in GATES.items():
        assert any(fn(0, b) != fn(1, b) for b in (0, 1)), f"{name} ignores A"
        assert any(fn(a, 0) != fn(a, 1) for a in (0, 1)), f"{name} ignores B"


def test_count_formulas():
    assert count_formulas(1, 1) == 2 ** 2 * 10
    assert count_formulas(1, 2) == 40 + 2 ** 3 * 100


def test_splits_have_paper_sizes_ranges_and_no_overlap():
    dm = LogicDataModule()
    assert [len(dm.splits[s]) for s in ("train", "val", "test")] == [1000, 200, 1000]
    gates = {s: {(len(f) - 1) // 2 for f in dm.splits[s]} for s in dm.splits}
    assert min(gates["train"]) >= 5 and max(gates["train"]) <= 10
    assert min(gates["test"]) >= 11 and max(gates["test"]) <= 20
    sets = {s: set(dm.splits[s]) for s in dm.splits}
    assert all(len(sets[s]) == len(dm.splits[s]) for s in sets)
    assert not (sets["train"] & sets["val"]) and not (sets["train"] & sets["test"]) and not (sets["val"] & sets["test"])
    labels = [y for _, y in dm.dataset("test")]
    assert 0.2 < sum(labels) / len(labels) < 0.8


def test_generation_is_seeded():
    assert LogicDataModule(seed=3).splits == LogicDataModule(seed=3).splits
    assert LogicDataModule(seed=3).splits["train"] != LogicDataModule(seed=4).splits["train"]


def test_overlapping_gate_ranges_still_disjoint():
    dm = LogicDataModule(train_size=30, val_size=5, test_size=5, train_gates=(1, 1), test_gates=(1, 1))
    everything = dm.splits["train"] + dm.splits["val"] + dm.splits["test"]
    assert len(set(everything)) == 40 == len(everything)


def test_more_formulas_than_exist_fails_at_start():
    with pytest.raises(ValueError, match="only 40 exist"):
        LogicDataModule(train_size=41, train_gates=(1, 1), test_gates=(2, 3))
    with pytest.raises(ValueError, match="after excluding other splits"):
        LogicDataModule(train_size=30, val_size=5, test_size=6, train_gates=(1, 1), test_gates=(1, 1))


@pytest.mark.parametrize("kwargs,match", [({"batch_size": 0}, "batch_size"), ({"train_gates": (3, 2)}, "train_gates"),
                                          ({"test_size": -1}, "test_size")])
def test_bad_data_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LogicDataModule(**kwargs)


@pytest.mark.parametrize("kwargs,match", [({"hidden_size": 0}, "hidden_size"), ({"embedding_size": -3}, "embedding_size"),
                                          ({"cell": "NoSuchCell"}, "Known cells: .*GRU")])
def test_bad_model_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LogicEvaluator(**kwargs)


def test_evaluator_learns_one_gate_formulas():
    """Single-gate formulas are a lookup of 40 cases: a MuFuRU must fit them."""
    L.seed_everything(0)
    dm = LogicDataModule(train_size=36, val_size=4, test_size=20, train_gates=(1, 1), test_gates=(2, 2), batch_size=6)
    model = LogicEvaluator(cell="MuFuRU", vocab_size=dm.vocab_size, hidden_size=16,
                           optimizer=lambda p: torch.optim.Adam(p, lr=0.02))
    trainer = L.Trainer(max_epochs=40, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(model, dm)
    result = trainer.validate(model, dataloaders=dm._loader("train", False), verbose=False)[0]
    assert result["val/acc"] > 0.95


def test_checkpoint_of_a_python_built_model_loads_with_weights_only(tmp_path):
    """hparams hold no callables: the cell is stored as a name or {class_path, init_args}."""
    from functools import partial

    from lit_rnncells.cells import MuFuRU

    dm = LogicDataModule(train_size=8, val_size=2, test_size=2, train_gates=(1, 1), test_gates=(2, 2), batch_size=4)
    model = LogicEvaluator(cell=partial(MuFuRU, ops=("keep", "replace")), hidden_size=6,
                           optimizer=lambda p: torch.optim.SGD(p, lr=0.1))
    trainer = L.Trainer(max_epochs=1, accelerator="cpu", logger=False, enable_progress_bar=False,
                        enable_model_summary=False, default_root_dir=tmp_path)
    trainer.fit(model, dm)
    ckpt = next(tmp_path.rglob("*.ckpt"))
    assert torch.load(ckpt, weights_only=True)["hyper_parameters"]["cell"] == {
        "class_path": "MuFuRU", "init_args": {"ops": ("keep", "replace")}}
    restored = LogicEvaluator.load_from_checkpoint(ckpt)
    assert restored.rnn.cell().ops == ("keep", "replace")
    torch.testing.assert_close(restored.classifier.weight, model.classifier.weight)
