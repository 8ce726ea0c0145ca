"""``--dry-run`` of compare and reproduce: every run planned and its arguments parsed as the run would parse them,
each run's command printed, nothing run or written. A lent GPU's minutes go to runs that start."""
from __future__ import annotations

import io
import shlex
from pathlib import Path

import pytest

from lit_rnncells import reproduce
from lit_rnncells.experiments.compare.cli import main as compare_main
from lit_rnncells.experiments.reproduce import PAPERS

ROOT = Path(__file__).resolve().parents[1]
LOGIC = str(ROOT / "configs" / "logic" / "gru.yaml")


def test_compare_dry_run_prints_each_runs_command_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "runs"
    code = compare_main(["--config", LOGIC, "--cells", "GRU", "MuFuRU", "--seeds", "2", "--budget", "epochs=1", "--out",
                         str(out), "--vary", "model.init_args.hidden_size=4,8", "--dry-run"])
    err = capsys.readouterr().err
    assert code == 0 and not out.exists()
    lines = [ln for ln in err.splitlines() if ln.startswith("compare: [")]
    assert len(lines) == 8 and lines[0].startswith("compare: [1/8] GRU-hidden_size=4-s1: python -m lit_rnncells fit ")
    command = shlex.split(lines[-1].split(": ", 2)[2])  # the printed line is a command a shell runs as it is
    assert command[command.index("--model.init_args.cell") + 1] == "MuFuRU"
    assert command[command.index("--model.init_args.hidden_size") + 1] == "8"
    assert "dry run: 8 runs planned and their arguments parsed; nothing was run or written." in err


def test_compare_dry_run_refuses_a_bad_argument_in_one_line(tmp_path, capsys):
    code = compare_main(["--config", LOGIC, "--cells", "GRU", "--budget", "epochs=1", "--out", str(tmp_path / "runs"),
                         "--dry-run", "--", "--model.init_args.hiden_size", "4"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: The arguments of run GRU-s1 are refused:") and err.count("\n") == 1
    assert not (tmp_path / "runs").exists()


def test_an_unknown_argument_after_the_separator_points_at_the_runs_help_not_compares(tmp_path, capsys):
    """compare's own --help lists only its options; the arguments after ``--`` are the runs' (fit's)."""
    code = compare_main(["--config", LOGIC, "--cells", "GRU", "--budget", "epochs=1", "--out", str(tmp_path / "runs"),
                         "--dry-run", "--", "--bogus-option", "4"])
    err = capsys.readouterr().err
    assert code == 2 and "unrecognized arguments: --bogus-option 4" in err.lower()
    assert f"run `python -m lit_rnncells fit --config {LOGIC} --help` to see the options a run takes." in err
    assert "the same command with --help" not in err


@pytest.mark.parametrize("paper", sorted(PAPERS))
def test_every_paper_scale_run_parses_with_todays_option_names(paper, tmp_path, capsys):
    """``reproduce <paper> --scale paper --dry-run``: each run a GPU would start parses, and none uses an option
    name that is going (a deprecation line); nothing is written."""
    out = tmp_path / "runs"
    assert reproduce.main([paper, "--scale", "paper", "--dry-run", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "nothing was run or written" in err and "deprecated" not in err, err[-3000:]
    assert not out.exists()


@pytest.mark.real_data
def test_the_cpu_scale_dry_run_plans_the_matched_hidden_sizes(data_dir, tmp_path, capsys):
    log = io.StringIO()
    assert reproduce.dry_run("mcrnn", tmp_path / "runs", ["ptb_word"], "cpu", log=log) == 0
    text = log.getvalue()
    assert "compare: LSTM: hidden 128" in text and "MultiChannel-cell=LSTM-block_size=4-h122-s3" in text
    assert "deprecated" not in text + capsys.readouterr().err


@pytest.mark.parametrize("scale, runs", [("cpu", 2 * 2 * 10), ("paper", 2 * 7 * 10)])
def test_seeds_sets_every_experiments_seed_count_at_either_scale(scale, runs, tmp_path, capsys):
    """``--seeds 10``: seeds 1 to 10 of MuFuRU's logic experiment (two cells, a grid of 2 sizes at the CPU scale, 7
    at the paper's), where it runs 3 of its own."""
    assert reproduce.main(["mufuru", "--experiments", "logic_fig1a", "--scale", scale, "--seeds", "10", "--dry-run",
                           "--out", str(tmp_path / "runs")]) == 0
    err = capsys.readouterr().err
    assert f"dry run: {runs} runs planned" in err and "GRU-hidden_size=4-s10:" in err and "-s11:" not in err


def test_seeds_below_one_is_one_line(tmp_path, capsys):
    assert reproduce.main(["caru", "--seeds", "0", "--out", str(tmp_path / "runs")]) == 2
    assert capsys.readouterr().err == "error: --seeds 0: give 1 or more seeds.\n"
    assert not (tmp_path / "runs").exists()


def test_a_dry_run_of_an_unknown_experiment_is_one_line(tmp_path, capsys):
    assert reproduce.main(["mzu", "--scale", "paper", "--dry-run", "--experiments", "absa_restaurants", "--out",
                           str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err == ("error: Unknown experiment(s) absa_restaurants of mzu at the paper's size; use ptb_char.\n")


def test_compare_dry_run_names_the_runs_a_rerun_keeps(tmp_path, capsys):
    """Runs gathered into one folder (or finished by an earlier call) are kept by the next call: its dry run says
    which, and prints commands only for the runs still to train."""
    tiny = ["--", "--data.init_args.train_size", "64", "--data.init_args.val_size", "16",
            "--data.init_args.test_size", "16", "--model.init_args.hidden_size", "4"]
    out = tmp_path / "runs"
    assert compare_main(["--config", LOGIC, "--cells", "GRU", "--seed-list", "1", "--budget", "epochs=1", "--out",
                         str(out), "--no-wandb", *tiny]) == 0
    capsys.readouterr()
    assert compare_main(["--config", LOGIC, "--cells", "GRU", "--seed-list", "1", "2", "--budget", "epochs=1",
                         "--out", str(out), "--no-wandb", "--dry-run", *tiny]) == 0
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("compare: ")]
    assert lines[0] == "compare: [1/2] GRU-s1: finished earlier, kept"
    assert lines[1].startswith("compare: [2/2] GRU-s2: python -m lit_rnncells fit ")
    assert lines[2] == ("compare: dry run: 2 runs planned (1 finished earlier and kept) and their arguments parsed; "
                        "nothing was run or written.")
    assert not (out / "GRU-s2").exists()
