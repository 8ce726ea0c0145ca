"""compare's input, refused at start or reported plainly (issue 33): a cell named twice, a parameter target no cell
comes near, and the table's mean ± std at one precision."""
from __future__ import annotations

from pathlib import Path

import pytest

from lit_rnncells import compare as cmp
from lit_rnncells.experiments.report import mean_std, summary_markdown

ROOT = Path(__file__).resolve().parents[1]
CONFIG = str(ROOT / "configs" / "logic" / "gru.yaml")
TINY = ["--", "--data.init_args.train_size", "32", "--data.init_args.val_size", "16", "--data.init_args.test_size",
        "16", "--trainer.enable_progress_bar", "false"]


def one_error_line(capsys, argv, out: Path) -> str:
    assert cmp.main(["--out", str(out), "--budget", "steps=1", "--seeds", "1", "--no-wandb", *argv, *TINY]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and len(err.splitlines()) == 1, err
    assert not list(out.glob("*/spec.json"))  # refused before any run started
    return err


@pytest.mark.parametrize("cells, named", [
    (["GRU", "GRU"], "'GRU' and 'GRU'"),
    (["GRU", "MuFuRU", "gru"], "'GRU' and 'gru'"),
    (["MultiChannel(cell=GRU,block_size=3)", "MultiChannel(block_size=3, cell=GRU)"],
     "'MultiChannel(cell=GRU,block_size=3)' and 'MultiChannel(block_size=3, cell=GRU)'"),
])
def test_a_cell_named_twice_is_refused(cells, named, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    err = one_error_line(capsys, ["--config", CONFIG, "--cells", *cells], tmp_path)
    assert f"--cells names one cell twice ({named})" in err and "--seeds" in err


def test_a_seed_named_twice_is_refused(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert cmp.main(["--out", str(tmp_path), "--budget", "steps=1", "--no-wandb", "--config", CONFIG, "--cells", "GRU",
                     "--seed-list", "2", "1", "2", *TINY]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: --seed-list names seed 2 twice; give each seed once (a seed's run is the same run)."
    assert not list(tmp_path.glob("*/spec.json"))


def test_a_setting_a_run_refuses_at_its_start_is_relayed_with_the_run(capsys, tmp_path, monkeypatch):
    """A misspelt --monitor is found by each run's sanity validation; compare used to say only "failed; its log
    is ...". The run's log ends in its error line, and compare relays it, naming its own option."""
    monkeypatch.setenv("WANDB_MODE", "disabled")
    out = tmp_path / "out"
    assert cmp.main(["--out", str(out), "--budget", "steps=1", "--seeds", "1", "--no-wandb", "--config", CONFIG,
                     "--cells", "GRU", "--monitor", "val/accc", *TINY]) == 1
    said = ("the comparison runner's best checkpoint monitors val/accc, which LogicEvaluator's validation does not "
            "log (it logs val/acc, val/loss); set compare's --monitor to val/acc")
    assert f"compare: GRU-s1 failed: {said}; its log is {out / 'GRU-s1' / 'log.txt'}" in capsys.readouterr().err
    assert (out / "GRU-s1" / "log.txt").read_text().rstrip().endswith(f"error: {said}.")


@pytest.mark.parametrize("argv, extra, said", [
    ([], ["--seed_everything", "5"], "--seed_everything after -- would override what compare sets for each run with "
                                     "--seeds / --seed-list, giving every run the same seed"),
    ([], ["--model.cell=MuFuRU"], "--model.cell after -- would override what compare sets for each run with --cells"),
    ([], ["--run_dir", "elsewhere"], "with --out, giving every run the same folder"),
    ([], ["--trainer.max_epochs=9"], "--trainer.max_epochs after -- would override what compare sets for each run "
                                     "with --budget"),
    (["--hidden-size", "4"], ["--model.init_args.hidden_size", "5"], "with --hidden-size / --match-params"),
    (["--vary", "data.init_args.train_size=32,48"], ["--data.init_args.train_size", "16"],
     "with --vary, giving every run the same data.init_args.train_size"),
])
def test_an_argument_after_the_separator_that_would_override_each_runs_own_is_refused(argv, extra, said, capsys,
                                                                                     tmp_path, monkeypatch):
    """The arguments after ``--`` come after the runner's own, so they won: ``-- --seed_everything 5`` made three
    seeds one, ``-- --model.init_args.cell MuFuRU`` made every cell a MuFuRU, with nothing said."""
    monkeypatch.setenv("WANDB_MODE", "disabled")
    err = one_error_line(capsys, ["--config", CONFIG, "--cells", "GRU", "MuFuRU", *argv, *TINY, *extra], tmp_path)
    assert said in err and err.endswith(".")


@pytest.mark.parametrize("vary, said", [
    ("model.init_args.cell=GRU,LSTM", "--vary model.init_args.cell varies what compare sets for each run with --cells; "
                                      "name each cell in --cells."),
    ("trainer.max_steps=2,4", "--vary trainer.max_steps varies what compare sets for each run with --budget; run one "
                              "compare per budget"),
    ("model.hidden_size=4,8", "--vary model.hidden_size varies what compare sets for each run with --hidden-size / "
                              "--match-params; drop --hidden-size / --match-params or the --vary."),
])
def test_a_vary_key_the_runner_sets_is_refused(vary, said, capsys, tmp_path, monkeypatch):
    """A --vary value came after the runner's own argument and won: two runs labelled GRU trained a GRU and an LSTM."""
    monkeypatch.setenv("WANDB_MODE", "disabled")
    err = one_error_line(capsys, ["--config", CONFIG, "--cells", "GRU", "--hidden-size", "4", "--vary", vary, *TINY],
                         tmp_path)
    assert said in err


def test_the_configs_own_hidden_size_may_come_after_the_separator_without_matching(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert cmp.main(["--out", str(tmp_path), "--budget", "steps=1", "--seeds", "1", "--no-wandb", "--config", CONFIG,
                     "--cells", "GRU", "--dry-run", *TINY, "--model.init_args.hidden_size", "5"]) == 0
    assert "--model.init_args.hidden_size 5" in capsys.readouterr().err


def test_an_out_folder_holding_a_users_files_of_the_outputs_names_is_refused_and_kept(capsys, tmp_path, monkeypatch):
    """compare wrote runs.csv and summary.md over a user's own files of those names in --out."""
    monkeypatch.setenv("WANDB_MODE", "disabled")
    out = tmp_path / "mine"
    out.mkdir()
    (out / "summary.md").write_text("my summary\n")
    err = one_error_line(capsys, ["--config", CONFIG, "--cells", "GRU", *TINY], out)
    assert f"--out {str(out)!r} holds summary.md but no comparison's runs" in err
    assert (out / "summary.md").read_text() == "my summary\n"


def test_only_the_last_part_of_a_run_log_gives_its_refusal(tmp_path):
    """A run resumed after a refusal (the user fixed it) that then crashed must not be reported with the old line."""
    from lit_rnncells.experiments.compare.runner import RESUMING, SLURM_START, refusal

    log = tmp_path / "log.txt"
    log.write_text("fit: ...\nerror: the old refusal.\n")
    assert refusal(log) == "the old refusal."
    for start in (f"{RESUMING} a.ckpt", f"{SLURM_START} 7 on node1 (start 2)"):
        log.write_text(f"error: the old refusal.\n{start}\nTraceback (most recent call last):\nRuntimeError: x\n")
        assert refusal(log) is None
        log.write_text(f"error: the old refusal.\n{start}\nerror: the new one.\nwandb: done\n")
        assert refusal(log) == "the new one."
    assert refusal(tmp_path / "missing.txt") is None


def test_different_options_of_one_cell_are_two_cells():
    from lit_rnncells.experiments.compare.sweep import check_cells

    cells = check_cells(["MultiChannel(cell=GRU,block_size=3)", "MultiChannel(cell=GRU,block_size=4)", "GRU"])
    assert len(cells) == 3


def test_a_target_below_every_size_of_a_cell_is_refused(capsys, tmp_path, monkeypatch):
    """``--match-params 1``: GRU's smallest model (hidden 1) has 525 parameters; no size comes within 5%."""
    monkeypatch.setenv("WANDB_MODE", "disabled")
    err = one_error_line(capsys, ["--config", CONFIG, "--cells", "GRU", "MuFuRU", "--match-params", "1"], tmp_path)
    assert "--match-params 1: no hidden size of GRU comes within 5% of 1 parameters" in err
    assert "its smallest model (hidden 1) has 525" in err and "give a target of at least 726" in err


def test_a_target_a_cell_reaches_is_matched_even_if_coarsely(capsys):
    """Tiny sizes are coarse (MuFuRU at hidden 1 is -18% of a GRU of 4): matched and printed, not refused."""
    log = __import__("io").StringIO()
    specs = cmp.plan(CONFIG, ["GRU", "MuFuRU"], [1], cmp.Budget.parse("steps=1"), Path("x"), [], None, "GRU@4",
                     "val/acc", "max", [], False, True, log)
    assert [s.hidden_size for s in specs] == [4, 1] and "-17.69% of 882" in log.getvalue()


def test_mean_and_std_have_the_same_decimals():
    assert mean_std([0.737, 0.732]) == "0.7345 ± 0.0035"  # was 0.7345 ± 0.003536
    assert mean_std([12.5, 12.0, 13.1]) == "12.53 ± 0.55"
    assert mean_std([1230.0, 1245.0]) == "1238 ± 11"
    assert mean_std([0.5, 0.5]) == "0.5000 ± 0.0000"
    assert mean_std([0.25]) == "0.2500"  # one value (one seed): the same decimals, was 0.25
    assert [mean_std([53.0]), mean_std([56.3])] == ["53.00", "56.30"]  # was 53 beside 56.3
    assert [mean_std([400.0, 400.0], count=True), mean_std([400.0, 401.0], count=True)] == ["400 ± 0", "400.5 ± 0.7"]
    row = {"cell": "GRU", "hidden_size": 4, "params": 500, "best val/acc": 0.737, "test/acc": 0.5, "steps": 4,
           "seconds": 1.25, "tokens_per_s": 1000.0}
    table = summary_markdown([row, {**row, "best val/acc": 0.732}], "c.yaml", "steps=4", "val/acc", [])
    assert "| 0.7345 ± 0.0035 |" in table and "| 4 ± 0 |" in table  # steps: a count (was 4.000 ± 0.000)
    one_seed = summary_markdown([{**row, "best val/acc": 0.53}], "c.yaml", "steps=4", "val/acc", [])
    assert "| 0.5300 | 0.5000 | 4 |" in one_seed


def test_the_summary_says_which_cells_the_seeds_separate_from_the_best():
    """Below the table: the best cell by the monitored metric (in its direction) and Welch's p of each other cell
    against it, per grid point; 'within the seeds' spread' from p = 0.05 up."""
    def rows(cell: str, values, **grid):
        return [{"cell": cell, "hidden_size": 4, "params": 500, "best val/loss": v, "steps": 4, "seconds": 1.0,
                 "tokens_per_s": 1.0, **grid} for v in values]

    table = summary_markdown(rows("GRU", [1.0, 2.0, 3.0]) + rows("CARU", [4.0, 5.0, 6.0])
                             + rows("MGU", [1.5, 2.5, 3.5]), "c.yaml", "steps=4", "val/loss", [], mode="min")
    # GRU lowest; by the df-4 closed form (tests/test_seed_spread.py) CARU p = 0.021, MGU p = 0.573
    assert ("- Best val/loss: GRU; against it (Welch's t-test over seeds): CARU p = 0.021, "
            "MGU p = 0.573 (within the seeds' spread).") in table, table
    higher = summary_markdown(rows("GRU", [1.0, 2.0, 3.0]) + rows("CARU", [4.0, 5.0, 6.0]), "c.yaml", "steps=4",
                              "val/loss", [], mode="max")
    assert "- Best val/loss: CARU; against it (Welch's t-test over seeds): GRU p = 0.021." in higher
    grid = summary_markdown(rows("GRU", [1.0, 2.0], lr="0.1") + rows("CARU", [3.0], lr="0.1"), "c.yaml", "steps=4",
                            "val/loss", ["lr"], mode="min")
    assert "- Best val/loss at lr 0.1: GRU; against it (Welch's t-test over seeds): CARU under 2 seeds" in grid
    assert "Welch" not in summary_markdown(rows("GRU", [1.0, 2.0]), "c.yaml", "steps=4", "val/loss", [], mode="min")


def test_the_summary_labels_keep_the_options_that_differ_and_name_the_shared_ones_once(tmp_path):
    """Two specs of one cell that share ``layer_norm=True``: the table's rows are told apart by
    ``transition_depth`` alone and the shared option is named once above it; ``runs.csv`` keeps the full labels."""
    out = tmp_path / "out"
    cells = ["GRUDT(transition_depth=0,layer_norm=true)", "GRUDT(transition_depth=1,layer_norm=true)"]
    assert cmp.main(["--config", CONFIG, "--cells", *cells, "--out", str(out), "--budget", "steps=1", "--seeds", "1",
                     "--no-wandb", *TINY]) == 0
    summary = (out / "summary.md").read_text()
    assert "Every cell has layer_norm=True, left out of its label." in summary.splitlines()[0]
    rows = [line.split(" | ")[0].lstrip("| ") for line in summary.splitlines()[4:6]]
    assert rows == ["GRUDT-transition_depth=0", "GRUDT-transition_depth=1"]
    assert "GRUDT-transition_depth=1-layer_norm=True," in (out / "runs.csv").read_text()
