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

    return paper_scale.reproduce_at_paper_scale("tiny", *reproduce.PAPERS["tiny"], Experiment, out, results, None, 3.0,
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
    assert "Reached in a time limit of 0.1 min per run: GRU seed 1:" in text
    assert "![logic_curves_steps](logic_curves_steps.png)" in text

    log = io.StringIO()  # the same command again: both runs go on from their checkpoints
    at_paper_scale(out, results, log)
    for run in runs:
        assert f"{run.name} resumes from " in log.getvalue()
        assert "compare: resuming from" in (run / "log.txt").read_text()
        assert json.loads((run / "result.json").read_text())["steps"] > first[run.name]


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
    monkeypatch.setattr(paper_scale, "reproduce_at_paper_scale", lambda *a, **k: seen.setdefault("limit", a[7]) and "")
    out = ["--out", str(tmp_path / "runs")]
    assert reproduce.main(["mzu", "--scale", "paper", "--total-minutes", "8", "--startup-allowance", "30"] + out) == 0
    assert seen["limit"] == 8 * 60 * (1 - paper_scale.TEST_SHARE) - 30


def test_the_paper_scale_experiments_hold_the_papers_sizes():
    mzu = {e.name: e for e in paper_scale.experiments("mzu", reproduce.PAPERS["mzu"][1], Experiment)}
    assert list(mzu) == ["ptb_char"]
    ptb = mzu["ptb_char"]
    assert ptb.config == "configs/lm/ptb_char_gru.yaml" and ptb.hidden_size == 800 and ptb.match_params is None
    assert sorted(ptb.cells.values()) == ["GRU", "GRU+DT", "capMZU+DT", "gcnMZU+DT", "satMZU+DT"]
    config = (ROOT / ptb.config).read_text()
    for setting in ("embedding_size: 256", "hidden_size: 800", "batch_size: 256", "bptt: 150", "lr: 0.001",
                    "gradient_clip_val: 5.0"):
        assert setting in config
    for paper, name in (("caru", "multi30k_de_en"), ("mcrnn", "ptb_word"), ("mufuru", "logic_fig1a")):
        found = {e.name: e for e in paper_scale.experiments(paper, reproduce.PAPERS[paper][1], Experiment)}
        assert name in found and (ROOT / found[name].config).is_file()
    from lit_rnncells.experiments.compare.sweep import check_cells

    check_cells(list(ptb.cells))  # every cell spec is one the runner takes


@pytest.mark.parametrize("argv, expected", [
    (["mzu", "--time-budget", "5"], "add --scale paper"),
    (["mzu", "--scale", "paper", "--time-budget", "5", "--total-minutes", "8"], "give one of them"),
    (["mzu", "--scale", "paper", "--total-minutes", "1"], "leaves no time to train"),
    (["mzu", "--scale", "paper", "--total-minutes", "8", "--startup-allowance", "-5"], "--startup-allowance -5"),
    (["mzu", "--startup-allowance", "30"], "add --scale paper"),
    (["mzu", "--scale", "paper", "--experiments", "absa_restaurants"], "Unknown experiment(s) absa_restaurants"),
])
def test_paper_scale_mistakes_are_one_line(argv, expected, capsys, tmp_path):
    assert reproduce.main(argv + ["--out", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and expected in err and len(err.splitlines()) == 1
    assert not (tmp_path / "runs" / "results").exists()
