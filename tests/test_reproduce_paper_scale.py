"""``reproduce --scale paper`` at tiny sizes on the CPU: every run of an experiment at once, each stopped by its
time limit (Lightning's max_time) with a checkpoint, a small result folder, and a second command that goes on."""
from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from lit_rnncells import reproduce
from lit_rnncells.experiments import paper_scale
from lit_rnncells.experiments.reproduce import Experiment

ROOT = Path(__file__).resolve().parents[1]
TINY = ("--data.init_args.train_size", "64", "--data.init_args.val_size", "16", "--data.init_args.test_size", "16",
        "--trainer.enable_progress_bar", "false", "--trainer.logger", "false")


@pytest.fixture
def tiny_paper(monkeypatch):
    """A paper with one CPU experiment whose paper-size settings are a tiny logic grid with an endless budget."""
    monkeypatch.setenv("WANDB_MODE", "disabled")
    exp = Experiment(name="logic", title="Logic (Fig. 0)", config="configs/logic/gru.yaml",
                     cells={"GRU": "GRU", "MuFuRU": "MuFuRU"}, paper={"GRU": 0.9, "MuFuRU": 0.95}, metric="test/acc",
                     lower_is_better=False, budget="epochs=1", seeds=1, hidden_size=4)
    monkeypatch.setitem(reproduce.PAPERS, "tiny", ("Tiny paper", [exp]))
    monkeypatch.setitem(paper_scale.SCALES, "tiny", {"logic": paper_scale.PaperScale(
        config="configs/logic/gru.yaml", budget="epochs=100000", setting="tiny", fields={"extra": TINY})})


def at_paper_scale(out: Path, results: Path, log: io.StringIO) -> str:
    """``reproduce tiny --scale paper --time-budget 0.05`` (3 s of training per run), in this process."""
    from lit_rnncells.experiments.reproduce import paper_section

    return paper_scale.reproduce_at_paper_scale("tiny", *reproduce.PAPERS["tiny"], out, results, None, 3.0,
                                                paper_section, log=log)


def test_every_run_at_once_each_stopped_by_its_time_limit_then_continued(tiny_paper, tmp_path):
    out, results = tmp_path / "runs", tmp_path / "results"
    log = io.StringIO()
    text = at_paper_scale(out, results, log)
    lines = log.getvalue().splitlines()
    starts = [i for i, ln in enumerate(lines) if ln.startswith("compare: [") and ln.endswith(" ...")]
    ends = [i for i, ln in enumerate(lines) if " done in " in ln]
    assert len(starts) == 2 and len(ends) == 2 and max(starts) < min(ends), log.getvalue()  # both began, then ended
    runs = [out / "logic" / "GRU-h4-s1", out / "logic" / "MuFuRU-h4-s1"]
    first = {}
    for run in runs:
        result = json.loads((run / "result.json").read_text())
        assert result["partial"] is True and 0 < result["epochs"] < 100000  # max_time stopped it, not the budget
        assert "max_time: 00:00:00:03" in (run / "config.yaml").read_text()  # Lightning's own time limit
        assert (run / "checkpoints" / "interrupted.ckpt").is_file()
        first[run.name] = result["steps"]
    files = sorted(p.name for p in results.iterdir())
    assert files == ["logic_curves_seconds.png", "logic_curves_steps.png", "logic_runs.csv", "tiny.md"]
    assert all((results / f).stat().st_size < 16 * 1024 * 1024 for f in files) and len(files) <= 8
    assert (results / "tiny.md").read_text() == text and "at the paper's size" in text
    reach = {(r["epochs"], r["steps"], f"{r['seconds'] / 60:.1f}")  # the report's phrase for each run
             for r in (json.loads((run / "result.json").read_text()) for run in runs)}
    each = "every run (2) " if len(reach) == 1 else "GRU seed 1: "  # one phrase where both reached the same
    assert "Reached in a time limit of 0.1 min per run: " + each in text
    assert "![logic_curves_steps](logic_curves_steps.png)" in text

    log = io.StringIO()  # the same command again: both runs go on from their checkpoints
    at_paper_scale(out, results, log)
    for run in runs:
        assert f"{run.name} resumes from " in log.getvalue()
        assert "compare: resuming from" in (run / "log.txt").read_text()
        assert json.loads((run / "result.json").read_text())["steps"] > first[run.name]


def test_a_run_its_time_limit_stops_mid_epoch_goes_on_mid_epoch(tiny_paper, tmp_path, monkeypatch):
    """Lightning validates after the time limit's stop and counts the epoch it cut short as done; the last.ckpt
    written then resumed at the next epoch, skipping the rest of this one (seen on an H200: 2 epochs and 1 step
    reported as 3 epochs, 130 batches skipped). The time-limit checkpoint, written again at the end with the
    stop's position, is what the same command resumes from: the run goes on inside its first epoch."""
    from lit_rnncells.data.checkpoint_state import read_checkpoint

    # 20,000 batches of one formula an epoch: never reached in 3 s (400,000 formulas took 4.5 s to generate a run)
    long_epoch = ("--data.init_args.train_size", "20000", "--data.init_args.batch_size", "1", *TINY[2:])
    monkeypatch.setitem(paper_scale.SCALES, "tiny", {"logic": paper_scale.PaperScale(
        config="configs/logic/gru.yaml", budget="epochs=100000", setting="tiny", fields={"extra": long_epoch})})
    out, results = tmp_path / "runs", tmp_path / "results"
    steps = []
    for _ in range(2):
        at_paper_scale(out, results, io.StringIO())
        run = out / "logic" / "GRU-h4-s1"
        result = json.loads((run / "result.json").read_text())
        steps.append(result["steps"])
        assert result["partial"] is True and result["epochs"] == 0  # no epoch trained to its end
        state = read_checkpoint(str(run / "checkpoints" / "interrupted.ckpt"))
        loop = state["loops"]["fit_loop"]
        assert state["epoch"] == 0 and loop["epoch_progress"]["current"]["processed"] == 0
        assert loop["epoch_loop.batch_progress"]["current"]["processed"] == result["steps"]
        best = next(v for k, v in state["callbacks"].items() if "'role': 'best'" in str(k))
        assert best["best_model_score"] is not None  # the callbacks' states from after the stop's validation
    assert 0 < steps[0] < steps[1]
    assert "resuming from " + str(run / "checkpoints" / "interrupted.ckpt") in (run / "log.txt").read_text()


def test_the_epochs_reached_are_one_phrase_when_alike_and_named_by_grid_point_when_not():
    key = "model.init_args.hidden_size"
    rows = [{"cell": "GRU", "seed": 1, key: 2, "epochs": 100, "steps": 3200},
            {"cell": "GRU", "seed": 1, key: 4, "epochs": 100, "steps": 3200}]
    assert paper_scale.reached(rows, None, [key]) == "Reached: every run (2) 100 epochs, 3200 steps.\n"
    rows[1].update(epochs=7, steps=224)
    assert paper_scale.reached(rows, 60.0, [key]) == ("Reached in a time limit of 1.0 min per run: GRU (hidden_size 2) "
                                                     "seed 1: 100 epochs, 3200 steps; GRU (hidden_size 4) seed 1: 7 "
                                                     "epochs, 224 steps.\n")


def test_the_report_page_shows_the_paper_scale_figures_from_beside_it(tmp_path, monkeypatch):
    """The results folder is for copying off the machine; the page (``--report``) gets its own copy of each figure,
    named apart from the CPU report's figure of the same experiment."""
    results = tmp_path / "runs" / "results"

    def fake(paper, title, exps, out, results_folder, *rest, **kw):
        results_folder.mkdir(parents=True)
        (results_folder / "logic_fig1a_curves_steps.png").write_bytes(b"png")
        return "# T at the paper's size\n\n![logic_fig1a_curves_steps](logic_fig1a_curves_steps.png)\n"

    monkeypatch.setattr(paper_scale, "reproduce_at_paper_scale", fake)
    page = tmp_path / "docs" / "mufuru.md"
    page.parent.mkdir()
    page.write_text("# CPU report\n\n![x](mufuru_logic_fig1a_curves_steps.png)\n")
    assert reproduce.main(["mufuru", "--scale", "paper", "--out", str(tmp_path / "runs"), "--report", str(page)]) == 0
    text = page.read_text()
    assert "![logic_fig1a_curves_steps](mufuru_paper_logic_fig1a_curves_steps.png)" in text
    assert "![x](mufuru_logic_fig1a_curves_steps.png)" in text  # the CPU report's figure is left as it was
    assert (page.parent / "mufuru_paper_logic_fig1a_curves_steps.png").read_bytes() == b"png"
    assert (results / "logic_fig1a_curves_steps.png").is_file()


def test_the_time_limit_per_run_from_the_commands_minutes():
    assert paper_scale.time_limit_seconds(None, None) is None  # the paper's full budget
    assert paper_scale.time_limit_seconds(2.5, None) == 150.0
    # the start-up allowance (process start to the first step), then the share for the test and the report
    startup = paper_scale.STARTUP_ALLOWANCE
    assert paper_scale.time_limit_seconds(None, 8) == 8 * 60 * (1 - paper_scale.TEST_SHARE) - startup
    assert paper_scale.time_limit_seconds(None, 8, startup_allowance=20) == 8 * 60 * (1 - paper_scale.TEST_SHARE) - 20
    with pytest.raises(paper_scale.CompareError, match="leaves no time to train"):
        paper_scale.time_limit_seconds(None, 1)
    with pytest.raises(paper_scale.CompareError, match="give one of them"):
        paper_scale.time_limit_seconds(2, 8)


def test_the_startup_allowance_is_an_option_of_the_command(tmp_path, monkeypatch):
    seen = {}
    monkeypatch.setattr(paper_scale, "reproduce_at_paper_scale", lambda *a, **k: seen.setdefault("limit", a[6]) and "")
    out = ["--out", str(tmp_path / "runs")]
    assert reproduce.main(["mzu", "--scale", "paper", "--total-minutes", "8", "--startup-allowance", "30"] + out) == 0
    assert seen["limit"] == 8 * 60 * (1 - paper_scale.TEST_SHARE) - 30


@pytest.mark.parametrize("jobs, expected, said", [(None, 2, "every cell and seed of an experiment at once on "),
                                                    (1, 1, "1 at a time (`--jobs 1`) on "),
                                                    (5, 2, "5 at a time (`--jobs 5`) on ")])
def test_jobs_caps_the_runs_at_once(tiny_paper, tmp_path, jobs, expected, said):
    seen = []

    def section(exp, folder, launcher, figures, log):
        seen.append(launcher.jobs)
        return "", []

    text = paper_scale.reproduce_at_paper_scale("tiny", *reproduce.PAPERS["tiny"], tmp_path / "runs",
                                                tmp_path / "results", None, None, section, log=io.StringIO(), jobs=jobs)
    assert seen == [expected]  # all of the experiment's 2 runs at once, or at most --jobs
    assert said in text and ("--scale paper --jobs" in text) == (jobs is not None)
    assert ("one GPU" in text) == bool(paper_scale.visible_gpus())


def test_jobs_reaches_the_paper_scale_runs(tmp_path, monkeypatch):
    seen = {}
    monkeypatch.setattr(paper_scale, "reproduce_at_paper_scale", lambda *a, **k: seen.setdefault("jobs", k["jobs"]) or "")
    out = ["--out", str(tmp_path / "runs")]
    assert reproduce.main(["mufuru", "--scale", "paper", "--jobs", "2"] + out) == 0
    assert seen["jobs"] == 2


def test_the_paper_scale_experiments_hold_the_papers_sizes():
    mzu = {e.name: e for e in paper_scale.experiments("mzu", reproduce.PAPERS["mzu"][1])}
    assert list(mzu) == ["ptb_char"]
    ptb = mzu["ptb_char"]
    assert ptb.config == "configs/lm/ptb_char_gru.yaml" and ptb.hidden_size == 800 and ptb.match_params is None
    assert sorted(ptb.cells.values()) == ["GRU", "GRU+DT", "capMZU+DT", "gcnMZU+DT", "satMZU+DT"]
    config = (ROOT / ptb.config).read_text()
    for setting in ("embedding_size: 256", "hidden_size: 800", "batch_size: 256", "bptt: 150", "lr: 0.001",
                    "gradient_clip_val: 5.0"):
        assert setting in config
    for paper, name in (("caru", "multi30k_de_en"), ("mcrnn", "ptb_word"), ("mufuru", "logic_fig1a")):
        found = {e.name: e for e in paper_scale.experiments(paper, reproduce.PAPERS[paper][1])}
        assert name in found and (ROOT / found[name].config).is_file()
    logic = {e.name: e for e in paper_scale.experiments("mufuru", reproduce.PAPERS["mufuru"][1])}
    assert logic["logic_fig1a"].vary == ("model.init_args.hidden_size=2,4,8,16,32,64,128",)  # Fig. 1a's range
    assert logic["logic_fig1a"].budget == "epochs=100" and logic["logic_fig1a"].seeds == 3
    from lit_rnncells.experiments.compare.sweep import check_cells

    check_cells(list(ptb.cells))  # every cell spec is one the runner takes


@pytest.mark.parametrize("argv, expected", [
    (["mzu", "--time-budget", "5"], "add --scale paper"),
    (["mzu", "--scale", "paper", "--time-budget", "5", "--total-minutes", "8"], "give one of them"),
    (["mzu", "--scale", "paper", "--total-minutes", "1"], "leaves no time to train"),
    (["mzu", "--scale", "paper", "--total-minutes", "8", "--startup-allowance", "-5"], "--startup-allowance -5"),
    (["mzu", "--startup-allowance", "30"], "add --scale paper"),
    (["mzu", "--scale", "paper", "--experiments", "absa_restaurants"], "Unknown experiment(s) absa_restaurants"),
    (["mzu", "--scale", "paper", "--jobs", "0"], "--jobs 0 is not a positive number"),
    (["mzu", "--jobs", "0"], "--jobs 0 is not a positive number"),  # the CPU scale too (a dry run planned them)
    (["mzu", "--results", "res"], "add --scale paper"),  # it was ignored without --scale paper
    (["mzu", "--scale", "paper", "--read-only"], "drop --read-only"),
    (["mzu", "--scale", "paper", "--total-minutes", "-3"], "--total-minutes -3 is not a positive number of minutes"),
    (["mzu", "--scale", "paper", "--total-minutes", "0"], "--total-minutes 0 is not a positive number of minutes"),
])
@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]], ids=["run", "dry run"])
def test_paper_scale_mistakes_are_one_line(argv, expected, dry_run, capsys, tmp_path):
    """The same line with --dry-run: a dry run refuses what the command would (it used to plan them)."""
    assert reproduce.main(argv + dry_run + ["--out", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and expected in err and len(err.splitlines()) == 1
    assert not (tmp_path / "runs" / "results").exists()
