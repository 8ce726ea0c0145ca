"""The parameter matcher finds, for every registered cell, the hidden size nearest a target count."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import pytest

from lit_rnncells.cells import available_cells
from lit_rnncells.experiments.param_match import ParamCounter, count_parameters, match_hidden_size, rebuild
from lit_rnncells.tasks import AspectClassifier, DocumentClassifier, LanguageModel, LogicEvaluator, Seq2Seq

ROOT = Path(__file__).resolve().parents[1]
SPECS = {name: name for name in available_cells()}
SPECS["MultiChannel"] = {"class_path": "MultiChannel", "init_args": {"cell": "GRU", "block_size": 3}}


@pytest.fixture(scope="module")
def counter():
    return ParamCounter(str(ROOT / "configs" / "logic" / "gru.yaml"), ["--trainer.logger", "false"])


def neighbour(counter: ParamCounter, cell, h: int, step: int) -> Optional[int]:
    """The count at the nearest size the cell accepts in direction ``step`` (None if there is none near)."""
    size = h + step
    while 1 <= size <= h + 64 * abs(step) and size >= h - 64:
        n = counter.count(cell, size)
        if n is not None:
            return n
        size += step
    return None


@pytest.mark.parametrize("name", sorted(SPECS))
@pytest.mark.parametrize("reference", ["GRU@8", "GRU@32"])
def test_every_cell_is_matched_within_one_hidden_size_step(counter, name, reference):
    cell = SPECS[name]
    target = counter.target(reference)
    match = counter.match(cell, target)
    assert match.params == counter.count(cell, match.hidden_size) and match.target == target
    for step in (-1, 1):
        other = neighbour(counter, cell, match.hidden_size, step)
        if other is not None:
            assert abs(match.params - target) <= abs(other - target), (name, match, step, other)
    assert match.gap == pytest.approx((match.params - target) / target)


def test_reference_matches_itself_and_counts_grow(counter):
    target = counter.target("GRU@8")
    assert target == count_parameters(counter.model)  # the config is a GRU of size 8
    assert counter.match("GRU", target).hidden_size == 8 and counter.match("GRU", target).gap == 0
    assert counter.target("5000") == 5000 and counter.target("1.2e4") == 12000
    counts = [counter.count("MuFuRU", h) for h in range(1, 40)]
    assert counts == sorted(counts)


def test_refused_sizes_are_skipped():
    """A cell that only accepts multiples of 4 is matched among those."""
    def count(h: int) -> Optional[int]:
        return None if h % 4 else 10 * h * h
    match = match_hidden_size(count, 10 * 30 * 30, "Zoned")
    assert match.hidden_size == 28 and match.params == 7840  # |7840 - 9000| < |10240 - 9000|
    match = match_hidden_size(count, 10 * 31 * 31, "Zoned")
    assert match.hidden_size == 32 and match.params == 10240  # |10240 - 9610| < |7840 - 9610|


def test_a_cell_that_refuses_every_size_says_why_at_the_last_size_tried():
    tried = []
    def why(h: int) -> str:
        tried.append(h)
        return "zones must be a positive integer, got 0; set it to 1 or more."
    said = (r"^Zoned accepts none of the hidden sizes 1\.\.256; check its options \(at 256: zones must be a "
            r"positive integer, got 0; set it to 1 or more\)\.$")
    with pytest.raises(ValueError, match=said):
        match_hidden_size(lambda h: None, 100, "Zoned", why=why)
    assert tried == [256]
    with pytest.raises(ValueError, match=r"check its options\.$"):  # no reason given: the sentence as before
        match_hidden_size(lambda h: None, 100, "Zoned")


def test_the_counter_gives_the_cells_own_reason_for_a_refused_size(counter):
    zoned = {"class_path": "SatMZU", "init_args": {"zones": 3}}
    assert counter.count(zoned, 8) is None
    assert counter.refusal(zoned, 8) == ("hidden_size=8 is not divisible by zones=3; pick a number of zones that "
                                         "divides hidden_size (e.g. 2).")
    assert counter.count(zoned, 9) is not None and counter.refusal(zoned, 9) is None


@pytest.mark.parametrize("model", [
    LogicEvaluator(vocab_size=13, hidden_size=8),
    LanguageModel(vocab_size=50, embedding_size=16, hidden_size=16),
    Seq2Seq(source_vocab_size=30, target_vocab_size=30, embedding_size=8, hidden_size=8, eval_metrics=[]),
    DocumentClassifier(vocab_size=40, embedding_size=8, hidden_size=8),
    AspectClassifier(vocab_size=40, embedding_size=8, hidden_size=8),
], ids=lambda m: type(m).__name__)
def test_rebuild_changes_cell_and_size_of_every_task(model):
    other = rebuild(model, cell="CARU", hidden_size=12)
    assert type(other) is type(model) and other.hparams["hidden_size"] == 12
    assert other.hparams["cell"] == "CARU"
    same = rebuild(model, cell=model.hparams["cell"], hidden_size=model.hparams["hidden_size"])
    assert count_parameters(same) == count_parameters(model)
    assert count_parameters(rebuild(model, cell="GRU", hidden_size=13)) > count_parameters(
        rebuild(model, cell="GRU", hidden_size=12))
