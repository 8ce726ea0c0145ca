"""The reproductions run with each paper's own settings (docs/reproduction/*.md states them)."""
from __future__ import annotations

from typing import Any, Dict, List

import pytest

from lit_rnncells.cells import MZU, build_cell
from lit_rnncells.experiments.compare import check_cell
from lit_rnncells.experiments.reproduce import PAPERS, Experiment


def _experiment(paper: str, name: str) -> Experiment:
    return next(e for e in PAPERS[paper][1] if e.name == name)


def _mzu_cells(exp: Experiment) -> List[MZU]:
    cells = []
    for spec in exp.cells:
        parsed = check_cell(spec)
        name = parsed if isinstance(parsed, str) else parsed["class_path"]
        options: Dict[str, Any] = {} if isinstance(parsed, str) else parsed["init_args"]
        cell = build_cell(name, 16, 16, **options)
        if isinstance(cell, MZU):
            cells.append(cell)
    return cells


def _arg(exp: Experiment, key: str) -> str:
    return exp.extra[exp.extra.index(key) + 1]


def test_mzu_ptb_char_runs_the_papers_table_1_cells_with_its_settings() -> None:
    exp = _experiment("mzu", "ptb_char")
    assert sorted(exp.cells.values()) == ["GRU", "GRU+DT", "capMZU+DT", "gcnMZU+DT", "satMZU+DT"]
    cells = _mzu_cells(exp)
    assert len(cells) == 3
    for cell in cells:  # 4 zones, λ = 1, layer norm, candidate dropout 0.5, one t-MZU sharing the M-functions
        assert (cell.zones, cell.disagreement_weight, cell.layer_norm, cell.candidate_dropout) == (4, 1.0, True, 0.5)
        assert (cell.transition_depth, cell.share_transition) == (1, True)
        zf = cell.blocks[0].zone_fns
        if zf.composition == "cap":
            assert (zf.capsules, zf.routing_iterations) == (2, 3)
    assert _arg(exp, "--model.init_args.regularization.dropout") == "0.0"  # the paper's dropout is on the candidate only


def test_mzu_absa_runs_capmzu_with_layer_norm_and_candidate_dropout() -> None:
    (cell,) = _mzu_cells(_experiment("mzu", "absa_restaurants"))
    assert (cell.zones, cell.layer_norm, cell.candidate_dropout, cell.transition_depth) == (4, True, 0.5, 1)


@pytest.mark.parametrize("paper", sorted(PAPERS))
def test_every_experiment_states_the_papers_setting_and_ours(paper: str) -> None:
    for exp in PAPERS[paper][1]:
        assert exp.paper_setting and exp.our_setting


def test_mcrnn_ptb_word_uses_the_awd_lstm_regularisers() -> None:
    exp = _experiment("mcrnn", "ptb_word")
    assert exp.config == "configs/lm/ptb_word_awd_lstm.yaml"  # DropConnect 0.5, dropouts, AR/TAR, SGD 30, NT-ASGD
    for key in ("--model.init_args.weight_drop", "--model.init_args.alpha", "--optimizer", "--model.init_args.nt_asgd"):
        assert key not in exp.extra  # nothing of the paper's setup is overridden
