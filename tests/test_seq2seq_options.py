"""Seq2Seq's option groups (tasks/seq2seq_options.py): encoder / decoder / decoding, the old flat names in
Python, YAML, argv and old checkpoints (whose hyperparameters are exactly the flat form rewritten here)."""
from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path
from typing import Any, Dict, List

import pytest
import torch
import yaml

from lit_rnncells.utils import arguments
from lit_rnncells.cli import run
from lit_rnncells.nn.beam_search import SearchConfig, SearchOptions
from lit_rnncells.tasks import Seq2Seq
from lit_rnncells.tasks.seq2seq_options import DECODING_OPTIONS, DEPRECATED_NAMES, DecodingConfig, SideConfig

from .test_duc2004 import gigaword_folder

SMALL = dict(source_vocab_size=17, target_vocab_size=13, embedding_size=6, hidden_size=8, dropout=0.0)
OLD_SIDES = {"encoder_cell": ("encoder", "cell"), "decoder_cell": ("decoder", "cell"),
             "encoder_layers": ("encoder", "num_layers"), "decoder_layers": ("decoder", "num_layers"),
             "encoder_hidden_size": ("encoder", "hidden_size"),
             "encoder_output_dropout": ("encoder", "output_dropout"), "output_dropout": ("decoder", "output_dropout")}


def test_decoding_extends_the_search_options_and_every_old_decoding_name_maps_into_it() -> None:
    search = [f.name for f in fields(SearchOptions)]
    assert list(DECODING_OPTIONS[:len(search)]) == search  # one definition of the search options
    assert [f.name for f in fields(SearchConfig)][:len(search)] == search
    old = ("beam_size", "val_beam_size", "n_best", "length_penalty", "length_penalty_alpha", "min_length",
           "max_length_a", "max_length_b", "no_repeat_ngram_size", "ban_unk", "eval_metrics", "rouge_max_bytes",
           "rouge_multiref")
    for name in old:
        group, _, field = DEPRECATED_NAMES[name].partition(".")
        assert group == "decoding" and field in DECODING_OPTIONS, name
    for name, (group, field) in OLD_SIDES.items():
        assert DEPRECATED_NAMES[name] == f"{group}.{field}"


def test_groups_and_old_names_build_the_same_model(capsys: pytest.CaptureFixture) -> None:
    torch.manual_seed(0)
    new = Seq2Seq(**SMALL, encoder=SideConfig(cell="LSTM", num_layers=2, hidden_size=5, output_dropout=0.1),
                  decoder={"cell": "MGU", "num_layers": 3, "output_dropout": 0.2},
                  decoding=DecodingConfig(beam_size=4, n_best=2, alpha=0.2, eval_metrics=("rouge",)))
    torch.manual_seed(0)
    old = Seq2Seq(**SMALL, encoder_cell="LSTM", encoder_layers=2, encoder_hidden_size=5, encoder_output_dropout=0.1,
                  decoder_cell="MGU", decoder_layers=3, output_dropout=0.2, beam_size=4, n_best=2,
                  length_penalty_alpha=0.2, eval_metrics=["rouge"])
    err = capsys.readouterr().err
    assert "Seq2Seq option `encoder_layers` is deprecated" in err and "use `encoder.num_layers`" in err
    assert "use `decoding.alpha`" in err and "use `decoder.output_dropout`" in err
    assert dict(new.hparams) == dict(old.hparams)
    assert new.hparams["encoder"] == {"cell": "LSTM", "num_layers": 2, "hidden_size": 5, "output_dropout": 0.1}
    assert not set(new.hparams) & (set(DECODING_OPTIONS) | set(DEPRECATED_NAMES) | {"decoding"})
    for (name, a), b in zip(new.state_dict().items(), old.state_dict().values()):
        assert torch.equal(a, b), name
    assert (new.encoder.num_layers, len(new.decoder_cells), new.memory_drop.p, new.output_drop.p) == (2, 3, 0.1, 0.2)
    assert type(new.decoder_cells[0]).__name__ == "MGU" and new.test_search == old.test_search
    assert (new.test_search.beam_size, new.test_search.n_best, new.test_search.alpha) == (4, 2, 0.2)
    assert new.eval_metrics == ["rouge"] and new.val_search.beam_size == 1


def test_the_decoder_hidden_size_is_its_own() -> None:
    model = Seq2Seq(**SMALL, decoder=SideConfig(hidden_size=12), num_layers=2).eval()  # hidden_size 8
    assert model.encoder.hidden_size == 8 and model.decoder_cells[1].hidden_size == 12
    source, lengths = torch.tensor([[5, 6, 7, 3]]), torch.tensor([4])
    logits, _ = model(source, lengths, torch.tensor([[2, 5, 6, 3]]))
    assert logits.shape == (1, 3, 13)
    with pytest.raises(ValueError, match="decoder.num_layers must be a positive integer"):
        Seq2Seq(**SMALL, decoder=SideConfig(num_layers=0))
    with pytest.raises(ValueError, match=r"Unknown encoder option\(s\) \['layers'\]"):
        Seq2Seq(**SMALL, encoder={"layers": 2})
    with pytest.raises(TypeError, match="unexpected keyword argument 'beam'"):
        Seq2Seq(**SMALL, beam=3)


def test_configure_decoding_takes_a_group_or_fields() -> None:
    model = Seq2Seq(**SMALL)
    model.configure_decoding(DecodingConfig(beam_size=7, val_beam_size=2))
    assert (model.test_search.beam_size, model.val_search.beam_size) == (7, 2)
    model.configure_decoding(n_best=3, length_penalty_alpha=0.9)  # over the current group; the old alpha name
    assert (model.test_search.beam_size, model.test_search.n_best, model.test_search.alpha) == (7, 3, 0.9)
    assert model.decoding == DecodingConfig(beam_size=7, val_beam_size=2, n_best=3, alpha=0.9)
    with pytest.raises(ValueError, match="n_best=8 exceeds beam_size=7"):
        model.configure_decoding(n_best=8)
    with pytest.raises(ValueError, match="Unknown eval_metrics"):
        model.configure_decoding({"eval_metrics": ["bleu"]})


def to_old_flat(hparams: Dict[str, Any]) -> Dict[str, Any]:
    """A grouped Seq2Seq's hyperparameters as a checkpoint saved before the groups holds them."""
    flat = {k: v for k, v in hparams.items() if k not in ("encoder", "decoder")}
    for old, (group, field) in OLD_SIDES.items():
        flat[old] = hparams[group][field]
    return flat


def tiny_args(data: Path) -> List[str]:
    """A tiny Gigaword Seq2Seq on the data-free folder of tests/test_duc2004.py, in the new names."""
    return ["--config", str(Path(__file__).resolve().parents[1] / "configs" / "seq2seq" / "gigaword_lstm.yaml"),
            "--model.init_args.embedding_size", "8", "--model.init_args.hidden_size", "16",
            "--model.init_args.num_layers", "1", "--model.init_args.encoder.num_layers", "2",
            "--model.init_args.decoder.output_dropout", "0.0", "--model.init_args.decoding.beam_size", "2",
            "--data.init_args.data_dir", str(data), "--data.init_args.subword_vocab_size", "300",
            "--data.init_args.min_frequency", "1", "--data.init_args.batch_size", "8",
            "--data.init_args.eval_batch_size", "4", "--data.init_args.cache_dir", "", "--trainer.logger", "false",
            "--trainer.enable_progress_bar", "false", "--trainer.enable_model_summary", "false",
            "--trainer.accelerator", "cpu", "--test_after_fit", "false"]


@pytest.fixture(scope="module")
def old_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Path]:
    """A real checkpoint of a grouped model, and the same file with its hyperparameters in the old flat form."""
    base = tmp_path_factory.mktemp("s2s_groups")
    data = gigaword_folder(base / "data")
    assert run(["fit", *tiny_args(data), "--trainer.max_steps", "3", "--trainer.limit_val_batches", "1",
                "--trainer.default_root_dir", str(base / "run")]) == 0
    new = next((base / "run").rglob("last.ckpt"))
    checkpoint = torch.load(new, weights_only=True)
    assert checkpoint["hyper_parameters"]["encoder"]["num_layers"] == 2
    checkpoint["hyper_parameters"] = to_old_flat(dict(checkpoint["hyper_parameters"]))
    old = base / "old.ckpt"
    torch.save(checkpoint, old)
    return {"data": data, "new": new, "old": old, "base": base}


def test_an_old_flat_checkpoint_loads_in_python(old_checkpoint: Dict[str, Path]) -> None:
    saved = torch.load(old_checkpoint["old"], weights_only=True)["hyper_parameters"]
    assert saved["encoder_layers"] == 2 and "encoder" not in saved  # the old format, as it was written
    old = Seq2Seq.load_from_checkpoint(old_checkpoint["old"], weights_only=True, beam_size=4)
    # a checkpoint of the command line is built by its parser: a group is given as a mapping there
    new = Seq2Seq.load_from_checkpoint(old_checkpoint["new"], weights_only=True, decoding={"beam_size": 4})
    assert dict(old.hparams) == dict(new.hparams) and old.encoder.num_layers == 2
    assert old.test_search == new.test_search and old.test_search.beam_size == 4
    for (name, a), b in zip(old.state_dict().items(), new.state_dict().values()):
        assert torch.equal(a, b), name


def printed_loss(out: str) -> float:
    return float(re.search(r"^test/loss\s+(\S+)$", out, re.M).group(1))


def test_an_old_flat_checkpoint_tests_through_the_command_line(old_checkpoint: Dict[str, Path],
                                                               capsys: pytest.CaptureFixture) -> None:
    args = [*tiny_args(old_checkpoint["data"]), "--trainer.limit_test_batches", "1"]
    capsys.readouterr()
    assert run(["test", *args, "--ckpt_path", str(old_checkpoint["new"])]) == 0
    expected = printed_loss(capsys.readouterr().out)
    # old checkpoint, config in the new names: the flat hparams compare equal to the groups (no warning, no error)
    with _no_checkpoint_warning():
        assert run(["test", *args, "--ckpt_path", str(old_checkpoint["old"])]) == 0
    captured = capsys.readouterr()
    assert printed_loss(captured.out) == expected
    # old names on argv with the old checkpoint
    old_argv = [a.replace("encoder.num_layers", "encoder_layers").replace("decoding.beam_size", "beam_size")
                .replace("decoder.output_dropout", "output_dropout") for a in args]
    assert old_argv != args
    assert run(["test", *old_argv, "--ckpt_path", str(old_checkpoint["old"])]) == 0
    assert printed_loss(capsys.readouterr().out) == expected
    # a shape the checkpoint does not have is refused, named by its new key
    changed = [*args, "--model.init_args.encoder.num_layers", "3"]
    assert run(["test", *changed, "--ckpt_path", str(old_checkpoint["old"])]) == 2
    err = capsys.readouterr().err
    assert "encoder.num_layers=3 (checkpoint: 2)" in err and err.startswith("error: ")


class _no_checkpoint_warning:
    """Asserts that no "Using the checkpoint's values" warning is raised inside the block."""

    def __enter__(self) -> "_no_checkpoint_warning":
        import warnings
        self._catch = warnings.catch_warnings(record=True)
        self.records = self._catch.__enter__()
        warnings.simplefilter("always")
        return self

    def __exit__(self, *exc: Any) -> None:
        self._catch.__exit__(*exc)
        messages = [str(r.message) for r in self.records if "checkpoint's values" in str(r.message)]
        assert not messages, messages


def test_old_names_in_a_yaml_config_fit_and_the_run_saves_the_new_names(old_checkpoint: Dict[str, Path],
                                                                        tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arguments, "_said_deprecated", set())  # each old name speaks once per process
    config = {"model": {"class_path": "lit_rnncells.tasks.Seq2Seq",
                        "init_args": {"encoder_layers": 2, "decoder_cell": "GRU", "beam_size": 2,
                                      "eval_metrics": ["rouge"], "length_penalty_alpha": 0.3}}}
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    args = tiny_args(old_checkpoint["data"])
    at = args.index("--model.init_args.encoder.num_layers")
    del args[at:at + 2]  # the YAML's old encoder_layers sets it
    capsys.readouterr()
    assert run(["fit", *args, "--config", str(path), "--trainer.max_steps", "2", "--trainer.limit_val_batches", "1",
                "--run_dir", str(tmp_path / "run")]) == 0
    err = capsys.readouterr().err
    assert "use `encoder.num_layers`" in err and "use `decoding.alpha`" in err
    saved = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text(encoding="utf-8"))["model"]["init_args"]
    assert not set(saved) & set(DEPRECATED_NAMES)
    assert saved["encoder"]["num_layers"] == 2 and saved["decoding"]["alpha"] == 0.3
    assert saved["decoding"]["eval_metrics"] == ["rouge"] and saved["decoder"]["cell"] is not None
    ckpt = torch.load(next((tmp_path / "run").rglob("last.ckpt")), weights_only=True)["hyper_parameters"]
    assert ckpt["encoder"]["num_layers"] == 2 and "GRU" in str(ckpt["decoder"]["cell"])
