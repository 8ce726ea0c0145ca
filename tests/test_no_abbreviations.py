"""No command line takes an option prefix for an option (argparse's abbreviations are off everywhere):
``--trainer.max_step`` is not ``--trainer.max_steps`` and ``--budg`` is not ``--budget``."""
from __future__ import annotations

import pytest

from lit_rnncells.analysis.__main__ import main as analysis_main
from lit_rnncells.experiments.compare import build_parser
from lit_rnncells.experiments.reproduce import main as reproduce_main


def test_compare_refuses_an_option_prefix(capsys):
    with pytest.raises(SystemExit) as stop:
        build_parser().parse_args(["--config", "c.yaml", "--cells", "GRU", "--budg", "steps=3"])
    assert stop.value.code == 2 and "--budg" in capsys.readouterr().err


def test_reproduce_refuses_an_option_prefix(capsys):
    with pytest.raises(SystemExit) as stop:
        reproduce_main(["mzu", "--read", "--out", "nowhere"])
    assert stop.value.code == 2 and "--read" in capsys.readouterr().err


def test_analysis_refuses_an_option_prefix(capsys):
    with pytest.raises(SystemExit) as stop:
        analysis_main(["mufuru-ops", "--ckpt", "x.ckpt", "--output", "ops.png"])
    assert stop.value.code == 2 and "--ckpt" in capsys.readouterr().err
