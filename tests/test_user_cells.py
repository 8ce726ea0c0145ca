"""A user's own cell in a config: named by its import path it trains; by its bare name (its module not
imported) the error says to give the import path."""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
import torch

from lit_rnncells.cells import registry
from lit_rnncells.cli import run
from lit_rnncells.tasks import LogicEvaluator

ROOT = Path(__file__).resolve().parents[1]
LOGIC = str(ROOT / "configs" / "logic" / "mufuru.yaml")
TINY = ["--data.init_args.train_size", "32", "--data.init_args.val_size", "8", "--data.init_args.test_size", "8",
        "--trainer.max_epochs", "1", "--trainer.enable_progress_bar", "false", "--trainer.enable_model_summary",
        "false", "--trainer.logger", "false", "--test_after_fit", "false"]


def test_a_cell_of_a_users_module_trains_by_its_import_path(tmp_path, monkeypatch):
    monkeypatch.setattr(registry, "_CELLS", dict(registry._CELLS))  # the registration ends with this test
    monkeypatch.delitem(sys.modules, "tests.examples.minimal_cell", raising=False)
    monkeypatch.chdir(ROOT)  # where tests.examples imports, as the README says for a user's module
    assert run(["fit", "--config", LOGIC, *TINY, "--trainer.default_root_dir", str(tmp_path),
                "--model.init_args.cell", "tests.examples.minimal_cell.MinimalRNN"]) == 0
    checkpoint = next(tmp_path.rglob("*.ckpt"))
    # the checkpoint names the cell by its import path, not by the name it registers (which a fresh process, the
    # module not imported, did not know: analysis and load_from_checkpoint failed in jsonargparse)
    saved = torch.load(checkpoint, weights_only=True)["hyper_parameters"]["cell"]
    assert saved == {"class_path": "tests.examples.minimal_cell.MinimalRNN", "init_args": {}}
    monkeypatch.setattr(registry, "_CELLS", dict(registry._CELLS))
    registry._CELLS.pop("minimalrnn")  # as in a fresh process
    monkeypatch.delitem(sys.modules, "tests.examples.minimal_cell")
    model = LogicEvaluator.load_from_checkpoint(checkpoint, weights_only=True)
    assert type(model.rnn.cells[0]).__name__ == "MinimalRNN"


def test_a_checkpoint_whose_cell_does_not_import_is_one_line_for_the_figures(tmp_path, capsys, monkeypatch):
    """``analysis`` and ``load_from_checkpoint`` on a checkpoint of a user's cell, from a folder where its module is
    not importable: one line naming the module and the fix (was jsonargparse's report, "Does not validate against
    any of the Union subtypes", from inside Lightning's ``load_from_checkpoint``)."""
    from lit_rnncells.analysis.__main__ import main as analysis_main

    monkeypatch.chdir(tmp_path)
    assert run(["fit", "--config", LOGIC, *TINY, "--trainer.default_root_dir", str(tmp_path)]) == 0
    checkpoint = torch.load(next(tmp_path.rglob("*.ckpt")), weights_only=True)
    checkpoint["hyper_parameters"]["cell"] = {"class_path": "gone_user_cells_xyz.MyCell", "init_args": {}}
    moved = tmp_path / "moved.ckpt"
    torch.save(checkpoint, moved)
    capsys.readouterr()  # the fit's lines
    assert analysis_main(["mufuru-ops", "--ckpt_path", str(moved), "--output", str(tmp_path / "ops.png")]) == 2
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    why = (f"{str(moved)!r} was trained with gone_user_cells_xyz.MyCell, which cannot be imported here: there is no "
           "module 'gone_user_cells_xyz' on Python's path; run the command from the folder that holds "
           "gone_user_cells_xyz, or add that folder to PYTHONPATH.")
    assert lines == [f"error: {why}"]
    with pytest.raises(ValueError) as raised:  # the same from Python, for a path given as str or Path
        LogicEvaluator.load_from_checkpoint(moved, weights_only=True)
    assert str(raised.value) == why and raised.value.__context__ is None
    with pytest.raises(ValueError, match="^" + re.escape(why) + "$"):
        LogicEvaluator.load_from_checkpoint(str(moved), map_location="cpu")
    checkpoint["hyper_parameters"]["cell"] = "MuFuRU"  # the package's own cell: the checkpoint loads again
    torch.save(checkpoint, moved)
    assert isinstance(LogicEvaluator.load_from_checkpoint(moved, weights_only=True), LogicEvaluator)


def test_load_from_checkpoint_keeps_lightnings_errors_where_every_class_imports(tmp_path):
    """The one-line error is only for a class that does not import: a missing file stays Lightning's error, and
    the method still refuses an instance (Lightning's restricted classmethod)."""
    with pytest.raises(FileNotFoundError):
        LogicEvaluator.load_from_checkpoint(tmp_path / "absent.ckpt")
    bad = tmp_path / "bad.ckpt"
    torch.save({"state_dict": {}, "hyper_parameters": {"cell": "GRU", "hidden_size": "not a number"}}, bad)
    with pytest.raises(Exception) as raised:
        LogicEvaluator.load_from_checkpoint(bad, weights_only=True)
    assert "cannot be imported here" not in str(raised.value)
    with pytest.raises(TypeError, match="cannot be called on an instance"):
        LogicEvaluator(hidden_size=4).load_from_checkpoint(bad)


def test_an_unimported_cell_name_suggests_the_import_path(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run(["fit", "--config", LOGIC, *TINY, "--model.init_args.cell", "MyOwnCell"]) == 2
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1 and "Unknown cell 'MyOwnCell'" in lines[0]
    assert "import path, e.g. mycells.minimal.MyOwnCell" in lines[0]
    assert not os.listdir(tmp_path)


def test_an_unregistered_cell_is_found_and_saved_by_its_import_path():
    """``package.module.Class`` and ``package.module:Class`` both name a cell of a user's module that does not
    register itself; a task keeps it in its hyperparameters as that import path (plain data, so its checkpoints
    load with ``weights_only``), which finds the class again."""
    from lit_rnncells.cells import get_cell
    from lit_rnncells.tasks.base import cell_config, resolve_cell
    from tests.examples.leaderboard_cell import GainRNN

    assert get_cell("tests.examples.leaderboard_cell.GainRNN") is GainRNN
    assert get_cell("tests.examples.leaderboard_cell:GainRNN") is GainRNN
    assert "GainRNN" not in registry.available_cells()
    assert cell_config(GainRNN) == "tests.examples.leaderboard_cell.GainRNN"
    assert resolve_cell(cell_config(GainRNN)) is GainRNN
    assert cell_config(registry.get_cell("GRU")) == "GRU"
USER_CELL = '''
import torch
from torch import nn
from lit_rnncells.cells import RecurrentCell


class MyCell(RecurrentCell):
    """A user's cell, in the user's own module (not registered, not in the package)."""

    def __init__(self, input_size, hidden_size, unused=False):
        super().__init__(input_size, hidden_size)
        self.weight_ih = nn.Parameter(torch.randn(hidden_size, input_size) / input_size ** 0.5)
        self.weight_hh = nn.Parameter(torch.randn(hidden_size, hidden_size) / hidden_size ** 0.5)
        if unused:
            self.spare = nn.Parameter(torch.zeros(hidden_size))  # a parameter no step reads

    def project_input(self, x):
        return x @ self.weight_ih.t()

    def step(self, x_proj_t, h):
        return torch.tanh(x_proj_t + h @ self.weight_hh.t())
'''


def test_a_users_cell_runs_the_contract_from_outside_the_package(tmp_path, monkeypatch):
    """Issue 33: ``-k MinimalRNN`` collected nothing for a user's cell; ``lit_rnncells.nn.check_cell`` runs every
    check of the contract on a cell of any module, and names the check a broken cell fails."""
    import functools

    import pytest

    from lit_rnncells.nn import CellContractError, check_cell
    from lit_rnncells.nn.contract import CHECKS

    (tmp_path / "my_cells.py").write_text(USER_CELL)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "my_cells", raising=False)
    from my_cells import MyCell  # noqa: E402  (the user's module, outside the package)

    assert check_cell(MyCell) == list(CHECKS)
    with pytest.raises(CellContractError, match=r"cell contract, gradients: no finite, non-zero gradient reaches "
                                                r"\['cells.0.spare'"):
        check_cell(functools.partial(MyCell, unused=True))
