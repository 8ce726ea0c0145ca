"""The README's code examples run as written."""
from __future__ import annotations

import re
from pathlib import Path

import torch

from lit_rnncells.cells import registry
from lit_rnncells.nn import Recurrent
from lit_rnncells.nn.dropout import WeightDrop

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def python_block_after(heading: str) -> str:
    section = README.split(heading, 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_adding_a_cell_example_runs_and_trains(monkeypatch):
    monkeypatch.setattr(registry, "_CELLS", dict(registry._CELLS))  # keep the global registry clean
    namespace: dict = {}
    exec(python_block_after("## Adding a cell"), namespace)
    layer = Recurrent("minimalrnn", 5, 6, num_layers=2, bidirectional=True, batch_first=True)
    out, state = layer(torch.randn(3, 4, 5), lengths=torch.tensor([4, 2, 1]))
    assert out.shape == (3, 4, 12) and state.shape == (4, 3, 6)
    dropped = WeightDrop(layer, 0.5).train()
    dropped(torch.randn(3, 4, 5))[0].sum().backward()
    assert all(p.grad is not None for p in layer.parameters())


def test_subclass_example_matches_the_tested_module():
    example = python_block_after("## Subclassing a task")
    source = (Path(__file__).parent / "examples" / "custom_task.py").read_text()
    for line in example.strip().splitlines():
        if line.strip() and not line.startswith(("import", "from")):
            assert line.strip() in source, line


def test_recurrent_snippet_runs_as_written():
    exec(python_block_after("## Using it"), {})


def test_the_readme_refers_only_to_files_in_the_repository():
    root = Path(__file__).resolve().parents[1]
    for link in re.findall(r"\]\(([^)#:]+)\)", README):
        assert (root / link).exists(), link
    assert "DESIGN.md" not in README and "my_package" not in README


def test_the_readme_reads_in_five_minutes():
    """At most 16 KB: the detail lives in docs/ (issue: the daily loop)."""
    size = len(README.encode("utf-8"))
    assert size <= 16_000, f"README.md is {size:,} bytes; move detail into docs/"


def test_the_readme_test_command_is_the_one_ci_runs():
    ci = (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text()
    readme_test = re.search(r"^(python -m pytest[^#\n]*?)\s+# test", README, re.M).group(1).split()
    ci_test = re.search(r"^python -m pytest[^#\n]*", ci, re.M).group(0).split()
    assert all(word in ci_test for word in readme_test), (readme_test, ci_test)
