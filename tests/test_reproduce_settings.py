"""The reproductions run with each paper's own settings (docs/reproduction/*.md states them)."""
from __future__ import annotations

from typing import Any, Dict, List

import pytest

from lit_rnncells.cells import GRUDT, MZU, build_cell
from lit_rnncells.experiments import paper_scale
from lit_rnncells.experiments.compare import check_cell
from lit_rnncells.experiments.reproduce import PAPERS, ROOT, Experiment


def _experiment(paper: str, name: str) -> Experiment:
    return next(e for e in PAPERS[paper][1] if e.name == name)


def _cells(exp: Experiment) -> Dict[str, Any]:
    """The cells an experiment runs, built at a tiny size, by the paper's name."""
    cells = {}
    for spec, paper_name in exp.cells.items():
        parsed = check_cell(spec)
        name = parsed if isinstance(parsed, str) else parsed["class_path"]
        options: Dict[str, Any] = {} if isinstance(parsed, str) else parsed["init_args"]
        cells[paper_name] = build_cell(name, 16, 16, **options)
    return cells


def _mzu_cells(exp: Experiment) -> List[MZU]:
    return [cell for cell in _cells(exp).values() if isinstance(cell, MZU)]


def _locked_dropout(exp: Experiment) -> float:
    """The locked dropout on the RNN output a run of ``exp`` gets: its config's, unless ``extra`` sets it."""
    import yaml

    assert "--model.init_args.dropout" not in exp.extra  # the name before the regularization group
    if "--model.init_args.regularization.dropout" in exp.extra:
        return float(_arg(exp, "--model.init_args.regularization.dropout"))
    config = yaml.safe_load((ROOT / exp.config).read_text())
    return float(config["model"]["init_args"].get("regularization", {}).get("dropout", 0.0))


def _ptb_char_both_scales() -> List[Experiment]:
    cpu = _experiment("mzu", "ptb_char")
    paper = next(e for e in paper_scale.experiments("mzu", PAPERS["mzu"][1]) if e.name == "ptb_char")
    return [cpu, paper]


@pytest.mark.parametrize("exp", _ptb_char_both_scales(), ids=["cpu", "paper"])
def test_every_table_1_cell_gets_the_papers_dropout_and_layer_norm_and_nothing_else(exp: Experiment) -> None:
    """The paper: layer norm and dropout 0.5 on the candidate activation for the MZUs, and (its footnote 3) the
    same for the GRUs; no other dropout is stated, so no run gets locked dropout on its output."""
    cells = _cells(exp)
    assert sorted(cells) == ["GRU", "GRU+DT", "capMZU+DT", "gcnMZU+DT", "satMZU+DT"]
    for name, cell in cells.items():
        assert (cell.layer_norm, cell.candidate_dropout) == (True, 0.5), name
    assert isinstance(cells["GRU"], GRUDT) and cells["GRU"].transition_depth == 0
    assert (cells["GRU+DT"].transition_depth, cells["GRU+DT"].share_transition) == (1, True)
    assert _locked_dropout(exp) == 0.0


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


def test_mzu_absa_gives_its_gru_dt_baseline_the_same_regularisers() -> None:
    """The paper states layer norm and candidate dropout for its language models only (GRUs included, footnote 3);
    for ABSA our choice gives both cells the same, as footnote 3 does on PTB."""
    cells = _cells(_experiment("mzu", "absa_restaurants"))
    gru_dt = cells["GRU+DT"]
    assert isinstance(gru_dt, GRUDT) and gru_dt.transition_depth == 1
    assert (gru_dt.layer_norm, gru_dt.candidate_dropout) == (True, 0.5)


@pytest.mark.parametrize("paper", sorted(PAPERS))
def test_every_experiment_states_the_papers_setting_and_ours(paper: str) -> None:
    for exp in PAPERS[paper][1]:
        assert exp.paper_setting and exp.our_setting


def test_mcrnn_ptb_word_uses_the_awd_lstm_regularisers() -> None:
    exp = _experiment("mcrnn", "ptb_word")
    assert exp.config == "configs/lm/ptb_word_awd_lstm.yaml"  # DropConnect 0.5, dropouts, AR/TAR, SGD 30, NT-ASGD
    for key in ("--model.init_args.weight_drop", "--model.init_args.alpha", "--optimizer", "--model.init_args.nt_asgd"):
        assert key not in exp.extra  # nothing of the paper's setup is overridden


@pytest.mark.parametrize("paper", sorted(PAPERS))
def test_no_experiment_passes_an_option_name_that_is_going(paper: str) -> None:
    """A reproduction's own arguments use today's names (``backend: compiled``, not the deprecated ``compile``),
    so its runs print no deprecation line."""
    for exp in PAPERS[paper][1] + paper_scale.experiments(paper, PAPERS[paper][1]):
        assert "--model.init_args.compile" not in exp.extra, exp.name
        assert "--model.init_args.dropout" not in exp.extra or "LanguageModel" not in (ROOT / exp.config).read_text()


def test_mufuru_ptb_word_runs_at_the_papers_size_with_its_optimiser() -> None:
    """§4.2: single-layer models of 200 hidden units, equal for the GRU and the MuFuRU; Adam with β1 = 0 (all the
    paper's experiments). Both configs agree but for the cell, so the one config the runner reads is fair to both."""
    import yaml

    exp = _experiment("mufuru", "ptb_word")
    assert exp.hidden_size == 200 and exp.match_params is None
    assert sorted(exp.cells.values()) == ["GRU", "MuFuRU"] and exp.paper == {"GRU": 123.0, "MuFuRU": 119.7}
    configs = [yaml.safe_load((ROOT / f"configs/lm/ptb_word_{c}.yaml").read_text()) for c in ("gru", "mufuru")]
    for config in configs:
        model = config["model"]["init_args"]
        assert (model["num_layers"], model["hidden_size"]) == (1, 200)
        assert model["optimizer"]["init_args"]["betas"] == [0.0, 0.999]
        assert config["data"]["init_args"]["dataset"] == "ptb_word"
    del configs[0]["model"]["init_args"]["cell"], configs[1]["model"]["init_args"]["cell"]
    assert configs[0] == configs[1]
    assert exp.config == "configs/lm/ptb_word_gru.yaml"
    assert "--model.init_args.num_layers" not in exp.extra and "--model.init_args.hidden_size" not in exp.extra


def test_caru_multi30k_runs_the_papers_settings_at_equal_hidden_size_on_both_scales() -> None:
    """Tables 1-2: "256 input and 2048 output" for GRU, MGU and CARU alike, batch 100, Adam 1e-3 halved whenever
    validation stagnates. The CPU scale keeps all of it but the hidden size (256, equal for every cell); the paper
    scale runs 2048."""
    import yaml

    cpu = _experiment("caru", "multi30k_de_en")
    paper = next(e for e in paper_scale.experiments("caru", PAPERS["caru"][1]) if e.name == "multi30k_de_en")
    config = yaml.safe_load((ROOT / cpu.config).read_text())
    model, data = config["model"]["init_args"], config["data"]["init_args"]
    assert (model["embedding_size"], model["num_layers"], data["batch_size"]) == (256, 1, 100)
    assert model["optimizer"]["init_args"]["lr"] == 0.001
    assert model["lr_scheduler"]["init_args"]["factor"] == 0.5 and model["scheduler_monitor"] == "val/loss"
    assert (data["source_language"], data["target_language"]) == ("de", "en")
    for exp, hidden in ((cpu, 256), (paper, 2048)):
        assert sorted(exp.cells.values()) == ["CARU", "GRU", "MGU"] and exp.paper["CARU"] == 31.99
        assert exp.hidden_size == hidden and exp.match_params is None  # equal hidden size, as the paper compares
        assert exp.metric == "test/sacrebleu" and not exp.lower_is_better
        for key in ("--model.init_args.embedding_size", "--data.init_args.batch_size", "--optimizer"):
            assert key not in exp.extra
    assert cpu.seeds == 3 and paper.budget == "epochs=20"


def _check_mcrnn_seq2seq(name: str, configs_stem: str, layers: int, beam: int, metric: str, dataset: str) -> Any:
    """The two configs of an MC-RNN seq2seq experiment agree but for the cell (the runner reads the LSTM one for
    both), with the paper's layers and beam; MC-RNN-3 wraps the same LSTM at equal hidden size; every test
    example is scored."""
    import yaml

    exp = _experiment("mcrnn", name)
    assert exp.hidden_size == 128 and exp.match_params is None
    assert exp.metric == metric and not exp.lower_is_better
    mcrnn = _cells(exp)["MC-RNN-3"]
    assert (type(mcrnn).__name__, mcrnn.block_size, type(mcrnn.cell).__name__) == ("MultiChannel", 4, "LSTM")
    configs = [yaml.safe_load((ROOT / f"configs/seq2seq/{configs_stem}_{c}.yaml").read_text())
               for c in ("lstm", "mcrnn3")]
    model = configs[0]["model"]["init_args"]
    assert (model["num_layers"], model["decoding"]["beam_size"]) == (layers, beam)
    assert configs[0]["data"]["init_args"]["dataset"] == dataset
    del configs[0]["model"]["init_args"]["cell"], configs[1]["model"]["init_args"]["cell"]
    assert configs[0] == configs[1]
    assert exp.config == f"configs/seq2seq/{configs_stem}_lstm.yaml"
    assert not any(arg.startswith("--trainer.limit_test_batches") for arg in exp.extra)
    return exp


def test_mcrnn_iwslt14_runs_the_papers_model_at_equal_hidden_size_on_the_whole_test_set() -> None:
    """Table 2: a 2-layer LSTM RNNSearch and MC-RNN-3 around the same LSTM at equal hidden size (29M against 25M
    parameters in the paper), beam 5, tokenised BLEU; the CPU budget shrinks the sizes and the BPE, never the
    test set."""
    exp = _check_mcrnn_seq2seq("iwslt14_de_en", "iwslt14_de_en", 2, 5, "test/tok_bleu", "iwslt14")
    assert exp.paper == {"Baseline-RNN": 31.03, "MC-RNN-3": 32.23}


def test_mcrnn_gigaword_runs_the_papers_4_layer_model_with_beam_10_and_rouge() -> None:
    """Table 3: a 4-layer LSTM RNNSearch against MC-RNN-3 around the same LSTM at equal hidden size, beam 10,
    ROUGE F1 on every test pair."""
    import yaml

    exp = _check_mcrnn_seq2seq("gigaword", "gigaword", 4, 10, "test/rouge1", "gigaword")
    assert exp.paper == {"Baseline-RNN": 34.65, "MC-RNN-3": 36.55}
    model = yaml.safe_load((ROOT / "configs/seq2seq/gigaword_lstm.yaml").read_text())["model"]["init_args"]
    assert "rouge" in model["decoding"]["eval_metrics"]
