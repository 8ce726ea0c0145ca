"""A value jsonargparse writes as ``Unable to serialize instance ...`` (a plain string under ``Union[Callable,
str]``: Lightning's ``ModelPruning(pruning_fn="l1_unstructured")``) is put back in the saved config, which the run's
``Test it`` / ``Resume it`` commands read; one it cannot put back is named."""
from __future__ import annotations

import json
from typing import Callable, Union

import yaml

from lit_rnncells.command.config_dump import repair_unserialized
from lit_rnncells.command.lightning_cli import ProgArgumentParser

BROKEN = "Unable to serialize instance l1_unstructured"


def test_plain_values_go_back_and_others_are_named() -> None:
    raw = {"trainer": {"callbacks": [{"init_args": {"pruning_fn": "l1_unstructured", "amount": 0.5}},
                                     {"init_args": {"fn": object()}}]}}
    dumped = {"trainer": {"callbacks": [{"init_args": {"pruning_fn": BROKEN, "amount": 0.5}},
                                        {"init_args": {"fn": "Unable to serialize instance <object>"}}]}}
    for fmt, text in (("yaml", yaml.safe_dump(dumped, sort_keys=False)), ("json", json.dumps(dumped))):
        fixed, lost = repair_unserialized(text, raw, fmt)
        data = yaml.safe_load(fixed)
        assert data["trainer"]["callbacks"][0]["init_args"] == {"pruning_fn": "l1_unstructured", "amount": 0.5}
        assert lost == ["trainer.callbacks[1].init_args.fn"]
    fixed, lost = repair_unserialized(yaml.safe_dump({"a": {"b": BROKEN}}), {"a": {}}, "yaml")  # no value to use
    assert yaml.safe_load(fixed) == {"a": {"b": BROKEN}} and lost == ["a.b"]
    untouched = yaml.safe_dump({"a": 1})
    assert repair_unserialized(untouched, {"a": 1}, "yaml") == (untouched, [])


def test_the_command_lines_parser_writes_a_string_under_union_callable_str() -> None:
    parser = ProgArgumentParser()
    parser.add_argument("--fn", type=Union[Callable, str])
    parser.add_argument("--size", type=int, default=3)
    cfg = parser.parse_args(["--fn", "l1_unstructured"])
    assert yaml.safe_load(parser.dump(cfg)) == {"fn": "l1_unstructured", "size": 3}
    assert json.loads(parser.dump(cfg, format="json")) == {"fn": "l1_unstructured", "size": 3}
    cfg = parser.parse_args(["--fn", "torch.nn.utils.prune.l1_unstructured"])  # a callable stays a callable
    assert yaml.safe_load(parser.dump(cfg))["fn"] == "torch.nn.utils.prune.l1_unstructured"
