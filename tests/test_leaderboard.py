"""The leaderboard at a tiny budget: 2 cells (one a user's unregistered cell, by its import path) x 2 tiny tasks
x 2 seeds through the comparison runner; the page's table equals runs.csv's means, the rank heatmap and the
curves are written, a rerun resumes, and bad input is one `error:` line before any run."""
from __future__ import annotations

import csv
import io
import re
import statistics
from pathlib import Path

import pytest

from lit_rnncells.experiments import leaderboard as lb
from lit_rnncells.experiments.leaderboard_tasks import TASKS, Task
from lit_rnncells.experiments.report import mean_std
from lit_rnncells.experiments.seed_spread import SeedResult, welch_p
from tests.test_language_model import ptb_char_corpus

ROOT = Path(__file__).resolve().parents[1]
ENV = {"WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
PNG = b"\x89PNG\r\n\x1a\n"
USER_CELL = "tests.examples.leaderboard_cell:GainRNN"  # not registered: found by its import path only
CELLS = ["GRU", USER_CELL]
SEEDS = [1, 2]


def tiny_tasks(corpus: Path) -> list:
    logic = Task("tiny_logic", "logic, 64 formulas", "configs/logic/gru.yaml", "test/acc", "GRU@4", scale=100.0,
                 extra=("--data.init_args.train_size", "64", "--data.init_args.val_size", "32",
                        "--data.init_args.test_size", "32", "--trainer.enable_progress_bar", "false"))
    lm = Task("tiny_lm", "PTB-format characters, a tiny corpus", "configs/lm/ptb_char_gru.yaml", "test/bpc", "GRU@8",
              extra=("--data.init_args.data_dir", str(corpus), "--data.init_args.cache_dir", "",
                     "--model.init_args.embedding_size", "8", "--data.init_args.batch_size", "4",
                     "--data.init_args.eval_batch_size", "2", "--data.init_args.bptt", "20",
                     "--trainer.val_check_interval", "2", "--trainer.enable_progress_bar", "false"),
              figure=("mzu", "ptb_char"))  # the MZU paper's PTB char figures: GRU 1.269
    return [logic, lm]


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    folder = tmp_path_factory.mktemp("leaderboard")
    tasks = tiny_tasks(ptb_char_corpus(folder / "ptb"))
    log = io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WANDB_MODE", "disabled")
        page = lb.leaderboard(CELLS, tasks, seeds=SEEDS, budget=["steps=4"], out=folder / "runs",
                              page=folder / "docs" / "board.md", env=ENV, log=log)
    return page, tasks, folder / "runs", log.getvalue()


def main_table(page: Path) -> dict:
    """The page's first table: {cell: [entry per task]}."""
    lines = page.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| cell |"))
    rows = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = cells[1:]
    return rows


def runs_csv(folder: Path) -> list:
    with open(folder / "runs.csv") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_the_page_has_the_table_the_rank_heatmap_and_each_tasks_curves(board):
    page, tasks, out, log = board
    text = page.read_text()
    table = main_table(page)
    assert set(table) == {"GRU", "tests.examples.leaderboard_cell.GainRNN"}
    header = next(line for line in text.splitlines() if line.startswith("| cell |"))
    assert "tiny_logic: test/acc ×100 ↑" in header and "tiny_lm: test/bpc ↓" in header
    assert "steps=4" in text and "seeds 1, 2" in text
    ranks = page.parent / "board_ranks.png"
    assert ranks.read_bytes()[:8] == PNG and "![Ranks per task](board_ranks.png)" in text
    for task in tasks:
        curves = page.parent / f"board_{task.name}_curves.png"
        assert curves.read_bytes()[:8] == PNG and len(curves.read_bytes()) > 5000
        assert f"]({curves.name})" in text
        assert (out / task.name / "runs.csv").is_file()  # each task ran through the comparison runner
    assert log.count(" done in ") == len(CELLS) * len(tasks) * len(SEEDS)
    assert "--paper-sizes" in text  # the command at the papers' sizes


@pytest.mark.slow
def test_the_pages_numbers_are_runs_csvs_means_and_stds(board):
    page, tasks, out, _ = board
    table = main_table(page)
    for column, task in enumerate(tasks):
        rows = runs_csv(out / task.name)
        for cell, label in (("GRU", "GRU"), ("tests.examples.leaderboard_cell.GainRNN", "GainRNN")):
            values = [float(r[task.metric]) * task.scale for r in rows if r["cell"] == label]
            assert len(values) == len(SEEDS)
            shown = table[cell][column]
            mean, std = (float(x) for x in shown.split(" (")[0].split(" ± "))
            assert shown.startswith(mean_std(values))  # the house format: both to the mean's decimals
            places = len(shown.split(" ± ")[0].partition(".")[2])
            assert mean == pytest.approx(statistics.fmean(values), abs=0.51 * 10 ** -places)
            assert std == pytest.approx(statistics.stdev(values), abs=0.51 * 10 ** -places)


@pytest.mark.slow
def test_the_paper_figure_shows_where_the_paper_reports_one(board):
    page, _, _, _ = board
    table = main_table(page)
    assert table["GRU"][1].endswith("(paper 1.269)")  # MZU Table 1, read from the reproduction experiment
    assert "paper" not in table["GRU"][0] and "paper" not in table["tests.examples.leaderboard_cell.GainRNN"][1]


@pytest.mark.slow
def test_ranks_follow_the_means_and_each_metrics_direction(board):
    page, tasks, out, _ = board
    text = page.read_text()
    for task in tasks:
        section = text[text.index(f"## {task.name}:"):]
        section = section[:section.index("![")]
        ranked = {}
        for line in section.splitlines():
            found = re.match(r"\| (\S+) \| \d+ \| [\d,]+ \| 2 \| ([^|]+) \| (\d) \|", line)
            if found:
                ranked[found[1]] = (float(found[2].split(" ± ")[0]), int(found[3]))
        assert len(ranked) == 2
        best = (min if task.lower_is_better else max)(ranked.values())
        assert best[1] == 1
        rows = runs_csv(out / task.name)
        sizes = {r["cell"]: int(r["params"]) for r in rows}
        assert sizes["GainRNN"] == pytest.approx(sizes["GRU"], rel=0.35)  # matched parameters


@pytest.mark.slow
def test_each_cell_has_welchs_p_against_the_rank_1_cell_from_runs_csv(board):
    """The p column is Welch's t-test of the cell's seeds against the best mean's seeds, as runs.csv holds them."""
    page, tasks, out, _ = board
    text = page.read_text()
    labels = {"GRU": "GRU", "tests.examples.leaderboard_cell.GainRNN": "GainRNN"}
    for task in tasks:
        section = text[text.index(f"## {task.name}:"):]
        rows = {m[1]: (int(m[2]), m[3]) for m in re.finditer(r"^\| (\S+) \|(?: [^|]+ \|){4} (\d) \| ([^|]+) \|",
                                                              section[:section.index("![")], re.M)}
        assert len(rows) == 2, section
        first = next(cell for cell, (rank, _) in rows.items() if rank == 1)
        other = next(cell for cell in rows if cell != first)
        values = {cell: [float(r[task.metric]) * task.scale for r in runs_csv(out / task.name)
                         if r["cell"] == labels[cell]] for cell in rows}
        seeds = {cell: SeedResult(statistics.fmean(v), statistics.stdev(v), len(v)) for cell, v in values.items()}
        p = welch_p(seeds[other], seeds[first])
        assert rows[first][1].strip() == "–"
        assert rows[other][1].strip() == ("< 0.001" if p < 0.001 else f"{p:.3f}") + (" (within)" if p >= 0.05 else "")
    assert "p vs rank 1: Welch's t-test over seeds" in text


@pytest.mark.slow
def test_a_rerun_keeps_every_finished_run_and_writes_the_page_again(board, monkeypatch, capsys):
    page, tasks, out, _ = board
    before = page.read_text()
    page.unlink()
    monkeypatch.setitem(TASKS, tasks[0].name, tasks[0])  # named on the command line like a table task
    monkeypatch.setitem(TASKS, tasks[1].name, tasks[1])
    code = lb.main(["--cells", *CELLS, "--tasks", "tiny_logic", "tiny_lm", "--seed-list", "1", "2", "--budget",
                    "steps=4", "--out", str(out), "--page", str(page)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert err.count("finished earlier, kept") == 8 and " done in " not in err
    assert main_table(page) == main_table_of(before, page.parent / "before.md")


def main_table_of(text: str, path: Path) -> dict:
    path.write_text(text)
    return main_table(path)


@pytest.mark.parametrize("argv, expected", [
    (["--tasks", "logic", "nope"], "--tasks: unknown task 'nope'; use one of logic, ptb_char"),
    (["--cells", "GRU", "NoSuchCell"], "Unknown cell 'NoSuchCell'"),
    (["--cells", "GRU", "tests.examples.no_module:Cell"],
     "cannot be imported: there is no module 'tests.examples.no_module'; check the spelling"),
    (["--budget", "steps=0"], "--budget 'steps=0' is not KIND=N"),
    (["--budget", "steps=3", "epochs=2"], "give one, and the others as TASK:VALUE"),
    (["--tasks", "logic", "--match-params", "ptb_char:GRU@8"], "'ptb_char' is not a task --tasks chooses"),
    (["--tasks", "logic", "--match-params", "GRU@x"], "Task logic: --match-params 'GRU@x'"),
    (["--budg", "steps=3"], "unrecognized arguments: --budg steps=3; see python -m lit_rnncells.leaderboard --help"),
])
def test_bad_input_is_one_error_line_before_any_run(argv, expected, tmp_path, capsys):
    out = tmp_path / "runs"
    assert lb.main([*argv, "--out", str(out)]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1 and expected in errors[0], lines
    assert not any(out.rglob("spec.json"))  # no run started


def test_a_page_that_is_a_users_file_is_refused_before_any_run_and_kept(tmp_path, capsys):
    """--page naming a file of the user's (notes.md) was written over with the leaderboard once the runs ended."""
    mine = tmp_path / "notes.md"
    mine.write_text("my notes\n")
    out = tmp_path / "runs"
    assert lb.main(["--tasks", "logic", "--cells", "GRU", "--page", str(mine), "--out", str(out)]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and f"--page {str(mine)!r} is a file of yours, not a leaderboard page" in errors[0]
    assert mine.read_text() == "my notes\n" and not any(out.rglob("spec.json"))


def test_a_page_the_leaderboard_wrote_may_be_written_again(tmp_path):
    from lit_rnncells.experiments.leaderboard_page import PAGE_TITLE, check_page

    page = tmp_path / "board.md"
    page.write_text(f"{PAGE_TITLE}2 cells x 1 task\n\nWritten by ...\n")
    check_page(page)  # no error: the leaderboard rewrites its own page
    check_page(tmp_path / "new.md")


def test_paper_sizes_run_each_config_as_it_is(tmp_path):
    """--paper-sizes: no CPU-size arguments, the config's own cell and hidden size as the target, its epochs."""
    plan = lb.make_plan(["GRU"], ["logic", "ptb_char"], 3, [], [], tmp_path / "runs", paper_sizes=True)
    assert [t.extra for t in plan.tasks] == [(), ()]
    assert plan.targets == {"logic": "GRU@8", "ptb_char": "GRU@800"}
    assert {k: str(v) for k, v in plan.budgets.items()} == {"logic": "epochs=100", "ptb_char": "epochs=60"}
    word = lb.make_plan(["LSTM"], ["ptb_word"], 1, [], [], tmp_path / "runs", paper_sizes=True)
    assert word.tasks[0].config == "configs/lm/ptb_word_awd_lstm.yaml"  # the reproduction's paper-size config
    assert str(word.budgets["ptb_word"]) == "epochs=500" and word.targets["ptb_word"] == "LSTM@1150"
    small = lb.make_plan(["GRU"], ["logic", "ptb_char"], 2, ["steps=300", "ptb_char:steps=100"],
                         ["logic:GRU@16"], tmp_path / "runs")
    assert {k: str(v) for k, v in small.budgets.items()} == {"logic": "steps=300", "ptb_char": "steps=100"}
    assert small.targets == {"logic": "GRU@16", "ptb_char": "GRU@256"}  # ptb_char: the MZU reproduction's target
    assert small.tasks[1].extra[:2] == ("--model.init_args.embedding_size", "64")


def test_jobs_and_a_launcher_reach_every_tasks_comparison(tmp_path, monkeypatch):
    """--jobs goes to the runner of every task unchanged; a launcher is built per task folder, all before the
    first run."""
    calls, built = [], []
    monkeypatch.setattr(lb, "check_tasks", lambda plan: None)
    monkeypatch.setattr(lb, "compare", lambda config, cells, **kw: calls.append((config, kw)) or [])
    plan = lb.make_plan(["GRU"], ["logic", "ptb_char"], 1, ["steps=2"], [], tmp_path / "runs", jobs=3,
                        launcher_for=lambda folder: built.append(folder) or f"launcher of {folder.name}")
    lb.run_plan(plan, log=io.StringIO())
    assert built == [tmp_path / "runs" / "logic", tmp_path / "runs" / "ptb_char"]
    assert [(kw["launch"].jobs, kw["launch"].launcher, kw["out"]) for _, kw in calls] == [
        (3, "launcher of logic", tmp_path / "runs" / "logic"), (3, "launcher of ptb_char", tmp_path / "runs" / "ptb_char")]
    with pytest.raises(lb.CompareError, match="--jobs 0"):
        lb.make_plan(["GRU"], ["logic"], 1, [], [], tmp_path / "runs", jobs=0)
