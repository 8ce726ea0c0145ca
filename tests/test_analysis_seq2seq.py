"""The seq2seq and MC-RNN analysis figures on tiny checkpoints trained here through the CLI: attention
alignment (rows sum to 1 over the source), MC-RNN Fig. 3 channel attention (α sums to 1 over channels, for
an LM and a seq2seq encoder) and Fig. 4 BLEU by source length (the buckets partition the sentences); each
writes a non-empty PNG, and a wrong checkpoint is one clear line with exit code 2."""
from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path
from typing import Dict, List

import numpy as np
import pytest
import torch

from lit_rnncells.analysis import alignment, bleu_by_length, channel_attention
from lit_rnncells.analysis.__main__ import main as analysis_main
from lit_rnncells.analysis.common import checkpoint_labels
from lit_rnncells.cells.mcrnn import channel_attention as cell_channel_attention
from lit_rnncells.cli import main as cli_main
from lit_rnncells.data.subword import EOS_ID
from lit_rnncells.nn.beam_search import SearchConfig
from lit_rnncells.tasks import Seq2Seq

ROOT = Path(__file__).resolve().parents[1]
SENTENCE = "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt."

pytestmark = pytest.mark.real_data


@pytest.fixture(scope="module")
def data() -> Path:
    path = Path(os.environ.get("LIT_RNNCELLS_DATA", ""))
    if not os.environ.get("LIT_RNNCELLS_DATA") or not (path / "multi30k").is_dir() or not (path / "ptb").is_dir():
        pytest.skip("real data not available: set LIT_RNNCELLS_DATA to the datasets folder (see README)")
    return path


def _fit(args: List[str], root: Path, steps: int = 4) -> str:
    # limit_val_batches 2, not 1: jsonargparse reads "1" as the float 1.0, the whole split
    cli_main(["fit", *args, "--trainer.accelerator", "cpu", "--trainer.logger", "false",
              "--trainer.enable_progress_bar", "false", "--trainer.enable_model_summary", "false",
              "--run_dir", str(root), "--trainer.max_steps", str(steps),
              "--trainer.limit_val_batches", "2", "--trainer.num_sanity_val_steps", "0", "--test_after_fit", "false",
              "--model.init_args.embedding_size", "16", "--model.init_args.hidden_size", "16",
              "--model.init_args.num_layers", "1"])
    return str(root / "checkpoints" / "last.ckpt")


@pytest.fixture(scope="module")
def checkpoints(data: Path, tmp_path_factory: pytest.TempPathFactory) -> Dict[str, str]:
    """A GRU RNNSearch, a GRU encoder-decoder without attention, an MC-RNN-3 RNNSearch (all three Multi30k De-En)
    and an MC-RNN-3 word LM (PTB), tiny."""
    base, cache = tmp_path_factory.mktemp("analysis_s2s"), str(tmp_path_factory.mktemp("analysis_cache"))
    s2s = ["--model.init_args.dropout", "0.0", "--model.init_args.eval_metrics", "[]",  # no decoding in fit
           "--data.init_args.dataset", "multi30k",
           "--data.init_args.data_dir", str(data / "multi30k"), "--data.init_args.limit", "40",
           "--data.init_args.subword_vocab_size", "300", "--data.init_args.batch_size", "10",
           "--data.init_args.eval_batch_size", "20", "--data.init_args.cache_dir", cache]
    torch.manual_seed(0)
    return {
        "gru": _fit(["--config", str(ROOT / "configs/seq2seq/multi30k_de_en_gru.yaml"), *s2s], base / "gru"),
        "plain": _fit(["--config", str(ROOT / "configs/seq2seq/multi30k_de_en_gru.yaml"), *s2s,
                       "--model.init_args.attention", "none"], base / "plain"),
        "mc": _fit(["--config", str(ROOT / "configs/seq2seq/iwslt14_de_en_mcrnn3.yaml"), *s2s], base / "mc"),
        "lm": _fit(["--config", str(ROOT / "configs/lm/ptb_word_mcrnn3.yaml"), "--data.init_args.data_dir",
                    str(data / "ptb"), "--data.init_args.batch_size", "4", "--data.init_args.eval_batch_size", "4",
                    "--data.init_args.bptt", "8", "--data.init_args.cache_dir", cache,
                    "--trainer.limit_train_batches", "2"], base / "lm", steps=2),
    }


def _png(path: Path) -> None:
    assert path.is_file() and path.stat().st_size > 1000
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _error(capsys: pytest.CaptureFixture, argv: List[str]) -> str:
    capsys.readouterr()
    assert analysis_main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    return err


# --- alignment -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("beam_size", [1, 3])
def test_alignment_rows_are_distributions_over_the_source(checkpoints: Dict[str, str], tmp_path: Path,
                                                           beam_size: int) -> None:
    out = tmp_path / "a.png"
    result = alignment.run(argparse.Namespace(ckpt_path=checkpoints["gru"], source=SENTENCE, beam_size=beam_size,
                                              output=str(out)))
    _png(out)
    weights, src, tgt = result["weights"], result["source_tokens"], result["target_tokens"]
    assert weights.shape == (len(tgt), len(src))
    np.testing.assert_allclose(weights.sum(1), 1.0, atol=1e-5)
    assert (weights >= 0).all()
    assert src[-1] == "<eos>" and tgt[-1] == "<eos>"
    # the same decoding as the task's own decoder: the hypothesis and its subwords
    model, _ = alignment.load_task(checkpoints["gru"], Seq2Seq)
    src_tok, tgt_tok = alignment.translation_tokenizers(alignment.load_task(checkpoints["gru"])[1])
    ids = src_tok.encode(SENTENCE) + [EOS_ID]
    assert len(src) == len(ids) and "".join(src[:-1]).replace("▁", " ").strip() == SENTENCE
    cfg = SearchConfig(beam_size=beam_size, n_best=1)
    best = model.translate(torch.tensor([ids]), torch.tensor([len(ids)]), cfg)[0][0]
    assert len(tgt) == len(best.tokens) + 1
    np.testing.assert_allclose(weights, best.attention.numpy(), atol=1e-6)


def test_alignment_command_and_its_errors(checkpoints: Dict[str, str], tmp_path: Path,
                                          capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "cli.png"
    assert analysis_main(["alignment", "--ckpt_path", checkpoints["mc"], "--source", SENTENCE, "--output",
                          str(out)]) == 0
    _png(out)
    err = _error(capsys, ["alignment", "--ckpt_path", checkpoints["lm"], "--source", "x", "--output", str(out)])
    assert "holds a LanguageModel" in err and "Seq2Seq" in err
    err = _error(capsys, ["alignment", "--ckpt_path", checkpoints["gru"], "--source", "  ", "--output", str(out)])
    assert "empty" in err
    err = _error(capsys, ["alignment", "--ckpt_path", checkpoints["plain"], "--source", SENTENCE, "--output",
                          str(out)])
    assert "without attention (attention: none)" in err and "attentional model" in err


# --- MC-RNN Fig. 3 -------------------------------------------------------------------------------------
@pytest.mark.parametrize("direction", [0, 1])
def test_channel_attention_of_a_seq2seq_encoder_sums_to_one(checkpoints: Dict[str, str], tmp_path: Path,
                                                             direction: int) -> None:
    out = tmp_path / "c.png"
    result = channel_attention.run(argparse.Namespace(ckpt_path=checkpoints["mc"], text=SENTENCE, layer=0,
                                                      direction=direction, output=str(out)))
    _png(out)
    alpha, tokens = result["alpha"], result["tokens"]
    assert alpha.shape == (len(tokens), 3) and tokens[-1] == "<eos>"  # block size 4: 3 channels
    np.testing.assert_allclose(alpha.sum(1), 1.0, atol=1e-5)
    assert alpha.std() > 0  # not a constant fill
    if direction == 0:  # the layer's forward cell on the embedded source, step by step, gives the same α
        model, ckpt = channel_attention.load_task(checkpoints["mc"])
        src_tok, _ = alignment.translation_tokenizers(ckpt)
        ids = torch.tensor([src_tok.encode(SENTENCE) + [EOS_ID]])
        with torch.no_grad():
            direct = cell_channel_attention(model.encoder.cell(0, 0), model.source_embedding(ids))[0]
        np.testing.assert_allclose(alpha, direct.numpy(), atol=1e-5)


def test_channel_attention_of_a_language_model_sums_to_one(checkpoints: Dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "lm.png"
    text = "zzyzx champions have been few and far between at the italian open"
    result = channel_attention.run(argparse.Namespace(ckpt_path=checkpoints["lm"], text=text, layer=0, direction=0,
                                                      output=str(out)))
    _png(out)
    alpha, tokens = result["alpha"], result["tokens"]
    assert len(tokens) == len(text.split()) and alpha.shape == (len(tokens), 3)
    assert tokens[2] == "have" and tokens[0] == "zzyzx (<unk>)"  # not a PTB word
    np.testing.assert_allclose(alpha.sum(1), 1.0, atol=1e-5)


def test_channel_attention_refuses_other_cells_and_tasks(checkpoints: Dict[str, str], tmp_path: Path,
                                                         capsys: pytest.CaptureFixture) -> None:
    out = str(tmp_path / "x.png")
    err = _error(capsys, ["channel-attention", "--ckpt_path", checkpoints["gru"], "--text", "ein mann",
                          "--output", out])
    assert "GRU" in err and "MultiChannel" in err
    err = _error(capsys, ["channel-attention", "--ckpt_path", checkpoints["mc"], "--text", "ein mann", "--layer", "2",
                          "--output", out])
    assert "--layer 2" in err
    assert not Path(out).exists()
    assert analysis_main(["channel-attention", "--ckpt_path", checkpoints["mc"], "--source", "ein mann", "--output",
                          out]) == 0
    _png(Path(out))


# --- MC-RNN Fig. 4 -------------------------------------------------------------------------------------
def test_buckets_partition_lengths() -> None:
    edges = bleu_by_length.parse_edges("10,20,30,40")
    lengths = list(range(1, 60))
    buckets = bleu_by_length.assign_buckets(lengths, edges)
    labels = bleu_by_length.bucket_labels(edges)
    assert labels == ["≤10", "11–20", "21–30", "31–40", ">40"]
    bounds = [(1, 10), (11, 20), (21, 30), (31, 40), (41, 10 ** 9)]
    for n, b in zip(lengths, buckets):
        assert [lo <= n <= hi for lo, hi in bounds].count(True) == 1 and bounds[b][0] <= n <= bounds[b][1]
    for bad in ("10,5", "0,4", "a,b", ""):
        with pytest.raises(ValueError, match="--buckets"):
            bleu_by_length.parse_edges(bad)


def test_bleu_by_length_partitions_the_sentences_and_scores_each_bucket(checkpoints: Dict[str, str],
                                                                         tmp_path: Path, data: Path) -> None:
    out = tmp_path / "b.png"
    args = argparse.Namespace(ckpt_path=[checkpoints["gru"], checkpoints["mc"]], split="test", buckets="8,12,16",
                              beam_size=1, limit=10, data_dir=str(data / "multi30k"), batch_size=4, output=str(out))
    result = bleu_by_length.run(args)
    _png(out)
    test_de = (data / "multi30k" / "test_2016_flickr.de").read_text(encoding="utf-8").split("\n")[:10]
    assert result["lengths"] == [len(line.split()) for line in test_de]
    assert sum(result["counts"]) == 10 and len(result["counts"]) == 4
    assert [result["buckets"].count(k) for k in range(4)] == result["counts"]
    edges = [0, 8, 12, 16, 10 ** 9]
    assert all(edges[b] < n <= edges[b + 1] for n, b in zip(result["lengths"], result["buckets"]))
    assert len(result["bleu"]) == 2
    for name, values in result["bleu"].items():
        assert len(values) == 4
        assert all(np.isnan(v) == (c == 0) for v, c in zip(values, result["counts"]))
        assert all(0.0 <= v <= 100.0 for v in values if not np.isnan(v))
    # one bucket holding every sentence scores the whole corpus
    whole = bleu_by_length.run(argparse.Namespace(**{**vars(args), "ckpt_path": [checkpoints["gru"]],
                                                     "buckets": "1000", "output": str(tmp_path / "w.png")}))
    name = next(iter(whole["bleu"]))
    assert whole["counts"] == [10, 0]
    assert whole["bleu"][name][0] == pytest.approx(whole["overall"][name])
    assert whole["overall"][name] == pytest.approx(result["overall"][name])


def test_checkpoint_labels_name_the_folders_that_tell_two_runs_apart() -> None:
    labels = checkpoint_labels(["/r/caru/CARU-h128-s1/best/best.ckpt", "/r/ablation/CARU-h128-s1/best/best.ckpt",
                                "/r/x/GRU/checkpoints/last.ckpt"])
    assert labels == ["caru/CARU-h128-s1/best.ckpt", "ablation/CARU-h128-s1/best.ckpt", "GRU/last.ckpt"]
    assert checkpoint_labels(["/a/b/run/checkpoints/x.ckpt", "/c/b/run/checkpoints/x.ckpt"]) == \
        ["a/b/run/x.ckpt", "c/b/run/x.ckpt"]  # as many folders as it takes
    assert checkpoint_labels(["/r/a/run/best.ckpt", "/r/a/run/best.ckpt"]) == ["run/best.ckpt"] * 2  # one file


def test_a_figure_refuses_a_checkpoint_of_another_datamodule_in_one_sentence(checkpoints: Dict[str, str]) -> None:
    """checkpoint_datamodule(expected=...) names the class the checkpoint was trained with and the one needed."""
    from lit_rnncells.analysis.common import checkpoint_datamodule
    from lit_rnncells.data import LogicDataModule

    checkpoint = torch.load(checkpoints["gru"], map_location="cpu", weights_only=True)
    with pytest.raises(ValueError, match=r"was trained with TranslationDataModule, not LogicDataModule; pass a "
                                         r"checkpoint of the logic task"):
        checkpoint_datamodule(checkpoints["gru"], checkpoint, expected=LogicDataModule,
                              fix="pass a checkpoint of the logic task.")


def test_bleu_by_length_rows_of_two_sweeps_runs_of_the_same_name(checkpoints: Dict[str, str], tmp_path: Path,
                                                                 data: Path, capsys: pytest.CaptureFixture) -> None:
    """The same run folder and file name in two sweeps got one title ("run/x.ckpt" and "run/x.ckpt'")."""
    copies = []
    for sweep in ("sweep_a", "sweep_b"):
        folder = tmp_path / sweep / "GRU-h16-s1" / "best"
        folder.mkdir(parents=True)
        copies.append(str(shutil.copy(checkpoints["gru"], folder / "best.ckpt")))
    args = argparse.Namespace(ckpt_path=copies, split="test", buckets="1000", beam_size=1, limit=4,
                              data_dir=str(data / "multi30k"), batch_size=4, output=str(tmp_path / "b.png"))
    result = bleu_by_length.run(args)
    assert sorted(result["bleu"]) == ["sweep_a/GRU-h16-s1/best.ckpt", "sweep_b/GRU-h16-s1/best.ckpt"]
    printed = capsys.readouterr().out.splitlines()  # one line a checkpoint, its numbers as in the result
    for name, line in zip(sorted(result["bleu"]), printed):
        bleu = result["overall"][name]
        assert line == f"{name}: BLEU ≤1000 {bleu:.2f} (n 4), >1000 – (n 0); all {bleu:.2f}"


def test_bleu_by_length_errors(checkpoints: Dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = str(tmp_path / "b.png")
    err = _error(capsys, ["bleu-by-length", "--ckpt_path", checkpoints["gru"], checkpoints["lm"], "--limit", "2",
                          "--beam_size", "1", "--output", out])
    assert "holds a LanguageModel" in err
    err = _error(capsys, ["bleu-by-length", "--ckpt_path", checkpoints["gru"], "--buckets", "20,10", "--output", out])
    assert "--buckets" in err
    err = _error(capsys, ["bleu-by-length", "--ckpt_path", checkpoints["gru"], "--data_dir", str(tmp_path / "none"),
                          "--output", out])
    assert "--data_dir" in err and "does not exist" in err
