"""LanguageModel's and TranslationDataModule's option groups: the old flat names in Python, YAML, argv and
checkpoints; the groups in ``--help`` (issue 32, item 3)."""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Dict, List

import pytest
import torch
import yaml

from lit_rnncells.utils import arguments
from lit_rnncells.cli import run
from lit_rnncells.command.deprecated_names import regroup_init_args
from lit_rnncells.command.checkpoint_options import compare_with_checkpoint as _compare_with_checkpoint
from lit_rnncells.data import TranslationDataModule
from lit_rnncells.data.checkpoint_state import options_the_checkpoint_overrides
from lit_rnncells.data.translation_options import Batching, Lengths, Subwords
from lit_rnncells.command.deprecated_names import rewrite_argv
from lit_rnncells.tasks import LanguageModel
from lit_rnncells.tasks.language_model_options import Optimization, Regularization
from .test_bad_input import write_parallel
from .test_language_model import ptb_char_corpus

REPO = Path(__file__).resolve().parents[1]
OLD_LM = {"dropout": 0.3, "dropout_h": 0.2, "dropout_i": 0.1, "dropout_e": 0.05, "weight_drop": 0.25,
          "alpha": 2.0, "beta": 1.0, "nt_asgd": True, "nonmono": 3, "scale_lr_with_seq_len": True}
OLD_DATA = {"subword_vocab_size": 300, "joint_vocabulary": False, "pretokenized": True, "min_frequency": 1,
            "eval_batch_size": 3, "max_tokens": 500, "chunk_batches": 7, "length_buckets": 2, "num_workers": 0,
            "max_source_length": 40, "max_target_length": 41, "max_input_length": 50}


def grouped_lm() -> Dict[str, Any]:
    return {"regularization": Regularization(dropout=0.3, dropout_h=0.2, dropout_i=0.1, dropout_e=0.05,
                                             weight_drop=0.25, alpha=2.0, beta=1.0),
            "optimization": Optimization(nt_asgd=True, nonmono=3, scale_lr_with_seq_len=True)}


def test_old_language_model_names_build_the_grouped_model(capsys):
    old = LanguageModel("GRU", vocab_size=20, embedding_size=8, hidden_size=8, **OLD_LM)
    new = LanguageModel("GRU", vocab_size=20, embedding_size=8, hidden_size=8, **grouped_lm())
    assert dict(old.hparams) == dict(new.hparams)
    assert not set(OLD_LM) & set(new.hparams)  # saved under the groups only
    assert new.hparams["regularization"]["dropout_h"] == 0.2 and new.drop_h.p == 0.2
    assert new.rnns[0].p == 0.25 and old.rnns[0].p == 0.25  # DropConnect on the recurrent weights
    assert "use `regularization.dropout_h`" in capsys.readouterr().err


def test_old_translation_names_build_the_grouped_datamodule(tmp_path):
    folder = write_parallel(tmp_path / "corpus")
    common = dict(dataset="parallel", data_dir=str(folder), source_language="de", target_language="en",
                  cache_dir=str(tmp_path / "cache"))
    old = TranslationDataModule(**common, **OLD_DATA)
    new = TranslationDataModule(**common, subwords=Subwords(300, False, True, 1),
                                lengths=Lengths(40, 41, 50), batching={"eval_batch_size": 3, "max_tokens": 500,
                                                                       "chunk_batches": 7, "length_buckets": 2})
    assert dict(old.hparams) == dict(new.hparams) and not set(OLD_DATA) & set(new.hparams)
    for name, value in OLD_DATA.items():  # the flat attributes the cache keys and batches read are kept
        assert getattr(new, name) == value
    assert len(list((tmp_path / "cache").iterdir())) > 0
    cached = sorted(p.name for p in (tmp_path / "cache").rglob("*"))
    TranslationDataModule(**common, **OLD_DATA)
    assert sorted(p.name for p in (tmp_path / "cache").rglob("*")) == cached  # same keys: nothing rebuilt


def test_the_argv_rewrite_follows_the_chosen_class(capsys):
    """``min_frequency`` is an old name of TranslationDataModule and a current one of SentimentDataModule;
    ``dropout`` an old name of LanguageModel and a current one of Seq2Seq."""
    assert rewrite_argv(["fit", "--data", "TranslationDataModule", "--data.init_args.min_frequency", "1"])[-2] == \
        "--data.init_args.subwords.min_frequency"
    assert rewrite_argv(["fit", "--data", "SentimentDataModule", "--data.min_frequency=1"])[-1] == \
        "--data.min_frequency=1"
    assert rewrite_argv(["fit", "--model.class_path", "lit_rnncells.tasks.Seq2Seq", "--model.dropout", "0.1"])[-2] \
        == "--model.dropout"
    assert rewrite_argv(["fit", "--config", str(REPO / "configs/lm/ptb_char_gru.yaml"), "--model.dropout", "0.1"]
                        )[-2] == "--model.regularization.dropout"
    # no class on the command line: only names no class takes today are rewritten
    assert rewrite_argv(["--data.subword_vocab_size", "9", "--data.min_frequency", "2"]) == [
        "--data.subwords.subword_vocab_size", "9", "--data.min_frequency", "2"]


def test_checkpoint_comparison_reads_old_flat_hyperparameters():
    init_args = {"hidden_size": 16, **{k: {f: v for f, v in vars(g).items()} for k, g in grouped_lm().items()}}
    flat = regroup_init_args("LanguageModel", {"hidden_size": 16, **OLD_LM})  # as the command line reads it
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # equal: no warning
        _compare_with_checkpoint(init_args, flat, "x.ckpt")
    with pytest.warns(UserWarning, match=r"regularization.dropout=0.3 \(you gave 0.5\)"):
        _compare_with_checkpoint({**init_args, "regularization": {**init_args["regularization"], "dropout": 0.5}},
                                 flat, "x.ckpt")


def test_ignored_tokenizer_options_read_old_and_new_checkpoints(tmp_path):
    folder = write_parallel(tmp_path / "corpus")
    dm = TranslationDataModule("parallel", str(folder), source_language="de", target_language="en", cache_dir="",
                               subwords={"subword_vocab_size": 300, "min_frequency": 1})
    for saved in ({"subword_vocab_size": 280, "min_frequency": 1, "joint_vocabulary": True},
                  {"subwords": {"subword_vocab_size": 280, "min_frequency": 1, "joint_vocabulary": True}}):
        assert options_the_checkpoint_overrides(dm, {"datamodule_hyper_parameters": saved}) == [
            "--data.init_args.subwords.subword_vocab_size 300 (trained with 280)"]


def _lm_args(folder: Path, out: Path, config: str = str(REPO / "configs/lm/ptb_char_gru_reference.yaml")
             ) -> List[str]:
    return ["--config", config, "--data.init_args.data_dir", str(folder), "--data.init_args.cache_dir", "",
            "--model.init_args.hidden_size", "16", "--model.init_args.embedding_size", "8",
            "--data.init_args.batch_size", "4", "--data.init_args.bptt", "20", "--trainer.logger", "false",
            "--trainer.enable_progress_bar", "false", "--trainer.max_steps", "2", "--trainer.limit_val_batches", "1",
            "--trainer.max_epochs", "1", "--test_after_fit", "false", "--run_dir", str(out)]


@pytest.mark.data_fallback
def test_old_names_in_yaml_and_argv_fit_and_an_old_checkpoint_tests(tmp_path, capsys, monkeypatch):
    """Old names in a config file and on the command line train the grouped model; a checkpoint whose
    hyperparameters are rewritten to the old flat form loads and tests with the grouped config, without a
    'checkpoint's values' warning (they are equal)."""
    monkeypatch.setattr(arguments, "_said_deprecated", set())  # each old name says its line once per process
    folder = ptb_char_corpus(tmp_path / "ptb")
    config = yaml.safe_load((REPO / "configs/lm/ptb_char_gru_reference.yaml").read_text())
    config["model"]["init_args"].update(dropout=0.1, alpha=1.5)
    old_yaml = tmp_path / "old.yaml"
    old_yaml.write_text(yaml.safe_dump(config))
    assert run(["fit", *_lm_args(folder, tmp_path / "run", str(old_yaml)), "--model.init_args.dropout_h", "0.2",
                "--model.nonmono", "2"]) == 0
    err = capsys.readouterr().err
    assert "LanguageModel option `alpha` is deprecated" in err and "use `optimization.nonmono`" in err
    ckpt = next((tmp_path / "run").rglob("last.ckpt"))
    saved = torch.load(ckpt, map_location="cpu", weights_only=True)
    assert saved["hyper_parameters"]["regularization"] == {**vars(Regularization()), "dropout": 0.1,
                                                           "dropout_h": 0.2, "alpha": 1.5}
    assert saved["hyper_parameters"]["optimization"]["nonmono"] == 2
    saved_config = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert saved_config["model"]["init_args"]["regularization"]["alpha"] == 1.5  # written with the new names

    hparams = saved["hyper_parameters"]  # the flat form of checkpoints saved before the groups
    hparams.update({**hparams.pop("regularization"), **hparams.pop("optimization")})
    old_ckpt = tmp_path / "old.ckpt"
    torch.save(saved, old_ckpt)
    loaded = LanguageModel.load_from_checkpoint(old_ckpt, weights_only=True)
    assert loaded.regularization == Regularization(dropout=0.1, dropout_h=0.2, alpha=1.5)
    assert loaded.optimization.nonmono == 2
    new = LanguageModel.load_from_checkpoint(ckpt, weights_only=True)
    assert all(torch.equal(a, b) for a, b in zip(loaded.state_dict().values(), new.state_dict().values()))

    grouped = ["--model.init_args.regularization.dropout", "0.1", "--model.init_args.regularization.dropout_h",
               "0.2", "--model.init_args.regularization.alpha", "1.5", "--model.init_args.optimization.nonmono", "2"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert run(["test", *_lm_args(folder, tmp_path / "t")[:-2], *grouped, "--ckpt_path", str(old_ckpt),
                    "--trainer.limit_test_batches", "1"]) == 0
    assert not [w for w in caught if "checkpoint's values" in str(w.message)]
    assert "test/bpc" in capsys.readouterr().out


@pytest.mark.parametrize("help_args, shown", [
    (["--model.help", "LanguageModel"], ["--model.regularization.dropout_h", "--model.regularization.weight_drop",
                                         "--model.optimization.nt_asgd", "--model.optimization.nonmono"]),
    (["--data.help", "TranslationDataModule"], ["--data.subwords.subword_vocab_size", "--data.lengths.max_input_length",
                                                "--data.batching.max_tokens", "--data.batching.num_workers"]),
])
def test_help_shows_the_groups(help_args, shown, capsys):
    assert run(["fit", *help_args]) == 0
    out = capsys.readouterr().out
    for option in shown:
        assert option in out
    assert "--model.dropout_h " not in out and "--data.max_tokens " not in out
