"""The comparison runner at a tiny budget: CSV, summary table, curves, resume, bad input; CARU Fig. 2 figure."""
from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shutil
import warnings
from pathlib import Path

import pytest
import torch

from lit_rnncells import compare as cmp
from lit_rnncells.analysis import common
from lit_rnncells.analysis.accuracy_per_epoch import accuracy_per_epoch

ROOT = Path(__file__).resolve().parents[1]
CONFIG = str(ROOT / "configs" / "logic" / "gru.yaml")
TINY = ["--data.init_args.train_size", "64", "--data.init_args.val_size", "32", "--data.init_args.test_size", "32",
        "--trainer.enable_progress_bar", "false"]
ENV = {"WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
PNG = b"\x89PNG\r\n\x1a\n"


def run_sweep(out: Path) -> tuple[list, str]:
    log = io.StringIO()
    rows = cmp.compare(CONFIG, ["GRU", "MuFuRU"], seeds=[1], budget="epochs=2", out=out,
                       matching=cmp.Matching(hidden_size=4),
                       runs=cmp.RunOptions(extra=TINY, test_every_epoch=True, env=ENV), log=log)
    return rows, log.getvalue()


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    os.environ["WANDB_MODE"] = "disabled"
    out = tmp_path_factory.mktemp("compare")
    rows, log = run_sweep(out)
    return out, rows, log


def test_outputs_csv_table_and_curves(sweep):
    out, rows, _ = sweep
    with open(out / "runs.csv") as f:
        csv_rows = list(csv.DictReader(f))
    assert sorted((r["cell"], r["seed"]) for r in csv_rows) == [("GRU", "1"), ("MuFuRU", "1")]
    assert len(rows) == 2
    for row in csv_rows:
        result = json.loads((out / row["run_id"] / "result.json").read_text())
        assert int(row["hidden_size"]) == result["hidden_size"] == 4
        assert int(row["params"]) == result["params"] > 0
        assert int(row["epochs"]) == result["epochs"] == 2
        assert int(row["steps"]) == result["steps"] == 4  # 64 formulas, batch 32, 2 epochs
        assert float(row["test/acc"]) == pytest.approx(result["test"]["test/acc"])
        assert float(row["best val/acc"]) == pytest.approx(result["best val/acc"])
        assert float(row["tokens_per_s"]) > 0
        curves = json.loads((out / row["run_id"] / "curves.json").read_text())
        assert [p["step"] for p in curves["validation"]] == [2, 4]
        assert max(p["val/acc"] for p in curves["validation"]) == pytest.approx(result["best val/acc"])
        assert [p["epoch"] for p in curves["test"]] == [0, 1]
    assert int(csv_rows[0]["params"]) != int(csv_rows[1]["params"])  # GRU and MuFuRU at 4 differ
    summary = (out / "summary.md").read_text()
    assert "| GRU | 4 |" in summary and "| MuFuRU | 4 |" in summary and "epochs=2" in summary
    for name in ("curves_steps.png", "curves_seconds.png"):
        data = (out / name).read_bytes()
        assert data[:8] == PNG and len(data) > 5000


def test_testing_a_runs_checkpoint_has_no_warning_about_the_runners_callbacks(sweep, tmp_path, capsys, monkeypatch):
    """A comparison run's checkpoint holds the state of the runner's callbacks (its best checkpoint, its curves);
    ``test`` of it warned that those "need to be provided", which concerns only a fit that goes on."""
    from lit_rnncells.cli import run

    out, _, _ = sweep
    result = json.loads((out / "GRU-h4-s1" / "result.json").read_text())
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert run(["test", "--config", str(out / "GRU-h4-s1" / "config.yaml"), "--ckpt_path",
                    result["checkpoint"]]) == 0
    said = [str(w.message) for w in caught] + [capsys.readouterr().err]
    assert not any("callbacks used to create the checkpoint" in text for text in said), said


def test_resume_skips_finished_runs_and_resumes_the_unfinished_one(sweep):
    """A run without result.json (here: its fit had ended, its tests had not) resumes from its last.ckpt: it
    trains nothing more, tests, and keeps its curves, per-epoch tests included."""
    out, rows, _ = sweep
    kept, redone = (out / r["run_id"] / "result.json" for r in rows)
    before = json.loads(redone.read_text())
    curves_before = json.loads((redone.parent / "curves.json").read_text())
    kept_mtime = kept.stat().st_mtime_ns
    redone.unlink()
    rows_again, log = run_sweep(out)
    assert kept.stat().st_mtime_ns == kept_mtime
    assert redone.is_file()
    assert log.count("finished earlier, kept") == 1 and log.count(" done in ") == 1
    assert f"{rows[1]['run_id']} resumes from {redone.parent / 'checkpoints' / 'last.ckpt'} (step 4)" in log
    after = json.loads(redone.read_text())
    assert (after["steps"], after["test"], after["best val/acc"]) == \
        (before["steps"], before["test"], before["best val/acc"])
    assert json.loads((redone.parent / "curves.json").read_text())["validation"] == curves_before["validation"]
    assert [p["epoch"] for p in json.loads((redone.parent / "curves.json").read_text())["test"]] == [0, 1]
    assert [r["run_id"] for r in rows_again] == [r["run_id"] for r in rows]


def test_a_moved_comparison_keeps_its_runs_curves_and_checkpoint_paths(sweep, tmp_path):
    """result.json names the folder a run finished in; a comparison moved since (copied off a remote machine, runs
    gathered into one folder) still draws its curves and names its checkpoints where they are now."""
    from lit_rnncells.experiments.report import load_result

    out, rows, _ = sweep
    first, second = tmp_path / "first", tmp_path / "second"
    shutil.copytree(out, first)
    for row in rows:  # as if the runs had finished in `first`
        path = first / row["run_id"] / "result.json"
        result = json.loads(path.read_text())
        result["checkpoint"] = result["checkpoint"].replace(result["folder"], str(path.parent))
        result["folder"] = str(path.parent)
        path.write_text(json.dumps(result))
    run_sweep(first)  # every run kept: the figures drawn from this folder's curves
    drawn = (first / "curves_steps.png").read_bytes()
    shutil.move(first, second)
    _, log = run_sweep(second)
    assert log.count("finished earlier, kept") == 2
    assert (second / "curves_steps.png").read_bytes() == drawn  # not an empty figure of the old paths
    for row in rows:
        result = load_result(second / row["run_id"])
        assert result["folder"] == str(second / row["run_id"])
        assert Path(result["checkpoint"]).is_file() and Path(result["checkpoint"]).is_relative_to(second)


def test_an_unfinished_run_without_a_usable_checkpoint_starts_again(sweep):
    out, rows, _ = sweep
    run = out / rows[1]["run_id"]
    (run / "result.json").unlink()
    (run / "checkpoints" / "last.ckpt").write_bytes(b"cut short by a kill")
    _, log = run_sweep(out)
    assert f"{rows[1]['run_id']} ...\n" in log and "resumes from" not in log
    assert (run / "result.json").is_file() and (run / "checkpoints" / "last.ckpt").stat().st_size > 1000


def test_a_resumable_run_started_with_other_settings_is_refused_and_kept(sweep, tmp_path):
    out, rows, _ = sweep
    run = out / rows[1]["run_id"]
    result = (run / "result.json").read_bytes()
    (run / "result.json").unlink()
    log = io.StringIO()
    try:
        with pytest.raises(cmp.CompareError, match=r"holds an unfinished run, resumable from .*last\.ckpt, that was "
                                                   r"started with other settings \(budget\); rerun with the settings"):
            cmp.compare(CONFIG, ["MuFuRU"], seeds=[1], budget="epochs=1", out=out,  # shorter: refused
                        matching={"hidden_size": 4}, runs={"extra": TINY, "test_every_epoch": True, "env": ENV},
                        log=log)
        assert (run / "checkpoints" / "last.ckpt").is_file()
        assert "compare: [" not in log.getvalue()  # refused before any run started
    finally:
        (run / "result.json").write_bytes(result)


def test_accuracy_per_epoch_figure(sweep, tmp_path):
    out, rows, _ = sweep
    output = tmp_path / "fig.png"
    means = accuracy_per_epoch(argparse.Namespace(runs=str(out), metric="test/acc", output=str(output)))
    assert set(means) == {"GRU", "MuFuRU"} and all(list(m) == [1, 2] for m in means.values())
    final = {r["cell"]: json.loads((out / r["run_id"] / "curves.json").read_text())["test"][-1]["test/acc"]
             for r in rows}
    assert means["GRU"][2] == pytest.approx(final["GRU"])
    assert output.read_bytes()[:8] == PNG
    assert "accuracy-per-epoch" in common.FIGURES


@pytest.mark.parametrize("argv, expected", [
    (["--config", CONFIG, "--cells", "GRUU"], "Did you mean 'GRU'"),
    (["--config", "configs/logic/nope.yaml", "--cells", "GRU"], "does not exist"),
    (["--config", CONFIG, "--cells", "GRU", "--budget", "epochs20"], "--budget 'epochs20'"),
    (["--config", CONFIG, "--cells", "GRU", "--budget", "hours=2"], "KIND=N"),
    (["--config", CONFIG, "--cells", "GRU", "--vary", "train_size=1,2"], "dotted CLI key"),
    (["--config", CONFIG, "--cells", "GRU", "--match-params", "GRU@x"], "CELL@HIDDEN"),
    (["--config", CONFIG, "--cells", "GRU", "--seeds", "two"], "invalid int value"),
    (["--config", CONFIG, "--cells", "GRU", "--vary", "data.init_args.train_sizes=1,2"], "Did you mean 'train_size'"),
    (["--config", CONFIG, "--cells", "LSTM(zones=4)"],  # it said "LSTM accepts: ."
     "--cells 'LSTM(zones=4)': LSTM has no option 'zones'. LSTM takes no options. 'zones' is an option of CapMZU"),
    (["--config", CONFIG, "--cells", "GRU", "--vary", "model.init_args.cell.init_args.zone=2,4"],
     "GRU has no option 'zone' (--model.init_args.cell.init_args.zone). GRU accepts: update_bias."),
])
def test_bad_input_is_one_line_and_exit_2(argv, expected, capsys, tmp_path):
    assert cmp.main(argv + ["--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert expected in err and err.startswith("error: ") and len(err.splitlines()) == 1
    assert not list(tmp_path.glob("*/spec.json"))


def test_budget_and_grid_syntax():
    assert cmp.Budget.parse("time=3725").cli_args()[:2] == ["--trainer.max_time", "00:01:02:05"]
    assert cmp.Budget.parse("steps=7").cli_args()[:2] == ["--trainer.max_steps", "7"]
    grid = cmp.parse_vary(["data.init_args.test_gates=[11,20],[21,40]", "data.init_args.train_size=100,300"])
    assert grid == [("data.init_args.test_gates", ["[11,20]", "[21,40]"]),
                    ("data.init_args.train_size", ["100", "300"])]
    assert cmp.check_cell("MultiChannel(cell=GRU,block_size=3)") == {
        "class_path": "MultiChannel", "init_args": {"cell": "GRU", "block_size": 3}}


def test_a_steps_budget_shorter_than_an_epoch_still_validates_and_keeps_a_best_checkpoint(tmp_path):
    """320 formulas at batch 32 are 10 steps an epoch; a budget of 3 steps validates at step 3."""
    log = io.StringIO()
    rows = cmp.compare(CONFIG, ["GRU"], seeds=[1], budget="steps=3", out=tmp_path,
                       matching=cmp.Matching(hidden_size=4),
                       runs=cmp.RunOptions(extra=TINY + ["--data.init_args.train_size", "320"], env=ENV), log=log)
    assert len(rows) == 1, log.getvalue()
    result = json.loads((tmp_path / rows[0]["run_id"] / "result.json").read_text())
    assert result["steps"] == 3 and result["checkpoint"]
    curves = json.loads((tmp_path / rows[0]["run_id"] / "curves.json").read_text())
    assert [p["step"] for p in curves["validation"]] == [3]
    assert "validating at step 3 instead" in (tmp_path / rows[0]["run_id"] / "log.txt").read_text()


def test_the_runner_reports_on_the_current_stderr_not_the_one_at_import(tmp_path, capsys):
    """``log`` defaults to ``sys.stderr`` as it is at the call (a script run in-process under a captured, later
    closed stream once broke the next caller)."""
    spec = cmp.RunSpec(run_id="GRU-s1", folder=str(tmp_path / "GRU-s1"), config=CONFIG, cell="GRU", seed=1, grid={},
                       hidden_size=4, budget="steps=1", monitor="val/acc", mode="max")
    Path(spec.folder).mkdir()
    (Path(spec.folder) / cmp.RESULT_FILE).write_text(json.dumps({"run_id": spec.run_id}))
    assert cmp.run_specs([spec]) == [{"run_id": "GRU-s1", "folder": spec.folder}]  # named by where it is
    assert "[1/1] GRU-s1 finished earlier, kept" in capsys.readouterr().err


def test_learning_curves_resume_from_a_checkpoint_state_and_ignore_a_test_restore(tmp_path):
    """The curve recorder's state travels in checkpoints: a fit resumed from one continues its points, seconds and
    tokens, dropping points recorded after the checkpoint; restoring it to test a checkpoint changes nothing."""
    from lit_rnncells.experiments.curves import LearningCurves, read_curves

    path = tmp_path / "curves.json"
    first = LearningCurves(path)
    first.validation = [{"step": 2, "val/acc": 0.5}, {"step": 4, "val/acc": 0.6}]
    first.tokens, first._seconds_before = 100, 3.0
    state = first.state_dict()
    first.validation.append({"step": 6, "val/acc": 0.7})  # recorded after the checkpoint was saved
    first.save()

    tested = LearningCurves(path)
    tested.load_state_dict(state)  # what trainer.test(ckpt_path=...) does
    tested.teardown(None, None, "test")
    tested.on_fit_start(None, None)
    assert tested.validation == [] and len(read_curves(path)["validation"]) == 3

    resumed = LearningCurves(path)
    resumed.load_state_dict(state)
    resumed.on_fit_start(None, None)
    assert [p["step"] for p in read_curves(path)["validation"]] == [2, 4]
    assert resumed.tokens == 100 and resumed.seconds >= 3.0


def test_a_resumed_run_keeps_writing_last_ckpt_beside_a_config_checkpoint_on_the_same_metric(tmp_path):
    """The runner's best checkpoint and a config's own ModelCheckpoint on the same metric and mode (most shipped
    configs: val/loss, min) keep separate states, so a resumed run's config checkpoint still owns last.ckpt:
    Lightning overwrites it rather than writing last-v1.ckpt beside a last.ckpt left at the resumed step."""
    from lightning.pytorch.callbacks import ModelCheckpoint

    from lit_rnncells.command.callbacks import RunnerCheckpoint
    from lit_rnncells.data.checkpoint_state import read_checkpoint

    own = {"class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
           "init_args": {"monitor": "val/acc", "mode": "max", "save_last": True}}
    folder = tmp_path / "GRU-h4-s1"
    folder.mkdir()

    def spec(epochs: int) -> cmp.RunSpec:
        return cmp.RunSpec(run_id=folder.name, folder=str(folder), config=CONFIG, cell="GRU", seed=1, grid={},
                           hidden_size=4, budget=f"epochs={epochs}", monitor="val/acc", mode="max", no_wandb=True,
                           extra=TINY + ["--trainer.callbacks+=" + json.dumps(own)])

    first = cmp.run_child(spec(1))
    last = folder / "checkpoints" / "last.ckpt"
    assert int(read_checkpoint(str(last))["global_step"]) == first["steps"]
    (folder / "result.json").unlink()
    second = cmp.run_child(spec(2), str(last))
    assert second["steps"] == 2 * first["steps"]
    assert sorted(p.name for p in (folder / "checkpoints").glob("last*.ckpt")) == ["last.ckpt"]
    assert int(read_checkpoint(str(last))["global_step"]) == second["steps"]
    # distinct keys, and a checkpoint written before (one shared key) still gives the best one its state
    best = RunnerCheckpoint("best", monitor="val/loss", mode="min")
    plain = ModelCheckpoint(monitor="val/loss", mode="min")
    assert best.state_key != plain.state_key == best._legacy_state_key


def test_a_run_folder_moved_since_keeps_its_checkpoints_states_on_resume(tmp_path):
    """A run whose folder moved (renamed, copied off a cluster) resumes with every checkpoint's state: Lightning
    drops a checkpoint's best score when its saved folder differs, so the next validation was taken as the best
    even where worse, and the config's checkpoint wrote last-v1.ckpt beside last.ckpt."""
    import torch
    from lightning.pytorch.callbacks import ModelCheckpoint

    from lit_rnncells.command.callbacks import RunnerCheckpoint, moved_paths

    def callbacks(run: Path) -> list:
        return [RunnerCheckpoint("best", dirpath=str(run / "best"), monitor="val/loss", mode="min"),
                ModelCheckpoint(dirpath=str(run / "checkpoints"), monitor="val/acc", mode="max", save_last=True)]

    old, new = callbacks(tmp_path / "old" / "GRU-s1"), callbacks(tmp_path / "new" / "GRU-s1")
    for callback, score in zip(old, (1.5, 0.75)):
        path = str(Path(callback.dirpath) / "kept.ckpt")
        callback.best_model_score, callback.best_model_path, callback.kth_best_model_path = (torch.tensor(score),
                                                                                              path, path)
        callback.best_k_models, callback.last_model_path = {path: torch.tensor(score)}, path
    checkpoint = {"callbacks": {c.state_key: c.state_dict() for c in old}}
    new[0].on_load_checkpoint(None, None, checkpoint)  # Lightning's order: every on_load_checkpoint, then states
    for callback in new:
        callback.load_state_dict(checkpoint["callbacks"][callback.state_key])
    for callback, score in zip(new, (1.5, 0.75)):
        moved = str(Path(callback.dirpath) / "kept.ckpt")
        assert float(callback.best_model_score) == score and callback.best_model_path == moved
        assert list(callback.best_k_models) == [moved] and callback.last_model_path == moved
    assert moved_paths({"a": "/runs/x-2/best.ckpt", "/runs/x/b": 1}, "/runs/x", "/new") == {
        "a": "/runs/x-2/best.ckpt", "/new/b": 1}  # only paths under the folder itself move

    # end to end: a finished run moved with its --out, then given a longer budget
    for out, budget in ((tmp_path / "a", "epochs=1"), (tmp_path / "b", "epochs=2")):
        if out.name == "b":
            shutil.move(str(tmp_path / "a"), str(out))
        cmp.compare(CONFIG, ["GRU"], seeds=[1], budget=budget, out=out, matching=cmp.Matching(hidden_size=4),
                    runs=cmp.RunOptions(extra=TINY, env=ENV), log=io.StringIO())
    run = tmp_path / "b" / "GRU-h4-s1"
    assert sorted(p.name for p in (run / "checkpoints").glob("last*.ckpt")) == ["last.ckpt"]
    assert json.loads((run / "result.json").read_text())["checkpoint"] == str((run / "best" / "best.ckpt").resolve())


def test_a_run_resumes_from_the_newest_of_last_ckpt_and_lightnings_last_v1(tmp_path):
    """Runs resumed before the fix above have a stale last.ckpt and a newer last-v1.ckpt: the newer is taken."""
    import time

    import torch

    checkpoints = tmp_path / "checkpoints"
    checkpoints.mkdir()
    torch.save({"state_dict": {}, "global_step": 800}, checkpoints / "last.ckpt")
    time.sleep(0.01)
    torch.save({"state_dict": {}, "global_step": 1630}, checkpoints / "last-v1.ckpt")
    assert cmp.resume_checkpoint(tmp_path) == (checkpoints / "last-v1.ckpt", 1630)


def test_a_longer_budget_goes_on_from_each_finished_run_and_other_settings_are_refused(tmp_path):
    """The same comparison again with epochs=3 instead of 1: each finished run goes on from its checkpoint to the
    result a 3-epoch run gives; a shorter budget, or any other setting changed, is refused before any run."""
    def sweep(out: Path, budget: str, extra: list = TINY) -> str:
        log = io.StringIO()
        cmp.compare(CONFIG, ["GRU"], seeds=[1], budget=budget, out=out, matching=cmp.Matching(hidden_size=4),
                    runs=cmp.RunOptions(extra=extra, env=ENV), log=log)
        return log.getvalue()

    out, direct = tmp_path / "extended", tmp_path / "direct"
    sweep(out, "epochs=1")
    run = next(p for p in out.iterdir() if (p / "result.json").is_file())
    log = sweep(out, "epochs=3")
    assert f"{run.name} finished epochs=1 earlier; goes on to epochs=3" in log and f"{run.name} resumes from " in log
    result = json.loads((run / "result.json").read_text())
    assert (result["epochs"], result["steps"]) == (3, 6)  # 2 steps an epoch; the first epoch not trained again
    assert json.loads((run / "result_epochs1.json").read_text())["steps"] == 2  # the 1-epoch result, kept
    assert json.loads((run / "spec.json").read_text())["budget"] == "epochs=3"
    sweep(direct, "epochs=3")
    once = json.loads((direct / run.name / "result.json").read_text())
    assert result["test"] == pytest.approx(once["test"]) and result["best val/acc"] == once["best val/acc"]
    assert "finished earlier, kept" in sweep(out, "epochs=3")
    for budget, extra, changed in (("epochs=2", TINY, r"\(budget; budget epochs=3 there, epochs=2 now\)"),
                                   ("steps=20", TINY, r"\(budget; budget epochs=3 there, steps=20 now\)"),
                                   ("epochs=3", TINY + ["--model.init_args.embedding_size", "8"], r"\(extra\)")):
        with pytest.raises(cmp.CompareError, match=rf"holds a finished run made with other settings {changed}; give "
                                                   "another --out"):
            sweep(out, budget, extra)
    assert json.loads((run / "result.json").read_text()) == result  # nothing was run or moved
    shutil.rmtree(run / "checkpoints")
    with pytest.raises(cmp.CompareError, match=r"finished its budget epochs=3 and keeps no checkpoint to go on to "
                                               r"epochs=4 from; move the folder away"):
        sweep(out, "epochs=4")


def test_an_epoch_a_steps_budget_cuts_short_gets_no_per_epoch_test_until_it_ends(tmp_path):
    """2 steps an epoch: a budget of 3 steps ends in the second epoch, which Lightning still ends (and calls its
    epoch-end hooks); only the first epoch's end is tested. Going on to 4 steps tests the second epoch at its real
    end, step 4, not at the cut (step 3)."""
    def sweep(budget: str) -> Path:
        cmp.compare(CONFIG, ["GRU"], seeds=[1], budget=budget, out=tmp_path, matching=cmp.Matching(hidden_size=4),
                    runs=cmp.RunOptions(extra=TINY, test_every_epoch=True, keep_epoch_checkpoints=True, env=ENV),
                    log=io.StringIO())
        return next(p for p in tmp_path.iterdir() if (p / "result.json").is_file())

    run = sweep("steps=3")
    assert json.loads((run / "result.json").read_text())["steps"] == 3
    assert sorted(p.name for p in (run / "epochs").iterdir()) == ["epoch=0-step=2.ckpt"]
    assert [(p["epoch"], p["step"]) for p in json.loads((run / "curves.json").read_text())["test"]] == [(0, 2)]
    sweep("steps=4")
    assert sorted(p.name for p in (run / "epochs").iterdir()) == ["epoch=0-step=2.ckpt", "epoch=1-step=4.ckpt"]
    assert [(p["epoch"], p["step"]) for p in json.loads((run / "curves.json").read_text())["test"]] == [(0, 2),
                                                                                                       (1, 4)]


def test_a_setting_a_spec_json_lacks_counts_as_its_default(tmp_path):
    """A run folder written before a setting existed (its spec.json lacks it) is not a run with other settings."""
    from dataclasses import asdict

    from lit_rnncells.experiments.compare.folders import spec_differences

    spec = cmp.RunSpec(run_id="GRU-s1", folder=str(tmp_path), config=CONFIG, cell="GRU", seed=1, grid={},
                       hidden_size=4, budget="epochs=1", monitor="val/acc", mode="max")
    saved = {k: v for k, v in asdict(spec).items() if k not in ("extra", "match", "test_every_epoch")}
    (tmp_path / "spec.json").write_text(json.dumps(saved))
    assert spec_differences(tmp_path, spec) == []
    assert spec_differences(tmp_path, cmp.RunSpec(**{**asdict(spec), "extra": ["--x", "1"]})) == ["extra"]


def test_keep_epoch_checkpoints_keeps_each_tested_epoch_and_is_not_a_setting(sweep, tmp_path):
    """By default the epochs' checkpoints are deleted once tested (the sweep above); kept, there is one per epoch,
    each loadable with its epoch's weights, and a resume that changes the flag is not a run with other settings."""
    from dataclasses import asdict

    from lit_rnncells.experiments.compare.folders import spec_differences

    assert not list(sweep[0].rglob("epochs/*.ckpt"))
    rows = cmp.compare(CONFIG, ["GRU"], seeds=[1], budget="epochs=2", out=tmp_path / "kept",
                       matching=cmp.Matching(hidden_size=4), log=io.StringIO(),
                       runs=cmp.RunOptions(extra=TINY, test_every_epoch=True, env=ENV, keep_epoch_checkpoints=True))
    folder = tmp_path / "kept" / rows[0]["run_id"]
    kept = sorted((folder / "epochs").glob("*.ckpt"))
    assert [p.name for p in kept] == ["epoch=0-step=2.ckpt", "epoch=1-step=4.ckpt"]
    weights = [torch.load(p, map_location="cpu", weights_only=True)["state_dict"] for p in kept]
    assert any(not torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    spec = cmp.RunSpec(**json.loads((folder / "spec.json").read_text()))
    assert spec.keep_epoch_checkpoints
    assert spec_differences(folder, cmp.RunSpec(**{**asdict(spec), "keep_epoch_checkpoints": False})) == []
    with pytest.raises(cmp.CompareError, match="--keep-epoch-checkpoints keeps the epochs' checkpoints that "
                                               "--test-every-epoch writes"):
        cmp.compare(CONFIG, ["GRU"], seeds=[1], budget="epochs=1", out=tmp_path / "refused",
                    runs=cmp.RunOptions(extra=TINY, keep_epoch_checkpoints=True))
    assert not (tmp_path / "refused").exists()


def test_a_config_path_written_relative_or_absolute_is_the_same_setting(tmp_path):
    """A run started with ``--config configs/...`` goes on under ``--config /abs/.../configs/...`` (same file)."""
    from dataclasses import asdict

    from lit_rnncells.experiments.compare.folders import spec_differences

    spec = cmp.RunSpec(run_id="GRU-s1", folder=str(tmp_path), config=os.path.relpath(CONFIG), cell="GRU", seed=1,
                       grid={}, hidden_size=4, budget="epochs=1", monitor="val/acc", mode="max")
    (tmp_path / "spec.json").write_text(json.dumps(asdict(spec)))
    assert spec_differences(tmp_path, cmp.RunSpec(**{**asdict(spec), "config": CONFIG})) == []
    other = str(ROOT / "configs" / "logic" / "mufuru.yaml")
    assert spec_differences(tmp_path, cmp.RunSpec(**{**asdict(spec), "config": other})) == ["config"]
