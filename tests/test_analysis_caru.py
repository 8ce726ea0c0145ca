"""CARU's gate hook and the ``caru-word-weights`` figure (CARU §2.2): the hook records the two factors of the gate
the step uses, and the figure's per-token means are those factors averaged over the steps reading each token.
Checkpoints are trained here through the CLI: a classifier on a tiny IMDB release folder in its official layout
(``aclImdb/{train,test}/{pos,neg}/<id>_<rating>.txt``) and, with the real Multi30k, a Seq2Seq model."""
from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import List

import pytest
import torch

from lit_rnncells.analysis import caru_word_weights
from lit_rnncells.analysis.__main__ import main as analysis_main
from lit_rnncells.cells.caru import CARU
from lit_rnncells.cli import main as cli_main
from lit_rnncells.nn import Recurrent
from lit_rnncells.nn.recording import content_adaptive_gates

ROOT = Path(__file__).resolve().parents[1]
QUIET = ["--trainer.accelerator", "cpu", "--trainer.logger", "false", "--trainer.enable_progress_bar", "false",
         "--trainer.enable_model_summary", "false", "--test_after_fit", "false", "--trainer.num_sanity_val_steps",
         "0"]
REVIEWS = {"pos": ["a great film . i loved it .", "wonderful acting . a fine story ."],
           "neg": ["a dull film . i hated it .", "terrible acting . a weak story ."]}


# --- the hook ------------------------------------------------------------------------------------------

def test_the_recorded_gates_are_the_factors_of_the_step_the_cell_takes() -> None:
    """h' = h + l ⊙ (n − h) with l = σ(x') ⊙ z (eq. 4d, 4e): the recorded word weight is σ of the input's
    projection alone, and with n computed from the weights the recorded product moves the state exactly."""
    torch.manual_seed(0)
    cell = CARU(3, 5)
    x, h0 = torch.randn(2, 4, 3), torch.randn(2, 5) * 0.5
    lengths = torch.tensor([4, 2])
    word, content = content_adaptive_gates(cell, x, h0, lengths)
    assert word.shape == content.shape == (2, 4, 5)
    assert word[1, 2:].abs().sum() == 0 and content[1, 2:].abs().sum() == 0  # padded steps
    with torch.no_grad():
        projected = cell.project_input(x[:, 0])
        torch.testing.assert_close(word[:, 0], torch.sigmoid(projected[:, :5]))  # eq. 4a: the word alone
        n = torch.tanh(h0 @ cell.weight_hh[:5].T + cell.bias_hh[:5] + projected[:, :5])  # eq. 4b
        h1 = cell.step(projected, h0)
    torch.testing.assert_close(h1, h0 + word[:, 0] * content[:, 0] * (n - h0))
    layer = Recurrent(CARU, 3, 5, batch_first=True, bidirectional=True)
    with torch.no_grad():
        before = layer(x, lengths=lengths)[0]
        backward = content_adaptive_gates(layer, x, lengths=lengths, direction=1)
        assert torch.equal(layer(x, lengths=lengths)[0], before)  # recording leaves the layer as it was
    alone = content_adaptive_gates(layer.cell(0, 1), x[1:, :2].flip(1))  # example 1's real steps, reversed
    torch.testing.assert_close(backward[0][1, :2], alone[0][0].flip(0))
    torch.testing.assert_close(backward[1][1, :2], alone[1][0].flip(0))


def test_the_hook_refuses_other_cells() -> None:
    from lit_rnncells.cells.classic import GRU

    with pytest.raises(TypeError, match="holds a GRU, not a CARU"):
        content_adaptive_gates(Recurrent(GRU, 3, 4, batch_first=True), torch.randn(1, 2, 3))


# --- the figure on a classifier ---------------------------------------------------------------------------

def write_imdb(folder: Path) -> Path:
    for split in ("train", "test"):
        for label, texts in REVIEWS.items():
            sub = folder / "aclImdb" / split / label
            sub.mkdir(parents=True, exist_ok=True)
            for i, text in enumerate(texts * 3):
                (sub / f"{i}_{8 if label == 'pos' else 2}.txt").write_text(text, encoding="utf-8")
    return folder / "aclImdb"


def fit_imdb(tmp: Path, cell: str) -> str:
    folder = write_imdb(tmp / "data")
    cli_main(["fit", "--config", str(ROOT / "configs/classification/imdb_caru.yaml"), *QUIET,
              "--model.init_args.cell", cell, "--model.init_args.hidden_size", "8",
              "--model.init_args.embedding_size", "6", "--data.init_args.data_dir", str(folder),
              "--data.init_args.val_size", "4", "--data.init_args.cache_dir", "", "--trainer.max_steps", "2",
              "--run_dir", str(tmp / cell)])
    return str(tmp / cell / "checkpoints" / "last.ckpt")


@pytest.fixture(scope="module")
def imdb_caru(tmp_path_factory: pytest.TempPathFactory) -> str:
    return fit_imdb(tmp_path_factory.mktemp("caru_imdb"), "CARU")


def test_each_tokens_word_weight_is_its_embeddings_sigma_and_its_count_its_steps(imdb_caru: str,
                                                                                 tmp_path: Path) -> None:
    """In the first layer σ(x') = σ(W_vn e + b_vn) depends on the word alone: every token's mean is that, over
    the hidden units; the counts are the test reviews' tokens; the full stop is ranked."""
    out = tmp_path / "w.png"
    [result] = caru_word_weights.run(argparse.Namespace(
        ckpt_path=[imdb_caru], split="test", layer=0, direction=0, limit=None, min_count=2, top=3, data_dir=None,
        output=str(out)))
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from lit_rnncells.analysis.common import load_task

    model, _ = load_task(imdb_caru)
    cell = model.rnn.cell(0, 0)
    with torch.no_grad():
        expected = torch.sigmoid(cell.project_input(model.embedding.weight)[:, :cell.hidden_size]).mean(1)
    read = torch.nonzero(result.counts).flatten()
    torch.testing.assert_close(result.word_weight[read], expected[read])
    words = [w for text in REVIEWS["pos"] + REVIEWS["neg"] for w in text.split()] * 3
    assert {result.tokens[i]: int(result.counts[i]) for i in read} == {w: words.count(w) for w in set(words)}
    assert result.rank_of(".", 2)[1] == len(set(words))
    assert 0 < result.means["gate"] < result.means["word_weight"] < 1


def test_the_command_prints_each_checkpoints_line_and_refuses_a_gru(imdb_caru: str, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "w.png"
    assert analysis_main(["caru-word-weights", "--ckpt_path", imdb_caru, imdb_caru, "--min_count", "3",
                          "--output", str(out)]) == 0
    said = capsys.readouterr().out
    assert said.count("mean word weight σ(x')") == 2 and "'.' 0." in said and "% of steps x units" in said and str(out) in said
    gru = fit_imdb(tmp_path, "GRU")
    errors: List[str] = []
    for argv in (["--ckpt_path", gru], ["--ckpt_path", imdb_caru, "--layer", "1"],
                 ["--ckpt_path", imdb_caru, "--min_count", "1000"], ["--ckpt_path", imdb_caru, "--top", "0"]):
        capsys.readouterr()
        assert analysis_main(["caru-word-weights", *argv, "--output", str(tmp_path / "x.png")]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and "\n" not in err, err
        errors.append(err)
    assert "has a GRU at layer 0, direction 0; caru-word-weights needs one of CARU" in errors[0]
    assert "--layer must lie in [0, 0]" in errors[1]
    assert "lower --min_count" in errors[2] and "--top must be a positive integer" in errors[3]


# --- the figure on a Seq2Seq encoder (real Multi30k) ---------------------------------------------------------

@pytest.mark.real_data
def test_a_seq2seq_encoders_backward_direction_on_real_multi30k(tmp_path: Path) -> None:
    data = Path(os.environ.get("LIT_RNNCELLS_DATA", ""))
    if not os.environ.get("LIT_RNNCELLS_DATA") or not (data / "multi30k").is_dir():
        pytest.skip("real data not available: set LIT_RNNCELLS_DATA to the datasets folder (see README)")
    cli_main(["fit", "--config", str(ROOT / "configs/seq2seq/multi30k_de_en_caru.yaml"), *QUIET,
              "--model.init_args.embedding_size", "8", "--model.init_args.hidden_size", "8",
              "--model.init_args.eval_metrics", "[]", "--data.init_args.data_dir", str(data / "multi30k"),
              "--data.init_args.limit", "40", "--data.init_args.subword_vocab_size", "300",
              "--data.init_args.batch_size", "10", "--data.init_args.cache_dir", "", "--trainer.max_steps", "2",
              "--trainer.limit_val_batches", "2", "--run_dir", str(tmp_path / "s2s")])
    ckpt = str(tmp_path / "s2s" / "checkpoints" / "last.ckpt")
    forward = caru_word_weights.checkpoint_word_weights(ckpt, split="val", limit=12)
    backward = caru_word_weights.checkpoint_word_weights(ckpt, split="val", limit=12, direction=1)
    from lit_rnncells.analysis.common import checkpoint_datamodule
    from lit_rnncells.data.checkpoint_state import read_checkpoint

    dm = checkpoint_datamodule(ckpt, read_checkpoint(ckpt))
    dm.setup("validate")
    shortest = sorted(len(source) + 1 for source in dm.split("valid")["source"])[:12]  # <eos> included
    assert int(forward.counts.sum()) == int(backward.counts.sum()) == sum(shortest)
    read = torch.nonzero(forward.counts).flatten()
    # first layer: the word weight is the word's alone, but each direction has its own W_vn
    assert not torch.allclose(forward.word_weight[read], backward.word_weight[read])
    assert forward.tokens[read[0]] and all(isinstance(t, str) for t in forward.tokens)


def test_a_language_model_checkpoint_is_refused_in_one_line_without_its_data(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for split, animal in (("train", "cat"), ("valid", "dog"), ("test", "cow")):
        (corpus / f"{split}.txt").write_text("".join(f"the {animal} sat on mat {i} .\n" for i in range(40)))
    cli_main(["fit", "--config", str(ROOT / "configs/lm/ptb_char_gru.yaml"), *QUIET, "--model.init_args.cell",
              "CARU", "--data.init_args.dataset", "text", "--data.init_args.level", "char",
              "--data.init_args.data_dir", str(corpus),
              "--data.init_args.batch_size", "2",
              "--data.init_args.bptt", "8", "--model.init_args.embedding_size", "4",
              "--model.init_args.hidden_size", "8", "--trainer.max_steps", "1", "--trainer.limit_val_batches", "2",
              "--data.init_args.cache_dir", "", "--run_dir", str(tmp_path / "lm")])
    for text in corpus.iterdir():  # the refusal needs no data
        text.unlink()
    capsys.readouterr()
    assert analysis_main(["caru-word-weights", "--ckpt_path", str(tmp_path / "lm" / "checkpoints" / "last.ckpt"),
                          "--output", str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("error: caru-word-weights reads a text classifier or a Seq2Seq encoder, not a LanguageModel; pass "
                   "a checkpoint of configs/classification/*.yaml or configs/seq2seq/*.yaml.")
