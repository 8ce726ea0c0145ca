"""Every ``python -m lit_rnncells...`` command of the README runs: the main job exactly as written, the others
as written with a small budget appended (later flags override earlier ones), placeholders filled in."""
from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import List

import pytest
import torch

from lit_rnncells import compare as compare_module
from lit_rnncells import reproduce as reproduce_module
from lit_rnncells.analysis.__main__ import main as analysis_main
from lit_rnncells.cli import run

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
MAIN_JOB = "python -m lit_rnncells fit --config configs/logic/mufuru.yaml"
SMALL = ["--trainer.max_steps", "3", "--trainer.limit_val_batches", "2", "--trainer.limit_test_batches", "2",
         "--trainer.logger", "false", "--trainer.enable_progress_bar", "false"]


def readme_commands() -> List[str]:
    """The README's shell commands (continuation lines joined, comments dropped)."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", README, re.S):
        for command in block.replace("\\\n", " ").splitlines():
            command = command.split("  #", 1)[0].strip()
            if command.startswith("python -m lit_rnncells"):
                commands.append(" ".join(command.split()))
    return commands


COMMANDS = readme_commands()


def test_the_readme_has_the_commands_this_file_runs():
    assert MAIN_JOB in COMMANDS
    assert {c.split()[2] for c in COMMANDS} >= {"lit_rnncells", "lit_rnncells.compare", "lit_rnncells.analysis",
                                                "lit_rnncells.reproduce"}


@pytest.fixture(scope="module")
def logic_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The README's main job exactly as written, from a folder where ``configs/`` is the repository's (so its
    run files land there); its run folder."""
    import os

    root = tmp_path_factory.mktemp("main_job")
    (root / "configs").symlink_to(ROOT / "configs")
    here = os.getcwd()
    os.chdir(root)
    try:
        assert run(shlex.split(MAIN_JOB)[3:]) == 0
    finally:
        os.chdir(here)
    return next(root.rglob("config.yaml")).parent


def fill(command: str, run_folder: Path) -> List[str]:
    checkpoint = next(p for p in sorted(run_folder.rglob("*.ckpt")) if p.name != "last.ckpt")
    lines = run_folder / "lines.txt"
    text = (command.replace("<run>/config.yaml", str(run_folder / "config.yaml"))
            .replace("<checkpoint>", str(checkpoint)).replace("<logic checkpoint>", str(checkpoint))
            .replace("lines.txt", str(lines)).replace("out.txt", str(run_folder / "out.txt")))
    return shlex.split(text)[3:]


SEQ2SEQ_FIT = next((c for c in COMMANDS if c.split()[2:4] == ["lit_rnncells", "fit"] and "seq2seq/" in c), None)


@pytest.fixture(scope="module")
def seq2seq_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The README's translation fit (or, without one, the GRU config's) at the tiny budget, run once: its own
    test below and predict (which needs a task that reads input lines) share it."""
    import os

    data = os.environ.get("LIT_RNNCELLS_DATA")
    if not data:
        pytest.skip("real data not available: set LIT_RNNCELLS_DATA to the datasets folder (see README)")
    root = tmp_path_factory.mktemp("seq2seq")
    gru = "fit --config configs/seq2seq/multi30k_de_en_gru.yaml"
    args = shlex.split(SEQ2SEQ_FIT)[3:] if SEQ2SEQ_FIT else gru.split()
    here = os.getcwd()
    os.chdir(ROOT)  # the README's paths are relative to the clone
    try:
        assert run(args + SMALL + TINY_SEQ2SEQ + ["--trainer.default_root_dir", str(root)]) == 0
    finally:
        os.chdir(here)
    return next(root.rglob("config.yaml")).parent


TINY_SEQ2SEQ = ["--model.init_args.hidden_size", "16", "--model.init_args.embedding_size", "16",
                "--model.init_args.eval_metrics", "[]", "--data.init_args.subword_vocab_size", "300",
                "--data.init_args.limit", "50"]


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.split()[2] == "lit_rnncells"])
def test_each_command_line_command_runs(command, request, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    if command == MAIN_JOB:
        request.getfixturevalue("logic_run")  # ran exactly as written
        return
    if " predict " in command:
        folder = request.getfixturevalue("seq2seq_run")
        args = fill(command, folder)
        (folder / "lines.txt").write_text("Ein Mann läuft.\nZwei Hunde spielen im Schnee.\n")
        assert run(args) == 0, capsys.readouterr().err[-2000:]
        assert len((folder / "out.txt").read_text().splitlines()) == 2
        return
    if command == SEQ2SEQ_FIT:
        request.getfixturevalue("seq2seq_run")  # ran there at the tiny budget below; predict reuses its run
        return
    args = fill(command, request.getfixturevalue("logic_run"))
    if "--model.help" in args:
        assert run(args) == 0 and "--model.hidden_size" in capsys.readouterr().out
        return
    if "configs/trainer/multi_gpu.yaml" in args and torch.cuda.device_count() < 2:
        assert run(args + ["--print_config"]) == 0  # the configs combine; training needs the GPUs
        return
    if any(p in command for p in ("seq2seq/", "classification/", "lm/")):
        request.getfixturevalue("data_dir")  # skips without the real data
    extra = SMALL + ["--trainer.default_root_dir", str(tmp_path)] if args[0] == "fit" else []
    if args[0] == "fit" and "seq2seq/" in command:
        extra += TINY_SEQ2SEQ
    assert run(args + extra) == 0, capsys.readouterr().err[-2000:]


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.split()[2] == "lit_rnncells.compare"])
def test_the_compare_command_runs_at_a_tiny_budget(command, data_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    args = shlex.split(command)[3:]
    args[args.index("--seeds"):args.index("--seeds") + 2] = ["--seed-list", "1"]
    args[args.index("--cells") + 1:args.index("--seed-list")] = ["GRU", "CARU"]
    args += ["--budget", "steps=2", "--out", str(tmp_path), "--no-wandb", "--", "--model.init_args.embedding_size",
             "8", "--trainer.limit_val_batches", "2", "--trainer.limit_test_batches", "2",
             "--trainer.val_check_interval", "2", "--data.init_args.batch_size", "4", "--data.init_args.bptt", "20"]
    assert compare_module.main(args) == 0
    assert len((tmp_path / "runs.csv").read_text().splitlines()) == 3


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.split()[2] == "lit_rnncells.analysis"])
def test_the_analysis_command_runs(command, logic_run, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert analysis_main(fill(command, logic_run)) == 0
    assert (tmp_path / "ops.png").stat().st_size > 1000


@pytest.mark.parametrize("command", [c for c in COMMANDS if c.split()[2] == "lit_rnncells.reproduce"])
def test_the_reproduce_command_parses_and_reports_what_has_run(command, tmp_path):
    args = shlex.split(command)[3:]
    args[args.index("--out") + 1] = str(tmp_path / "runs")
    args[args.index("--report") + 1] = str(tmp_path / "report.md")
    assert reproduce_module.main(args + ["--read-only"]) == 0
    assert "Not run yet" in (tmp_path / "report.md").read_text()
