"""``utils.imports.import_object``: the one way the package resolves a dotted import path it was given."""
from __future__ import annotations

import collections
import pytest
import torch

from lit_rnncells.analysis.common import task_class
from lit_rnncells.utils.imports import import_object, import_problem


def test_a_dotted_or_colon_path_names_the_object():
    assert import_object("torch.optim.Adam") is torch.optim.Adam
    assert import_object("collections:OrderedDict") is collections.OrderedDict


@pytest.mark.parametrize("path", ["Adam", "torch.optim.NoSuchOptimizer", "no_such_package_xyz.Thing", ".Adam",
                                  "torch.optim."])
def test_what_cannot_be_imported_is_none(path):
    assert import_object(path) is None


def test_a_checkpoint_of_a_class_that_cannot_be_imported_is_one_sentence():
    """Was an ImportError traceback from inside importlib."""
    with pytest.raises(ValueError, match=r"was written by gone_package\.Task, which cannot be imported here: there is "
                                         r"no module 'gone_package' on Python's path; run the command from the folder"):
        task_class({"lit_rnncells_task": "gone_package.Task"}, "old.ckpt")


def test_why_a_path_does_not_import_tells_the_causes_apart(tmp_path, monkeypatch):
    """One phrase per cause, each naming its fix; nothing for a path that imports or is no import path."""
    assert import_problem("torch.optim.Adam") is None and import_problem("Adam") is None
    assert import_problem("no_such_package_xyz.cells.Cell") == (
        "there is no module 'no_such_package_xyz' on Python's path; run the command from the folder that holds "
        "no_such_package_xyz, or add that folder to PYTHONPATH")
    assert import_problem("torch.optimm.Adam") == "there is no module 'torch.optimm'; check the spelling of torch.optimm.Adam"
    assert import_problem("torch.optim:Adamm") == "module torch.optim has no 'Adamm' (did you mean torch.optim.Adam?)"
    assert import_problem("torch.optim.Zzzzzz") == "module torch.optim has no 'Zzzzzz'; check the spelling"
    (tmp_path / "raises_on_import_xyz.py").write_text("import os\nvalue = 1 / 0\n")
    (tmp_path / "imports_a_missing_package_xyz.py").write_text("import not_installed_package_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert import_problem("raises_on_import_xyz.Cell") == (
        "importing raises_on_import_xyz raised ZeroDivisionError: division by zero "
        f"(at {tmp_path / 'raises_on_import_xyz.py'}:2); fix raises_on_import_xyz and run the command again")
    assert import_object("raises_on_import_xyz.Cell") is None  # the error is import_problem's to tell
    assert import_problem("imports_a_missing_package_xyz.Cell") == (
        "importing imports_a_missing_package_xyz raised ModuleNotFoundError: No module named "
        "'not_installed_package_xyz'; install not_installed_package_xyz or fix the import")
