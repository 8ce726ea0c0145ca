"""The command line: fit/validate/test/predict, data->model links, subclassing, and bad input."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lit_rnncells.cli import main
from lit_rnncells.tasks import LogicEvaluator

ROOT = Path(__file__).resolve().parents[1]
MUFURU = str(ROOT / "configs" / "logic" / "mufuru.yaml")
TINY = ["--data.init_args.train_size", "64", "--data.init_args.val_size", "16", "--data.init_args.test_size", "32",
        "--trainer.max_epochs", "1", "--trainer.enable_progress_bar", "false", "--trainer.logger", "false"]


def run_cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", "WANDB_MODE": "disabled"}
    return subprocess.run([sys.executable, "-m", "lit_rnncells", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)


def test_fit_links_sizes_then_tests_and_predicts(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cli = main(["fit", "--config", MUFURU, *TINY, "--trainer.default_root_dir", str(tmp_path)])
    model = cli.model
    assert isinstance(model, LogicEvaluator)
    assert model.embedding.num_embeddings == cli.datamodule.vocab_size == 13
    assert type(model.rnn.cell()).__name__ == "MuFuRU"
    assert "test/acc" in cli.trainer.callback_metrics  # test_after_fit: true in the config
    ckpt = next(tmp_path.rglob("*.ckpt"))
    restored = LogicEvaluator.load_from_checkpoint(ckpt)
    for key, value in model.state_dict().items():
        torch.testing.assert_close(restored.state_dict()[key], value)
    cli = main(["predict", "--config", MUFURU, *TINY, "--ckpt_path", str(ckpt), "--return_predictions", "true"])
    assert cli.trainer.predict_loop.predictions  # returned batches of predicted labels


def test_validate_and_test_subcommands(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for sub in ("validate", "test"):
        cli = main([sub, "--config", MUFURU, *TINY])
        assert f"{'val' if sub == 'validate' else 'test'}/acc" in cli.trainer.callback_metrics


def test_cell_by_name_and_nested_options(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cli = main(["validate", "--config", MUFURU, *TINY, "--model.init_args.cell", "CARU"])
    assert type(cli.model.rnn.cell()).__name__ == "CARU"
    cli = main(["validate", "--config", MUFURU, *TINY, "--model.init_args.cell",
                '{"class_path": "lit_rnncells.cells.MuFuRU", "init_args": {"ops": ["keep", "replace", "max"]}}'])
    assert cli.model.rnn.cell().ops == ("keep", "replace", "max")


def test_unknown_cell_name_lists_known_cells(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"Unknown cell 'GRUU'\. Did you mean 'GRU'\? Known cells: .*MuFuRU"):
        main(["fit", "--config", MUFURU, *TINY, "--model.init_args.cell", "GRUU"])


def test_misspelt_config_key_fails_at_start(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(Path(MUFURU).read_text().replace("hidden_size: 8", "hiden_size: 8"))
    result = run_cli(tmp_path, "fit", "--config", str(bad), *TINY)
    assert result.returncode != 0
    assert "hiden_size" in result.stderr
    assert "Epoch" not in result.stderr + result.stdout


def test_non_positive_size_fails_at_start(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="hidden_size must be a positive integer"):
        main(["fit", "--config", MUFURU, *TINY, "--model.init_args.hidden_size", "0"])


def test_user_subclass_in_own_module_trains_through_cli(tmp_path):
    result = run_cli(tmp_path, "fit", "--config", MUFURU, *TINY,
                     "--model", "tests.examples.custom_task.MeanPoolLogicEvaluator",
                     "--model.init_args.hidden_size", "12")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "test/acc" in result.stdout


@pytest.mark.slow
def test_ddp_two_cpu_processes_with_bf16(tmp_path):
    result = run_cli(tmp_path, "fit", "--config", MUFURU, *TINY, "--trainer.devices", "2",
                     "--trainer.strategy", "ddp", "--trainer.precision", "bf16-mixed",
                     "--trainer.default_root_dir", str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "test/acc" in result.stdout
    assert "world_size=2" in result.stderr + result.stdout or "distributed_backend=gloo" in result.stderr + result.stdout
    folders = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert len(folders) == 1 and (folders[0] / "config.yaml").is_file()  # rank 1 used rank 0's run folder
    assert result.stderr.count("recurrence: MuFuRU on cpu") == 1  # rank 0's line, whole
    assert "all_gather is deprecated" not in result.stderr  # Lightning's call, once per rank


@pytest.mark.slow
def test_ddp_spawn_trains_mufuru_and_the_summary_names_the_config_the_spawned_rank_saved(tmp_path):
    """Lightning's ddp_spawn pickles the model: MuFuRU's ops (lambdas) failed with a PicklingError traceback. Its
    rank 0 saves config.yaml in the spawned process, so the summary had no config and no Test it / Resume it."""
    result = run_cli(tmp_path, "fit", "--config", MUFURU, *TINY, "--trainer.devices", "2", "--trainer.accelerator",
                     "cpu", "--trainer.strategy", "ddp_spawn", "--run_dir", "spawned", "--test_after_fit", "false")
    assert result.returncode == 0, result.stderr[-3000:]
    config = tmp_path / "spawned" / "config.yaml"
    assert config.is_file() and f"  config:          {config}" in result.stdout
    assert f"Test it:   python -m lit_rnncells test --config {config} --ckpt_path " in result.stdout
    # the spawned workers drop the noise the command line drops (they printed it once per rank and stage)
    for noise in ("LeafSpec", "IterableDataset", "all_gather is deprecated", "wandb.require('service')", "Tip:"):
        assert noise not in result.stderr, noise
    assert result.stderr.count("recurrence: MuFuRU on cpu") == 1


def test_lightnings_model_pruning_trains_mufuru_and_its_saved_config_tests_the_checkpoint(tmp_path, monkeypatch):
    """ModelPruning prunes each module's ``weight`` and ``bias``, MuFuRU's ``bias`` among them: the layer never
    ran the cell's pruning hook (a traceback at the second step, tests/test_cell_hooks.py), and the run's
    config.yaml held ``pruning_fn: Unable to serialize instance l1_unstructured`` (tests/test_config_dump.py), so
    its printed ``Test it`` command failed."""
    monkeypatch.chdir(tmp_path)
    pruning = ["--trainer.callbacks+=ModelPruning", "--trainer.callbacks.pruning_fn", "l1_unstructured",
               "--trainer.callbacks.amount", "0.1"]
    cli = main(["fit", "--config", MUFURU, *TINY, *pruning, "--trainer.max_epochs", "2", "--run_dir", "pruned"])
    config = tmp_path / "pruned" / "config.yaml"
    assert "pruning_fn: l1_unstructured" in config.read_text()
    assert cli.trainer.current_epoch == 2
    ckpt = str(next((tmp_path / "pruned").rglob("*.ckpt")))
    tested = main(["test", "--config", str(config), "--ckpt_path", ckpt])
    assert "test/acc" in tested.trainer.callback_metrics


def test_ckpt_path_reaches_a_datamodule_that_accepts_it_in_test_and_predict_not_in_fit(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = ["--data", "tests.examples.checkpoint_data.CheckpointAwareLogicData"]
    cli = main(["fit", "--config", MUFURU, *TINY, *data, "--trainer.default_root_dir", str(tmp_path)])
    assert cli.datamodule.checkpoint_path is None
    ckpt = str(next(tmp_path.rglob("*.ckpt")))
    for sub in ("test", "predict"):
        cli = main([sub, "--config", MUFURU, *TINY, *data, "--ckpt_path", ckpt])
        assert cli.datamodule.checkpoint_path == ckpt


def test_a_batch_limit_of_1_is_one_batch_and_1_0_all(tmp_path, monkeypatch):
    """Lightning reads an int as a count and a float as a fraction; the Trainer's annotation put float first,
    so ``--trainer.limit_val_batches 1`` became 1.0 (every batch)."""
    monkeypatch.chdir(tmp_path)
    small = [*TINY, "--data.init_args.val_size", "64", "--data.init_args.batch_size", "8",
             "--trainer.default_root_dir", str(tmp_path), "--test_after_fit", "false"]
    cli = main(["fit", "--config", MUFURU, *small, "--trainer.limit_val_batches", "1",
                "--trainer.limit_train_batches", "2"])
    assert cli.trainer.num_training_batches == 2 and cli.trainer.num_val_batches == [1]
    cli = main(["fit", "--config", MUFURU, *small, "--trainer.limit_val_batches", "1.0",
                "--trainer.limit_train_batches", "0.5"])
    assert cli.trainer.num_training_batches == 4 and cli.trainer.num_val_batches == [8]


def test_only_a_datamodule_that_resumes_exactly_drops_lightnings_mid_epoch_resume_warning():
    """Ours keep the training position in the checkpoint (``resumes_mid_epoch``); a user's plain DataModule
    does not, and keeps Lightning's warning that its mid-epoch resume may not be exact."""
    import warnings

    from lightning.pytorch import LightningDataModule

    from lit_rnncells.data import LanguageModelDataModule
    from lit_rnncells.utils.quiet import quiet_mid_epoch_resume_warning

    message = ("You're resuming from a checkpoint that ended before the epoch ended and your dataloader is not "
               "resumable.")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        quiet_mid_epoch_resume_warning(LightningDataModule())
        warnings.warn(message, UserWarning)
        assert len(caught) == 1
        assert LanguageModelDataModule.resumes_mid_epoch
        quiet_mid_epoch_resume_warning(LanguageModelDataModule.__new__(LanguageModelDataModule))
        warnings.warn(message, UserWarning)
        assert len(caught) == 1
