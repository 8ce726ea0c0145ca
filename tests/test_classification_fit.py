"""The classifiers on real data through the Trainer and the CLI: learning, DDP + bf16, exact mid-epoch resume,
predict from a checkpoint in input order, and run_seeds' table."""
from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest
import torch
from lightning.pytorch import Callback, Trainer, seed_everything
from lightning.pytorch.callbacks import ModelCheckpoint

from lit_rnncells.cli import main, run
from lit_rnncells.data.sentiment import AspectSentimentDataModule, DocumentSentimentDataModule
from lit_rnncells.tasks import AspectClassifier, DocumentClassifier

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.real_data

ABSA_CONFIG = """
seed_everything: 3
trainer:
  max_epochs: 1
  accelerator: cpu
  devices: 1
  logger: false
  enable_progress_bar: false
  enable_model_summary: false
  gradient_clip_val: 5.0
model:
  class_path: lit_rnncells.tasks.AspectClassifier
  init_args:
    cell:
      class_path: lit_rnncells.cells.GRUDT
      init_args: {transition_depth: 1}
    embedding_size: 16
    hidden_size: 12
    dropout: 0.0
data:
  class_path: lit_rnncells.data.AspectSentimentDataModule
  init_args:
    domain: restaurants
    batch_size: 32
    cache_dir: CACHE
"""


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("cache"))


@pytest.fixture
def absa_config(tmp_path, cache, data_dir) -> Path:
    path = tmp_path / "absa.yaml"
    path.write_text(ABSA_CONFIG.replace("CACHE", cache))
    return path


def trainer(tmp_path, **kwargs) -> Trainer:
    options = dict(accelerator="cpu", devices=1, logger=False, enable_progress_bar=False, enable_model_summary=False,
                   enable_checkpointing=False, num_sanity_val_steps=0, default_root_dir=tmp_path)
    return Trainer(**{**options, **kwargs})


def test_aspect_classifier_short_fit_lowers_validation_loss(tmp_path, cache, data_dir):
    seed_everything(0)
    dm = AspectSentimentDataModule(cache_dir=cache, batch_size=32)
    cell = {"class_path": "lit_rnncells.cells.CapMZU", "init_args": {"zones": 2, "transition_depth": 1}}
    model = AspectClassifier(cell, vocab_size=dm.vocab_size, num_classes=dm.num_classes, pad_id=dm.pad_id,
                             embedding_size=24, hidden_size=16, dropout=0.0)
    optimizer = lambda params: torch.optim.Adam(params, lr=1e-2)  # noqa: E731
    model.optimizer_factory = optimizer
    t = trainer(tmp_path, max_epochs=1, limit_train_batches=40)
    before = t.validate(model, datamodule=dm, verbose=False)[0]["val/loss"]
    t.fit(model, datamodule=dm)
    after = float(t.callback_metrics["val/loss"])
    assert after < before - 0.05, (before, after)
    assert float(t.callback_metrics[f"train/{model.rnn.aux_loss_name}"]) > 0  # the zones' disagreement, logged
    assert float(t.callback_metrics["val/acc"]) > 0.5  # majority class (positive) is ~0.6 of val; chance 0.25


def test_document_classifier_short_fit_lowers_validation_loss(tmp_path, cache, data_dir):
    seed_everything(0)
    dm = DocumentSentimentDataModule("imdb", cache_dir=cache, max_length=64, batch_size=32, eval_batch_size=250,
                                     max_vocab_size=5000)
    model = DocumentClassifier("MGU", vocab_size=dm.vocab_size, num_classes=dm.num_classes, pad_id=dm.pad_id,
                               embedding_size=32, hidden_size=32, readout="mean", dropout=0.0)
    model.optimizer_factory = lambda params: torch.optim.Adam(params, lr=5e-3)
    t = trainer(tmp_path, max_epochs=1, limit_train_batches=150, limit_val_batches=4)
    before = t.validate(model, datamodule=dm, verbose=False)[0]["val/loss"]
    t.fit(model, datamodule=dm)
    after = float(t.callback_metrics["val/loss"])
    assert after < before - 0.02, (before, after)


class StepLosses(Callback):
    def __init__(self) -> None:
        self.losses: Dict[tuple, float] = {}

    def on_train_batch_end(self, trainer: Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        self.losses[(batch["epoch"], batch["batch"])] = float(outputs["loss"])


def test_resuming_mid_epoch_gives_the_same_losses(tmp_path, cache, data_dir):
    def build():
        seed_everything(5)
        dm = AspectSentimentDataModule(cache_dir=cache, batch_size=64, seed=5)
        model = AspectClassifier("GRU", vocab_size=dm.vocab_size, num_classes=dm.num_classes, pad_id=dm.pad_id,
                                 embedding_size=16, hidden_size=8, dropout=0.0)  # dropout's RNG is not checkpointed
        return dm, model

    full = StepLosses()
    dm, model = build()
    trainer(tmp_path, max_epochs=2, limit_val_batches=2, callbacks=[full]).fit(model, datamodule=dm)
    per_epoch = len(full.losses) // 2
    stop = per_epoch + per_epoch // 2  # in the middle of the second epoch

    dm, model = build()  # stopped by max_steps; the checkpoint is written at that step, mid-epoch
    keep = ModelCheckpoint(dirpath=tmp_path, filename="mid", every_n_train_steps=stop, save_top_k=-1)
    trainer(tmp_path, max_epochs=2, max_steps=stop, limit_val_batches=2, enable_checkpointing=True,
            callbacks=[keep]).fit(model, datamodule=dm)
    ckpt = tmp_path / "mid.ckpt"
    assert torch.load(ckpt, weights_only=True)["global_step"] == stop

    resumed = StepLosses()
    dm, model = build()
    trainer(tmp_path, max_epochs=2, limit_val_batches=2, callbacks=[resumed]).fit(model, datamodule=dm,
                                                                                 ckpt_path=str(ckpt))
    expected = {k: v for k, v in full.losses.items() if k[0] * per_epoch + k[1] >= stop}
    assert sorted(resumed.losses) == sorted(expected)
    for key in expected:
        assert resumed.losses[key] == pytest.approx(expected[key], rel=1e-5, abs=1e-6), key


def child_env() -> Dict[str, str]:
    path = f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    return {**os.environ, "PYTHONPATH": path, "WANDB_MODE": "disabled"}


def run_cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = child_env()
    return subprocess.run([sys.executable, "-m", "lit_rnncells", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=900)


def test_predict_from_a_checkpoint_keeps_input_order(tmp_path, absa_config, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    cli = main(["fit", "--config", str(absa_config), "--trainer.limit_train_batches", "5",
                "--trainer.limit_val_batches", "2", "--trainer.default_root_dir", str(tmp_path)])
    ckpt = str(next(tmp_path.rglob("*.ckpt")))
    assert cli.model.label_names == ["negative", "neutral", "positive", "conflict"]
    lines = ["The food was great but the service was awful .\tservice",
             "The food was great but the service was awful .\tfood",
             "Great sushi\tsushi",
             "I waited an hour for a table , and the waiter was rude to us the whole evening .\twaiter",
             "The wine list is long .\twine list"]
    outputs: List[List[str]] = []
    for order in (lines, lines[::-1]):
        src, out = tmp_path / "in.tsv", tmp_path / "out.txt"
        src.write_text("\n".join(order) + "\n")
        # in-process, as the README's predict command runs in test_readme_commands; a subprocess proves no more
        assert run(["predict", "--config", str(absa_config), "--ckpt_path", ckpt, "--data.init_args.predict_file",
                    str(src), "--predict_output", str(out)]) == 0, capsys.readouterr().err[-3000:]
        outputs.append(out.read_text().splitlines())
    assert len(outputs[0]) == len(lines) == len(outputs[1])
    for a, b in zip(outputs[0], outputs[1][::-1]):  # each line's prediction follows the line, whatever the order
        (label_a, p_a), (label_b, p_b) = a.split("\t"), b.split("\t")
        assert label_a == label_b and float(p_a) == pytest.approx(float(p_b), abs=2e-4)
    for row in outputs[0]:
        label, prob = row.split("\t")
        assert label in ("negative", "neutral", "positive", "conflict") and 0.25 <= float(prob) <= 1.0
    # in Python, from the checkpoint alone: its options, vocabulary and labels; no training file is read
    monkeypatch.setenv("LIT_RNNCELLS_DATA", str(tmp_path / "no_data_here"))
    src.write_text("\n".join(lines) + "\n")
    data = AspectSentimentDataModule.load_from_checkpoint(ckpt, predict_file=str(src))
    records = Trainer(logger=False, enable_progress_bar=False, enable_model_summary=False).predict(
        AspectClassifier.load_from_checkpoint(ckpt), data)
    assert [r["text"] for r in sorted((r for batch in records for r in batch), key=lambda r: r["index"])] \
        == outputs[0]
    with pytest.raises(ValueError, match="was trained with AspectSentimentDataModule, not DocumentSentimentDataModule"):
        DocumentSentimentDataModule.load_from_checkpoint(ckpt)


def script(name: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``scripts/<name>.py`` imported in this process (its seeds still train in fresh processes, through the
    comparison runner): the script's own process would only pay the imports again."""
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    return importlib.import_module(name)


def test_run_seeds_tiny_budget_prints_mean_and_std(tmp_path, absa_config, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    script("run_seeds", monkeypatch).main(["--config", str(absa_config), "--seed-list", "1", "2", "--out",
                                           str(tmp_path / "runs"), "--", "--trainer.limit_train_batches", "3",
                                           "--trainer.limit_val_batches", "2", "--trainer.limit_test_batches", "2"])
    stdout = capsys.readouterr().out
    table = stdout[stdout.index("| config"):]
    assert "test/acc (%)" in table and "test/f1 (%)" in table and "best val/acc (%)" in table
    row = table.splitlines()[2]
    assert row.startswith("| absa | 1, 2 |") and row.count("±") >= 4
    assert len(list((tmp_path / "runs" / "absa").glob("seed_*/best/best.ckpt"))) == 2


def test_run_seeds_refuses_an_argument_of_the_second_config_before_any_run(tmp_path, absa_config, monkeypatch,
                                                                             capsys):
    """bench_absa passes its unknown options on to the fits: a wrong one used to fail every seed of every config,
    one fresh process each. Each config's arguments are parsed first (the second config's DataModule has no
    option domain)."""
    monkeypatch.chdir(tmp_path)
    other = tmp_path / "logic.yaml"
    other.write_text((ROOT / "configs" / "logic" / "gru.yaml").read_text())
    with pytest.raises(SystemExit) as stop:
        script("run_seeds", monkeypatch).main(["--config", str(absa_config), "--config", str(other), "--seed-list",
                                               "1", "2", "--out", str(tmp_path / "runs"), "--",
                                               "--data.init_args.domain", "restaurants"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: The arguments of run logic/seed_1 are refused") and len(err.splitlines()) == 1
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_ddp_two_cpu_processes_with_bf16(tmp_path, absa_config):
    result = run_cli(tmp_path, "fit", "--config", str(absa_config), "--trainer.devices", "2",
                     "--trainer.strategy", "ddp", "--trainer.precision", "bf16-mixed",
                     "--trainer.limit_train_batches", "4", "--trainer.limit_val_batches", "2",
                     "--trainer.default_root_dir", str(tmp_path), "--test_after_fit", "true",
                     "--trainer.limit_test_batches", "2")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "test/acc" in result.stdout and "test/f1" in result.stdout
    log = result.stdout + result.stderr
    assert "MEMBER: 2/2" in log and "bfloat16" in log  # really two processes, really bf16 autocast


def run_script(tmp_path: Path, cache: str, *args: str) -> str:
    env = {**child_env(), "LIT_RNNCELLS_CACHE": cache}
    result = subprocess.run([sys.executable, *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.mark.slow
def test_bench_imdb_runs_reference_and_ours_side_by_side(tmp_path, cache, data_dir, reference_programs):
    out = run_script(tmp_path, cache, str(ROOT / "scripts" / "bench_imdb.py"), "--limit", "100", "--epochs", "1",
                     "--cells", "GRU", "CARU", "--reference", str(reference_programs / "imdb_gru.py"))
    assert "ANCHOR imdb_gru epochs=1" in out
    assert "| reference nn.GRU (imdb_gru.py) |" in out and "| ours DocumentClassifier CARU |" in out
    assert "2 threads for both; allocator: malloc keeps freed memory for both" in out
    assert "Bar 1 (our GRU within 1 point" in out and "Bar 2 (tokens/s ratio >= 0.9)" in out


def test_bench_imdb_without_the_reference_program_says_how_to_give_it(tmp_path):
    env = {k: v for k, v in child_env().items() if k != "LIT_RNNCELLS_ANCHORS"}
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_imdb.py"), "--limit", "10"], cwd=tmp_path,
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    assert result.stderr.strip().splitlines()[-1].startswith("error: no reference program imdb_gru.py was given; "
                                                             "pass --reference <imdb_gru.py> or set LIT_RNNCELLS_ANCHORS")
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_bench_absa_tiny_prints_both_models_and_the_ordering(tmp_path, cache, data_dir, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LIT_RNNCELLS_CACHE", cache)  # the seeds' processes inherit it
    script("bench_absa", monkeypatch).main(["--seeds", "2", "--epochs", "1", "--limit-batches", "2", "--hidden", "8",
                                            "--embedding", "8", "--out", str(tmp_path / "runs")])
    out = capsys.readouterr().out
    assert "| GRU+DT | 1, 2 |" in out and "| capMZU+DT | 1, 2 |" in out and "test/f1 (%)" in out
    assert "Paper's ordering (capMZU+DT > GRU+DT)" in out
