"""LanguageModel: exact truncated BPTT, whole-split evaluation, resume, NT-ASGD, sampling, CLI, DDP, bf16."""
from __future__ import annotations

import functools
import json
import math
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List

import lightning as L
import pytest
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from torch.nn import functional as F

from lit_rnncells.cli import main as cli_main
from lit_rnncells.data import LanguageModelDataModule, VocabularyMismatchError
from lit_rnncells.tasks import LanguageModel

REPO = Path(__file__).resolve().parents[1]
SENTENCES = ["the cat sat on the mat", "a dog ran far away", "we saw the cat and the dog", "on a mat we sat"]
# valid / test lines: the training words in other sentences (a train split holding the whole dev split is an error)
HELD_OUT = ["the dog sat on a mat", "we ran far away", "a cat and the dog saw", "on the mat we sat"]


def ptb_char_corpus(folder: Path, lines: int = 120) -> Path:
    """A tiny corpus in Mikolov's PTB char format (``ptb.char.{split}.txt``)."""
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", lines), ("valid", 12), ("test", 12)):
        lines = SENTENCES if split == "train" else HELD_OUT
        text = "".join(" " + " ".join("_".join(lines[i % 4].split())) + " \n" for i in range(n))
        (folder / f"ptb.char.{split}.txt").write_text(text)
    return folder


def corpus_words(train_file: Path, count: int) -> List[str]:
    """The ``count`` most frequent words of letters of a PTB char file, most frequent first (a prompt of them
    is in the vocabulary of a model trained on it, whichever corpus that is; ``<unk>`` and ``N`` left out)."""
    text = train_file.read_text()[:1_000_000].replace(" ", "").replace("_", " ")
    counts = Counter(w for w in text.split() if w.isalpha() and w.islower())
    return [w for w, _ in counts.most_common(count)]


def trainer(**kw: Any) -> L.Trainer:
    base = dict(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                enable_model_summary=False, num_sanity_val_steps=0)
    base.update(kw)
    return L.Trainer(**base)


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return ptb_char_corpus(tmp_path / "ptb")


def data(folder: Path, **kw: Any) -> LanguageModelDataModule:
    kw.setdefault("batch_size", 3)
    kw.setdefault("eval_batch_size", 2)
    kw.setdefault("bptt", 11)
    return LanguageModelDataModule("ptb_char", str(folder), cache_dir="", **kw)


def model(dm: LanguageModelDataModule, cell: Any = "GRU", **kw: Any) -> LanguageModel:
    kw.setdefault("embedding_size", 8)
    kw.setdefault("hidden_size", 16)
    return LanguageModel(cell, vocab_size=dm.vocab_size, **kw)


class Record(Callback):
    def __init__(self) -> None:
        self.batches: List[Dict[str, Any]] = []
        self.losses: List[float] = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.batches.append(batch)
        self.losses.append(float(outputs["loss"]))


def test_no_prompts_to_continue_is_refused(corpus: Path) -> None:
    """predict with ``prompts: []`` returned nothing (Lightning warned of an empty loader); a string is not a list."""
    for prompts in ([], "the "):
        with pytest.raises(ValueError, match="prompts must be a list of texts to continue"):
            data(corpus, prompts=prompts)


@pytest.mark.parametrize("cell", ["GRU", "LSTM"])
def test_tbptt_carries_state_exactly(corpus: Path, cell: str) -> None:
    """Window losses of a (frozen, eval-mode) model trained through the loop equal the whole-stream
    loss at the same positions: the state is carried from window to window, nothing is reset."""
    dm = data(corpus)
    lm = model(dm, cell, optimizer=functools.partial(torch.optim.SGD, lr=0.0))
    lm.eval()
    lm.train = lambda mode=True: lm  # keep eval mode inside fit (no dropout anyway; makes the claim literal)
    rec = Record()
    trainer(max_epochs=1, limit_train_batches=6, limit_val_batches=0, callbacks=[rec]).fit(lm, dm)
    inputs = torch.cat([b["inputs"] for b in rec.batches], 1)
    targets = torch.cat([b["targets"] for b in rec.batches], 1)
    with torch.no_grad():
        logits, _, _ = lm(inputs)
    nll = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
    offsets = [0]
    for b in rec.batches:
        offsets.append(offsets[-1] + b["seq_len"])
    for i, loss in enumerate(rec.losses):
        assert loss == pytest.approx(float(nll[:, offsets[i]:offsets[i + 1]].mean()), rel=1e-5, abs=1e-6)


def test_evaluation_is_the_token_weighted_mean_over_the_whole_split(corpus: Path) -> None:
    dm = data(corpus, eval_batch_size=3, bptt=7)
    lm = model(dm)
    val = trainer().validate(lm, dm, verbose=False)[0]
    tokens = dm.splits["valid"].long()
    with torch.no_grad():  # one stream, no windows: the reference
        logits, _, _ = lm.eval()(tokens[None, :-1])
    ref = F.cross_entropy(logits[0], tokens[1:]).item()
    # three streams start from a zero state instead of the running context: close, and exact per stream
    assert val["val/loss"] == pytest.approx(ref, rel=0.05)
    assert val["val/bpc"] == pytest.approx(val["val/loss"] / math.log(2), rel=1e-6)
    assert val["val/ppl"] == pytest.approx(math.exp(val["val/loss"]), rel=1e-5)
    ev = dm.val_dataloader().dataset
    total, count = 0.0, 0
    with torch.no_grad():
        for row in range(3):
            n = int(ev.sizes[row])
            logits, _, _ = lm(ev.inputs[row:row + 1, :n])
            total += F.cross_entropy(logits[0], ev.targets[row, :n], reduction="sum").item()
            count += n
    assert count == len(tokens) - 1
    assert val["val/loss"] == pytest.approx(total / count, rel=1e-5)


def test_resume_mid_epoch_restores_data_position_and_carried_state(corpus: Path, tmp_path: Path) -> None:
    def run(max_steps: int, ckpt: str | None = None, callbacks=()):
        torch.manual_seed(0)
        dm = data(corpus)
        lm = model(dm)
        rec = Record()
        trainer(max_steps=max_steps, limit_val_batches=0, callbacks=[rec, *callbacks],
                enable_checkpointing=bool(callbacks), default_root_dir=str(tmp_path)).fit(lm, dm, ckpt_path=ckpt)
        return lm, rec

    full, full_rec = run(5)
    saver = ModelCheckpoint(dirpath=str(tmp_path / "ck"), every_n_train_steps=2, save_top_k=-1)
    run(2, callbacks=[saver])
    resumed, rec = run(5, ckpt=str(tmp_path / "ck" / "epoch=0-step=2.ckpt"))
    assert [b["window"] for b in rec.batches] == [2, 3, 4]  # continues where it stopped
    assert rec.losses == pytest.approx(full_rec.losses[2:], rel=1e-5)  # same state, data and optimiser
    for (n, p), q in zip(full.named_parameters(), resumed.parameters()):
        torch.testing.assert_close(p, q, msg=n)
    ckpt = torch.load(tmp_path / "ck" / "epoch=0-step=2.ckpt", weights_only=False)
    assert ckpt["LanguageModelDataModule"]["position"]["window"] == 2
    assert ckpt["language_model"]["vocab"]["symbols"] == data(corpus).vocab.symbols


def test_checkpoint_with_another_vocabulary_fails_at_start(corpus: Path, tmp_path: Path) -> None:
    dm = data(corpus)
    lm = model(dm)
    t = trainer(max_steps=1, limit_val_batches=0, default_root_dir=str(tmp_path))
    t.fit(lm, dm)
    path = tmp_path / "a.ckpt"
    t.save_checkpoint(path)
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    for split, line in (("train", " x y z _ q \n"), ("valid", " q _ z y x \n"), ("test", " z _ x q y \n")):
        (other_dir / f"ptb.char.{split}.txt").write_text(line * 80)
    other = data(other_dir)
    with pytest.raises(VocabularyMismatchError, match="use the dataset and level the checkpoint was trained on"):
        trainer(max_steps=2).fit(model(other), other, ckpt_path=str(path))


def test_generate_from_a_checkpoint_alone(corpus: Path, tmp_path: Path) -> None:
    dm = data(corpus)
    t = trainer(max_steps=3, limit_val_batches=0, default_root_dir=str(tmp_path))
    t.fit(model(dm), dm)
    t.save_checkpoint(tmp_path / "m.ckpt")
    lm = LanguageModel.load_from_checkpoint(tmp_path / "m.ckpt")
    assert lm.vocab == dm.vocab
    text = lm.generate("the cat", length=30, temperature=0.7)
    assert text.startswith("the cat") and len(text) == len("the cat") + 30
    assert lm.generate("a ", 20, 0.0) == lm.generate("a ", 20, 0.0)  # temperature 0 is greedy


def test_nt_asgd_switches_and_evaluates_with_the_average(corpus: Path) -> None:
    dm = data(corpus)
    lm = model(dm, nt_asgd=True, nonmono=1, optimizer=functools.partial(torch.optim.SGD, lr=0.5))

    class Worse(Callback):  # pretend earlier evaluations were better, so the first one triggers the switch
        def on_validation_epoch_start(self, trainer, pl_module) -> None:
            if not pl_module._val_history:
                pl_module._val_history = [-1.0, -1.0]

    t = trainer(max_epochs=3, limit_train_batches=3, limit_val_batches=2, callbacks=[Worse()])
    t.fit(lm, dm)
    assert lm._asgd and isinstance(t.optimizers[0], torch.optim.ASGD)
    before = {n: p.detach().clone() for n, p in lm.named_parameters()}
    t.validate(lm, dm, verbose=False)
    for n, p in lm.named_parameters():  # raw weights are back after evaluating with the averages
        assert torch.equal(p, before[n])


def test_regularisers_and_aux_loss_train(corpus: Path) -> None:
    dm = data(corpus, variable_bptt=True, min_bptt=3)
    mzu = functools.partial(__import__("lit_rnncells.cells", fromlist=["SatMZU"]).SatMZU, zones=2)
    lm = model(dm, mzu, num_layers=2, tie_weights=True, dropout=0.2, dropout_h=0.2, dropout_i=0.2,
               dropout_e=0.1, weight_drop=0.3, alpha=2.0, beta=1.0, scale_lr_with_seq_len=True)
    assert lm.decoder.weight is lm.embedding.weight and lm.has_aux_loss
    t = trainer(max_epochs=1, limit_train_batches=3, limit_val_batches=1)
    t.fit(lm, dm)
    assert "train/zone_disagreement" in t.callback_metrics or any("train/" in k and k not in (
        "train/loss", "train/bpc", "train/ppl") for k in t.callback_metrics)
    assert math.isfinite(float(t.callback_metrics["val/loss"]))


def test_short_training_lowers_validation_bpc(corpus: Path) -> None:
    dm = data(corpus, batch_size=4, bptt=20)
    lm = model(dm, optimizer=functools.partial(torch.optim.Adam, lr=0.01))
    t = trainer(max_epochs=4, limit_val_batches=1.0)
    before = t.validate(lm, dm, verbose=False)[0]["val/bpc"]
    t.fit(lm, dm)
    assert float(t.callback_metrics["val/bpc"]) < before - 0.5


def test_bf16_mixed_fit(corpus: Path) -> None:
    dm = data(corpus)
    t = trainer(max_epochs=1, limit_train_batches=3, limit_val_batches=2, precision="bf16-mixed")
    t.fit(model(dm, "LSTM"), dm)
    assert math.isfinite(float(t.callback_metrics["val/loss"]))


def _cli_args(config: str, folder: Path, out: Path) -> List[str]:
    return ["--config", str(REPO / "configs" / "lm" / config), "--data.init_args.data_dir", str(folder),
            "--data.init_args.cache_dir", "", "--model.init_args.hidden_size", "16",
            "--model.init_args.embedding_size", "8", "--data.init_args.batch_size", "4", "--data.init_args.bptt", "20",
            "--trainer.logger", "false", "--trainer.enable_progress_bar", "false",
            "--trainer.default_root_dir", str(out)]


@pytest.mark.real_data
def test_real_ptb_char_short_fit_lowers_bpc(data_dir: Path) -> None:
    dm = LanguageModelDataModule("ptb_char", str(data_dir / "ptb"), batch_size=16, eval_batch_size=16, bptt=50,
                                 cache_dir="")
    lm = LanguageModel("GRU", vocab_size=dm.vocab_size, embedding_size=16, hidden_size=64,
                       optimizer=functools.partial(torch.optim.Adam, lr=0.01))
    t = trainer(max_epochs=1, limit_train_batches=30, limit_val_batches=10)
    before = t.validate(lm, dm, verbose=False)[0]["val/bpc"]
    t.fit(lm, dm)
    assert float(t.callback_metrics["val/bpc"]) < before - 1.0


@pytest.mark.data_fallback
def test_cli_fit_then_predict_from_checkpoint(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """configs/lm/ptb_char_gru_reference.yaml end to end (real PTB char when available, else a tiny copy)."""
    root = os.environ.get("LIT_RNNCELLS_DATA")
    folder = Path(root) / "ptb" if root and (Path(root) / "ptb").is_dir() else ptb_char_corpus(tmp_path / "ptb")
    args = _cli_args("ptb_char_gru_reference.yaml", folder, tmp_path / "run")
    cli_main(["fit", *args, "--trainer.limit_train_batches", "3", "--trainer.limit_val_batches", "2",
              "--trainer.max_epochs", "1", "--trainer.val_check_interval", "1.0"])
    ckpt = next((tmp_path / "run").rglob("last.ckpt"))
    words = corpus_words(folder / "ptb.char.train.txt", 3)  # prompts the vocabulary of either corpus holds
    capsys.readouterr()
    cli_main(["predict", *args, "--ckpt_path", str(ckpt), "--data.init_args.prompts",
              json.dumps([f"{w} " for w in words[:2]]), "--data.init_args.predict_length", "25"])
    lines = capsys.readouterr().out.splitlines()
    # one line per prompt, in prompt order
    assert lines[-2].startswith(f"{words[0]} ") and lines[-1].startswith(f"{words[1]} ")
    written = tmp_path / "samples.txt"  # issue 19 item 2: --predict_output is honoured, and said
    cli_main(["predict", *args, "--ckpt_path", str(ckpt), "--data.init_args.prompts",
              json.dumps([f"{w} " for w in words]), "--data.init_args.predict_length", "25",
              "--predict_output", str(written)])
    samples = written.read_text().splitlines()
    assert len(samples) == 3 and [s.split(" ")[0] for s in samples] == words
    assert f"predict: wrote 3 lines to {written}" in capsys.readouterr().out
    # the prompts as a file, one per line, as every other task's predict reads its input (--data.init_args.prompts
    # prompts.txt was jsonargparse's 'Parser key "data" expects list, got NestedArg(...)')
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("".join(f"{w} \n" for w in reversed(words)))
    from_file = tmp_path / "from_file.txt"
    cli_main(["predict", *args, "--ckpt_path", str(ckpt), "--data.init_args.predict_file", str(prompts),
              "--data.init_args.predict_length", "25", "--predict_output", str(from_file)])
    assert [s.split(" ")[0] for s in from_file.read_text().splitlines()] == list(reversed(words))


def test_prompts_from_a_file_or_standard_input_and_the_mistakes(tmp_path: Path, monkeypatch) -> None:
    """``predict_file`` replaces ``prompts``: a file or ``-`` (standard input, read once); a blank line, no lines,
    and a file name given as ``prompts`` are one sentence each."""
    import io

    folder = ptb_char_corpus(tmp_path / "ptb")
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("a b\nc \n")
    dm = data(folder, predict_file=str(prompts))
    assert dm.predict_prompts() == ["a b", "c "]
    assert [item["prompt"] for item in dm.predict_dataloader().dataset] == ["a b", "c "]
    monkeypatch.setattr("sys.stdin", io.StringIO("x\ny\n"))
    dm = data(folder, predict_file="-")
    assert dm.predict_prompts() == ["x", "y"] and dm.predict_prompts() == ["x", "y"]  # read once, kept
    (tmp_path / "blank.txt").write_text("a\n\nb\n")
    with pytest.raises(ValueError, match=r"Line 2 of predict_file '.*blank.txt' is empty"):
        data(folder, predict_file=str(tmp_path / "blank.txt")).predict_prompts()
    (tmp_path / "none.txt").write_text("")
    with pytest.raises(ValueError, match=r"predict_file '.*none.txt' has no lines; give one prompt per line"):
        data(folder, predict_file=str(tmp_path / "none.txt")).predict_prompts()
    with pytest.raises(ValueError, match=r"got 'prompts.txt'; give e.g. .* or a file of prompts, one per line, as "
                                         r"--data.init_args.predict_file <file>"):
        data(folder, prompts="prompts.txt")


@pytest.mark.slow
def test_ddp_two_processes_smoke_and_metric_reduction(tmp_path: Path) -> None:
    """A 2-process DDP fit through the CLI; the DDP validation loss equals a 1-process run over the same
    streams (2 ranks x 2 streams = 4 streams), so the token-weighted mean is reduced across ranks correctly."""
    folder = ptb_char_corpus(tmp_path / "ptb")
    args = _cli_args("ptb_char_gru_reference.yaml", folder, tmp_path / "run")
    env = {**os.environ, "WANDB_MODE": "disabled", "PYTHONPATH": str(REPO)}
    common = ["--trainer.limit_train_batches", "3", "--trainer.max_epochs", "1", "--trainer.accelerator", "cpu",
              "--trainer.devices", "2", "--trainer.strategy", "ddp", "--data.init_args.eval_batch_size", "2"]
    fit = subprocess.run([sys.executable, "-m", "lit_rnncells", "fit", *args, *common,
                          "--trainer.val_check_interval", "1.0"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert fit.returncode == 0, fit.stderr[-3000:]
    ckpt = next((tmp_path / "run").rglob("last.ckpt"))
    state = torch.load(ckpt, weights_only=False)["language_model"]["train_state"]
    assert state[0].shape[:3] == (2, 1, 4)  # both ranks' carried states, for resuming on 2 devices
    val = subprocess.run([sys.executable, "-m", "lit_rnncells", "validate", *args, *common, "--ckpt_path", str(ckpt)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert val.returncode == 0, val.stderr[-3000:]
    ddp_loss = float(re.search(r"val/loss\s*│?\s*([0-9.]+)", val.stdout).group(1))
    dm = data(folder, eval_batch_size=4, bptt=20)
    lm = LanguageModel.load_from_checkpoint(ckpt)
    single = trainer().validate(lm, dm, verbose=False)[0]["val/loss"]
    assert ddp_loss == pytest.approx(single, rel=1e-4)
