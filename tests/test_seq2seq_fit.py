"""Short real fits of Seq2Seq on TranslationDataModule: the loss falls and the metrics come out (Multi30k
sacreBLEU, Gigaword ROUGE), DDP + bf16 through the CLI, exact mid-epoch resume, and predict from a
checkpoint alone keeping the input order."""
from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any, List

import pytest
import torch
from lightning.pytorch import Callback, Trainer
from lightning.pytorch.callbacks import ModelCheckpoint

from lit_rnncells.cli import main as cli_main
from lit_rnncells.data import TranslationDataModule
from lit_rnncells.tasks import Seq2Seq

ROOT = Path(__file__).resolve().parents[1]
TINY_MODEL = dict(embedding_size=32, hidden_size=48, num_layers=1, dropout=0.0, beam_size=3)


def data(data_dir: Path, dataset: str, cache: Path, **kw: Any) -> TranslationDataModule:
    kw.setdefault("limit", 200)
    kw.setdefault("batch_size", 20)
    kw.setdefault("eval_batch_size", 50)
    return TranslationDataModule(dataset, data_dir=str(data_dir / dataset), subword_vocab_size=400,
                                 cache_dir=str(cache), **kw)


def model_for(dm: TranslationDataModule, **kw: Any) -> Seq2Seq:
    opts = {**TINY_MODEL, **kw}
    opts.setdefault("optimizer", partial(torch.optim.Adam, lr=3e-3))
    return Seq2Seq(source_vocab_size=dm.source_vocab_size, target_vocab_size=dm.target_vocab_size,
                   pad_id=dm.pad_id, bos_id=dm.bos_id, eos_id=dm.eos_id, **opts)


def trainer(tmp_path: Path, **kw: Any) -> Trainer:
    kw.setdefault("enable_checkpointing", any(isinstance(c, ModelCheckpoint) for c in kw.get("callbacks", [])))
    return Trainer(accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                   enable_model_summary=False, default_root_dir=tmp_path, gradient_clip_val=1.0, **kw)


@pytest.fixture
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.getbasetemp() / "s2s_fit_cache"


@pytest.mark.real_data
@pytest.mark.parametrize("dataset,metrics", [("multi30k", ["sacrebleu"]), ("gigaword", ["rouge"])])
def test_short_fit_lowers_val_loss_and_scores(dataset: str, metrics: List[str], data_dir: Path, cache: Path,
                                              tmp_path: Path) -> None:
    torch.manual_seed(0)
    dm = data(data_dir, dataset, cache)
    model = model_for(dm, eval_metrics=metrics)
    before = trainer(tmp_path).validate(model, datamodule=dm, verbose=False)[0]["val/loss"]
    fit = trainer(tmp_path, max_epochs=3)  # 30 steps of 20 pairs
    fit.fit(model, datamodule=dm)
    after = float(fit.callback_metrics["val/loss"])
    assert after < before - 0.5, (before, after)
    names = ["val/sacrebleu"] if dataset == "multi30k" else ["val/rouge1", "val/rouge2", "val/rougeL"]
    for name in names:
        value = float(fit.callback_metrics[name])
        assert math.isfinite(value) and 0.0 <= value <= 100.0


class LossRecorder(Callback):
    def __init__(self) -> None:
        self.losses: List[float] = []
        self.positions: List[tuple] = []

    def on_train_batch_end(self, trainer: Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs
        self.losses.append(float(loss))
        self.positions.append((batch["epoch"], batch["batch"], batch["index"][:3].tolist()))


@pytest.mark.real_data
def test_resuming_mid_epoch_gives_the_same_losses(data_dir: Path, cache: Path, tmp_path: Path) -> None:
    kw = dict(limit=64, batch_size=8, eval_batch_size=32)  # 8 batches an epoch
    run = lambda: model_for(data(data_dir, "multi30k", cache, **kw), eval_metrics=[])  # noqa: E731
    torch.manual_seed(0)
    full, whole = run(), LossRecorder()
    trainer(tmp_path / "a", max_steps=12, callbacks=[whole], num_sanity_val_steps=0).fit(
        full, datamodule=data(data_dir, "multi30k", cache, **kw))
    torch.manual_seed(0)
    first, part = run(), LossRecorder()
    every5 = ModelCheckpoint(dirpath=tmp_path, filename="mid", every_n_train_steps=5, save_top_k=-1)
    t = trainer(tmp_path / "b", max_steps=5, callbacks=[part, every5], num_sanity_val_steps=0)
    t.fit(first, datamodule=data(data_dir, "multi30k", cache, **kw))  # stops in epoch 0 after its 5th batch
    rest = LossRecorder()
    dm = data(data_dir, "multi30k", cache, **kw)
    trainer(tmp_path / "c", max_steps=12, callbacks=[rest], num_sanity_val_steps=0).fit(
        run(), datamodule=dm, ckpt_path=str(tmp_path / "mid.ckpt"))
    assert len(whole.losses) == 12 and len(part.losses) == 5 and len(rest.losses) == 7
    assert rest.positions == whole.positions[5:], (whole.positions, part.positions, rest.positions)
    assert part.losses == pytest.approx(whole.losses[:5], rel=1e-6)
    assert rest.losses == pytest.approx(whole.losses[5:], rel=1e-5)  # steps 6-8 of epoch 0, then epoch 1


def _cli_args(data_dir: Path, cache: Path, root: Path) -> List[str]:
    return ["--model", "lit_rnncells.tasks.Seq2Seq", "--model.init_args.embedding_size", "32",
            "--model.init_args.hidden_size", "48", "--model.init_args.dropout", "0.0",
            "--model.init_args.beam_size", "2", "--model.init_args.eval_metrics", "[sacrebleu]",
            "--data", "lit_rnncells.data.TranslationDataModule", "--data.init_args.dataset", "multi30k",
            "--data.init_args.data_dir", str(data_dir / "multi30k"), "--data.init_args.limit", "60",
            "--data.init_args.subword_vocab_size", "400", "--data.init_args.batch_size", "10",
            "--data.init_args.eval_batch_size", "16", "--data.init_args.cache_dir", str(cache),
            "--trainer.accelerator", "cpu", "--trainer.logger", "false", "--trainer.enable_progress_bar", "false",
            "--trainer.enable_model_summary", "false", "--trainer.default_root_dir", str(root)]


@pytest.mark.real_data
def test_predict_from_a_checkpoint_keeps_the_input_order(data_dir: Path, cache: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    args = _cli_args(data_dir, cache, tmp_path)
    cli = cli_main(["fit", *args, "--trainer.max_epochs", "1"])
    ckpt = str(next(tmp_path.rglob("*.ckpt")))
    lines = (data_dir / "multi30k" / "test_2016_flickr.de").read_text(encoding="utf-8").split("\n")[:9]
    lines = [lines[5], lines[0], lines[8], lines[0], lines[3], lines[7], lines[1], lines[5], lines[2]]
    (tmp_path / "in.de").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out.en"
    predict = list(args)
    predict[predict.index("--data.init_args.data_dir") + 1] = str(tmp_path / "no_training_files_here")
    cli = cli_main(["predict", *predict, "--data.init_args.predict_file", str(tmp_path / "in.de"),
                    "--data.init_args.eval_batch_size", "4", "--ckpt_path", ckpt, "--predict_output", str(out)])
    outputs = out.read_text(encoding="utf-8").split("\n")[:-1]
    assert len(outputs) == len(lines)
    # the batches predict ran (sorted by length): each row is the line its index names, and the file
    # holds each row's output at that line number
    dm, model = cli.datamodule, cli.model.eval()
    expected = {}
    for batch in dm.predict_dataloader():
        for row, i in enumerate(batch["index"].tolist()):
            n = int(batch["source_lengths"][row])
            assert batch["source"][row, :n].tolist() == dm.source_tokenizer.encode(lines[i]) + [dm.eos_id]
        with torch.no_grad():
            expected.update({r["index"]: r["text"] for r in model.predict_step(batch, 0)})
    assert outputs == [expected[i] for i in range(len(lines))]
    assert [b["index"].tolist() for b in dm.predict_dataloader()] != [[0, 1, 2, 3], [4, 5, 6, 7], [8]]  # reordered
    # in Python, from the checkpoint alone (its tokenizers; decoding options are not in a checkpoint)
    loaded = Seq2Seq.load_from_checkpoint(ckpt, decoding={"beam_size": 2})
    assert loaded.translate_lines(lines, batch_size=4) == outputs
    assert loaded.translate_lines(lines[:1]) == outputs[:1]
    # or Lightning's predict, with the DataModule rebuilt from the checkpoint (no training file read)
    data = TranslationDataModule.load_from_checkpoint(ckpt, predict_file=str(tmp_path / "in.de"),
                                                      data_dir=str(tmp_path / "no_training_files_here"))
    records = trainer(tmp_path).predict(loaded, data)
    assert [r["text"] for r in sorted((r for batch in records for r in batch), key=lambda r: r["index"])] == outputs
    with pytest.raises(ValueError, match=r"lines\[1\] is empty"):
        loaded.translate_lines([lines[0], " "])
    with pytest.raises(RuntimeError, match="This model has no tokenizers: load it with Seq2Seq.load_from_checkpoint"):
        model_for(dm).translate_lines(lines)


@pytest.mark.slow
@pytest.mark.real_data
def test_ddp_two_cpu_processes_bf16_smoke_fit(data_dir: Path, cache: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "lit_rnncells", "fit", *_cli_args(data_dir, cache, tmp_path),
         "--trainer.devices", "2", "--trainer.strategy", "ddp", "--trainer.precision", "bf16-mixed",
         "--trainer.max_epochs", "1", "--test_after_fit", "true"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "test/sacrebleu" in result.stdout and "test/loss" in result.stdout


@pytest.mark.slow
@pytest.mark.real_data
def test_bench_seq2seq_script_runs_at_tiny_settings(data_dir: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture) -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import bench_seq2seq
    finally:
        sys.path.pop(0)
    threads = torch.get_num_threads()
    saved = tmp_path / "gru.ckpt"
    tiny = ["--limit", "40", "--emb", "16", "--hid", "16", "--vocab", "300", "--single", "4", "--threads", "1",
            "--decode-repeats", "1", "--data", str(data_dir / "multi30k")]
    try:
        bench_seq2seq.main(tiny + ["--epochs", "1", "--seeds", "0", "1", "--skip-reference", "--cells", "GRU", "CARU",
                                   "--save-model", str(saved)])
        out = capsys.readouterr().out
        bench_seq2seq.main(tiny + ["--decode-from", str(saved)])
        decoded = capsys.readouterr().out
    finally:
        torch.set_num_threads(threads)
    assert "| ours Seq2Seq GRU | 0 |" in out and "| ours Seq2Seq GRU | 1 |" in out and " ± " in out
    assert "| beam 5 | 128 |" in out and "| CARU |" in out
    # the saved model decodes to the same greedy BLEU as right after training
    seed0 = re.search(r"\| ours Seq2Seq GRU \| 0 \| (\d+\.\d+) \|", out).group(1)
    assert f"test BLEU greedy {seed0}," in decoded and "| beam 5 | 128 |" in decoded
    assert "Bar 3 (our beam 5 BLEU >= our greedy, seed 0)" in out and "CARU Table 2's claim" in out
