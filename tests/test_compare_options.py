"""compare's typed option groups (matching, selection, runs, launch): the Python API, the old flat keywords with
their one deprecation line each, and the command line's --help groups that match the dataclasses."""
from __future__ import annotations

import io
from dataclasses import fields
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import pytest

from lit_rnncells.utils import arguments
from lit_rnncells.experiments import compare as cmp
from lit_rnncells.experiments.compare.cli import groups_of

ROOT = Path(__file__).resolve().parents[1]
CONFIG = str(ROOT / "configs" / "logic" / "gru.yaml")
TINY = ["--data.init_args.train_size", "32", "--data.init_args.val_size", "16"]


class Recording(cmp.Launcher):
    """A launcher that runs nothing: it keeps the jobs and the environment it was given (every run 'fails')."""

    def __init__(self) -> None:
        self.jobs: List[cmp.Job] = []
        self.env: Optional[Dict[str, str]] = None

    def run(self, jobs: Sequence[cmp.Job], env: Optional[Dict[str, str]], log: Any) -> Dict[str, Any]:
        self.jobs, self.env = list(jobs), env
        return {}


def planned(tmp_path: Path, **options: Any) -> Recording:
    """The runs compare hands its launcher, given ``options`` (groups or old flat names)."""
    launcher = options.pop("launcher", None) or Recording()
    failed: List[str] = []
    rows = cmp.compare(CONFIG, ["GRU", "MuFuRU"], seeds=[1], budget="steps=1", out=tmp_path, log=io.StringIO(),
                       failed=failed, **options, **({"launch": cmp.Launch(launcher=launcher)}
                                                     if "launch" not in options and "jobs" not in options else {}))
    assert rows == [] and len(failed) == 2  # the recording launcher ran nothing
    return launcher


def spec_settings(launcher: Recording) -> List[tuple]:
    return [(j.spec.hidden_size, j.spec.monitor, j.spec.mode, j.spec.extra, j.spec.test_every_epoch, j.spec.no_wandb)
            for j in launcher.jobs]


def test_the_groups_reach_every_run(tmp_path):
    launcher = planned(tmp_path, matching=cmp.Matching(hidden_size=3), selection=cmp.Selection("val/loss"),
                       runs=cmp.RunOptions(extra=TINY, test_every_epoch=True, no_wandb=True, env={"A_VAR": "1"}))
    assert spec_settings(launcher) == [(3, "val/loss", "min", TINY, True, True)] * 2
    assert launcher.env == {"A_VAR": "1"}
    assert [j.spec.run_id for j in launcher.jobs] == ["GRU-h3-s1", "MuFuRU-h3-s1"]


def test_a_group_given_as_a_dict_is_the_same_group(tmp_path):
    as_classes = planned(tmp_path / "a", matching=cmp.Matching(hidden_size=3), runs=cmp.RunOptions(extra=TINY))
    as_dicts = planned(tmp_path / "b", matching={"hidden_size": 3}, runs={"extra": TINY})
    assert spec_settings(as_classes) == spec_settings(as_dicts) == [(3, "val/acc", "max", TINY, False, False)] * 2
    with pytest.raises(ValueError, match=r"Unknown matching option\(s\) \['hidden'\]; matching takes hidden_size, "
                                         r"match_params"):
        planned(tmp_path / "c", matching={"hidden": 3})


def test_old_flat_keywords_work_with_one_deprecation_line_each(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(arguments, "_said_deprecated", set())
    new = planned(tmp_path / "new", matching=cmp.Matching(hidden_size=3), selection=cmp.Selection(mode="min"),
                  runs=cmp.RunOptions(extra=TINY, no_wandb=True))
    capsys.readouterr()
    old = planned(tmp_path / "old", hidden_size=3, mode="min", extra=TINY, no_wandb=True)
    assert spec_settings(old) == spec_settings(new)
    err = capsys.readouterr().err.splitlines()
    said = [line for line in err if "is deprecated" in line]
    assert said == [f"lit_rnncells: compare option `{old}` is deprecated and goes in the next release; use `{new}`."
                    for old, new in (("hidden_size", "matching.hidden_size"), ("mode", "selection.mode"),
                                     ("extra", "runs.extra"), ("no_wandb", "runs.no_wandb"))]
    planned(tmp_path / "again", hidden_size=3)  # once per process and name
    assert "is deprecated" not in capsys.readouterr().err


def test_an_old_launch_keyword_builds_the_launcher(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(arguments, "_said_deprecated", set())
    with pytest.raises(cmp.CompareError, match="--jobs 0 is not a positive number"):
        cmp.compare(CONFIG, ["GRU"], seeds=[1], out=tmp_path, jobs=0)
    assert "use `launch.jobs`" in capsys.readouterr().err


def test_an_unknown_keyword_is_the_usual_type_error(tmp_path):
    with pytest.raises(TypeError, match="compare\\(\\) got an unexpected keyword argument 'hiden_size'"):
        cmp.compare(CONFIG, ["GRU"], out=tmp_path, hiden_size=3)


def test_help_shows_one_argument_group_per_option_group():
    parser = cmp.build_parser()
    by_title = {g.title: {a.dest for a in g._group_actions} for g in parser._action_groups}
    flagged = {"matching": {"match_params", "hidden_size"}, "selection": {"monitor", "mode"},
               "runs": {"test_every_epoch", "no_wandb", "keep_epoch_checkpoints"}, "launch": {"jobs", "launcher"}}
    for name, group_type in cmp.GROUPS.items():
        title = f"{name} (compare's {name}={group_type.__name__}(...))"
        assert flagged[name] <= by_title[title]
        assert flagged[name] <= {f.name for f in fields(group_type)}  # each flag is a field of its dataclass
    text = parser.format_help()
    text = text[text.index("\noptions:"):]  # the groups, after the usage lines
    order = [text.index(f"{name} (compare's") for name in ("matching", "selection", "runs", "launch")]
    assert order == sorted(order)
    assert order[0] < text.index("--hidden-size") < order[1] < text.index("--mode {min,max}") < order[2]
    assert order[2] < text.index("--no-wandb") < order[3] < text.index("--jobs N") < text.index("--partition")


def test_the_command_line_fills_the_groups(tmp_path):
    args = cmp.build_parser().parse_args(["--config", CONFIG, "--cells", "GRU", "--match-params", "GRU@8",
                                          "--mode", "min", "--no-wandb", "--jobs", "2"])
    assert groups_of(args, ["--trainer.fast_dev_run", "1"], tmp_path) == {
        "matching": cmp.Matching(match_params="GRU@8"), "selection": cmp.Selection(mode="min"),
        "runs": cmp.RunOptions(extra=["--trainer.fast_dev_run", "1"], no_wandb=True),
        "launch": cmp.Launch(jobs=2)}
