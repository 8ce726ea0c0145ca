"""The bad-input catalogue: each kind of bad config, data file, checkpoint or argument, driven through the
public command line (``lit_rnncells.cli.run``, what ``python -m lit_rnncells`` calls).

Every probe must: exit non-zero; print exactly one ``error: ...`` line that contains the expected
sentence (naming the problem and the fix); and leave an earlier run's files (config, checkpoint, logs in
the same working folder) exactly as they were, with no new checkpoint or config written.
"""
from __future__ import annotations

import hashlib
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


def write_parallel(folder: Path, **override: List[str]) -> Path:
    """A tiny parallel corpus ``{train,valid,test}.{de,en}``; ``override`` replaces files by name."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {"train.de": DE * 8, "train.en": EN * 8, "valid.de": DE, "valid.en": EN, "test.de": DE, "test.en": EN}
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
    good = ["(3 (2 a) (4 (3 good) (2 film)))", "(1 (2 a) (0 (1 bad) (2 film)))"] * 4
    for name in ("train.txt", "dev.txt", "test.txt"):
        lines = good + ([bad_line] if bad_line and name == "train.txt" else [])
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
    "zero hidden size": (["--model.init_args.hidden_size", "0"], ["hidden_size must be a positive integer"]),
    "negative layers": (["--model.init_args.num_layers", "-1"], ["num_layers must be a positive integer"]),
    "value of the wrong type": (["--trainer.max_epochs", "abc"], ['"trainer.max_epochs" expects int']),
    "unknown argument": (["--bogus", "1"], ["unrecognized arguments: --bogus", "--help"]),
    "missing config file": (["--config", "nope.yaml"], ["nope.yaml"]),
    "more formulas than exist": (["--data.init_args.train_gates", "[1, 1]", "--data.init_args.test_gates", "[1, 1]"],
                                 ["formulas"]),
    "gates range upside down": (["--data.init_args.test_gates", "[20, 11]"], ["test_gates must be [min, max]"]),
}


@pytest.mark.parametrize("probe", list(CLI_PROBES))
def test_configuration_mistakes(probe, workdir, capsys):
    extra, fragments = CLI_PROBES[probe]
    expect_error(capsys, workdir, ["fit", "--config", LOGIC, *TINY_LOGIC, *QUIET, *extra], *fragments, code=2)


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
                                   "--model.init_args.cell", "GRU"], "cell=GRU (checkpoint: MuFuRU(")


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


def test_an_empty_data_root_is_named_at_once(workdir, capsys, monkeypatch):
    monkeypatch.setenv("LIT_RNNCELLS_DATA", str(workdir / "nothing"))
    expect_error(capsys, workdir, ["fit", "--config", LM, *QUIET, *TINY_LM], "does not exist", "ptb.char.train.txt")


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


# --- run folders (issue 19, items 19 and 20) -----------------------------------------------------------------
def test_a_run_folder_holding_another_run(workdir, capsys):
    """A second fit named into a folder that holds another run's config, checkpoints and logs is refused before
    it writes anything (two fits used to share metrics.csv and lose checkpoints)."""
    earlier_run = next(workdir.rglob("config.yaml")).parent
    expect_error(capsys, workdir, ["fit", "--config", LOGIC, *TINY_LOGIC, *QUIET, "--run_dir", str(earlier_run)],
                 f"The run folder {earlier_run} already holds another run", "--run_dir", code=2)


def test_a_run_folder_another_fit_is_writing_to(workdir, capsys):
    """A folder whose lock another process holds (a fit still training, e.g. an orphaned compare child)."""
    import fcntl

    from lit_rnncells.run_folder import LOCK_NAME

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
    probes = len(CLI_PROBES) + len(LM_PROBES) + sum(1 for name in globals() if name.startswith("test_")) - 3
    assert probes >= 40, probes
