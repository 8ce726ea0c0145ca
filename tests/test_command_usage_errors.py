"""Every command other than the LightningCLI answers a usage mistake in one ``error:`` line naming its
``--help`` (argparse printed its usage lines first, then ``prog: error: ...``), and refuses an ``--out`` it cannot
write before any work (a ``FileNotFoundError`` / ``PermissionError`` traceback from a ``mkdir`` before)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, List

import pytest

from lit_rnncells.analysis.__main__ import main as analysis_main
from lit_rnncells.data.__main__ import main as data_main
from lit_rnncells.experiments.compare.cli import main as compare_main
from lit_rnncells.experiments.leaderboard import main as leaderboard_main
from lit_rnncells.experiments.reproduce import main as reproduce_main
from lit_rnncells.utils.paths import check_writable_folder

ROOT = Path(__file__).resolve().parents[1]
LOGIC = str(ROOT / "configs" / "logic" / "mufuru.yaml")


def _exit_code(main: Callable[[List[str]], int], argv: List[str]) -> int:
    try:
        return main(argv)
    except SystemExit as stop:
        return int(stop.code or 0)


@pytest.mark.parametrize("main,argv,prog", [
    (analysis_main, ["no-such-figure"], "python -m lit_rnncells.analysis"),
    (analysis_main, ["mufuru-ops"], "python -m lit_rnncells.analysis mufuru-ops"),
    (data_main, [], "python -m lit_rnncells.data"),
    (data_main, ["prepare"], "python -m lit_rnncells.data prepare"),
    (reproduce_main, [], "python -m lit_rnncells.reproduce"),
    (reproduce_main, ["mzu", "--scale", "huge"], "python -m lit_rnncells.reproduce"),
    (leaderboard_main, ["--no-such-option"], "python -m lit_rnncells.leaderboard"),
])
def test_a_usage_mistake_is_one_error_line(main, argv, prog, capsys) -> None:
    assert _exit_code(main, argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and err.endswith(f"; see {prog} --help.\n"), err


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc, a folder that takes no new files")
@pytest.mark.parametrize("main,argv", [
    (compare_main, ["--config", LOGIC, "--cells", "GRU", "--budget", "steps=2"]),
    (reproduce_main, ["mufuru"]),
    (leaderboard_main, ["--cells", "GRU", "--tasks", "logic"]),
])
def test_an_out_folder_that_takes_no_files_is_refused_before_any_run(main, argv, capsys) -> None:
    assert _exit_code(main, [*argv, "--out", "/proc/lit_rnncells_out"]) == 2
    err = capsys.readouterr().err
    assert err == ("error: --out '/proc/lit_rnncells_out' cannot be written (No such file or directory: '/proc' does "
                   "not take new files); choose a --out folder you can write to.\n")


def test_a_writable_folder_passes_and_keeps_nothing_of_the_check(tmp_path: Path) -> None:
    assert check_writable_folder(tmp_path / "a" / "b", "--out") == tmp_path / "a" / "b"
    assert check_writable_folder(tmp_path, "--out") == tmp_path
    assert os.listdir(tmp_path) == []
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError, match="is under .*which is a file"):
        check_writable_folder(tmp_path / "file" / "out", "--out")
