"""The bad-input catalogue: each kind of bad config, data file, checkpoint or argument, driven through the
public command line (``lit_rnncells.cli.run``, what ``python -m lit_rnncells`` calls).

Every probe must: exit non-zero; print exactly one ``error: ...`` line that contains the expected
sentence (naming the problem and the fix); and leave an earlier run's files (config, checkpoint, logs in
the same working folder) exactly as they were, with no new checkpoint or config written.
"""
from __future__ import annotations

import hashlib
import io
import os
import shutil
from pathlib import Path
from typing import Dict, List, Optional

import pytest

from lit_rnncells.cli import run

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"
LOGIC = str(CONFIGS / "logic" / "mufuru.yaml")
LM = str(CONFIGS / "lm" / "ptb_char_gru_reference.yaml")
S2S = str(CONFIGS / "seq2seq" / "multi30k_de_en_gru.yaml")
ABSA = str(CONFIGS / "classification" / "absa_restaurants_gru_dt.yaml")
IMDB = str(CONFIGS / "classification" / "imdb_gru.yaml")
SST = str(CONFIGS / "classification" / "sst2_gru.yaml")
QUIET = ["--trainer.enable_progress_bar", "false", "--trainer.enable_model_summary", "false"]
TINY_LOGIC = ["--data.init_args.train_size", "64", "--data.init_args.val_size", "16", "--data.init_args.test_size",
              "32", "--trainer.max_epochs", "1", "--test_after_fit", "false"]
TINY_LM = ["--model.init_args.embedding_size", "8", "--model.init_args.hidden_size", "16",
           "--data.init_args.batch_size", "4", "--data.init_args.bptt", "20", "--trainer.max_steps", "2",
           "--trainer.max_time", "null"]

DE = ["ein mann fährt rad .", "zwei hunde spielen .", "eine frau liest ein buch .", "kinder lachen ."]
EN = ["a man rides a bike .", "two dogs play .", "a woman reads a book .", "children laugh ."]
# held-out pairs (made of the training words): a train split that contains the whole dev split is an error
DE_HELD = ["ein mann liest .", "zwei kinder spielen .", "eine frau fährt rad .", "hunde lachen ."]
EN_HELD = ["a man reads .", "two children play .", "a woman rides a bike .", "dogs laugh ."]
DE_TEST = ["ein kind liest ein buch .", "zwei frauen lachen .", "eine frau spielen .", "hunde fährt rad ."]
EN_TEST = ["a child reads a book .", "two women laugh .", "a woman play .", "dogs rides a bike ."]


def write_parallel(folder: Path, **override: List[str]) -> Path:
    """A tiny parallel corpus ``{train,valid,test}.{de,en}``; ``override`` replaces files by name."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {"train.de": DE * 8, "train.en": EN * 8, "valid.de": DE_HELD, "valid.en": EN_HELD,
             "test.de": DE_TEST, "test.en": EN_TEST}
    files.update({k.replace("_", "."): v for k, v in override.items()})
    for name, lines in files.items():
        (folder / name).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return folder


def parallel_args(folder: Path) -> List[str]:
    return ["--config", S2S, *QUIET, "--data.init_args.dataset", "parallel", "--data.init_args.data_dir",
            str(folder), "--data.init_args.subword_vocab_size", "300", "--data.init_args.min_frequency", "1",
            "--model.init_args.hidden_size", "16", "--model.init_args.embedding_size", "8",
            "--trainer.max_steps", "1", "--test_after_fit", "false"]


SEMEVAL_SENTENCE = ('<sentence id="{id}"><text>The {term} was fine.</text><aspectTerms>'
                    '<aspectTerm term="{term}" polarity="{polarity}" from="4" to="{end}"/></aspectTerms></sentence>')


def write_semeval(folder: Path, polarity: str = "positive", broken: bool = False) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("Restaurants_Train_v2.xml", "Restaurants_Test_Gold.xml"):
        body = "".join(SEMEVAL_SENTENCE.format(id=i, term=t, polarity=p, end=4 + len(t))
                       for i, (t, p) in enumerate([("food", polarity), ("service", "negative")] * 6))
        text = f'<?xml version="1.0" encoding="UTF-8"?>\n<sentences>\n{body}\n</sentences>\n'
        (folder / name).write_text(text.replace("</sentences>", "<sentence>") if broken else text, encoding="utf-8")
    return folder


def write_sst(folder: Path, bad_line: Optional[str] = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    good = {"train.txt": ["(3 (2 a) (4 (3 good) (2 film)))", "(1 (2 a) (0 (1 bad) (2 film)))"] * 4,
            "dev.txt": ["(4 (3 good) (2 film))", "(0 (1 bad) (2 film))"],
            "test.txt": ["(3 (2 a) (3 good))", "(1 (2 a) (1 bad))"]}
    for name in ("train.txt", "dev.txt", "test.txt"):
        lines = good[name] + ([bad_line] if bad_line and name == "train.txt" else [])
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def fit_logic(folder: Path) -> Path:
    """An earlier run in ``folder`` (its config, checkpoint and logs), returning its checkpoint."""
    assert run(["fit", "--config", LOGIC, *TINY_LOGIC, *QUIET, "--trainer.logger",
                "lightning.pytorch.loggers.CSVLogger", "--trainer.logger.save_dir", str(folder / "runs")]) == 0
    return next(folder.rglob("*.ckpt"))


@pytest.fixture(scope="module")
def earlier(tmp_path_factory) -> Dict[str, Path]:
    """A finished logic run, a finished LM run (with real data) and a seq2seq checkpoint, made once."""
    base = tmp_path_factory.mktemp("earlier")
    old = os.getcwd()
    os.chdir(base)
    try:
        made = {"folder": base, "logic": fit_logic(base)}
    finally:
        os.chdir(old)
    return made


def snapshot(folder: Path) -> Dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def expect_error(capsys, folder: Path, args: List[str], *fragments: str, code: Optional[int] = None,
                 new_config_ok: bool = False) -> str:
    """Run ``args`` in ``folder`` (holding an earlier run) and check the catalogue's three promises. A run
    that trained before failing (divergence) keeps its own new config, never a checkpoint."""
    before = snapshot(folder)
    old = os.getcwd()
    os.chdir(folder)
    try:
        exit_code = run(args)
    finally:
        os.chdir(old)
    err = capsys.readouterr().err
    assert exit_code != 0 and (code is None or exit_code == code), err[-3000:]
    lines = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1, err[-3000:]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    after = snapshot(folder)
    assert {k: v for k, v in after.items() if k in before} == before  # nothing of the earlier run changed
    new = [k for k in after if k not in before and k.endswith((".ckpt",) if new_config_ok else (".ckpt", ".yaml"))]
    assert not new, new
    return lines[0]


@pytest.fixture
def workdir(earlier, tmp_path) -> Path:
    """A fresh folder holding a copy of the earlier logic run."""
    shutil.copytree(earlier["folder"], tmp_path / "work")
    return tmp_path / "work"


# --- configuration and command line (logic task: no data needed) -------------------------------------------
CLI_PROBES = {
    "misspelt model option": (["--model.init_args.hiden_size", "3"],
                               ["no option 'hiden_size'", "Did you mean 'hidden_size'?"]),
    "misspelt data option": (["--data.init_args.train_sise", "3"], ["no option 'train_sise'", "'train_size'"]),
    "unknown cell": (["--model.init_args.cell", "GRUU"], ["Unknown cell 'GRUU'", "Did you mean 'GRU'?"]),
    "own cell by its bare name": (["--model.init_args.cell", "MyOwnCell"],
                                  ["Unknown cell 'MyOwnCell'", "import path, e.g. mycells.minimal.MyOwnCell"]),
    "unknown cell in compare's Name(option=value) form": (  # the example was mycells.minimal.MyOwnCell(depth=2)
        ["--model.init_args.cell", "MyOwnCell(depth=2)"],
        ["Unknown cell 'MyOwnCell(depth=2)'", "import path, e.g. mycells.minimal.MyCell (the command line"]),
    "a wrapper cell without the cell it wraps": (["--model.init_args.cell", "MultiChannel"], [
        "The cell MultiChannel needs the option cell; give it with --model.init_args.cell.init_args.cell GRU, or "
        "under the cell's init_args in a config."]),
    "zero hidden size": (["--model.init_args.hidden_size", "0"], ["hidden_size must be a positive integer"]),
    "negative layers": (["--model.init_args.num_layers", "-1"], ["num_layers must be a positive integer"]),
    "value of the wrong type": (["--trainer.max_epochs", "abc"],
                                ["--trainer.max_epochs expects an int, got 'abc'; fix that value"]),
    # jsonargparse reported these against the outer key with its own NestedArg(key=..., val=...)
    "a data option's value of the wrong type": (["--data.init_args.batch_size", "abc"],
                                                ["--data.init_args.batch_size expects an int, got 'abc'; fix that"]),
    "a cell option's value of the wrong type": (["--model.init_args.cell.init_args.reset_bias", "x"], [
        "--model.init_args.cell.init_args.reset_bias expects a float, got 'x'; fix that value"]),  # was 'no option'
    "an optimiser option's value of the wrong type": (["--model.init_args.optimizer.init_args.lr", "abc"],
                                                      ["--model.init_args.optimizer.init_args.lr expects a float, got "
                                                       "'abc'"]),
    "a tuple of the wrong length": (["--model.init_args.optimizer.init_args.betas", "[0.9]"],
                                    ["--model.init_args.optimizer.init_args.betas expects a tuple with 2 elements, "
                                     "got [0.9]"]),
    "unknown argument": (["--bogus", "1"], ["unrecognized arguments: --bogus", "--help"]),
    "an option prefix (no abbreviations)": (["--trainer.max_step", "1"], ["unrecognized arguments: --trainer.max_step"]),
    "missing config file": (["--config", "nope.yaml"], ["nope.yaml"]),
    "more formulas than exist": (["--data.init_args.train_gates", "[1, 1]", "--data.init_args.test_gates", "[1, 1]"],
                                 ["formulas"]),
    "gates range upside down": (["--data.init_args.test_gates", "[20, 11]"], ["test_gates must be [min, max]"]),
    "misspelt task class": (["--model", "LogicEvaluatr"], [
        "Unknown task class 'LogicEvaluatr' (--model). Did you mean 'LogicEvaluator'? Known: AspectClassifier, "
        "DocumentClassifier, LanguageModel, LogicEvaluator, Seq2Seq, SequenceClassifier;"]),
    "misspelt DataModule class": (["--data", "LogicDataModul"], [
        "Unknown DataModule class 'LogicDataModul' (--data). Did you mean 'LogicDataModule'? Known:",
        "LanguageModelDataModule, LogicDataModule, TranslationDataModule;"]),
    "a class that is not a task": (["--model", "torch.nn.Linear"], ["'torch.nn.Linear' is not a task class (--model)"]),
    # a user's class by its import path, its module not on Python's path (the command run from another folder):
    # "Parser key ... rejects the value", or "Unknown task class" for a class the message then said to name so
    "own cell from a module not on the path": (["--model.init_args.cell", "no_such_module_xyz.cells.MyCell"], [
        "Cell 'no_such_module_xyz.cells.MyCell' cannot be imported: there is no module 'no_such_module_xyz' on "
        "Python's path; run the command from the folder that holds no_such_module_xyz, or add that folder to "
        "PYTHONPATH."]),
    "own cell's class_path from a module not on the path": (
        ["--model.init_args.cell", '{"class_path": "no_such_module_xyz.cells.MyCell"}'],
        ["no_such_module_xyz.cells.MyCell (in the config or on the command line) cannot be imported: there is no "
         "module 'no_such_module_xyz' on Python's path"]),
    "own task from a module not on the path": (["--model", "no_such_module_xyz.MyTask"], [
        "no_such_module_xyz.MyTask (in the config or on the command line) cannot be imported: there is no module "
        "'no_such_module_xyz' on Python's path; run the command from the folder that holds no_such_module_xyz"]),
    "own callback from a module not on the path": (["--trainer.callbacks+=no_such_module_xyz.MyCallback"], [
        "no_such_module_xyz.MyCallback (in the config or on the command line) cannot be imported: there is no "
        "module 'no_such_module_xyz' on Python's path"]),
    "misspelt class in a module": (["--trainer.callbacks+=lightning.pytorch.callbacks.ModelCheckpoin"], [
        "lightning.pytorch.callbacks.ModelCheckpoin (in the config or on the command line) cannot be imported: "
        "module lightning.pytorch.callbacks has no 'ModelCheckpoin' (did you mean "
        "lightning.pytorch.callbacks.ModelCheckpoint?)."]),
    # Lightning divided by it at the first training step (ZeroDivisionError, a traceback)
    "validation every 0 batches": (["--trainer.val_check_interval", "0"],
                                   ["--trainer.val_check_interval 0 is not a positive number", "e.g. 0.25"]),
    # torch.optim raised ValueError inside Lightning's fit, after W&B had started: a traceback
    "a negative learning rate": (["--model.init_args.optimizer.init_args.lr", "-1"], [
        "The optimizer refuses its settings: Invalid learning rate: -1.0; fix model.init_args.optimizer",
        "--model.init_args.optimizer.init_args.lr 0.001"]),
    "a scheduler setting torch refuses": (
        ["--model.init_args.lr_scheduler", '{"class_path": "torch.optim.lr_scheduler.LinearLR", '
                                           '"init_args": {"start_factor": 0}}'],
        ["The learning-rate scheduler refuses its settings: Starting multiplicative factor expected to be",
         "fix model.init_args.lr_scheduler"]),
    # Lightning divided by it at the first step (ZeroDivisionError, a traceback)
    "gradients accumulated over 0 batches": (["--trainer.accumulate_grad_batches", "0"],
                                             ["--trainer.accumulate_grad_batches 0 is not a positive number"]),
    # Lightning divided by it at the first epoch's end (ZeroDivisionError, a traceback after an epoch's training)
    "validation every 0 epochs": (["--trainer.check_val_every_n_epoch", "0"],
                                  ["--trainer.check_val_every_n_epoch 0 is not a positive number of epochs"]),
    # torch's norm clipping scaled every gradient by a negative factor: the run trained uphill, silently
    "a negative gradient clip": (["--trainer.gradient_clip_val", "-1"],
                                 ["--trainer.gradient_clip_val -1", "is negative", "0 for no clipping"]),
    # fit trained nothing and printed the untrained model's test metrics as the run's result
    # (without the test after it, a fit of 0 steps is a setup-only baseline: scripts/bench_memory.py measures one)
    "no epochs": (["--trainer.max_epochs", "0", "--test_after_fit", "true"],
                  ["--trainer.max_epochs 0 trains nothing", "or -1 for no limit"]),
    "no steps": (["--trainer.max_steps", "0", "--test_after_fit", "true"],
                 ["--trainer.max_steps 0 trains nothing", "1 or more steps"]),
    "no training batches": (["--trainer.limit_train_batches", "0.0", "--test_after_fit", "true"],
                            ["--trainer.limit_train_batches 0.0 trains nothing", "a fraction of an epoch in (0, 1]"]),
    # Lightning refused it once the data was loaded, at the fit's start: a traceback through its fit loop
    "validation interval over an epoch": (["--trainer.val_check_interval", "1000"],
                                          ["--trainer.val_check_interval 1000 is more than the 2 training batches",
                                           "--trainer.check_val_every_n_epoch null"]),
    # Lightning refused these once the data was loaded (MisconfigurationException): a traceback through its loops
    "a training fraction under one batch": (["--trainer.limit_train_batches", "0.1"],
                                            ["--trainer.limit_train_batches 0.1 is less than one of the 2 training "
                                             "batches; give a number of batches (an int, e.g. 10) or a fraction of at "
                                             "least 0.5."]),
    "a validation fraction under one batch": (["--trainer.limit_val_batches", "0.001"],
                                              ["--trainer.limit_val_batches 0.001 is less than one of the",
                                               "validation batches; give a number of batches"]),
    # Lightning's Trainer raised ValueError while being built (the configs' log_every_n_steps, logger, ...), and
    # once past those it would drop every metric the task logs
    "barebones": (["--trainer.barebones", "true"],
                  ["--trainer.barebones true turns off what a task's run is made of", "--trainer.logger false"]),
    # Lightning's Trainer raised ValueError / TypeError while being built: tracebacks
    "no nodes": (["--trainer.num_nodes", "0"], ["Lightning's Trainer refuses these trainer options: `num_nodes` must "
                                                "be a positive integer, but got 0; change the --trainer options"]),
    "an unknown strategy": (["--trainer.strategy", "ddpx"], ["Lightning's Trainer refuses these trainer options: You "
                                                            "selected an invalid strategy name: `strategy='ddpx'`"]),
    "a negative number of devices": (["--trainer.devices", "-2"], [
        "Lightning's Trainer refuses these trainer options: `devices` selected with `CPUAccelerator` should be an "
        "int"]),
    # Lightning's seed_everything raised ValueError: a traceback
    "a seed numpy cannot take": (["--seed_everything", "-1"], [
        "--seed_everything -1 is not a seed numpy takes; give one from 0 to 4294967295, true for a random one"]),
    # Lightning raised MisconfigurationException at the fit's start (on_train_start): a traceback
    "a learning-rate monitor without a logger": (
        ["--trainer.logger", "false", "--trainer.callbacks+=LearningRateMonitor"],
        ["Lightning refuses this run's settings: Cannot use `LearningRateMonitor` callback with `Trainer` that has no "
         "logger; change the options it names."]),
    # Lightning's finder looked for model.lr at the fit's start: an AttributeError traceback
    "a learning-rate finder": (["--trainer.callbacks+=LearningRateFinder"], [
        "LearningRateFinder needs a learning rate on the model (model.lr), but LogicEvaluator takes it as its "
        "optimizer's option", "--vary model.init_args.optimizer.init_args.lr=0.001,0.003"]),
    # the parser's report listed only its first alternative ("expects int")
    "a precision Lightning does not have": (["--trainer.precision", "bf32"], [
        "--trainer.precision expects one of 'transformer-engine',", "'bf16-mixed'", ", or an int, got 'bf32'"]),
    # Lightning's Trainer raised MisconfigurationException while being built: a traceback, not a sentence
    "checkpointing off beside a ModelCheckpoint": (
        ["--trainer.callbacks+=ModelCheckpoint", "--trainer.enable_checkpointing", "false"],
        ["Lightning's Trainer refuses these trainer options: Trainer was configured with `enable_checkpointing=False`"
         " but found `ModelCheckpoint` in callbacks list;", "change the --trainer options"]),
}


@pytest.mark.parametrize("probe", list(CLI_PROBES))
def test_configuration_mistakes(probe, workdir, capsys):
    extra, fragments = CLI_PROBES[probe]
    expect_error(capsys, workdir, ["fit", "--config", LOGIC, *TINY_LOGIC, *QUIET, *extra], *fragments, code=2)


def test_a_callback_whose_package_is_missing_is_one_line(workdir, capsys):
    """Lightning's DeviceStatsMonitor needs psutil to log CPU stats and raised ModuleNotFoundError at the fit's
    start: a traceback."""
    import importlib.util

    if importlib.util.find_spec("psutil") is not None:
        pytest.skip("psutil is installed here, so DeviceStatsMonitor has what it needs")
    expect_error(capsys, workdir, ["fit", "--config", LOGIC, *TINY_LOGIC, *QUIET,
                                   "--trainer.callbacks+=DeviceStatsMonitor", "--trainer.logger",
                                   "lightning.pytorch.loggers.CSVLogger"],
                 "Requirement 'psutil' not met", "(a package an option given needs); install it, or drop that option.",
                 code=2)


def test_a_users_module_that_fails_when_imported_is_named_with_its_error_and_line(workdir, capsys, monkeypatch):
    """Was a traceback (the cell named as a string) or "Parser key ... rejects the value" (a config's class_path)."""
    (workdir / "broken_user_cells_xyz.py").write_text("from lit_rnncells.cells import GRU\nx = undefined_name\n")
    monkeypatch.syspath_prepend(str(workdir))
    for cell in ("broken_user_cells_xyz.GRU", '{"class_path": "broken_user_cells_xyz.GRU"}'):
        line = expect_error(capsys, workdir, ["fit", "--config", LOGIC, *TINY_LOGIC, *QUIET,
                                              "--model.init_args.cell", cell], code=2)
        assert ("cannot be imported: importing broken_user_cells_xyz raised NameError: name 'undefined_name' is not "
                f"defined (at {workdir / 'broken_user_cells_xyz.py'}:2); fix broken_user_cells_xyz") in line, line


def test_a_run_of_a_users_cell_tested_from_another_folder_names_the_folder_to_run_from(tmp_path, capsys):
    """A fit of a cell from the user's module, then ``test`` with its config from a folder where that module is
    not importable: its config names the cell's class_path, which jsonargparse reported as 'Parser key "model"
    expects str, got {the whole model dict}'."""
    import importlib
    import sys

    project = tmp_path / "project"
    (project / "user_cells_elsewhere_xyz").mkdir(parents=True)
    (project / "user_cells_elsewhere_xyz" / "__init__.py").write_text(
        "from lit_rnncells.cells import GRU\n\n\nclass MyGRU(GRU):\n    pass\n")
    sys.path.insert(0, str(project))
    try:
        ckpt = fit_logic_with(project, ["--model.init_args.cell", "user_cells_elsewhere_xyz.MyGRU"])
    finally:
        sys.path.remove(str(project))
        sys.modules.pop("user_cells_elsewhere_xyz", None)
        importlib.invalidate_caches()
    config = next(project.rglob("config.yaml"))
    assert "user_cells_elsewhere_xyz.MyGRU" in config.read_text()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    line = expect_error(capsys, elsewhere, ["test", "--config", str(config), "--ckpt_path", str(ckpt)], code=2)
    assert line == ("error: user_cells_elsewhere_xyz.MyGRU (in the config or on the command line) cannot be imported: "
                    "there is no module 'user_cells_elsewhere_xyz' on Python's path; run the command from the folder "
                    "that holds user_cells_elsewhere_xyz, or add that folder to PYTHONPATH.")


def fit_logic_with(folder: Path, extra: List[str]) -> Path:
    """:func:`fit_logic` with ``extra`` arguments, run from ``folder`` (where its run folder goes)."""
    old = os.getcwd()
    os.chdir(folder)
    try:
        assert run(["fit", "--config", LOGIC, *TINY_LOGIC, *QUIET, "--trainer.logger", "false", *extra]) == 0
    finally:
        os.chdir(old)
    return next(p for p in folder.rglob("*.ckpt"))


def test_predict_without_a_checkpoint(workdir, capsys):
    expect_error(capsys, workdir, ["predict", "--config", LOGIC, *TINY_LOGIC], "predict needs a trained model",
                 "--untrained true")


# --- checkpoints --------------------------------------------------------------------------------------------
def test_missing_checkpoint(workdir, capsys):
    expect_error(capsys, workdir, ["test", "--config", LOGIC, *TINY_LOGIC, "--ckpt_path", "missing.ckpt"],
                 "does not exist", "pass the path of a .ckpt file")


def test_truncated_checkpoint(earlier, workdir, capsys):
    (workdir / "truncated.ckpt").write_bytes(earlier["logic"].read_bytes()[:2000])
    expect_error(capsys, workdir, ["test", "--config", LOGIC, *TINY_LOGIC, "--ckpt_path", "truncated.ckpt"],
                 "is not a readable checkpoint")


def test_random_bytes_as_checkpoint(workdir, capsys):
    (workdir / "random.ckpt").write_bytes(os.urandom(5000))
    line = expect_error(capsys, workdir, ["test", "--config", LOGIC, *TINY_LOGIC, "--ckpt_path", "random.ckpt"],
                        "is not a readable checkpoint")
    assert "weights_only=False" not in line  # never the advice to run untrusted pickles


def test_a_pickle_that_would_run_code_is_refused(workdir, capsys):
    import pickle

    class Evil:
        def __reduce__(self):
            return (os.system, ("touch pwned",))

    (workdir / "evil.ckpt").write_bytes(pickle.dumps({"state_dict": Evil()}))
    expect_error(capsys, workdir, ["test", "--config", LOGIC, *TINY_LOGIC, "--ckpt_path", "evil.ckpt"],
                 "is not a readable checkpoint")
    assert not (workdir / "pwned").exists()


def test_changed_sizes_with_a_checkpoint(earlier, workdir, capsys):
    expect_error(capsys, workdir, ["test", "--config", LOGIC, *TINY_LOGIC, "--ckpt_path", str(earlier["logic"]),
                                   "--model.init_args.hidden_size", "32"],
                 "hidden_size=32 (checkpoint: 8) differ from the checkpoint", "drop those options")


def test_another_cell_with_a_checkpoint(earlier, workdir, capsys):
    expect_error(capsys, workdir, ["test", "--config", LOGIC, *TINY_LOGIC, "--ckpt_path", str(earlier["logic"]),
                                   "--model.init_args.cell", "GRU"], "cell=GRU (checkpoint: MuFuRU) differ")


@pytest.mark.real_data
def test_a_checkpoint_of_another_task(earlier, workdir, capsys, data_dir):
    expect_error(capsys, workdir, ["test", "--config", LM, *QUIET, "--ckpt_path", str(earlier["logic"])],
                 "is a LogicEvaluator, the config builds a LanguageModel")


# --- language model -------------------------------------------------------------------------------------------
LM_PROBES = {
    "data_dir is a file": (["--data.init_args.data_dir", "{data}/ptb/ptb.char.test.txt"],
                           ["is a file, but ptb_char is distributed as separate"]),
    "mistyped local folder": (["--data.init_args.data_dir", "runs/ptbb"], ["Corpus folder 'runs/ptbb' does not exist"]),
    "dropout_e above 1": (["--model.init_args.dropout_e", "1.5"], ["dropout_e must be a probability in [0, 1)"]),
    "dropout_e of 1": (["--model.init_args.dropout_e", "1.0"], ["dropout_e must be a probability in [0, 1)"]),
    "negative weight drop": (["--model.init_args.weight_drop", "-0.1"], ["weight_drop must be a probability"]),
    "negative AR": (["--model.init_args.alpha", "-1"], ["alpha must be 0 or more"]),
    "bptt longer than a stream": (["--data.init_args.bptt", "100000000"], ["is longer than each training stream"]),
    "tie weights with other sizes": (["--model.init_args.tie_weights", "true", "--model.init_args.deep_output_size",
                                      "12"], ["tie_weights needs the output size"]),
    "unknown dataset": (["--data.init_args.dataset", "ptb_chars"], ["ptb_chars"]),
    "text dataset without level": (["--data.init_args.dataset", "text", "--data.init_args.data_dir", "{tmp}"],
                                   ["needs level"]),
}


@pytest.mark.real_data
@pytest.mark.parametrize("probe", list(LM_PROBES))
def test_language_model_mistakes(probe, workdir, capsys, data_dir):
    extra, fragments = LM_PROBES[probe]
    extra = [e.replace("{data}", str(data_dir)).replace("{tmp}", str(workdir)) for e in extra]
    expect_error(capsys, workdir, ["fit", "--config", LM, *QUIET, *TINY_LM, *extra], *fragments)


def test_empty_and_missing_corpus_files(workdir, capsys, monkeypatch):
    corpus = workdir / "corpus"
    corpus.mkdir()
    for split in ("train", "valid"):
        (corpus / f"{split}.txt").write_text("some text here\n")
    args = ["fit", "--config", LM, *QUIET, *TINY_LM, "--data.init_args.dataset", "text", "--data.init_args.level",
            "char", "--data.init_args.data_dir", str(corpus)]
    expect_error(capsys, workdir, args, "Missing corpus file", "test.txt")
    (corpus / "test.txt").write_text("")
    expect_error(capsys, workdir, args, "is empty")
    (corpus / "test.txt").write_bytes("café au lait\n".encode("latin-1"))  # a Latin-1 file, not UTF-8
    expect_error(capsys, workdir, args, "test.txt", "is not UTF-8 text (byte 3", "iconv")


def test_an_empty_data_root_is_named_at_once(workdir, capsys, monkeypatch):
    monkeypatch.setenv("LIT_RNNCELLS_DATA", str(workdir / "nothing"))
    expect_error(capsys, workdir, ["fit", "--config", LM, *QUIET, *TINY_LM], "does not exist", "ptb.char.train.txt")


def test_a_hub_dataset_out_of_reach_names_repo_cause_and_local_alternative(workdir, capsys, monkeypatch, tmp_path):
    from tests.hub_stub import HubStub

    HubStub(tmp_path, monkeypatch)  # an empty hub cache, offline
    expect_error(capsys, workdir, ["fit", "--config", LM, *QUIET, *TINY_LM, "--data.init_args.data_dir",
                                   "ptb-text-only/ptb_text_only"],
                 "Could not load 'ptb-text-only/ptb_text_only' from the Hugging Face hub: the hub is unreachable",
                 "LIT_RNNCELLS_DATA, which holds ptb/")


def test_iwslt14_without_a_local_copy_names_both_ways_to_build_it(workdir, capsys, monkeypatch):
    monkeypatch.delenv("LIT_RNNCELLS_DATA", raising=False)
    expect_error(capsys, workdir, ["fit", "--config", str(CONFIGS / "seq2seq" / "iwslt14_de_en_lstm.yaml"), *QUIET],
                 "no hub repo holds", "python -m lit_rnncells.data prepare iwslt14", "prepare-iwslt14.sh")


@pytest.mark.real_data
def test_a_diverging_run(workdir, capsys, data_dir):
    expect_error(capsys, workdir, ["fit", "--config", LM, *QUIET, *TINY_LM, "--trainer.max_steps", "40",
                                   "--model.init_args.optimizer", "torch.optim.SGD",
                                   "--model.init_args.optimizer.init_args.lr", "1e38",
                                   "--trainer.gradient_clip_val", "null", "--trainer.logger", "false"],
                 "became non-finite at step", "lower the learning rate", code=1, new_config_ok=True)


# --- seq2seq --------------------------------------------------------------------------------------------------
def test_parallel_files_with_different_line_counts(workdir, capsys):
    folder = write_parallel(workdir / "par", valid_en=EN[:3])
    expect_error(capsys, workdir, ["fit", *parallel_args(folder)], "valid.de", "valid.en", "4", "3")


def test_an_empty_line_in_evaluation_data(workdir, capsys):
    folder = write_parallel(workdir / "par", test_de=DE[:2] + [""] + DE[3:])
    expect_error(capsys, workdir, ["fit", *parallel_args(folder)], "test.de", "Line 3", "is empty")


def test_an_unknown_language_pair(workdir, capsys):
    folder = write_parallel(workdir / "par")
    expect_error(capsys, workdir, ["fit", *parallel_args(folder), "--data.init_args.source_language", "fr"], "fr")


def test_an_unknown_multi30k_direction(workdir, capsys):
    expect_error(capsys, workdir, ["fit", "--config", S2S, *QUIET, "--data.init_args.source_language", "cs",
                                   "--data.init_args.data_dir", str(workdir)], "cs")


def test_label_smoothing_of_one(workdir, capsys):
    folder = write_parallel(workdir / "par")
    expect_error(capsys, workdir, ["fit", *parallel_args(folder), "--model.init_args.label_smoothing", "1.0"],
                 "label_smoothing")


def test_a_zero_beam(workdir, capsys):
    folder = write_parallel(workdir / "par")
    expect_error(capsys, workdir, ["fit", *parallel_args(folder), "--model.init_args.beam_size", "0"], "beam_size")


def test_a_source_longer_than_the_model_allows_in_predict(workdir, capsys, tmp_path):
    folder = write_parallel(tmp_path / "par")
    assert run(["fit", *parallel_args(folder), "--trainer.logger", "false", "--trainer.default_root_dir",
                str(tmp_path / "run"), "--model.init_args.max_source_length", "40"]) == 0
    ckpt = next((tmp_path / "run").rglob("*.ckpt"))
    lines = workdir / "lines.de"
    lines.write_text("ein mann .\n" + " ".join(["wort"] * 80) + "\n")
    expect_error(capsys, workdir, ["predict", *parallel_args(folder), "--ckpt_path", str(ckpt),
                                   "--data.init_args.predict_file", str(lines)], "40")


def test_a_checkpoint_whose_tokenizer_differs_from_the_data(workdir, capsys, tmp_path):
    folder = write_parallel(tmp_path / "par")
    assert run(["fit", *parallel_args(folder), "--trainer.logger", "false", "--trainer.default_root_dir",
                str(tmp_path / "run")]) == 0
    ckpt = next((tmp_path / "run").rglob("*.ckpt"))
    expect_error(capsys, workdir, ["fit", *parallel_args(folder), "--data.init_args.subword_vocab_size", "290",
                                   "--ckpt_path", str(ckpt), "--trainer.max_steps", "2"], "tokenizer")


def test_duc2004_is_a_test_set_only(workdir, capsys):
    folder = write_parallel(workdir / "par")
    expect_error(capsys, workdir, ["fit", *parallel_args(folder), "--data.init_args.dataset", "duc2004"],
                 "duc2004 is a test set only", "--ckpt_path")


def test_a_missing_duc2004_folder_names_where_to_get_it(workdir, capsys, tmp_path):
    folder = write_parallel(tmp_path / "par")
    assert run(["fit", *parallel_args(folder), "--trainer.logger", "false", "--trainer.default_root_dir",
                str(tmp_path / "run")]) == 0
    ckpt = next((tmp_path / "run").rglob("*.ckpt"))
    expect_error(capsys, workdir, ["test", *parallel_args(folder), "--ckpt_path", str(ckpt), "--data.init_args.dataset",
                                   "duc2004", "--data.init_args.data_dir", str(workdir / "no_duc"),
                                   "--data.init_args.source_language", "article", "--data.init_args.target_language",
                                   "title"],
                 "no_duc", "does not exist", "NIST", "task1_ref0.txt")


def duc_args(folder: Path, ckpt: Path, duc: Path) -> List[str]:
    return ["test", *parallel_args(folder), "--ckpt_path", str(ckpt), "--data.init_args.dataset", "duc2004",
            "--data.init_args.data_dir", str(duc), "--data.init_args.source_language", "article",
            "--data.init_args.target_language", "title"]


def test_a_gap_in_the_duc2004_references_or_a_short_one_is_named(workdir, capsys, tmp_path):
    folder = write_parallel(tmp_path / "par")
    assert run(["fit", *parallel_args(folder), "--trainer.logger", "false", "--trainer.default_root_dir",
                str(tmp_path / "run")]) == 0
    ckpt = next((tmp_path / "run").rglob("*.ckpt"))
    duc = workdir / "DUC2004"
    duc.mkdir()
    for name in ("input.txt", "task1_ref0.txt", "task1_ref2.txt", "task1_ref3.txt"):  # task1_ref1.txt is missing
        (duc / name).write_text("".join(line + "\n" for line in EN_TEST), encoding="utf-8")
    expect_error(capsys, workdir, duc_args(folder, ckpt, duc), "has no task1_ref1.txt",
                 "task1_ref0.txt, task1_ref2.txt, task1_ref3.txt", "without gaps")
    (duc / "task1_ref1.txt").write_text("".join(line + "\n" for line in EN_TEST[:-1]), encoding="utf-8")
    expect_error(capsys, workdir, duc_args(folder, ckpt, duc), "task1_ref1.txt 3 lines", "input.txt 4 lines",
                 "one line per document")


def test_predict_output_that_is_the_predict_file(workdir, capsys, tmp_path):
    folder = write_parallel(tmp_path / "par")
    assert run(["fit", *parallel_args(folder), "--trainer.logger", "false", "--trainer.default_root_dir",
                str(tmp_path / "run")]) == 0
    ckpt = next((tmp_path / "run").rglob("*.ckpt"))
    lines = workdir / "lines.de"  # in the checked folder: the probe proves it is left as it was
    lines.write_text("ein mann .\nzwei hunde .\n", encoding="utf-8")
    (workdir / "sub").mkdir()
    (workdir / "link.de").symlink_to(lines)
    for output in (str(lines), "sub/../lines.de", str(workdir / "link.de")):  # the same file, however it is spelt
        expect_error(capsys, workdir, ["predict", *parallel_args(folder), "--ckpt_path", str(ckpt),
                                       "--data.init_args.predict_file", "lines.de", "--predict_output", output],
                     "--predict_output", "is the file --data.init_args.predict_file reads", "overwrite the input")
    assert lines.read_text(encoding="utf-8") == "ein mann .\nzwei hunde .\n"


def test_a_negative_rouge_truncation(workdir, capsys):
    folder = write_parallel(workdir / "par")
    expect_error(capsys, workdir, ["fit", *parallel_args(folder), "--model.init_args.rouge_max_bytes", "-75"],
                 "rouge_max_bytes must be a number of bytes")


def test_an_unknown_multi_reference_rouge(workdir, capsys):
    folder = write_parallel(workdir / "par")
    expect_error(capsys, workdir, ["fit", *parallel_args(folder), "--model.init_args.rouge_multiref", "average"],
                 "rouge_multiref must be 'pooled'", "'best'")


# --- classification -------------------------------------------------------------------------------------------
def absa_args(folder: Path) -> List[str]:
    return ["--config", ABSA, *QUIET, "--data.init_args.data_dir", str(folder), "--trainer.max_steps", "1",
            "--model.init_args.hidden_size", "8", "--model.init_args.embedding_size", "8", "--test_after_fit",
            "false", "--data.init_args.val_fraction", "0.2"]


def test_malformed_semeval_xml(workdir, capsys):
    folder = write_semeval(workdir / "semeval", broken=True)
    expect_error(capsys, workdir, ["fit", *absa_args(folder)], "Restaurants_", "line")


def test_an_unknown_polarity(workdir, capsys):
    folder = write_semeval(workdir / "semeval", polarity="happy")
    expect_error(capsys, workdir, ["fit", *absa_args(folder)], "happy")


def test_missing_semeval_folder(workdir, capsys):
    expect_error(capsys, workdir, ["fit", *absa_args(workdir / "nope")], "nope")


def test_an_aspect_predict_line_without_a_tab(workdir, capsys, tmp_path):
    folder = write_semeval(tmp_path / "semeval")
    assert run(["fit", *absa_args(folder), "--trainer.logger", "false", "--trainer.default_root_dir",
                str(tmp_path / "run")]) == 0
    ckpt = next((tmp_path / "run").rglob("*.ckpt"))
    pairs = workdir / "pairs.tsv"
    pairs.write_text("The food was fine.\tfood\nno tab on this line\n")
    expect_error(capsys, workdir, ["predict", *absa_args(folder), "--ckpt_path", str(ckpt),
                                   "--data.init_args.predict_file", str(pairs)], "Line 2", "sentence<TAB>aspect")


def sst_args(folder: Path) -> List[str]:
    return ["--config", SST, *QUIET, "--data.init_args.data_dir", str(folder), "--trainer.max_steps", "1",
            "--model.init_args.hidden_size", "8", "--model.init_args.embedding_size", "8", "--test_after_fit",
            "false"]


def test_a_malformed_tree_line(workdir, capsys):
    folder = write_sst(workdir / "sst", bad_line="(3 (2 unbalanced) (4 good)")
    expect_error(capsys, workdir, ["fit", *sst_args(folder)], "train.txt", "line 9")


def test_an_embeddings_file_of_another_dimension(workdir, capsys):
    folder = write_sst(workdir / "sst")
    vectors = workdir / "glove.txt"
    vectors.write_text("good 0.1 0.2 0.3\nfilm 0.3 0.2 0.1\n")
    expect_error(capsys, workdir, ["fit", *sst_args(folder), "--model.init_args.pretrained_embeddings",
                                   str(vectors)], "glove.txt", "3", "8")


def test_an_empty_split(workdir, capsys):
    folder = write_sst(workdir / "sst")
    (folder / "test.txt").write_text("")
    expect_error(capsys, workdir, ["fit", *sst_args(folder)], "test")


def test_a_missing_imdb_archive(workdir, capsys):
    expect_error(capsys, workdir, ["fit", "--config", IMDB, *QUIET, "--data.init_args.data_dir",
                                   str(workdir / "no_imdb")], "no_imdb")


# --- issue 19: start checks, divergence, inputs, output paths ------------------------------------------------
def test_a_gpu_trainer_config_on_a_machine_without_a_gpu(workdir, capsys, monkeypatch):
    import torch

    from lit_rnncells.command import start_checks
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(start_checks, "_mps_available", lambda: False)
    expect_error(capsys, workdir, ["fit", "--config", LOGIC, "--config", str(CONFIGS / "trainer" / "multi_gpu.yaml"),
                                   *TINY_LOGIC, *QUIET], "asks for accelerator 'gpu'", "--trainer.accelerator cpu",
                 code=2)


def test_a_train_file_that_holds_the_dev_file(workdir, capsys):
    """The common SST copy whose train.txt is train + dev (9,645 lines): refused before training."""
    folder = write_sst(workdir / "sst")
    train = (folder / "train.txt").read_text()
    (folder / "train.txt").write_text(train + (folder / "dev.txt").read_text())
    expect_error(capsys, workdir, ["fit", *sst_args(folder)], "train split of sst (train.txt) contains all 2 trees "
                 "of the dev split (dev.txt)", "use the official train file without the dev examples",
                 "python -m lit_rnncells.data prepare sst")


def test_parallel_training_files_that_hold_the_valid_files(workdir, capsys):
    folder = write_parallel(workdir / "par", train_de=DE * 8 + DE_HELD, train_en=EN * 8 + EN_HELD)
    expect_error(capsys, workdir, ["fit", *parallel_args(folder)], "contains all 4 pairs of the dev split "
                 "(valid.de, valid.en)", "remove the dev examples from the train files")


EXPLODING = ["--data.init_args.train_size", "640", "--model.init_args.optimizer.init_args.lr", "1e6",
             "--trainer.gradient_clip_val", "null", "--trainer.max_epochs", "3"]


def test_a_finite_loss_that_explodes(workdir, capsys):
    expect_error(capsys, workdir, ["fit", "--config", LOGIC, *TINY_LOGIC, *QUIET, *EXPLODING],
                 "The training loss exploded", "10x its running minimum", "for 10 consecutive steps",
                 "--divergence_threshold 0", code=1, new_config_ok=True)


def test_an_exploded_loss_skips_the_checkpoints_due_and_stops_after_its_patience(workdir, capsys, monkeypatch):
    """Checkpoints due every 3 steps while the loss stays exploded: each is skipped with a line (none is written,
    expect_error checks), and the run stops at the patience, not at the first save."""
    said = []
    real_print = print
    monkeypatch.setattr("builtins.print", lambda *a, **k: (said.append(" ".join(map(str, a))), real_print(*a, **k)))
    expect_error(capsys, workdir, ["fit", "--config", LOGIC, *TINY_LOGIC, *QUIET, *EXPLODING,
                                   "--trainer.val_check_interval", "3"],
                 "The training loss exploded", "for 10 consecutive steps", code=1, new_config_ok=True)
    assert sum("skipped the checkpoint due now" in line for line in said) >= 2


def test_a_divergence_threshold_between_0_and_1(workdir, capsys):
    expect_error(capsys, workdir, ["fit", "--config", LOGIC, *TINY_LOGIC, *QUIET, "--divergence_threshold", "0.5"],
                 "divergence_threshold must be 0 (off) or above 1", code=2)


REVIEWS = {"pos": ["a great film , loved it", "wonderful acting and a fine story"] * 4,
           "neg": ["a dull film , hated it", "terrible acting and a weak story"] * 4}


def write_imdb(folder: Path, empty: Optional[str] = None) -> Path:
    """A tiny extracted ``aclImdb`` folder; ``empty`` (e.g. ``"train/pos"``) is left without reviews."""
    for split in ("train", "test"):
        for label, texts in REVIEWS.items():
            sub = folder / "aclImdb" / split / label
            sub.mkdir(parents=True, exist_ok=True)
            if f"{split}/{label}" != empty:
                for i, text in enumerate(texts):
                    (sub / f"{i}_{8 if label == 'pos' else 2}.txt").write_text(text, encoding="utf-8")
    return folder / "aclImdb"


def imdb_args(folder: Path) -> List[str]:
    return ["--config", IMDB, *QUIET, "--data.init_args.data_dir", str(folder), "--data.init_args.val_size", "4",
            "--data.init_args.cache_dir", "", "--trainer.max_steps", "1", "--model.init_args.hidden_size", "8",
            "--model.init_args.embedding_size", "8", "--test_after_fit", "false"]


@pytest.mark.parametrize("empty", ["train/pos", "test/neg"])
def test_an_imdb_split_without_one_class(empty, workdir, capsys):
    folder = write_imdb(workdir / "imdb", empty=empty)
    label = "positive" if empty.endswith("pos") else "negative"
    expect_error(capsys, workdir, ["fit", *imdb_args(folder)], f"has no {label} reviews",
                 str(folder / empty), code=2)


@pytest.fixture(scope="module")
def seq2seq_checkpoint(tmp_path_factory) -> Dict[str, Path]:
    base = tmp_path_factory.mktemp("s2s")
    folder = write_parallel(base / "par")
    assert run(["fit", *parallel_args(folder), "--trainer.logger", "false", "--trainer.default_root_dir",
                str(base / "run")]) == 0
    return {"data": folder, "ckpt": next((base / "run").rglob("*.ckpt"))}


def test_a_predict_line_longer_than_the_default_input_limit(seq2seq_checkpoint, workdir, capsys):
    lines = workdir / "long.de"
    lines.write_text("ein mann .\n" + " ".join(["zwei hunde spielen ."] * 400) + "\n")
    out = workdir / "out.txt"
    expect_error(capsys, workdir, ["predict", *parallel_args(seq2seq_checkpoint["data"]), "--ckpt_path",
                                   str(seq2seq_checkpoint["ckpt"]), "--data.init_args.predict_file", str(lines),
                                   "--predict_output", str(out)],
                 "Line 2 of", "more than max_input_length=1024", "--data.init_args.max_input_length", code=2)
    assert not out.exists()


def test_sigterm_stops_seq2seq_predict_between_batches(seq2seq_checkpoint, workdir, capsys):
    import json
    lines = workdir / "many.de"
    lines.write_text("".join(DE[i % len(DE)] + "\n" for i in range(12)))
    out = workdir / "out.txt"
    stop = {"class_path": "tests.examples.recorders.SigtermInPredict", "init_args": {"batch": 0}}
    old = os.getcwd()
    os.chdir(ROOT)  # tests.examples imports from the repository root
    try:
        code = run(["predict", *parallel_args(seq2seq_checkpoint["data"]), "--ckpt_path",
                    str(seq2seq_checkpoint["ckpt"]), "--data.init_args.predict_file", str(lines),
                    "--data.init_args.eval_batch_size", "2", "--predict_output", str(out),
                    "--trainer.callbacks+=" + json.dumps(stop)])
    finally:
        os.chdir(old)
    err = capsys.readouterr().err
    assert code == 143, err[-2000:]
    assert "SIGTERM during predict: stopped before batch 2 of 6" in err
    assert not out.exists()


def test_a_binary_predict_file(seq2seq_checkpoint, workdir, capsys):
    binary = workdir / "photo.jpg"
    binary.write_bytes(b"\xff\xd8\xff\xe0" + os.urandom(2000))
    expect_error(capsys, workdir, ["predict", *parallel_args(seq2seq_checkpoint["data"]), "--ckpt_path",
                                   str(seq2seq_checkpoint["ckpt"]), "--data.init_args.predict_file", str(binary)],
                 str(binary), "is not UTF-8 text", code=2)


def test_a_binary_classification_predict_file(workdir, capsys, tmp_path):
    folder = write_sst(tmp_path / "sst")
    assert run(["fit", *sst_args(folder), "--trainer.logger", "false", "--trainer.default_root_dir",
                str(tmp_path / "run"), "--trainer.val_check_interval", "1.0"]) == 0
    binary = workdir / "blob.bin"
    binary.write_bytes(b"\x80\x81" * 100)
    expect_error(capsys, workdir, ["predict", *sst_args(folder), "--ckpt_path", str(next((tmp_path / "run").rglob(
        "*.ckpt"))), "--data.init_args.predict_file", str(binary)], "predict_file", str(binary), "is not UTF-8 text")


def test_predict_output_under_a_file(earlier, workdir, capsys):
    (workdir / "notes.txt").write_text("mine\n")
    expect_error(capsys, workdir, ["predict", "--config", LOGIC, *TINY_LOGIC, "--ckpt_path", str(earlier["logic"]),
                                   "--predict_output", "notes.txt/out.txt"],
                 "--predict_output 'notes.txt/out.txt' is under 'notes.txt', which is a file", code=2)
    assert (workdir / "notes.txt").read_text() == "mine\n"


def test_predict_output_that_is_a_folder(earlier, workdir, capsys):
    (workdir / "outdir").mkdir()
    expect_error(capsys, workdir, ["predict", "--config", LOGIC, *TINY_LOGIC, "--ckpt_path", str(earlier["logic"]),
                                   "--predict_output", "outdir"], "--predict_output 'outdir' is a folder", code=2)


def test_a_logger_save_dir_under_a_file(workdir, capsys):
    (workdir / "notes.txt").write_text("mine\n")
    expect_error(capsys, workdir, ["fit", "--config", LOGIC, *TINY_LOGIC, *QUIET, "--trainer.logger",
                                   "lightning.pytorch.loggers.CSVLogger", "--trainer.logger.save_dir", "notes.txt/runs"],
                 "--trainer.logger.save_dir 'notes.txt/runs' is under 'notes.txt', which is a file", code=2)


def test_a_default_root_dir_that_is_a_file(workdir, capsys):
    (workdir / "notes.txt").write_text("mine\n")
    expect_error(capsys, workdir, ["fit", "--config", LOGIC, *TINY_LOGIC, *QUIET, "--trainer.logger", "false",
                                   "--trainer.default_root_dir", "notes.txt"],
                 "--trainer.default_root_dir 'notes.txt' is a file, not a folder", code=2)


def test_a_run_dir_under_a_file(workdir, capsys):
    (workdir / "notes.txt").write_text("mine\n")
    expect_error(capsys, workdir, ["fit", "--config", LOGIC, *TINY_LOGIC, *QUIET, "--run_dir", "notes.txt/run"],
                 "--run_dir 'notes.txt/run' is under 'notes.txt', which is a file", code=2)
    expect_error(capsys, workdir, ["fit", "--config", LOGIC, *TINY_LOGIC, *QUIET, "--run_dir", "notes.txt"],
                 "--run_dir 'notes.txt' is a file, not a folder", code=2)


def test_an_embeddings_file_with_nan(workdir, capsys):
    folder = write_sst(workdir / "sst")
    vectors = workdir / "glove.txt"
    vectors.write_text("good " + " ".join(["0.1"] * 8) + "\nfilm " + " ".join(["nan"] * 8) + "\n")
    expect_error(capsys, workdir, ["fit", *sst_args(folder), "--model.init_args.pretrained_embeddings",
                                   str(vectors)], "glove.txt, line 2", "'film'", "nan or inf")


CELL_SPEC_PROBES = {
    "a misspelt option in a cell spec": (['{"class_path": "SatMZU", "init_args": {"zonez": 4}}'],
                                         ["SatMZU has no option 'zonez'. Did you mean 'zones'?"]),
    "a misspelt cell option as a flag": (["SatMZU", "--model.init_args.cell.zonez", "4"],
                                         ["SatMZU has no option 'zonez' (--model.init_args.cell.zonez). Did you mean "
                                          "'zones'? SatMZU accepts: zones, filter_size,"]),
    "an option of another cell as a flag": (["GRU", "--model.init_args.cell.zones", "4"],
                                            ["GRU has no option 'zones' (--model.init_args.cell.zones). GRU accepts: "
                                             "update_bias. 'zones' is an option of CapMZU, GcnMZU, SatMZU."]),
    "an option given to a cell that takes none": (["LSTM", "--model.init_args.cell.init_args.zones", "4"],
                                                  ["LSTM has no option 'zones' (--model.init_args.cell.init_args."
                                                   "zones). LSTM takes no options. 'zones' is an option of"]),
    "a misspelt cell option as an init_args flag": (["SatMZU", "--model.init_args.cell.init_args.zonez", "4"],
                                                    ["SatMZU has no option 'zonez' (--model.init_args.cell.init_args."
                                                     "zonez). Did you mean 'zones'?"]),
    "a misspelt option of the cell a wrapper wraps": (
        ["MultiChannel", "--model.init_args.cell.init_args.cell", "SatMZU",
         "--model.init_args.cell.init_args.cell.init_args.zonez", "4"],
        ["SatMZU has no option 'zonez' (--model.init_args.cell.init_args.cell.init_args.zonez). Did you mean "
         "'zones'?"]),
    "an option given to a user's cell": (  # GainRNN does not register itself: the registry stays as it was
        ["tests.examples.leaderboard_cell.GainRNN", "--model.init_args.cell.init_args.zones", "4"],
        ["GainRNN has no option 'zones' (--model.init_args.cell.init_args.zones). GainRNN takes no options."]),
    "compare's Name(option=value) form of a user's cell": (  # was "Unknown cell", its example naming it twice over
        ["tests.examples.leaderboard_cell:GainRNN(gain=2)"],
        ["Cell 'tests.examples.leaderboard_cell:GainRNN(gain=2)': GainRNN has no option 'gain'. GainRNN takes no "
         "options. Name(key=value) is compare's --cells form; here give the cell's options as --model.init_args.cell "
         '\'{"class_path": "tests.examples.leaderboard_cell.GainRNN", "init_args": {"gain": 2}}\'.']),
    "compare's Name(option=value) form of a user's module that does not import": (
        ["tests.examples.no_such_module.Cell(x=1)"],
        ["Cell 'tests.examples.no_such_module.Cell(x=1)' cannot be imported: there is no module "
         "'tests.examples.no_such_module'"]),
    "compare's Name(option=value) form with a misspelt option": (
        ["SatMZU(zonez=4)"], ["SatMZU has no option 'zonez'. Did you mean 'zones'?", "compare's --cells form",
                              '--model.init_args.cell \'{"class_path": "SatMZU", "init_args": {"zones": 4}}\'']),
}


@pytest.mark.parametrize("probe", list(CELL_SPEC_PROBES))
def test_cell_spec_mistakes(probe, workdir, capsys):
    extra, fragments = CELL_SPEC_PROBES[probe]
    expect_error(capsys, workdir, ["fit", "--config", LOGIC, *TINY_LOGIC, *QUIET, "--model.init_args.cell", *extra],
                 *fragments, code=2)


def test_resume_with_another_joint_vocabulary(seq2seq_checkpoint, workdir, capsys):
    expect_error(capsys, workdir, ["fit", *parallel_args(seq2seq_checkpoint["data"]), "--ckpt_path",
                                   str(seq2seq_checkpoint["ckpt"]), "--data.init_args.joint_vocabulary", "false",
                                   "--trainer.max_steps", "2"],
                 "trained with joint_vocabulary=True, this data has joint_vocabulary=False",
                 "--data.init_args.joint_vocabulary true")


def test_another_tokenizer_says_what_differs(seq2seq_checkpoint, workdir, capsys):
    expect_error(capsys, workdir, ["fit", *parallel_args(seq2seq_checkpoint["data"]), "--ckpt_path",
                                   str(seq2seq_checkpoint["ckpt"]), "--data.init_args.subword_vocab_size", "290",
                                   "--trainer.max_steps", "2"],
                 "source tokenizer differs from this data's: the checkpoint's has")


# The other commands: compare, reproduce, analysis (their own one-line errors, exit 2, nothing written).
def other_command_error(capsys, folder: Path, main, args: List[str], *fragments: str) -> str:
    before = snapshot(folder)
    old = os.getcwd()
    os.chdir(folder)
    try:
        try:
            code = main(args)
        except SystemExit as stop:
            code = stop.code
    finally:
        os.chdir(old)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert code == 2 and len(lines) == 1, err[-3000:]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert snapshot(folder) == before
    return lines[0]


def test_compare_out_under_a_file(workdir, capsys):
    from lit_rnncells.experiments.compare import main as compare_main
    (workdir / "notes.txt").write_text("mine\n")
    other_command_error(capsys, workdir, compare_main, ["--config", LOGIC, "--cells", "GRU", "--out", "notes.txt/cmp"],
                        "--out 'notes.txt/cmp' is under 'notes.txt', which is a file")


def test_compare_match_params_with_an_unknown_cell(workdir, capsys):
    from lit_rnncells.experiments.compare import main as compare_main
    other_command_error(capsys, workdir, compare_main, ["--config", LOGIC, "--cells", "GRU", "--match-params",
                                                        "GRUU@8", "--out", "cmp"],
                        "--match-params 'GRUU@8': Unknown cell 'GRUU'. Did you mean 'GRU'?")


def test_compare_a_misspelt_task_class_in_the_config(workdir, capsys):
    """compare used to print the whole model dict the parser echoed."""
    from lit_rnncells.experiments.compare import main as compare_main
    (workdir / "bad.yaml").write_text(Path(LOGIC).read_text().replace("LogicEvaluator", "LogicEvaluatr"))
    line = other_command_error(capsys, workdir, compare_main,
                               ["--config", "bad.yaml", "--cells", "GRU", "--out", "cmp"],
                               "Unknown task class 'lit_rnncells.tasks.LogicEvaluatr' (--model). Did you mean "
                               "'LogicEvaluator'?")
    assert "init_args" not in line and "embedding_size" not in line


def test_compare_a_misspelt_cell_option(workdir, capsys):
    from lit_rnncells.experiments.compare import main as compare_main
    other_command_error(capsys, workdir, compare_main, ["--config", LOGIC, "--cells", "SatMZU(zonez=4)", "--out",
                                                        "cmp"], "SatMZU has no option 'zonez'. Did you mean 'zones'?")


@pytest.mark.parametrize("cells, fragments", [
    (["GRU", "SatMZU(zones=0)"], ["The cell of run SatMZU-zones=0-s1 is refused at hidden size 8: zones must be a "
                                  "positive integer, got 0"]),
    (["MultiChannel(cell=GRU,block_size=0)"], ["refused at hidden size 8: block_size must be a positive integer"]),
    (["GRU", "CARU(content_weight_bias=abc)"], ["The arguments of run CARU-content_weight_bias=abc-s1 are refused",
                                                "expects a float"]),  # a type the parser refuses, in the 2nd cell
], ids=["zones=0", "block_size=0", "a float option given text"])
def test_compare_a_cell_option_value_the_cell_refuses(workdir, capsys, cells, fragments):
    """The option exists but its value is refused when the cell is built: one line before any run starts (the
    runs used to start, each fail with the message deep in its log, and compare said to rerun them)."""
    from lit_rnncells.experiments.compare import main as compare_main
    other_command_error(capsys, workdir, compare_main, ["--config", LOGIC, "--cells", *cells, "--seed-list", "1",
                                                        "--out", "cmp"], *fragments)


def test_compare_a_cell_the_hidden_size_does_not_suit(workdir, capsys):
    """Zones must divide the hidden size: checked at each run's own hidden size (the config's 8; --hidden-size 9)."""
    from lit_rnncells.experiments.compare import Budget, CompareError, main as compare_main, plan
    from lit_rnncells.experiments.compare.planning import check_models

    args = ["--config", LOGIC, "--cells", "SatMZU(zones=3)", "--seed-list", "1", "--out", "cmp"]
    other_command_error(capsys, workdir, compare_main, args,
                        "refused at hidden size 8: hidden_size=8 is not divisible by zones=3")
    for hidden, refused in ((8, True), (9, False)):
        specs = plan(LOGIC, [{"class_path": "SatMZU", "init_args": {"zones": 3}}], [1], Budget.parse("steps=1"),
                     workdir / "cmp", [], hidden, None, "val/loss", "min", [], False, True, io.StringIO())
        if refused:
            with pytest.raises(CompareError, match="not divisible by zones=3"):
                check_models(specs, local=True)
        else:
            check_models(specs, local=True)


def test_compare_a_grid_point_whose_value_the_model_refuses(workdir, capsys):
    """The config builds, one --vary value does not: refused before any run, naming the value."""
    from lit_rnncells.experiments.compare import main as compare_main
    other_command_error(capsys, workdir, compare_main, ["--config", LOGIC, "--cells", "GRU", "--seed-list", "1",
                                                        "--vary", "model.init_args.hidden_size=8,0", "--out", "cmp"],
                        "The config with --model.init_args.hidden_size 0 is refused: hidden_size must be a positive "
                        "integer, got 0")


def test_compare_refuses_a_config_its_runs_here_could_not_build_and_leaves_it_to_runs_elsewhere(workdir, capsys):
    """Each grid point's model is built before any run. With the runs on this machine a config that does not build
    (its data folder missing here) is one line: every run would fail on it. With the runs elsewhere (a Slurm
    cluster's nodes, where the data may be) the plan stands and the runs report it; so does a dry run's, which
    shows the plan on a fresh clone without the data."""
    from lit_rnncells.experiments.compare import Budget, main as compare_main, plan
    from lit_rnncells.experiments.compare.planning import check_models

    args = ["--config", LM, "--cells", "GRU", "SatMZU(zones=0)", "--seed-list", "1", "--out", "cmp", "--",
            "--data.init_args.data_dir", str(workdir / "elsewhere")]
    other_command_error(capsys, workdir, compare_main, args, "The config with --data.init_args.data_dir",
                        "elsewhere' does not exist")
    assert compare_main(args[:9] + ["--dry-run"] + args[9:]) == 0
    assert "dry run: 2 runs planned" in capsys.readouterr().err
    specs = plan(LM, ["GRU", {"class_path": "SatMZU", "init_args": {"zones": 0}}], [1], Budget.parse("steps=1"),
                 workdir / "cmp", [], None, None, "val/loss", "min", args[-2:], False, True, io.StringIO())
    check_models(specs, local=False)  # no error: left to the runs


def test_compare_over_finished_runs_needs_no_data_here(tmp_path, capsys, monkeypatch):
    """The check above builds the models only of runs that will train: a rerun over finished runs (to redraw the
    table on a machine without the data, say) keeps them and writes its outputs."""
    from lit_rnncells.experiments.compare import main as compare_main

    from .test_language_model import ptb_char_corpus

    monkeypatch.setenv("WANDB_MODE", "disabled")
    monkeypatch.setenv("LIT_RNNCELLS_CACHE", str(tmp_path / "cache"))
    corpus = ptb_char_corpus(tmp_path / "ptb")
    args = ["--config", str(CONFIGS / "lm" / "ptb_char_gru.yaml"), "--cells", "GRU", "--seed-list", "1",
            "--hidden-size", "8", "--budget", "steps=2", "--out", str(tmp_path / "cmp"), "--no-wandb", "--",
            "--data.init_args.data_dir", str(corpus), "--model.init_args.embedding_size", "8",
            "--data.init_args.batch_size", "4", "--data.init_args.bptt", "10", "--trainer.val_check_interval", "2",
            "--trainer.limit_val_batches", "2", "--trainer.limit_test_batches", "2"]
    assert compare_main(args) == 0, capsys.readouterr().err[-3000:]
    shutil.rmtree(corpus)
    capsys.readouterr()
    assert compare_main(args) == 0
    err = capsys.readouterr().err
    assert "GRU-h8-s1 finished earlier, kept" in err and "error:" not in err
    assert (tmp_path / "cmp" / "runs.csv").is_file()


def test_compare_match_params_with_a_cell_that_refuses_every_size(workdir, capsys):
    from lit_rnncells.experiments.compare import main as compare_main
    other_command_error(capsys, workdir, compare_main, ["--config", LOGIC, "--cells", "GRU", "SatMZU(zones=0)",
                                                        "--match-params", "GRU@8", "--out", "cmp"],
                        "SatMZU accepts none of the hidden sizes 1..256; check its options (at 256: zones must be a "
                        "positive integer, got 0")


def test_compare_over_an_unfinished_run_started_with_other_settings(workdir, capsys):
    """A rerun resumes unfinished runs from their checkpoints; one that was started with other settings (here
    a shorter budget; a longer one goes on from the checkpoint) is refused, and its checkpoint kept (issue 19,
    item 19)."""
    import io
    import json
    from dataclasses import asdict

    import torch

    from lit_rnncells.experiments.compare import Budget, main as compare_main, plan

    spec = plan(LOGIC, ["GRU"], [1], Budget.parse("epochs=2"), Path("cmp-resume"), [], 4, None, "val/acc", "max", [],
                False, True, io.StringIO())[0]
    folder = workdir / spec.folder
    (folder / "checkpoints").mkdir(parents=True)
    (folder / "spec.json").write_text(json.dumps(asdict(spec)))
    torch.save({"state_dict": {}, "global_step": 3}, folder / "checkpoints" / "interrupted.ckpt")
    other_command_error(capsys, workdir, compare_main, ["--config", LOGIC, "--cells", "GRU", "--seed-list", "1",
                                                        "--hidden-size", "4", "--budget", "epochs=1", "--no-wandb",
                                                        "--out", "cmp-resume"],
                        f"The run folder {spec.folder} holds an unfinished run, resumable from",
                        "started with other settings (budget); rerun with the settings it was started with")


def test_reproduce_report_under_a_file(workdir, capsys):
    from lit_rnncells.experiments.reproduce import main as reproduce_main
    (workdir / "notes.txt").write_text("mine\n")
    other_command_error(capsys, workdir, reproduce_main, ["mzu", "--out", "runs/rep", "--report", "notes.txt/mzu.md",
                                                          "--read-only"],
                        "--report 'notes.txt/mzu.md' is under 'notes.txt', which is a file")


def test_analysis_output_under_a_file(earlier, workdir, capsys):
    from lit_rnncells.analysis.__main__ import main as analysis_main
    (workdir / "notes.txt").write_text("mine\n")
    other_command_error(capsys, workdir, analysis_main, ["mufuru-ops", "--ckpt_path", str(earlier["logic"]),
                                                         "--output", "notes.txt/ops.png"],
                        "--output 'notes.txt/ops.png' is under 'notes.txt', which is a file")


def test_analysis_output_that_is_no_image_format(earlier, workdir, capsys):
    """A figure written to a name matplotlib cannot write (a checkpoint's, a text file's) is refused before the
    checkpoint is read: savefig refused it only after the whole evaluation, and the user's file stays as it was."""
    from lit_rnncells.analysis.__main__ import main as analysis_main
    (workdir / "notes.txt").write_text("mine\n")
    other_command_error(capsys, workdir, analysis_main, ["mufuru-ops", "--ckpt_path", str(earlier["logic"]),
                                                         "--output", "notes.txt"],
                        "--output 'notes.txt' ends in '.txt', which is no image format matplotlib writes",
                        "give a file ending in .png")
    assert (workdir / "notes.txt").read_text() == "mine\n"


def test_analysis_output_without_an_extension_is_the_png_matplotlib_writes(earlier, tmp_path, capsys):
    from lit_rnncells.analysis.__main__ import main as analysis_main
    assert analysis_main(["mufuru-ops", "--ckpt_path", str(earlier["logic"]), "--output", str(tmp_path / "ops")]) == 0
    assert f"wrote {tmp_path / 'ops.png'}" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ops.png"]


# --- run folders (issue 19, items 19 and 20) -----------------------------------------------------------------
def test_a_run_folder_holding_another_run(workdir, capsys):
    """A second fit named into a folder that holds another run's config, checkpoints and logs is refused before
    it writes anything (two fits used to share metrics.csv and lose checkpoints)."""
    earlier_run = next(workdir.rglob("config.yaml")).parent
    expect_error(capsys, workdir, ["fit", "--config", LOGIC, *TINY_LOGIC, *QUIET, "--run_dir", str(earlier_run)],
                 f"The run folder {earlier_run} already holds another run", "--run_dir", code=2)


def test_a_run_folder_whose_fit_was_refused_at_its_start_takes_the_corrected_fit(workdir, capsys):
    """Lightning writes the config before it refuses a setting it can judge only with the data loaded; that folder
    held no run, yet the corrected command with the same --run_dir was refused as "already holds another run"."""
    folder = workdir / "runs" / "interval"
    args = ["fit", "--config", LOGIC, *TINY_LOGIC, *QUIET, "--trainer.logger", "false", "--run_dir", str(folder)]
    expect_error(capsys, workdir, [*args, "--trainer.val_check_interval", "1000"], "is more than the 2 training")
    assert not folder.exists()
    assert run(args) == 0 and (folder / "config.yaml").is_file() and any((folder / "checkpoints").iterdir())


def test_a_run_folder_another_fit_is_writing_to(workdir, capsys):
    """A folder whose lock another process holds (a fit still training, e.g. an orphaned compare child)."""
    import fcntl

    from lit_rnncells.command.run_folder import LOCK_NAME

    busy = workdir / "busy"
    busy.mkdir()
    fd = os.open(busy / LOCK_NAME, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, b"31337")
        expect_error(capsys, workdir, ["fit", "--config", LOGIC, *TINY_LOGIC, *QUIET, "--run_dir", str(busy)],
                     "is in use by another fit (process 31337)", "--run_dir", code=2)
    finally:
        os.close(fd)


def test_the_catalogue_is_large_enough():
    """And as large as docs/reliability.md says ("over N such mistakes")."""
    import re

    probes = len(CLI_PROBES) + len(LM_PROBES) + sum(1 for name in globals() if name.startswith("test_")) - 3
    claim = re.search(r"over (\d+) such mistakes", (ROOT / "docs" / "reliability.md").read_text())
    assert claim is not None and probes > int(claim[1]) >= 40, (probes, claim)


# --- issue 33, section 4 -----------------------------------------------------------------------------------
@pytest.mark.parametrize("task", ["imdb", "absa", "seq2seq"])
def test_a_blank_predict_line_is_refused_the_same_way_by_every_task(task, seq2seq_checkpoint, workdir, capsys,
                                                                     tmp_path):
    """IMDB used to label blank lines (``positive 0.5540`` each); every task now names the line, in one sentence."""
    lines = workdir / "input.txt"
    if task == "seq2seq":
        args, ckpt = parallel_args(seq2seq_checkpoint["data"]), seq2seq_checkpoint["ckpt"]
        lines.write_text("ein mann .\n\nzwei hunde .\n")
    else:
        args = imdb_args(write_imdb(tmp_path / "imdb")) if task == "imdb" else absa_args(write_semeval(tmp_path / "s"))
        assert run(["fit", *args, "--trainer.logger", "false", "--trainer.default_root_dir",
                    str(tmp_path / "run")]) == 0
        ckpt = next((tmp_path / "run").rglob("*.ckpt"))
        lines.write_text("a good film\t film\n  \nbad\tbad\n" if task == "absa" else "a good film\n  \nbad\n")
    expect_error(capsys, workdir, ["predict", *args, "--ckpt_path", str(ckpt), "--data.init_args.predict_file",
                                   str(lines)], "Line 2 of", "is empty; evaluation and predict inputs need text on "
                                                             "every line", code=2)


def write_corpus(folder: Path) -> Path:
    """A tiny character corpus ``{train,valid,test}.txt`` of random word sequences (splits that do not overlap)."""
    import random

    rng = random.Random(0)
    words = "the quick brown fox jumps over lazy dog a cat sat on mat and ran far away".split()
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", 300), ("valid", 40), ("test", 40)):
        (folder / f"{split}.txt").write_text("".join(" ".join(rng.choices(words, k=8)) + "\n" for _ in range(n)))
    return folder


def corpus_args(folder: Path) -> List[str]:
    return ["--config", LM, *QUIET, *TINY_LM, "--data.init_args.dataset", "text", "--data.init_args.level", "char",
            "--data.init_args.data_dir", str(folder)]


def test_variable_bptt_with_a_fractional_validation_interval(workdir, capsys):
    """Lightning refused it only once training started, in a 62-line traceback."""
    expect_error(capsys, workdir, ["fit", *corpus_args(write_corpus(workdir / "corpus")), "--data.init_args."
                                   "variable_bptt", "true", "--trainer.val_check_interval", "0.5"],
                 "--trainer.val_check_interval 0.5 is a fraction of an epoch", "variable_bptt true",
                 "number of training batches", code=2)


def test_a_value_outside_an_options_choices_names_the_choices(workdir, capsys):
    """jsonargparse reported it as '--data rejects the value, got "NestedArg(key='level', val='chars')"'."""
    expect_error(capsys, workdir, ["fit", *corpus_args(write_corpus(workdir / "corpus")), "--data.init_args.level",
                                   "chars"],
                 "--data.init_args.level expects one of 'char', 'word', got 'chars'; fix that value", code=2)
    expect_error(capsys, workdir, ["fit", *corpus_args(write_corpus(workdir / "corpus")),
                                   "--model.init_args.regularization.dropout", "abc"],  # a field of an option group
                 "--model.init_args.regularization.dropout expects a float, got 'abc'; fix that value", code=2)


def test_variable_bptt_with_a_fraction_of_the_training_batches(workdir, capsys):
    """The windows' number is not known in advance: Lightning refused a fraction at the fit's start, in a traceback."""
    expect_error(capsys, workdir, ["fit", *corpus_args(write_corpus(workdir / "corpus")), "--data.init_args."
                                   "variable_bptt", "true", "--trainer.val_check_interval", "1.0",
                                   "--trainer.limit_train_batches", "0.5"],
                 "--trainer.limit_train_batches 0.5 is a fraction of an epoch, but with --data.init_args.variable_bptt "
                 "true", "give limit_train_batches as a number of training batches", code=2)


def test_a_fraction_of_a_stream_of_unknown_length_that_lightning_refuses_is_one_sentence():
    """A user's DataModule whose training batches are an IterableDataset without a length: Lightning's own refusal,
    raised by the call its fit loop makes, read as one sentence."""
    from lightning.pytorch.trainer.connectors.data_connector import _parse_num_batches
    from lightning.pytorch.trainer.states import RunningStage

    from lit_rnncells.command.errors import user_message

    with pytest.raises(Exception) as refused:
        _parse_num_batches(RunningStage.TRAINING, float("inf"), 0.5)
    assert user_message(refused.value) == (
        "--trainer.limit_train_batches takes a number of batches here (an int, e.g. 100) or 1.0, not a fraction: the "
        "training data is a stream whose number of batches is not known in advance (e.g. a language model's "
        "variable_bptt windows).")


PLATEAU = ["--model.init_args.lr_scheduler", "torch.optim.lr_scheduler.ReduceLROnPlateau", "--trainer.max_epochs",
           "2", "--trainer.max_steps", "-1", "--trainer.limit_train_batches", "2"]


@pytest.mark.parametrize("no_validation, message", [
    (["--trainer.limit_val_batches", "0"], "--trainer.limit_val_batches 0 turns validation off"),
    (["--trainer.limit_val_batches", "0.0"], "--trainer.limit_val_batches 0 turns validation off"),
    (["--trainer.check_val_every_n_epoch", "2"], "--trainer.check_val_every_n_epoch 2 leaves epochs without"),
])
def test_a_plateau_scheduler_without_validation(workdir, capsys, no_validation, message):
    """Lightning stopped at the end of the first epoch, in a traceback ("ReduceLROnPlateau conditioned on metric
    val/loss which is not available"), after that epoch's training."""
    expect_error(capsys, workdir, ["fit", *corpus_args(write_corpus(workdir / "corpus")), *PLATEAU, *no_validation],
                 message, "the ReduceLROnPlateau scheduler steps on val/loss", "--model.init_args.lr_scheduler null",
                 code=2)


def test_a_plateau_scheduler_on_a_training_metric_needs_no_validation(workdir, capsys):
    """The check refuses only a validation metric: a plateau on train/loss trains both epochs with validation off."""
    code = run(["fit", *corpus_args(write_corpus(workdir / "corpus")), *PLATEAU, "--trainer.limit_val_batches", "0",
                "--model.init_args.scheduler_monitor", "train/loss", "--trainer.logger", "false",
                "--trainer.default_root_dir", str(workdir / "runs")])
    assert code == 0, capsys.readouterr().err[-2000:]
    assert len(list((workdir / "runs").rglob("*.ckpt"))) >= 1


@pytest.mark.parametrize("monitor_args, fragments", [
    (["--model.init_args.lr_scheduler", "torch.optim.lr_scheduler.ReduceLROnPlateau",
      "--model.init_args.scheduler_monitor", "val/los"],
     ("the ReduceLROnPlateau scheduler monitors val/los", "set --model.init_args.scheduler_monitor to val/loss.")),
    (["--trainer.callbacks+=EarlyStopping", "--trainer.callbacks.monitor", "val/bcp"],
     ("the EarlyStopping callback monitors val/bcp", "it logs val/bpc, val/loss, val/ppl", "to val/bpc.")),
])
def test_a_misspelt_monitor_stops_before_training(workdir, capsys, monitor_args, fragments):
    """Lightning read a misspelt monitor only at the first epoch's end or validation, after that training, and
    stopped in a traceback; the sanity validation shows the task's validation metrics before the first step."""
    line = expect_error(capsys, workdir, ["fit", *corpus_args(write_corpus(workdir / "corpus")), *PLATEAU[2:],
                                          "--trainer.logger", "false", *monitor_args], *fragments)
    assert "LanguageModel's validation does not log" in line


def test_monitors_lists_validation_metrics_a_run_reads():
    """What the check compares: plateau schedulers', checkpoints' and strict early stoppings' validation metrics;
    a training metric (first logged during training) and a non-strict EarlyStopping are left out."""
    from types import SimpleNamespace

    from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint

    from lit_rnncells.command.monitor_check import monitors

    plateau = SimpleNamespace(reduce_on_plateau=True, monitor="val/acc", scheduler=SimpleNamespace())
    stepwise = SimpleNamespace(reduce_on_plateau=False, monitor="val/x", scheduler=SimpleNamespace())
    trainer = SimpleNamespace(lr_scheduler_configs=[plateau, stepwise], callbacks=[
        ModelCheckpoint(monitor="val_loss"), ModelCheckpoint(monitor="train/loss"), ModelCheckpoint(),
        EarlyStopping(monitor="val/bleu"), EarlyStopping(monitor="val/ppl", strict=False)])
    assert [m for m, _, _ in monitors(trainer)] == ["val/acc", "val_loss", "val/bleu"]


TIMER = ["--trainer.callbacks+=lightning.pytorch.callbacks.Timer"]


def test_a_callback_with_an_enum_default_names_the_option_to_give_as_text(workdir, capsys):
    """Lightning's Timer defaults ``interval`` to ``Interval.step``, which jsonargparse cannot write back: a
    40-line traceback through jsonargparse for any use of Timer. The line names the option and the text that works,
    and that text trains."""
    args = ["fit", *corpus_args(write_corpus(workdir / "corpus")), "--trainer.logger", "false"]
    expect_error(capsys, workdir, [*args, *TIMER], "Timer's option interval defaults to the enum Interval.step",
                 "--trainer.callbacks.interval step.")
    code = run([*args, *TIMER, "--trainer.callbacks.interval", "step", "--trainer.default_root_dir",
                str(workdir / "timed")])
    assert code == 0, capsys.readouterr().err[-2000:]


def test_an_enum_default_outside_the_callbacks_is_fixed_in_the_init_args():
    """The same jsonargparse failure for a class that is not a callback: the fix names the init_args entry."""
    from lit_rnncells.command.errors import _enum_default_message

    text = ("Errors:\n  - ('cannot represent an object', <Mode.fast: 'fast'>)\nGiven value: Namespace(class_path="
            "'mypkg.Scheduler', init_args=Namespace(steps=3, mode=<Mode.fast: 'fast'>))")
    assert _enum_default_message(text) == ("Scheduler's option mode defaults to the enum Mode.fast, which jsonargparse "
                                           "cannot write back; give it as text in the class's init_args: mode: fast.")
    assert _enum_default_message("Errors: something else") is None


def run_unprivileged(args: List[str], cwd: Path, env: Optional[Dict[str, str]] = None):
    """``python -m lit_rnncells <args>`` in a subprocess where folder permissions hold: as root, through
    ``setpriv`` without capabilities (so a read-only folder is read-only); skipped when that is not possible."""
    import subprocess
    import sys

    prefix: List[str] = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: a read-only folder cannot be made read-only for root")
        prefix = ["setpriv", "--inh-caps=-all", "--bounding-set=-all", "--"]
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "disabled", **(env or {})}
    done = subprocess.run([*prefix, sys.executable, "-m", "lit_rnncells", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=300)
    if "setpriv" in done.stderr and done.returncode != 0 and "error: " not in done.stderr:
        pytest.skip(f"setpriv cannot drop capabilities here: {done.stderr.strip()[-200:]}")
    return done


@pytest.mark.parametrize("where", ["the working folder (runs/ under it)", "--run_dir"])
def test_a_read_only_run_folder(where, tmp_path):
    """A 28-line PermissionError traceback before; now one sentence naming the folder and the way out."""
    read_only = tmp_path / "read-only"
    read_only.mkdir()
    read_only.chmod(0o555)
    try:
        extra = ["--run_dir", str(read_only / "run")] if where == "--run_dir" else []
        done = run_unprivileged(["fit", "--config", LOGIC, *TINY_LOGIC, *QUIET, "--trainer.logger", "false", *extra],
                                cwd=read_only if not extra else tmp_path)
    finally:
        read_only.chmod(0o755)
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("error: ")]
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert f"Cannot write the run folder {read_only}" in lines[0] and "Permission denied" in lines[0]
    assert "pass --run_dir <a folder you can write to>" in lines[0]
    assert list(read_only.iterdir()) == []


def test_a_cache_variable_naming_a_file(workdir, capsys, monkeypatch):
    """LIT_RNNCELLS_CACHE pointing at a file gave an 86-line double traceback."""
    (workdir / "cache.txt").write_text("mine\n")
    monkeypatch.setenv("LIT_RNNCELLS_CACHE", str(workdir / "cache.txt"))
    expect_error(capsys, workdir, ["fit", *corpus_args(write_corpus(workdir / "corpus"))],
                 f"LIT_RNNCELLS_CACHE '{workdir / 'cache.txt'}' is a file, not a folder",
                 "set LIT_RNNCELLS_CACHE to a folder you can write to", "--data.init_args.cache_dir ''", code=2)
    assert (workdir / "cache.txt").read_text() == "mine\n"


def test_a_read_only_cache_folder(tmp_path):
    read_only = tmp_path / "cache"
    read_only.mkdir()
    read_only.chmod(0o555)
    try:
        done = run_unprivileged(["fit", *corpus_args(write_corpus(tmp_path / "corpus")), "--trainer.logger", "false"],
                                cwd=tmp_path, env={"LIT_RNNCELLS_CACHE": str(read_only)})
    finally:
        read_only.chmod(0o755)
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("error: ")]
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert f"Cannot write the cache folder {read_only} (Permission denied)" in lines[0]


def test_a_mistyped_relative_data_dir_says_no_local_folder_exists(workdir, capsys, monkeypatch, tmp_path):
    """``data/ptbb`` (no ``data/`` here) has the shape of a hub id: it is said at once, before the hub is tried
    (which took 48 s of retries), that no local folder of that name exists, and the error says it again."""
    from tests.hub_stub import HubStub

    HubStub(tmp_path, monkeypatch)  # an empty hub cache, offline
    monkeypatch.delenv("LIT_RNNCELLS_DATA", raising=False)
    expect_error(capsys, workdir, ["fit", "--config", LM, *QUIET, *TINY_LM, "--data.init_args.data_dir", "data/ptbb"],
                 "Could not load 'data/ptbb' from the Hugging Face hub",
                 f"no local folder 'data/ptbb' exists (in {workdir}) either: if you meant a local folder, fix the path")


def test_a_mistyped_relative_data_dir_is_named_before_the_hub_is_tried(workdir, monkeypatch, tmp_path):
    from lit_rnncells.data import hub
    from tests.hub_stub import HubStub

    HubStub(tmp_path, monkeypatch)
    monkeypatch.chdir(workdir)
    with pytest.warns(UserWarning, match=r"data_dir 'data/ptbb': no local folder 'data/ptbb' exists .* read as a "
                                         "Hugging Face hub dataset; if you meant a local folder, fix the path"):
        with pytest.raises(hub.HubError):
            hub.load_splits("data/ptbb", ("train",), "a local copy")


def test_a_hub_name_without_its_owner_names_the_hub_form(workdir, capsys, monkeypatch):
    monkeypatch.delenv("LIT_RNNCELLS_DATA", raising=False)
    expect_error(capsys, workdir, ["fit", "--config", LM, *QUIET, *TINY_LM, "--data.init_args.data_dir",
                                   "ptb_text_only"], "Corpus folder 'ptb_text_only' does not exist",
                 "a hub dataset is named owner/name: did you mean 'ptb-text-only/ptb_text_only'?")


def test_a_data_option_a_checkpoint_overrides_is_said_to_be_ignored(seq2seq_checkpoint, workdir, capsys):
    """``test --data.init_args.subword_vocab_size 600`` with a checkpoint used the checkpoint's tokenizers without a
    word; it still does (the weights were trained on them: not an error), and a warning says the option is ignored
    and why (docs/tasks.md)."""
    args = ["test", *parallel_args(seq2seq_checkpoint["data"]), "--ckpt_path", str(seq2seq_checkpoint["ckpt"]),
            "--trainer.limit_test_batches", "1"]
    old = os.getcwd()
    os.chdir(workdir)
    try:
        with pytest.warns(UserWarning, match=r"--data.init_args.subwords.subword_vocab_size 600 \(trained with 300\); "
                                             r"--data.init_args.subwords.min_frequency 3 \(trained with 1\): ignored, because "
                                             r"test takes the tokenizers / vocabulary from the checkpoint"):
            assert run([*args, "--data.init_args.subword_vocab_size", "600", "--data.init_args.min_frequency",
                        "3"]) == 0
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert run(args) == 0  # the options it was trained with: no warning
    finally:
        os.chdir(old)
    assert not [w for w in caught if "ignored, because" in str(w.message)]


def test_the_semeval_offset_warning_is_given_once_per_fit(workdir, tmp_path):
    """Terms whose from/to offsets do not match their text: one warning per file, not one from the DataModule
    and another from the split check that reads the same file."""
    import warnings

    folder = write_semeval(tmp_path / "semeval")
    train = folder / "Restaurants_Train_v2.xml"
    train.write_text(train.read_text().replace('from="4"', 'from="5"', 1))
    old = os.getcwd()
    os.chdir(workdir)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert run(["fit", *absa_args(folder), "--trainer.logger", "false", "--trainer.default_root_dir",
                        str(tmp_path / "run"), "--test_after_fit", "true"]) == 0
    finally:
        os.chdir(old)
    offsets = {(str(w.message), w.filename, w.lineno) for w in caught if "from/to offsets" in str(w.message)}
    assert len(offsets) == 1 and "1 aspect terms in" in next(iter(offsets))[0], offsets


def test_sigterm_during_the_test_after_fit_stops_it(tmp_path):
    """A real SIGTERM, from outside, while the test that follows fit runs: the test stops before its next batch
    with exit code 143 (it used to run to its end: Lightning's handler only sets a flag that its training loop
    reads). Through the command line in a subprocess; no timing beyond a generous time-out."""
    import json
    import signal
    import subprocess
    import sys
    import time

    flag = tmp_path / "testing"
    pause = {"class_path": "tests.examples.recorders.PauseInTest", "init_args": {"flag": str(flag)}}
    args = ["fit", "--config", LOGIC, *TINY_LOGIC[:-2], *QUIET, "--test_after_fit", "true", "--data.init_args."
            "batch_size", "8", "--trainer.logger", "false", "--run_dir", str(tmp_path / "run"),
            "--trainer.callbacks+=" + json.dumps(pause)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WANDB_MODE": "disabled"}
    proc = subprocess.Popen([sys.executable, "-m", "lit_rnncells", *args], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        end = time.monotonic() + 300
        while not flag.exists():
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < end, "the test loop never started"
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err[-3000:]
    assert "SIGTERM during test: stopped after 1 of 4 batches; no test metrics were reported." in err
    assert "test/acc" not in out


def test_sigterm_during_a_decoding_batch_stops_between_its_steps(seq2seq_checkpoint, workdir, capsys):
    """A paper-size seq2seq test batch can decode for minutes: the beam search reads the SIGTERM flag between its
    steps, so the batch during which the signal came is not finished (0 batches done, exit 143)."""
    import json

    stop = {"class_path": "tests.examples.recorders.SigtermInTestBatch", "init_args": {"batch": 0}}
    old = os.getcwd()
    os.chdir(ROOT)  # tests.examples imports from the repository root
    try:
        code = run(["test", *parallel_args(seq2seq_checkpoint["data"]), "--ckpt_path", str(seq2seq_checkpoint["ckpt"]),
                    "--data.init_args.eval_batch_size", "2", "--model.init_args.beam_size", "3",
                    "--trainer.callbacks+=" + json.dumps(stop)])
    finally:
        os.chdir(old)
    captured = capsys.readouterr()
    assert code == 143, captured.err[-2000:]
    assert "SIGTERM during test: stopped after 0 of 2 batches; no test metrics were reported." in captured.err
    assert "test/" not in captured.out
