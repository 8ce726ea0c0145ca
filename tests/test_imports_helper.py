"""``utils.imports.import_object``: the one way the package resolves a dotted import path it was given."""
from __future__ import annotations

import collections
import pytest
import torch

from lit_rnncells.analysis.common import task_class
from lit_rnncells.utils.imports import import_object


def test_a_dotted_or_colon_path_names_the_object():
    assert import_object("torch.optim.Adam") is torch.optim.Adam
    assert import_object("collections:OrderedDict") is collections.OrderedDict


@pytest.mark.parametrize("path", ["Adam", "torch.optim.NoSuchOptimizer", "no_such_package_xyz.Thing", ".Adam",
                                  "torch.optim."])
def test_what_cannot_be_imported_is_none(path):
    assert import_object(path) is None


def test_a_checkpoint_of_a_class_that_cannot_be_imported_is_one_sentence():
    """Was an ImportError traceback from inside importlib."""
    with pytest.raises(ValueError, match=r"was written by gone_package\.Task, which cannot be imported here"):
        task_class({"lit_rnncells_task": "gone_package.Task"}, "old.ckpt")
