"""Every shipped experiment config works: through the CLI it builds its model at the config's own sizes and
trains, validates and tests one tiny batch of real text (so a renamed argument or a cell change that breaks
a config fails here, not in a user's week-long run)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import List

import pytest

from lit_rnncells.cli import main as cli_main
from tests.test_sentiment_data import config_data_args

REPO = Path(__file__).resolve().parents[1]
CONFIGS = sorted(p for p in (REPO / "configs").glob("*/*.yaml") if p.parent.name != "trainer")


def _dataset(config: Path) -> str:
    for line in config.read_text().splitlines():
        if line.strip().startswith(("dataset:", "domain:")):  # domain: the SemEval-2014 ABSA configs
            return line.split(":", 1)[1].split("#")[0].strip()
    return ""


def _text8_from_ptb(ptb: Path, folder: Path, chars: int = 6000) -> Path:
    """A small file in text8's format (one line, a–z and single spaces) cut from real PTB text."""
    words = re.sub(r"[^a-z ]+", " ", (ptb / "ptb.train.txt").read_text()[: 3 * chars].lower()).split()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "text8").write_text(" ".join(words)[:chars])
    return folder / "text8"


def _data_args(dataset: str, data_dir: Path, tmp_path: Path, cache: Path) -> List[str]:
    sentiment = config_data_args(dataset, data_dir, tmp_path, cache)
    if sentiment is not None:
        return sentiment
    if not dataset:  # the logic task generates its formulas
        return []
    if dataset == "iwslt17":  # IWSLT 2017 is raw cased text: real raw De-En lines (Multi30k's) in its layout
        folder = tmp_path / "iwslt17"
        folder.mkdir(parents=True, exist_ok=True)
        for split, name in (("train", "train"), ("valid", "val"), ("test", "test_2016_flickr")):
            for lang in ("de", "en"):
                lines = (data_dir / "multi30k" / f"{name}.{lang}").read_text(encoding="utf-8").splitlines()[:40]
                (folder / f"{split}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
        data_dir = tmp_path
    if dataset in ("multi30k", "iwslt14", "iwslt17", "gigaword"):  # seq2seq: the first pairs of every split
        return ["--data.init_args.data_dir", str(data_dir / dataset), "--data.init_args.limit", "40",
                "--data.init_args.cache_dir", str(cache), "--data.init_args.batch_size", "2",
                "--data.init_args.eval_batch_size", "2"]
    if dataset == "text8":  # not in the shared data: the same reader and split on a small real-text file
        source = ["--data.init_args.data_dir", str(_text8_from_ptb(data_dir / "ptb", tmp_path / "text8")),
                  "--data.init_args.split_sizes", "[5000, 500, 500]"]
    else:
        source = ["--data.init_args.data_dir", str(data_dir / "ptb")]
    return [*source, "--data.init_args.cache_dir", str(cache), "--data.init_args.batch_size", "2",
            "--data.init_args.eval_batch_size", "2", "--data.init_args.bptt", "8"]


@pytest.mark.real_data
@pytest.mark.parametrize("config", CONFIGS, ids=[f"{p.parent.name}/{p.stem}" for p in CONFIGS])
def test_shipped_config_runs_one_batch(config: Path, tmp_path: Path, data_dir: Path,
                                       tmp_path_factory: pytest.TempPathFactory) -> None:
    cache = tmp_path_factory.getbasetemp() / "lm_cache"
    cli = cli_main(["fit", "--config", str(config), "--trainer.fast_dev_run", "1", "--trainer.accelerator", "cpu",
                    "--trainer.logger", "false", "--trainer.enable_progress_bar", "false",
                    "--trainer.enable_model_summary", "false", "--trainer.default_root_dir", str(tmp_path),
                    *_data_args(_dataset(config), data_dir, tmp_path, cache)])
    assert cli.trainer.state.finished and cli.trainer.global_step == 1
    assert sum(p.numel() for p in cli.model.parameters()) > 0
