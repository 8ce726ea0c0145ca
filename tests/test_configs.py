"""Every shipped experiment config works: through the CLI, with the default logger (W&B, offline here), it
builds its model at the config's own sizes, trains a step, validates and tests on tiny batches of real text,
and logs its hyperparameters (so a renamed argument, a cell change or a logger clash that breaks a config
fails here, not in a user's week-long run)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import List

import pytest
import wandb
import yaml

from lit_rnncells.cli import main as cli_main
from lit_rnncells.utils.loggers import DefaultWandbLogger
from tests.test_sentiment_data import config_data_args

REPO = Path(__file__).resolve().parents[1]
CONFIGS = sorted(p for p in (REPO / "configs").glob("*/*.yaml") if p.parent.name != "trainer")


def _dataset(config: Path) -> str:
    for line in config.read_text().splitlines():
        if line.strip().startswith(("dataset:", "domain:")):  # domain: the SemEval-2014 ABSA configs
            return line.split(":", 1)[1].split("#")[0].strip()
    return ""


def _text8_from_ptb(ptb: Path, folder: Path, chars: int = 6000) -> Path:
    """A small file in text8's format (one line, a–z and single spaces) cut from real PTB text."""
    words = re.sub(r"[^a-z ]+", " ", (ptb / "ptb.train.txt").read_text()[: 3 * chars].lower()).split()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "text8").write_text(" ".join(words)[:chars])
    return folder / "text8"


def _data_args(dataset: str, data_dir: Path, tmp_path: Path, cache: Path) -> List[str]:
    sentiment = config_data_args(dataset, data_dir, tmp_path, cache)
    if sentiment is not None:
        return sentiment
    if not dataset:  # the logic task generates its formulas
        return []
    if dataset == "iwslt17":  # IWSLT 2017 is raw cased text: real raw De-En lines (Multi30k's) in its layout
        folder = tmp_path / "iwslt17"
        folder.mkdir(parents=True, exist_ok=True)
        for split, name in (("train", "train"), ("valid", "val"), ("test", "test_2016_flickr")):
            for lang in ("de", "en"):
                lines = (data_dir / "multi30k" / f"{name}.{lang}").read_text(encoding="utf-8").splitlines()[:40]
                (folder / f"{split}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
        data_dir = tmp_path
    if dataset in ("multi30k", "iwslt14", "iwslt17", "gigaword"):  # seq2seq: the first pairs of every split
        return ["--data.init_args.data_dir", str(data_dir / dataset), "--data.init_args.limit", "40",
                "--data.init_args.cache_dir", str(cache), "--data.init_args.batch_size", "2",
                "--data.init_args.eval_batch_size", "1"]  # 2 batches of 1: decoding 2 sentences per split
    if dataset == "text8":  # not in the shared data: the same reader and split on a small real-text file
        source = ["--data.init_args.data_dir", str(_text8_from_ptb(data_dir / "ptb", tmp_path / "text8")),
                  "--data.init_args.split_sizes", "[5000, 500, 500]"]
    else:
        source = ["--data.init_args.data_dir", str(data_dir / "ptb")]
    return [*source, "--data.init_args.cache_dir", str(cache), "--data.init_args.batch_size", "2",
            "--data.init_args.eval_batch_size", "2", "--data.init_args.bptt", "8"]


@pytest.fixture
def wandb_offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """The default logger as a user without a W&B account gets it: offline, files under ``./runs``; every
    run is finished afterwards (in-process runs share one W&B service), even when the test fails."""
    monkeypatch.setenv("WANDB_MODE", "offline")  # conftest turns W&B off for every other test
    monkeypatch.chdir(tmp_path)
    wandb.finish()  # a run an earlier in-process fit left open (W&B disabled) would be reused by the logger
    wandb.teardown()  # W&B keeps the settings of its first run in the process: read WANDB_MODE again
    try:
        yield
    finally:
        wandb.finish()
        wandb.teardown()  # and the next test reads its own


# Lightning's fast_dev_run would replace the logger with a dummy one (and turn checkpointing off), hiding
# exactly the failures this test is for: one real step, then two validation and two test batches instead.
# One training batch is set in the YAML override below: the command line reads "1" for a limit as the float
# 1.0, which Lightning takes as 100%. (Two steps cost the six Multi30k configs at hidden 2048 about 5 s each
# and checked nothing one does not.)
ONE_STEP = ["--trainer.max_steps", "1", "--trainer.val_check_interval", "1.0",
            "--trainer.limit_val_batches", "2", "--trainer.limit_test_batches", "2", "--trainer.max_epochs", "1",
            "--trainer.num_sanity_val_steps", "0", "--trainer.accelerator", "cpu"]


def _one_batch_no_checkpoint_files(config: Path, folder: Path) -> List[str]:
    """A second ``--config``: one training batch (an int, which the command line cannot give), and the
    config's callbacks kept (ModelCheckpoint's monitor is still checked against the logged metrics) but
    writing no checkpoint: saving the paper-size models (hidden 2048 with Adam state) twice per config was a
    tenth of this test's time, and saving is covered by the CLI and resume tests."""
    trainer = {"limit_train_batches": 1}
    callbacks = (yaml.safe_load(config.read_text()).get("trainer") or {}).get("callbacks")
    if callbacks:
        for callback in callbacks:
            if callback["class_path"].endswith("ModelCheckpoint"):
                callback["init_args"] = {**(callback.get("init_args") or {}), "save_top_k": 0, "save_last": False}
        trainer["callbacks"] = callbacks
    else:
        trainer["enable_checkpointing"] = False  # not Lightning's default ModelCheckpoint either
    override = folder / "one_batch_no_checkpoint_files.yaml"
    override.write_text(yaml.safe_dump({"trainer": trainer}))
    return ["--config", str(override)]


@pytest.mark.real_data
@pytest.mark.parametrize("config", CONFIGS, ids=[f"{p.parent.name}/{p.stem}" for p in CONFIGS])
def test_shipped_config_trains_a_step_with_the_default_logger(config: Path, tmp_path: Path, data_dir: Path,
                                                                 tmp_path_factory: pytest.TempPathFactory,
                                                                 wandb_offline: None) -> None:
    cache = tmp_path_factory.getbasetemp() / "lm_cache"
    cli = cli_main(["fit", "--config", str(config), *_one_batch_no_checkpoint_files(config, tmp_path), *ONE_STEP,
                    "--trainer.enable_progress_bar", "false", "--trainer.enable_model_summary", "false",
                    "--trainer.default_root_dir", str(tmp_path),
                    *_data_args(_dataset(config), data_dir, tmp_path, cache)])
    assert cli.trainer.state.finished and cli.trainer.global_step == 1 and cli.trainer.num_training_batches == 1
    assert all(n <= 2 for n in [*cli.trainer.num_val_batches, *cli.trainer.num_test_batches])  # a quick test
    assert sum(p.numel() for p in cli.model.parameters()) > 0
    assert not list(tmp_path.rglob("*.ckpt"))
    logger = cli.trainer.logger
    assert isinstance(logger, DefaultWandbLogger) and logger.experiment.settings.mode in ("offline", "dryrun")
    summary = set(logger.experiment.summary.keys())  # what reached the logger: training and validation metrics
    assert any(k.startswith("train/") for k in summary) and any(k.startswith("val/") for k in summary), summary
    logged = dict(logger.experiment.config)  # model and data hyperparameters in their own groups, never merged
    assert logged["model"] == {k: v for k, v in cli.model.hparams.items() if k != "_class_path"}
    assert logged["data"] == {k: v for k, v in cli.datamodule.hparams.items() if k != "_class_path"}
    assert "config" in logged  # the full config, from the CLI
