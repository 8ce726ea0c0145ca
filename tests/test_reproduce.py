"""Per-paper reproduction reports: the ordering verdict, the summary of runs, and a tiny report end to end."""
from __future__ import annotations

from pathlib import Path

import pytest

from lit_rnncells import reproduce
from lit_rnncells.experiments.reproduce import Experiment, experiment_markdown, ordering_verdict, summarise

ROOT = Path(__file__).resolve().parents[1]


def _exp(**kw) -> Experiment:
    base = dict(name="x", title="X", config="configs/logic/gru.yaml", cells={"GRU": "GRU", "MuFuRU": "MuFuRU"},
                paper={"GRU": 0.9, "MuFuRU": 0.95}, metric="test/acc", lower_is_better=False, budget="epochs=1")
    base.update(kw)
    return Experiment(**base)


def _row(cell: str, seed: int, acc: float) -> dict:
    return {"cell": cell, "seed": seed, "hidden_size": 8, "params": 1234, "test/acc": acc}


def test_summary_is_mean_and_sample_std_per_cell_with_the_papers_value():
    exp = _exp(scale=100.0)
    entries = {e["cell"]: e for e in summarise([_row("GRU", 1, 0.5), _row("GRU", 2, 0.7), _row("MuFuRU", 1, 0.9)],
                                               exp)}
    assert entries["GRU"]["mean"] == pytest.approx(60.0) and entries["GRU"]["std"] == pytest.approx(14.1421, 1e-4)
    assert entries["GRU"]["n"] == 2 and entries["MuFuRU"]["std"] is None and entries["MuFuRU"]["paper"] == 0.95


def test_the_table_lists_the_cells_in_the_experiments_order_whatever_order_the_runs_came_in():
    """A run returns its rows in plan order, ``--read-only`` in folder-name order; the table is the same either way."""
    exp = _exp(cells={"MuFuRU": "MuFuRU", "GRU": "GRU", "MGU": "MGU"})
    rows = [_row("GRU", 1, 0.5), _row("MGU", 1, 0.6), _row("MuFuRU", 1, 0.9)]
    assert [e["cell"] for e in summarise(rows, exp)] == ["MuFuRU", "GRU", "MGU"]
    assert [e["cell"] for e in summarise(rows[::-1], exp)] == ["MuFuRU", "GRU", "MGU"]


def test_a_grid_reads_in_the_order_of_its_values_not_as_text():
    """Runs read back by folder name come as hidden 128, 16, 2; the table and the verdicts list 2, 16, 128."""
    key = "model.init_args.hidden_size"
    exp = _exp(vary=(f"{key}=2,16,128",), claimed_best="MuFuRU")
    rows = [dict(_row(cell, 1, acc), **{key: h}) for h in ("128", "16", "2") for cell, acc in (("GRU", 0.5),
                                                                                             ("MuFuRU", 0.9))]
    entries = summarise(rows, exp)
    assert [(e["cell"], e["grid"][key]) for e in entries] == [("GRU", "2"), ("GRU", "16"), ("GRU", "128"),
                                                             ("MuFuRU", "2"), ("MuFuRU", "16"), ("MuFuRU", "128")]
    verdicts = [ln for ln in experiment_markdown(exp, entries, []).splitlines() if ln.startswith("- hidden_size")]
    assert [ln.split(":")[0] for ln in verdicts] == ["- hidden_size 2", "- hidden_size 16", "- hidden_size 128"]


@pytest.mark.parametrize("lower, ours, shows", [(False, (0.5, 0.9), True), (False, (0.9, 0.5), False),
                                                (True, (0.9, 0.5), False), (True, (0.5, 0.9), True)])
def test_the_ordering_verdict_compares_best_first_in_the_metric_direction(lower, ours, shows):
    exp = _exp(lower_is_better=lower, paper={"GRU": 1.0, "MuFuRU": 2.0})
    entries = summarise([_row("GRU", 1, ours[0]), _row("MuFuRU", 1, ours[1])], exp)
    # the paper ranks GRU (1.0) ahead when lower is better, MuFuRU (2.0) ahead otherwise
    verdict = ordering_verdict(entries, exp)
    assert ("**shows**" in verdict) == shows, verdict
    assert ("does **not** show" in verdict) == (not shows)


def test_cells_level_as_printed_are_not_ordered():
    """Means equal to the table's precision (a tiny run's BLEU of 0 for every cell) are level, not an ordering."""
    exp = _exp(lower_is_better=False, paper={"GRU": 1.0, "MuFuRU": 2.0, "MGU": 0.5})
    level = ordering_verdict(summarise([_row("GRU", 1, 0.0), _row("MuFuRU", 1, 0.0), _row("MGU", 1, 0.0)], exp), exp)
    assert "Ours: GRU = MuFuRU = MGU." in level and "is **not resolved**" in level and "3 of its 3 pairs" in level
    close = ordering_verdict(summarise([_row("GRU", 1, 0.5001), _row("MuFuRU", 1, 0.50049), _row("MGU", 1, 0.1)],
                                       exp), exp)
    # sorted as the paper orders them (MuFuRU > GRU > MGU), but the first two print alike: not resolved
    assert "Ours: MuFuRU = GRU > MGU." in close and "**not resolved**" in close and "MuFuRU and GRU" in close


def _seeds(cell: str, *accs: float) -> list:
    return [_row(cell, seed, acc) for seed, acc in enumerate(accs, 1)]


def test_an_order_within_the_seeds_spread_is_not_resolved_and_names_the_pair():
    """Means in the paper's order whose seeds overlap (Welch p about 0.5) are no ordering."""
    exp = _exp(lower_is_better=False, paper={"GRU": 1.0, "MuFuRU": 2.0})
    entries = summarise(_seeds("GRU", 0.50, 0.60, 0.70) + _seeds("MuFuRU", 0.55, 0.68, 0.75), exp)
    verdict = ordering_verdict(entries, exp)
    assert "Ours: MuFuRU ≈ GRU (≈: within the seeds' spread" in verdict
    assert "is **not resolved**" in verdict and "MuFuRU and GRU (p = 0.5" in verdict, verdict


def test_a_reversal_beyond_the_spread_does_not_show_and_an_agreement_beyond_it_shows():
    exp = _exp(lower_is_better=False, paper={"GRU": 1.0, "MuFuRU": 2.0, "MGU": 0.5})
    tight = _seeds("MuFuRU", 0.90, 0.91, 0.92) + _seeds("GRU", 0.80, 0.81, 0.82)
    shows = ordering_verdict(summarise(tight + _seeds("MGU", 0.70, 0.71, 0.72), exp), exp)
    assert shows.endswith("The paper's ordering **shows** at this budget."), shows
    # MGU ahead of GRU beyond the spread: not shown, the reversed pair named, however the rest agree
    reversed_ = ordering_verdict(summarise(tight + _seeds("MGU", 0.85, 0.86, 0.87), exp), exp)
    assert ("does **not** show at this budget: reversed: MGU ahead of GRU (p = 0.004; 0.007 after Holm's correction"
            " over 3 pairs)." in reversed_), reversed_
    # MGU level with GRU within the spread, the rest agree: not resolved rather than not shown
    overlapping = ordering_verdict(summarise(tight + _seeds("MGU", 0.70, 0.80, 0.90), exp), exp)
    assert "is **not resolved**" in overlapping and "GRU and MGU (p = " in overlapping, overlapping
    # one seed each: the means decide, and the verdict says nothing was tested
    single = ordering_verdict(summarise([_row("MuFuRU", 1, 0.9), _row("GRU", 1, 0.8), _row("MGU", 1, 0.7)], exp), exp)
    assert "**shows** at this budget (3 of its 3 pairs by the means alone" in single, single


def test_a_reversal_counts_only_where_it_survives_holms_correction_over_the_papers_pairs():
    """Four cells the paper orders: six pairs. MGU ahead of GRU at p = 0.021 alone, but four pairs have a p at
    least as large, so Holm's step-down multiplies it by 4 (0.085): not resolved, with both p-values. Further
    apart, the reversal survives the correction and the ordering does not show."""
    exp = _exp(lower_is_better=False, paper={"MuFuRU": 4.0, "GRU": 3.0, "MGU": 2.0, "CARU": 1.0})
    base = _seeds("MuFuRU", 0.77, 0.79, 0.81) + _seeds("GRU", 0.70, 0.71, 0.72) + _seeds("CARU", 0.67, 0.69, 0.71)
    close = ordering_verdict(summarise(base + _seeds("MGU", 0.73, 0.74, 0.75), exp), exp)
    assert ("is **not resolved** at this budget: no pair is reversed; not separated: GRU and MGU (p = 0.021; 0.085"
            " after Holm's correction over 6 pairs); GRU and CARU (p = 0.221)." in close), close
    apart = ordering_verdict(summarise(base + _seeds("MGU", 0.75, 0.76, 0.77), exp), exp)
    assert ("does **not** show at this budget: reversed: MGU ahead of GRU (p = 0.004; 0.022 after Holm's correction"
            " over 6 pairs); not separated: MuFuRU and MGU (p = 0.104); GRU and CARU (p = 0.221)." in apart), apart


def test_without_numbers_the_papers_claimed_best_cell_is_checked():
    exp = _exp(paper={"GRU": None, "MuFuRU": None}, claimed_best="MuFuRU")
    shows = ordering_verdict(summarise([_row("GRU", 1, 0.5), _row("MuFuRU", 1, 0.9)], exp), exp)
    not_shown = ordering_verdict(summarise([_row("GRU", 1, 0.9), _row("MuFuRU", 1, 0.5)], exp), exp)
    assert "claim **shows**" in shows and "claim does **not** show" in not_shown
    # the claimed cell ahead but within the seeds' spread of the runner-up: not resolved, with the p-value
    close = ordering_verdict(summarise(_seeds("GRU", 0.5, 0.7) + _seeds("MuFuRU", 0.55, 0.75), exp), exp)
    assert "claim is **not resolved** at this budget (MuFuRU ahead of GRU: p = 0.757)." in close, close
    apart = ordering_verdict(summarise(_seeds("GRU", 0.5, 0.51) + _seeds("MuFuRU", 0.9, 0.91), exp), exp)
    assert "claim **shows** at this budget (MuFuRU ahead of GRU: p < 0.001)" in apart, apart


def test_a_tiny_report_runs_its_experiment_then_reads_it(tmp_path, monkeypatch):
    exp = _exp(name="tiny", budget="epochs=1", seeds=1, hidden_size=4, scale=100.0,
               extra=("--data.init_args.train_size", "64", "--data.init_args.val_size", "16",
                      "--data.init_args.test_size", "32", "--trainer.limit_val_batches", "2"),
               paper_setting="p", our_setting="o")
    monkeypatch.setitem(reproduce.PAPERS, "tiny", ("Tiny paper", [exp]))
    report = tmp_path / "docs" / "tiny.md"
    text = reproduce.reproduce("tiny", tmp_path / "runs", report)
    assert report.read_text() == text
    assert "| GRU | 0.900 |" in text and "| MuFuRU | 0.950 |" in text and "The paper's ordering" in text
    assert (tmp_path / "docs" / "tiny_tiny_curves_steps.png").stat().st_size > 1000
    before = (tmp_path / "runs" / "tiny" / "GRU-h4-s1" / "result.json").stat().st_mtime_ns
    again = reproduce.reproduce("tiny", tmp_path / "runs", None)
    text = "".join(ln for ln in text.splitlines(keepends=True) if not ln.startswith("<!-- "))  # the markers
    assert again.replace("\n", "") == text.replace("![tiny_tiny_curves_steps](tiny_tiny_curves_steps.png)", "").replace("\n", "")
    assert (tmp_path / "runs" / "tiny" / "GRU-h4-s1" / "result.json").stat().st_mtime_ns == before
    assert reproduce.reproduce("tiny", tmp_path / "runs", None, read_only=True) == again  # reads, runs nothing
    (tmp_path / "runs" / "tiny" / "MuFuRU-h4-s1" / "result.json").unlink()
    partial = reproduce.reproduce("tiny", tmp_path / "runs", None, read_only=True)
    assert "| GRU | 0.900 |" in partial and "| MuFuRU |" not in partial
    assert not (tmp_path / "runs" / "tiny" / "MuFuRU-h4-s1" / "result.json").exists()
    # --seeds 2: the finished seed is kept, the missing runs train, and the table counts both seeds
    more = reproduce.reproduce("tiny", tmp_path / "runs", None, seeds=2)
    assert "budget `epochs=1`, 2 seeds (n: the runs finished)" in more
    assert "| GRU | 0.900 | " in more and " | 2 | 4 |" in more and "| MuFuRU | 0.950 | " in more
    assert (tmp_path / "runs" / "tiny" / "GRU-h4-s1" / "result.json").stat().st_mtime_ns == before
    assert (tmp_path / "runs" / "tiny" / "GRU-h4-s2" / "result.json").is_file()


def test_an_unknown_paper_or_experiment_is_one_line(capsys):
    assert reproduce.main(["mzu", "--experiments", "nope", "--read-only"]) == 2
    assert capsys.readouterr().err.strip().startswith("error: Unknown experiment(s) nope of mzu")


def test_reading_no_finished_runs_keeps_the_results_a_report_already_holds(tmp_path, capsys):
    """The shipped MZU report read against an empty runs folder: its tables stay, no "Not run yet" replaces them."""
    shipped = (ROOT / "docs" / "reproduction" / "mzu.md").read_text()
    report = tmp_path / "mzu.md"
    report.write_text(shipped)
    assert reproduce.main(["mzu", "--out", str(tmp_path / "runs"), "--report", str(report), "--read-only"]) == 0
    text = report.read_text()
    assert "Not run yet" not in text and text == shipped
    assert "kept the results already in" in capsys.readouterr().err


def test_the_readme_reproduce_line_writes_under_runs():
    line = next(ln for ln in (ROOT / "README.md").read_text().splitlines() if "lit_rnncells.reproduce mzu" in ln)
    assert "--report runs/" in line and "docs/reproduction" not in line


def _finished_run(folder: Path, cell: str, losses) -> Path:
    """A run folder as compare leaves it: result.json and the validation curve (val/loss every 100 steps)."""
    import json

    folder.mkdir(parents=True)
    (folder / "result.json").write_text(json.dumps({"cell": cell, "monitor": "val/loss"}))
    (folder / "curves.json").write_text(json.dumps(
        {"validation": [{"step": 100 * (i + 1), "val/loss": v} for i, v in enumerate(losses)], "test": []}))
    return folder / "result.json"


def test_the_report_says_how_much_each_curve_still_moved_in_the_last_quarter(tmp_path):
    from lit_rnncells.experiments.reproduce import experiment_markdown, last_quarter_change

    exp = _exp()
    # steps 100..800: the last quarter runs from the validation nearest step 600 to step 800
    files = [_finished_run(tmp_path / "g1", "GRU", [3.0, 2.5, 2.2, 2.1, 2.05, 2.0, 1.98, 1.96]),
             _finished_run(tmp_path / "g2", "GRU", [3.0, 2.4, 2.2, 2.1, 2.05, 2.0, 1.99, 1.96]),
             _finished_run(tmp_path / "m1", "MuFuRU", [3.0, 2.9, 2.8, 2.7, 2.6, 2.5, 2.4, 2.3])]
    moved = {f["cell"]: f for f in last_quarter_change(files, exp)}
    assert moved["GRU"]["change"] == pytest.approx(-0.04) and moved["GRU"]["share"] == pytest.approx(0.04 / 1.04)
    assert moved["MuFuRU"]["change"] == pytest.approx(-0.2) and moved["MuFuRU"]["share"] == pytest.approx(0.2 / 0.7)
    text = experiment_markdown(exp, summarise([_row("GRU", 1, 0.5), _row("MuFuRU", 1, 0.9)], exp), [],
                               list(moved.values()))
    assert "last quarter of the budget" in text and "GRU -0.040 (4%)" in text and "MuFuRU -0.200 (29%)" in text


def test_a_grids_curves_take_a_colour_per_grid_point_and_a_line_style_per_cell():
    from lit_rnncells.experiments.report import line_styles

    labels = [f"{cell} hidden_size={h}" for h in (2, 4, 8, 16, 32, 64, 128) for cell in ("GRU", "MuFuRU")]
    styles = line_styles(labels)
    assert len({(s["color"], s["linestyle"]) for s in styles.values()}) == len(labels)  # no two curves alike
    assert styles["GRU hidden_size=2"]["color"] == styles["MuFuRU hidden_size=2"]["color"]
    assert styles["GRU hidden_size=2"]["linestyle"] == styles["GRU hidden_size=128"]["linestyle"] == "-"
    assert line_styles(["GRU", "MuFuRU"]) == {"GRU": {}, "MuFuRU": {}}  # no grid: matplotlib's colour per cell


def test_the_figures_name_each_curve_as_the_table_does(tmp_path, monkeypatch):
    """A paper-size cell's whole specification (``CapMZU-zones=4-...``) squeezed the H200 figure's axes into a
    corner; the curves carry the table's names (``capMZU+DT``), seeds of a cell in one curve."""
    import json

    from lit_rnncells.experiments import report
    from lit_rnncells.experiments import reproduce as reproduce_module

    exp = Experiment(name="ptb", title="PTB", config="configs/lm/ptb_char_gru.yaml",
                     cells={"GRU": "GRU", "CapMZU(zones=4,capsules=2)": "capMZU+DT"}, paper={}, metric="test/bpc",
                     lower_is_better=True, budget="epochs=1", seeds=2, hidden_size=8)
    for name, cell in [("c1", "CapMZU-zones=4-capsules=2"), ("c2", "CapMZU-zones=4-capsules=2"), ("g1", "GRU")]:
        result = _finished_run(tmp_path / name, cell, [3.0, 2.5, 2.2])
        result.write_text(json.dumps({**json.loads(result.read_text()), "folder": str(result.parent)}))
    drawn = {}
    monkeypatch.setattr(report, "plot_curves",
                        lambda groups, x_key, *rest: drawn.setdefault(x_key, {k: len(v) for k, v in groups.items()}))
    reproduce_module.draw_curves(exp, tmp_path)
    assert drawn == {"step": {"capMZU+DT": 2, "GRU": 1}, "seconds": {"capMZU+DT": 2, "GRU": 1}}
