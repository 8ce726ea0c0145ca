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
    from lit_rnncells.progress import plural
    from lit_rnncells.run_folder import finished

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
