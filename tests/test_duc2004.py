"""DUC-2004 task 1 as a test set of a Gigaword-trained model: the folder layout, four references per
document scored together, ROUGE on the first 75 bytes by default, the signature printed with the scores,
and the scores equal to the metrics computed directly on the model's outputs."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, List

import pytest

from lit_rnncells.cli import run
from lit_rnncells.data import TranslationDataModule
from lit_rnncells.metrics import rouge_corpus

ROOT = Path(__file__).resolve().parents[1]
GIGAWORD = str(ROOT / "configs" / "seq2seq" / "gigaword_lstm.yaml")
WORDS = "police arrest man after robbery in city court jails leader of gang over attack on bank".split()
ARTICLES = [" ".join(WORDS[i:i + 9] + WORDS[:i]) for i in range(8)]
TITLES = [" ".join(WORDS[i:i + 4]) for i in range(8)]  # the first words: a task 4 epochs teach a tiny model
DOCUMENTS = [" ".join(WORDS[i:i + 10]) for i in range(1, 6)]
REFERENCES = [[" ".join(WORDS[i + k:i + k + 5]) for i in range(1, 6)] for k in range(4)]


def write_lines(path: Path, lines: List[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def gigaword_folder(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    # one validation pair is not a training pair: a train split holding all of dev is refused before training
    held_article, held_title = " ".join(reversed(WORDS[:9])), " ".join(reversed(WORDS[:4]))
    for name, lines in {"train.article.txt": ARTICLES * 16, "train.title.txt": TITLES * 16, "valid.article.filter.txt":
                        ARTICLES[:3] + [held_article], "valid.title.filter.txt": TITLES[:3] + [held_title],
                        "test.article.txt": ARTICLES[4:], "test.title.txt": TITLES[4:]}.items():
        write_lines(folder / name, lines)
    return folder


def duc_folder(folder: Path, references: int = 4) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    write_lines(folder / "input.txt", DOCUMENTS)
    for k in range(references):
        write_lines(folder / f"task1_ref{k}.txt", REFERENCES[k])
    return folder


def model_args(data_dir: Path) -> List[str]:
    """The Gigaword config at a tiny size (the same flags for fit, test and predict)."""
    return ["--config", GIGAWORD, "--model.init_args.embedding_size", "8", "--model.init_args.hidden_size", "32",
            "--model.init_args.num_layers", "1", "--model.init_args.decoding.beam_size", "2", "--data.init_args.data_dir",
            str(data_dir), "--data.init_args.subword_vocab_size", "300", "--data.init_args.min_frequency", "1",
            "--data.init_args.batch_size", "4", "--data.init_args.eval_batch_size", "4", "--data.init_args.cache_dir",
            "", "--trainer.logger", "false", "--trainer.enable_progress_bar", "false",
            "--trainer.enable_model_summary", "false", "--trainer.accelerator", "cpu"]


@pytest.fixture(scope="module")
def gigaword_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Path]:
    base = tmp_path_factory.mktemp("gigaword")
    data = gigaword_folder(base / "data")
    assert run(["fit", *model_args(data), "--trainer.max_epochs", "4", "--test_after_fit", "false",
                "--model.init_args.optimizer.init_args.lr", "0.02",
                "--trainer.default_root_dir", str(base / "run")]) == 0
    return {"data": data, "ckpt": next((base / "run").rglob("last.ckpt"))}


def printed_metrics(out: str) -> Dict[str, float]:
    return {m[1]: float(m[2]) for m in re.finditer(r"^(test/(\S+))\s+(\S+)$", out, re.M) for m in [m.groups()]}


def references_overlapping(hyps: List[str]) -> List[List[str]]:
    """Four references per document sharing some words with the model's output early on (an untrained model's
    output shares none with real text) and going on well past 75 bytes, so truncation changes the scores."""
    tail = " and a much longer tail of other words than seventy five bytes allow"
    return [[" ".join(h.split()[k:k + 3 + k]) + tail * (k + 1) for h in hyps] for k in range(4)]


def test_a_gigaword_model_on_duc2004_scores_four_references_on_75_bytes(gigaword_checkpoint, tmp_path, capsys):
    duc = duc_folder(tmp_path / "DUC2004")
    ckpt = str(gigaword_checkpoint["ckpt"])
    args = [*model_args(gigaword_checkpoint["data"]), "--ckpt_path", ckpt, "--data.init_args.dataset", "duc2004",
            "--data.init_args.data_dir", str(duc)]
    hyps_file = tmp_path / "hyps.txt"  # the checkpoint's outputs on DUC's inputs, with the beam test uses
    assert run(["predict", *args, "--data.init_args.predict_file", str(duc / "input.txt"),
                "--predict_output", str(hyps_file)]) == 0
    hyps = hyps_file.read_text(encoding="utf-8").splitlines()
    assert len(hyps) == len(DOCUMENTS) and all(set(h.split()) & set(WORDS) for h in hyps), hyps
    references = references_overlapping(hyps)
    for k, lines in enumerate(references):
        write_lines(duc / f"task1_ref{k}.txt", lines)

    capsys.readouterr()
    assert run(["test", *args]) == 0
    out = capsys.readouterr().out
    scores = printed_metrics(out)
    signature = next(line for line in out.splitlines() if line.startswith("signature rouge: "))
    assert "nrefs:4" in signature and "trunc:75bytes" in signature and "multiref:pooled(rouge-1.5.5 -f A)" in signature
    direct, _ = rouge_corpus(hyps, list(zip(*references)), max_bytes=75, multiref="pooled")
    assert direct["rouge1_recall"] > 0 and direct["rouge2"] > 0
    for key in ("rouge1", "rouge2", "rougeL", "rouge1_recall", "rouge1_precision", "rouge2_recall", "rougeL_recall"):
        assert scores[key] == pytest.approx(direct[key], rel=1e-3, abs=1e-3), key

    capsys.readouterr()  # rouge_max_bytes 0: the whole texts
    assert run(["test", *args, "--model.init_args.decoding.rouge_max_bytes", "0"]) == 0
    out = capsys.readouterr().out
    whole, _ = rouge_corpus(hyps, list(zip(*references)), multiref="pooled")
    assert printed_metrics(out)["rouge1_recall"] == pytest.approx(whole["rouge1_recall"], rel=1e-3, abs=1e-3)
    assert "trunc:none" in out and whole["rouge1_recall"] != pytest.approx(direct["rouge1_recall"], rel=1e-2)

    capsys.readouterr()  # the best reference per metric (rouge-score), on request
    assert run(["test", *args, "--model.init_args.rouge_multiref", "best"]) == 0
    out = capsys.readouterr().out
    best, _ = rouge_corpus(hyps, list(zip(*references)), max_bytes=75, multiref="best")
    assert "multiref:best-f1-per-metric" in out and "trunc:75bytes" in out
    assert printed_metrics(out)["rouge1_recall"] == pytest.approx(best["rouge1_recall"], rel=1e-3, abs=1e-3)
    assert best["rouge1_recall"] > direct["rouge1_recall"] + 1  # the best of four is well above the pooled recall


def test_the_duc2004_reader_uses_every_reference_file(gigaword_checkpoint, tmp_path):
    dm = TranslationDataModule("duc2004", data_dir=str(duc_folder(tmp_path / "duc", references=3)),
                               checkpoint_path=str(gigaword_checkpoint["ckpt"]), cache_dir="", eval_batch_size=2)
    assert dm.rouge_max_bytes == 75 and (dm.source_language, dm.target_language) == ("article", "title")
    dm.setup("test")
    batches = list(dm.test_dataloader())
    refs = {i: list(r) for b in batches for i, r in zip(b["index"].tolist(), b["references"])}
    assert refs == {i: [REFERENCES[k][i] for k in range(3)] for i in range(len(DOCUMENTS))}
    assert dm.split("test")["target_text"] == REFERENCES[0]  # the loss reads the first reference
    with pytest.raises(ValueError, match="only a test split"):
        dm.split("valid")


def test_duc2004_files_of_different_lengths_are_named(gigaword_checkpoint, tmp_path):
    folder = duc_folder(tmp_path / "duc")
    write_lines(folder / "task1_ref2.txt", REFERENCES[2][:-1])
    with pytest.raises(ValueError, match=r"task1_ref1.txt 5 lines, task1_ref2.txt 4 lines.*one line per document"):
        TranslationDataModule("duc2004", data_dir=str(folder), checkpoint_path=str(gigaword_checkpoint["ckpt"]))
