"""The MuFuRU and MZU analysis figures (MuFuRU Fig. 1b, MZU Fig. 2 and 3) and the cell hooks they read.

Checkpoints are trained once per module through the public CLI: a tiny MuFuRU on the logic task, and
a tiny satMZU+DT and GRU character LM on a synthetic corpus of lines (``dataset: text``) whose lengths
fall in every length bucket.
"""
from __future__ import annotations

import argparse
import math
import random
from collections import Counter
from pathlib import Path
from typing import List

import pytest
import torch

from lit_rnncells.analysis import lm_length_buckets, mufuru_ops, relevance_map
from lit_rnncells.analysis.__main__ import main as analysis_main
from lit_rnncells.cells.mufuru import MuFuRU
from lit_rnncells.cells.mzu import SatMZU
from lit_rnncells.nn.recording import candidate_activations, composition_weights
from lit_rnncells.cli import run as cli_run
from lit_rnncells.nn.recurrent import Recurrent

ROOT = Path(__file__).resolve().parents[1]
QUIET = ["--trainer.enable_progress_bar", "false", "--trainer.enable_model_summary", "false",
         "--trainer.logger", "false", "--test_after_fit", "false", "--trainer.max_time", "null"]


def only_checkpoint(folder: Path) -> str:
    found = sorted(folder.rglob("*.ckpt"))
    assert found, f"fit wrote no checkpoint under {folder}"
    return str(found[-1])


@pytest.fixture(scope="module")
def logic_ckpt(tmp_path_factory: pytest.TempPathFactory) -> str:
    folder = tmp_path_factory.mktemp("logic")
    assert cli_run(["fit", "--config", str(ROOT / "configs/logic/mufuru.yaml"), *QUIET,
                    "--model.init_args.hidden_size", "4", "--model.init_args.embedding_size", "8",
                    "--data.init_args.train_size", "64", "--data.init_args.val_size", "16",
                    "--data.init_args.test_size", "40", "--trainer.max_steps", "3",
                    "--trainer.default_root_dir", str(folder)]) == 0
    return only_checkpoint(folder)


def synthetic_lines(rng: random.Random, count: int) -> List[str]:
    """Lines of random words whose lengths spread from 5 to 300 characters (every default bucket)."""
    lines = []
    for _ in range(count):
        target, words = rng.randint(5, 300), []
        while sum(len(w) + 1 for w in words) < target:
            words.append("".join(rng.choice("abcdefghij") for _ in range(rng.randint(1, 7))))
        lines.append(" ".join(words))
    return lines


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("corpus")
    rng = random.Random(0)
    for split, count in (("train", 120), ("valid", 10), ("test", 40)):
        (folder / f"{split}.txt").write_text("".join(line + "\n" for line in synthetic_lines(rng, count)))
    return folder


def fit_lm(config: str, corpus: Path, folder: Path, *extra: str) -> str:
    assert cli_run(["fit", "--config", str(ROOT / "configs/lm" / config), *QUIET,
                    "--data.init_args.dataset", "text", "--data.init_args.level", "char",
                    "--data.init_args.data_dir", str(corpus), "--data.init_args.cache_dir", "",
                    "--data.init_args.batch_size", "4", "--data.init_args.bptt", "20",
                    "--model.init_args.embedding_size", "8", "--model.init_args.hidden_size", "8",
                    "--trainer.max_steps", "3", "--trainer.limit_val_batches", "0",
                    "--trainer.default_root_dir", str(folder), *extra]) == 0
    return only_checkpoint(folder)


@pytest.fixture(scope="module")
def mzu_ckpt(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    return fit_lm("ptb_char_satmzu_dt.yaml", corpus, tmp_path_factory.mktemp("satmzu"),
                  "--model.init_args.cell.init_args.filter_size", "8")


@pytest.fixture(scope="module")
def gru_ckpt(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    return fit_lm("ptb_char_gru.yaml", corpus, tmp_path_factory.mktemp("gru"))


def assert_png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


# --- hooks -------------------------------------------------------------------------------

def test_mufuru_records_the_op_weights_its_step_uses() -> None:
    """With ops keep and forget the new state is p_keep ⊙ s, so s'/s must equal the recorded p_keep."""
    cell = MuFuRU(3, 5, ops=("keep", "forget"))
    x, s0 = torch.randn(2, 4, 3), torch.rand(2, 5) + 0.5
    lengths = torch.tensor([4, 2])
    p = composition_weights(cell, x, s0, lengths)
    assert p.shape == (2, 4, 2, 5)
    torch.testing.assert_close(p[0].sum(1), torch.ones(4, 5))
    assert p[1, 2:].abs().sum() == 0  # padded steps
    with torch.no_grad():
        s1 = cell.step(cell.project_input(x[:, 0]), s0)
    torch.testing.assert_close(p[:, 0, 0], s1 / s0)
    layer = Recurrent(cell.__class__, 3, 5, batch_first=True, bidirectional=True)
    with torch.no_grad():
        before = layer(x, lengths=lengths)[0]
        backward = composition_weights(layer, x, lengths=lengths, direction=1)
        assert torch.equal(layer(x, lengths=lengths)[0], before)  # recording leaves the layer as it was
    alone = composition_weights(layer.cell(0, 1), x[1:, :2].flip(1))  # example 1's real steps, reversed
    torch.testing.assert_close(backward[1, :2], alone[0].flip(0))


def test_mzu_records_its_candidate_and_states() -> None:
    """h' = h + g ⊙ (h~ − h) with g in (0, 1): the recorded h~ is the update's target; states are the outputs."""
    cell = SatMZU(3, 8, zones=4, transition_depth=0)
    x, lengths = torch.randn(2, 5, 3), torch.tensor([5, 3])
    candidates, states = candidate_activations(cell, x, lengths=lengths)
    assert candidates.shape == (2, 5, 1, 8) and states.shape == (2, 5, 8)
    previous = torch.cat([torch.zeros(2, 1, 8), states[:, :-1]], dim=1)
    gate = (states - previous)[0] / (candidates[0, :, 0] - previous[0])
    assert bool(((gate > 0) & (gate < 1)).all())
    layer = Recurrent(SatMZU, 3, 8, batch_first=True)
    with torch.no_grad():
        output = layer(x, lengths=lengths)[0]
    deep, layer_states = candidate_activations(layer, x, lengths=lengths)
    torch.testing.assert_close(layer_states, output)
    assert deep.shape == (2, 5, 2, 8) and deep[1, 3:].abs().sum() == 0
    slices = layer.cell().zone_slices()
    covered = sorted(i for part in slices for i in range(8)[part])
    assert covered == list(range(8)) and len(slices) == 4


# --- MuFuRU Fig. 1b ----------------------------------------------------------------------

def test_mufuru_ops_figure(logic_ckpt: str, tmp_path: Path) -> None:
    out = tmp_path / "ops.png"
    result = mufuru_ops.run(argparse.Namespace(ckpt_path=logic_ckpt, split="test", layer=0, output=str(out)))
    assert_png(out)
    torch.testing.assert_close(result.weights.sum(1), torch.ones(len(result.symbols)))
    assert result.ops == ["keep", "replace", "max", "min", "mul", "diff", "forget"]
    data = mufuru_ops.logic_datamodule(logic_ckpt, torch.load(logic_ckpt, weights_only=True))
    occurrences = Counter(t for f in data.splits["test"] for t in f)
    assert dict(zip(result.symbols, result.counts.tolist())) == dict(occurrences)
    assert result.formulas == 40


def test_the_analysis_command_says_which_file_it_wrote(logic_ckpt: str, tmp_path: Path, capsys) -> None:
    """Issue 33: ``python -m lit_rnncells.analysis`` drew its figure without a word; it names the file."""
    from lit_rnncells.analysis.__main__ import main as analysis_main

    out = tmp_path / "figs" / "ops.png"
    assert analysis_main(["mufuru-ops", "--ckpt_path", logic_ckpt, "--output", str(out)]) == 0
    assert_png(out)
    assert f"analysis mufuru-ops: wrote {out}" in capsys.readouterr().out.splitlines()


# --- MZU Fig. 2 ----------------------------------------------------------------------------

def test_bpc_by_length_buckets_cover_every_token_once(mzu_ckpt: str, gru_ckpt: str, corpus: Path,
                                                      tmp_path: Path) -> None:
    out = tmp_path / "bpc.png"
    results = lm_length_buckets.run(argparse.Namespace(
        ckpt_path=[mzu_ckpt, gru_ckpt], split="test", edges=list(lm_length_buckets.DEFAULT_EDGES),
        data_dir=None, batch_size=16, output=str(out)))
    assert_png(out)
    lines = (corpus / "test.txt").read_text().splitlines()
    expected = Counter(sum(1 for e in lm_length_buckets.DEFAULT_EDGES if len(line) > e) for line in lines)
    for r in results:
        assert r.tokens == sum(len(line) + 1 for line in lines)  # every character and line end, once
        assert sum(b.tokens for b in r.buckets) == r.tokens
        assert [b.sentences for b in r.buckets] == [expected[i] for i in range(len(r.buckets))]
        weighted = sum(b.bpc * b.tokens for b in r.buckets if b.tokens) / r.tokens
        assert math.isclose(weighted, r.bpc, rel_tol=1e-9)
    # Batched and padded evaluation gives each sentence the NLL it has alone.
    alone = lm_length_buckets.bpc_by_length(gru_ckpt, "test", [60, 180], batch_size=1)
    assert math.isclose(alone.bpc, results[1].bpc, rel_tol=1e-5)
    assert len(alone.buckets) == 3 and sum(b.tokens for b in alone.buckets) == alone.tokens


# --- MZU Fig. 3 ----------------------------------------------------------------------------

def test_relevance_map(mzu_ckpt: str, tmp_path: Path) -> None:
    from lit_rnncells.analysis.common import load_task
    from lit_rnncells.tasks.language_model import LanguageModel

    out = tmp_path / "rel.png"
    text = "abc def ghij"
    result = relevance_map.run(argparse.Namespace(ckpt_path=mzu_ckpt, text=text, layer=0, depth=0, last=None,
                                                  output=str(out)))
    assert_png(out)
    steps = len(text)
    zones = result.zones
    assert result.maps.shape == (1 + len(zones), steps, steps)
    assert sorted(i for part in zones for i in range(8)[part]) == list(range(8))  # disjoint, cover d_h
    earlier = torch.ones(steps, steps, dtype=torch.bool).tril(-1)
    assert bool(result.maps[:, ~earlier].isnan().all()) and not bool(result.maps[:, earlier].isnan().any())
    values = result.maps[:, earlier]
    assert bool((values >= -1 - 1e-6).all() and (values <= 1 + 1e-6).all())
    # The same numbers through the layer directly (the task's forward is not involved).
    model, _ = load_task(mzu_ckpt, LanguageModel)
    ids = model.vocab.encode(model.vocab.tokenize(text)).unsqueeze(0)
    with torch.no_grad():
        candidates, states = candidate_activations(model.rnns[0].module, model.embedding(ids))
    cos = torch.nn.functional.cosine_similarity(candidates[0, 7, 0, zones[1]], states[0, 2, zones[1]], dim=0)
    torch.testing.assert_close(result.maps[2, 7, 2], cos)


# --- bad input -----------------------------------------------------------------------------

@pytest.mark.parametrize("case", ["ops_on_lm", "bpc_on_logic", "relevance_on_gru", "unknown_symbols"])
def test_bad_input_is_one_line_and_exit_2(case: str, logic_ckpt: str, mzu_ckpt: str, gru_ckpt: str,
                                          tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path / "x.png")
    argv, expected = {
        "ops_on_lm": (["mufuru-ops", "--ckpt_path", mzu_ckpt], "needs a LogicEvaluator checkpoint"),
        "bpc_on_logic": (["bpc-by-length", "--ckpt_path", logic_ckpt, gru_ckpt], "needs a LanguageModel"),
        "relevance_on_gru": (["relevance-map", "--ckpt_path", gru_ckpt, "--text", "abc"], "SatMZU"),
        "unknown_symbols": (["relevance-map", "--ckpt_path", mzu_ckpt, "--text", "abc XYZ"], "['X', 'Y', 'Z']"),
    }[case]
    capsys.readouterr()
    assert analysis_main([*argv, "--output", out]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and err[0].startswith("error: ") and expected in err[0], err
    assert not Path(out).exists()
