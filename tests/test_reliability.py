"""Reliability through the public command line: one-sentence errors, divergence and signal guards, exact resume."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Sequence

import pytest
import torch

from lit_rnncells.cli import run

ROOT = Path(__file__).resolve().parents[1]
LM = str(ROOT / "configs" / "lm" / "ptb_char_gru_reference.yaml")
LOGIC = str(ROOT / "configs" / "logic" / "mufuru.yaml")


def small_lm(root: Path) -> List[str]:
    """The issue's small LM run ``S``, without a logger, under ``root``."""
    return ["fit", "--config", LM, "--trainer.max_time", "null", "--model.init_args.embedding_size", "8",
            "--model.init_args.hidden_size", "16", "--data.init_args.batch_size", "4", "--data.init_args.bptt", "20",
            "--data.init_args.eval_batch_size", "4", "--trainer.limit_val_batches", "3",
            "--trainer.val_check_interval", "null", "--trainer.enable_progress_bar", "false",
            "--trainer.logger", "false", "--trainer.default_root_dir", str(root),
            "--trainer.enable_model_summary", "false"]


def with_callbacks(*callbacks: Dict) -> List[str]:
    return ["--trainer.callbacks+=" + json.dumps(c) for c in callbacks]


def recorder(path: Path) -> Dict:
    return {"class_path": "tests.examples.recorders.LossRecorder", "init_args": {"path": str(path)}}


def losses(path: Path) -> Dict[int, float]:
    return {r["step"]: r["loss"] for r in map(json.loads, path.read_text().splitlines())}


def error_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1, stderr[-2000:]
    return lines[0]


def test_a_user_error_is_one_sentence_with_the_fix_and_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run(["fit", "--config", LOGIC, "--model.init_args.hiden_size", "3"]) == 2
    line = error_line(capsys.readouterr().err)
    assert "LogicEvaluator has no option 'hiden_size'. Did you mean 'hidden_size'?" in line
    assert run(["fit", "--config", LOGIC, "--model.init_args.hidden_size", "0"]) == 2
    assert "hidden_size must be a positive integer, got 0; set it to 1 or more." in error_line(capsys.readouterr().err)
    assert run(["fit", "--config", LOGIC, "--model.init_args.cell", "GRUU"]) == 2
    assert "Unknown cell 'GRUU'. Did you mean 'GRU'?" in error_line(capsys.readouterr().err)
    assert run(["fit", "--config", LOGIC, "--trainer.max_epochs", "abc"]) == 2
    assert "--trainer.max_epochs expects an int, got 'abc'" in error_line(capsys.readouterr().err)
    assert not list(tmp_path.rglob("*.ckpt")) and not list(tmp_path.rglob("config.yaml"))


def test_the_full_traceback_on_request(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LIT_RNNCELLS_TRACEBACK", "1")
    with pytest.raises(Exception, match="hidden_size must be a positive integer"):
        run(["fit", "--config", LOGIC, "--model.init_args.hidden_size", "0"])


@pytest.mark.real_data
def test_a_diverging_run_stops_at_the_first_non_finite_loss_and_keeps_no_nan_checkpoint(data_dir, tmp_path, capsys):
    code = run(small_lm(tmp_path) + ["--model.init_args.optimizer", "torch.optim.SGD",
                                     "--model.init_args.optimizer.init_args.lr", "1e38",
                                     "--trainer.gradient_clip_val", "null", "--trainer.max_steps", "50"])
    assert code == 1
    line = error_line(capsys.readouterr().err)
    assert "became non-finite at step" in line and "the last finite loss was" in line and "lower the learning" in line
    for ckpt in tmp_path.rglob("*.ckpt"):
        state = torch.load(ckpt, weights_only=True)["state_dict"]
        assert all(bool(torch.isfinite(v).all()) for v in state.values() if v.is_floating_point())


@pytest.mark.real_data
def test_sigterm_saves_a_checkpoint_exits_143_and_resuming_gives_the_uninterrupted_losses(data_dir, tmp_path, capsys):
    steps = ["--trainer.max_steps", "12"]
    full = tmp_path / "full.jsonl"
    assert run(small_lm(tmp_path / "a") + steps + with_callbacks(recorder(full))) == 0
    cut = tmp_path / "cut.jsonl"
    stop = {"class_path": "tests.examples.recorders.SigtermAtStep", "init_args": {"step": 5}}
    assert run(small_lm(tmp_path / "b") + steps + with_callbacks(recorder(cut), stop)) == 143
    err = capsys.readouterr().err
    assert "SIGTERM at step 5: saved a resumable checkpoint to" in err
    ckpt = next((tmp_path / "b").rglob("interrupted.ckpt"))
    assert f"--ckpt_path {ckpt}" in err
    assert run(small_lm(tmp_path / "b") + steps + with_callbacks(recorder(cut)) + ["--ckpt_path", str(ckpt)]) == 0
    uninterrupted, resumed = losses(full), losses(cut)
    assert sorted(resumed) == sorted(uninterrupted) == list(range(1, 13))
    for step in uninterrupted:
        assert resumed[step] == pytest.approx(uninterrupted[step], rel=1e-6), step


@pytest.mark.real_data
@pytest.mark.slow
@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["SIGTERM", "SIGINT"])
def test_a_real_signal_to_the_process_saves_and_exits_with_its_code(data_dir, tmp_path, signum, code):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "disabled"}
    started = tmp_path / "losses.jsonl"
    # The child starts with SIGINT's default disposition, as from a terminal: a process inherits an ignored SIGINT
    # (Lightning ignores it in-process after a Ctrl-C), and Python then never raises KeyboardInterrupt.
    proc = subprocess.Popen([sys.executable, "-m", "lit_rnncells", *small_lm(tmp_path), "--trainer.max_steps",
                             "1000000", *with_callbacks(recorder(started))], cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 240
    while time.time() < deadline and not started.exists():
        time.sleep(0.2)  # training has started once the first loss is recorded
    assert started.exists(), "the fit recorded no loss within 240 s"
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == code, err[-2000:]
    assert "saved a resumable checkpoint" in err
    assert list(tmp_path.rglob("interrupted.ckpt"))


def _logic(root: Path) -> List[str]:
    return ["--config", LOGIC, "--data.init_args.train_size", "64", "--data.init_args.val_size", "16",
            "--data.init_args.test_size", "32", "--trainer.max_epochs", "1", "--trainer.enable_progress_bar", "false",
            "--trainer.logger", "false", "--trainer.default_root_dir", str(root), "--test_after_fit", "false"]


@pytest.fixture(scope="module")
def logic_checkpoint(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("logic")
    assert run(["fit", *_logic(root)]) == 0
    return next(root.rglob("*.ckpt"))


def test_predict_without_a_checkpoint_refuses_unless_asked_for_an_untrained_model(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run(["predict", *_logic(tmp_path)]) == 2
    assert "predict needs a trained model: pass --ckpt_path" in error_line(capsys.readouterr().err)
    assert run(["predict", *_logic(tmp_path), "--untrained", "true"]) == 0


def test_bad_checkpoint_files_get_one_sentence(tmp_path, capsys, monkeypatch, logic_checkpoint):
    monkeypatch.chdir(tmp_path)
    truncated = tmp_path / "truncated.ckpt"
    truncated.write_bytes(logic_checkpoint.read_bytes()[:1000])
    junk = tmp_path / "junk.ckpt"
    junk.write_bytes(os.urandom(4096))
    for bad, expected in ((truncated, "is not a readable checkpoint"), (junk, "is not a readable checkpoint"),
                          (tmp_path / "missing.ckpt", "does not exist")):
        assert run(["test", *_logic(tmp_path), "--ckpt_path", str(bad)]) == 2
        line = error_line(capsys.readouterr().err)
        assert expected in line and "weights_only=False" not in line


@pytest.mark.real_data
def test_a_checkpoint_of_another_task_is_named(data_dir, tmp_path, capsys, monkeypatch, logic_checkpoint):
    monkeypatch.chdir(tmp_path)
    assert run(["test", "--config", LM, "--ckpt_path", str(logic_checkpoint), "--trainer.logger", "false"]) == 2
    assert "is a LogicEvaluator, the config builds a LanguageModel" in error_line(capsys.readouterr().err)


def test_changed_model_flags_with_a_checkpoint_are_refused_or_listed(tmp_path, capsys, monkeypatch, logic_checkpoint):
    monkeypatch.chdir(tmp_path)
    assert run(["test", *_logic(tmp_path), "--ckpt_path", str(logic_checkpoint),
                "--model.init_args.hidden_size", "32"]) == 2
    line = error_line(capsys.readouterr().err)
    assert "hidden_size=32 (checkpoint: 8) differ from the checkpoint" in line
    assert run(["test", *_logic(tmp_path), "--ckpt_path", str(logic_checkpoint),
                "--model.init_args.cell", "CARU"]) == 2
    assert "cell=CARU (checkpoint: MuFuRU) differ" in error_line(capsys.readouterr().err)  # default options unsaid


def test_a_checkpoint_saved_before_its_cell_gained_an_option_is_the_same_cell():
    """A CARU checkpoint from before ``word_weight`` existed holds no options; the config's CARU has the default,
    so the two are the same cell (testing such a checkpoint was refused); a non-default option still differs."""
    from lit_rnncells.command.checkpoint_options import compare_with_checkpoint

    saved = {"cell": {"class_path": "CARU", "init_args": {}}, "hidden_size": 8}
    given = {"cell": {"class_path": "lit_rnncells.cells.CARU", "init_args": {"word_weight": True}}, "hidden_size": 8}
    compare_with_checkpoint(given, saved, "old.ckpt")
    given["cell"]["init_args"]["word_weight"] = False
    with pytest.raises(ValueError, match=r"cell=CARU\(word_weight=False\) \(checkpoint: CARU\) differ"):
        compare_with_checkpoint(given, saved, "old.ckpt")


@pytest.mark.real_data
def test_changed_regularisation_flags_with_a_checkpoint_are_listed_with_the_value_in_force(data_dir, tmp_path):
    assert run(small_lm(tmp_path) + ["--trainer.max_steps", "2"]) == 0
    ckpt = next(tmp_path.rglob("*.ckpt"))
    args = small_lm(tmp_path)[1:] + ["--ckpt_path", str(ckpt), "--trainer.limit_test_batches", "2"]
    with pytest.warns(UserWarning, match=r"Using the checkpoint's values regularization\.dropout=0\.0 \(you gave 0\.3\)"):
        assert run(["test", *args, "--model.init_args.dropout", "0.3"]) == 0


@pytest.mark.real_data
@pytest.mark.parametrize("flags, expected", [
    (["--data.init_args.data_dir", "{data}/ptb/ptb.char.test.txt"],
     "is a file, but ptb_char is distributed as separate train/valid/test files"),
    (["--data.init_args.data_dir", "ptb/ptbb"], "Corpus folder 'ptb/ptbb' does not exist"),
    (["--model.init_args.dropout_e", "1.5"], "dropout_e must be a probability in [0, 1), got 1.5"),
    (["--model.init_args.dropout_e", "1.0"], "dropout_e must be a probability in [0, 1), got 1.0"),
    (["--model.init_args.weight_drop", "-0.1"], "weight_drop must be a probability in [0, 1)"),
])
def test_language_model_bad_input_fails_at_start_in_one_sentence(data_dir, tmp_path, capsys, monkeypatch, flags,
                                                                  expected):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ptb").mkdir()
    flags = [f.replace("{data}", str(data_dir)) for f in flags]
    assert run(small_lm(tmp_path / "run") + flags + ["--trainer.max_steps", "1"]) == 2
    assert expected in error_line(capsys.readouterr().err)
    assert not (tmp_path / "run").exists()


def test_an_empty_data_folder_is_named_at_once(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LIT_RNNCELLS_DATA", str(tmp_path))
    start = time.time()
    assert run(small_lm(tmp_path / "run") + ["--trainer.max_steps", "1"]) == 2
    line = error_line(capsys.readouterr().err)
    assert f"Corpus folder '{tmp_path / 'ptb'}' does not exist" in line and "ptb.char.train.txt" in line
    assert time.time() - start < 20  # no hub round trip


def test_fit_saves_its_config_in_its_own_folder_and_prints_where_and_how_to_resume(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = ["fit", *_logic(tmp_path)]
    args[args.index("--trainer.logger") + 1] = "lightning.pytorch.loggers.CSVLogger"
    args += ["--trainer.logger.save_dir", str(tmp_path / "logs")]
    assert run(args) == 0
    out = capsys.readouterr().out
    assert run(args) == 0
    configs = sorted(tmp_path.rglob("config.yaml"))
    assert len(configs) == 2 and configs[0].parent != configs[1].parent  # one per run, neither overwritten
    assert f"config:          {configs[0]}" in out or f"config:          {configs[1]}" in out
    assert all((c.parent / "checkpoints").is_dir() for c in configs) and "best checkpoint:" in out
    resume = next(line for line in out.splitlines() if line.startswith("Resume it: "))
    assert "--ckpt_path" in resume and not (tmp_path / "config.yaml").exists()
    assert run(resume.split()[5:]) == 0  # the printed command runs as printed


@pytest.mark.real_data
@pytest.mark.slow
def test_ddp_on_two_processes_takes_the_same_steps_as_one_process_on_the_same_global_batch(data_dir, tmp_path):
    """LM: 2 ranks × 4 streams and 1 rank × 8 streams see the same 8 streams each step; DDP's averaged
    gradients then equal the single process's, so the weights after 3 SGD steps agree."""
    assert_ddp_matches_one_process(lambda devices, batch: small_lm(tmp_path / f"run{devices}")[1:] + [
        "--data.init_args.batch_size", str(batch)], tmp_path)


def assert_ddp_matches_one_process(fit_args: Callable[[int, int], List[str]], tmp_path: Path,
                                   launch: Sequence[str] = ()) -> None:
    """``fit`` with ``fit_args(devices, batch)`` on 1 process × 8 and 2 DDP processes × 4, 3 SGD steps (lr 0.5,
    no clipping): the final weights agree (atol 2e-6). ``launch`` starts the 2 processes (e.g. ``srun -n2``;
    default: Lightning's own DDP launcher)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
    weights = {}
    for devices, batch in ((1, 8), (2, 4)):
        out = tmp_path / f"weights_{devices}.pt"
        args = ["fit", *fit_args(devices, batch), "--trainer.max_steps", "3", "--trainer.devices", str(devices),
                "--model.init_args.optimizer", "torch.optim.SGD", "--model.init_args.optimizer.init_args.lr", "0.5",
                "--trainer.enable_checkpointing", "false", "--trainer.callbacks", "null",
                "--trainer.gradient_clip_val", "null",
                *with_callbacks({"class_path": "tests.examples.recorders.SaveWeightsAtEnd",
                                 "init_args": {"path": str(out)}})]
        if devices > 1:
            args += ["--trainer.strategy", "ddp"]
            proc = subprocess.run([*launch, sys.executable, "-m", "lit_rnncells", *args], cwd=tmp_path, env=env,
                                  capture_output=True, text=True, timeout=600)
            assert proc.returncode == 0, proc.stderr[-3000:]
        else:  # one process: in this one (a fresh one would only pay the imports again), on one thread as the ranks
            here, threads = os.getcwd(), torch.get_num_threads()
            os.chdir(tmp_path)
            torch.set_num_threads(1)
            try:
                assert run(args) == 0
            finally:
                torch.set_num_threads(threads)
                os.chdir(here)
        weights[devices] = torch.load(out, weights_only=True)
    for key in weights[1]:
        torch.testing.assert_close(weights[2][key], weights[1][key], atol=2e-6, rtol=1e-5, msg=key)
