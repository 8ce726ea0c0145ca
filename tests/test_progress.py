"""Issue 19 item 13: redirected output gets a few plain progress lines, not tqdm's line per batch; usage lines
say python -m lit_rnncells; library helpers print no Trainer banners; predict has no batch-indices warning."""
from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

from lit_rnncells.cli import run
from lit_rnncells.experiments.param_match import ParamCounter
from lit_rnncells.utils.progress import last_progress_line

ROOT = Path(__file__).resolve().parents[1]
LOGIC = str(ROOT / "configs" / "logic" / "mufuru.yaml")
TINY = ["--config", LOGIC, "--data.init_args.train_size", "64", "--data.init_args.val_size", "16",
        "--data.init_args.test_size", "32", "--trainer.logger", "false"]


def cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "WANDB_MODE": "disabled"}
    return subprocess.run([sys.executable, "-m", "lit_rnncells", *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)


def test_redirected_fit_prints_sparse_progress_lines(tmp_path):
    """30 epochs of 2 batches, validated and tested: tqdm printed a line per epoch and stage; now a start and an
    end line (and one per 20 s)."""
    result = cli(tmp_path, "fit", *TINY, "--trainer.max_epochs", "30")
    assert result.returncode == 0, result.stderr[-3000:]
    output = result.stdout + result.stderr
    assert "it/s" not in output and "Epoch 0" not in output
    progress = [ln for ln in output.splitlines() if ln.startswith(("fit:", "test:"))]
    assert progress[0] == "fit: started, 2 batches an epoch (0 s)"
    assert any(ln.startswith("fit: ended after 30 epochs, step 60") for ln in progress)
    assert len(progress) <= 8 and len(output.splitlines()) < 40, output  # tqdm: 60+ lines
    (tmp_path / "log.txt").write_text(output)  # what compare's progress lines read back from a run's log
    assert last_progress_line(tmp_path / "log.txt") == progress[-1]
    assert last_progress_line(tmp_path / "log.txt", tail_bytes=10) is None and last_progress_line(tmp_path / "no") is None


def test_usage_lines_name_the_module(tmp_path):
    result = cli(tmp_path, "fit", "--model.help", "LogicEvaluator")
    assert result.returncode == 0 and result.stdout.startswith("usage: python -m lit_rnncells "), result.stdout[:200]
    assert "__main__.py" not in result.stdout


def test_param_counter_prints_no_trainer_banners(capfd):
    assert ParamCounter(LOGIC, ["--trainer.logger", "false"]).count("GRU", 8) > 0
    out, err = capfd.readouterr()
    assert "GPU available" not in out + err and "Seed set to" not in out + err


def test_predict_has_no_batch_indices_warning(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert run(["fit", *TINY, "--trainer.max_epochs", "1", "--test_after_fit", "false", "--run_dir", "r"]) == 0
    ckpt = next((tmp_path / "r" / "checkpoints").glob("*.ckpt"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert run(["predict", *TINY, "--ckpt_path", str(ckpt), "--predict_output", str(tmp_path / "p.txt")]) == 0
    assert not [w for w in caught if "infer the batch indices" in str(w.message)]


def test_messages_count_one_in_the_singular(tmp_path):
    """Issue 33: "1 epochs", "1 batches" read wrong; a count of one takes the singular (and others the plural)."""
    from lit_rnncells.utils.progress import plural
    from lit_rnncells.command.run_folder import finished

    assert [plural(1, "epoch"), plural(2, "epoch"), plural(1, "batch", "batches"), plural("?", "batch", "batches"),
            plural(1_000, "step")] == ["1 epoch", "2 epochs", "1 batch", "? batches", "1,000 steps"]
    assert finished({"global_step": 1}, None, 1).startswith("it trained 1 step of max_steps 1")
    done = {"global_step": 2, "loops": {"fit_loop": {"epoch_progress": {"current": {"processed": 1}},
                                                     "epoch_loop.batch_progress": {"is_last_batch": True}}}}
    assert finished(done, 1, None).startswith("it trained 1 epoch of max_epochs 1")
    result = cli(tmp_path, "fit", *TINY, "--trainer.max_epochs", "1", "--data.init_args.batch_size", "64",
                 "--test_after_fit", "true")
    assert result.returncode == 0, result.stderr[-3000:]
    lines = (result.stdout + result.stderr).splitlines()
    assert "fit: started, 1 batch an epoch (0 s)" in lines
    assert any(ln.startswith("fit: ended after 1 epoch, step 1") for ln in lines), lines
    assert any(ln.startswith("test: started, 1 batch (") for ln in lines), lines


def test_a_fit_and_its_resume_print_no_banners_summary_or_directory_warning(tmp_path):
    """Issue 33: the GPU/TPU banners (no GPU here), the 14-line model summary and, on resume, "Checkpoint directory
    exists and is not empty" came with every fit. The summary stays one flag away."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    words = "the quick brown fox jumps over lazy dog a cat sat on mat".split()
    for split, n in (("train", 200), ("valid", 20), ("test", 20)):
        lines = (" ".join(words[(i * 7 + j * (3 + len(split))) % len(words)] for j in range(9)) + f" {split} {i}\n"
                 for i in range(n))
        (corpus / f"{split}.txt").write_text("".join(lines))
    lm = ["--config", str(ROOT / "configs" / "lm" / "ptb_char_gru_reference.yaml"), "--data.init_args.dataset", "text",
          "--data.init_args.level", "char", "--data.init_args.data_dir", str(corpus), "--data.init_args.cache_dir", "",
          "--model.init_args.embedding_size", "8", "--model.init_args.hidden_size", "16", "--data.init_args.batch_size",
          "4", "--data.init_args.bptt", "20", "--trainer.max_time", "null", "--trainer.limit_val_batches", "1",
          "--trainer.val_check_interval", "1", "--trainer.logger", "false", "--run_dir", str(tmp_path / "run")]
    first = cli(tmp_path, "fit", *lm, "--trainer.max_steps", "2")
    resumed = cli(tmp_path, "fit", *lm, "--trainer.max_steps", "4", "--ckpt_path",
                  str(tmp_path / "run" / "checkpoints" / "last.ckpt"))
    for result in (first, resumed):
        assert result.returncode == 0, result.stderr[-3000:]
        output = result.stdout + result.stderr
        if not __import__("torch").cuda.is_available():
            assert "GPU available" not in output and "TPU available" not in output
        assert "Total params" not in output and "| Name" not in output
        assert "exists and is not empty" not in output
    summary = cli(tmp_path, "fit", *lm[:-2], "--run_dir", str(tmp_path / "run2"), "--trainer.max_steps", "1",
                  "--trainer.enable_model_summary", "true")
    assert summary.returncode == 0 and "Total params" in summary.stdout + summary.stderr
