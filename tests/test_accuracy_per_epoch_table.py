"""``analysis accuracy-per-epoch`` prints its numbers: per epoch each cell's mean ± std over seeds and, with
``--against``, each other cell's difference to it with Welch's p; runs of several sweeps are read together and a
``--vary`` grid point is part of a run's label. The run folders here hold the two files the figure reads, with the
keys the comparison runner writes (``result.json``: cell, grid, config; ``curves.json``: one test point per epoch)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List

import pytest
from scipy.stats import ttest_ind

from lit_rnncells.analysis.__main__ import main

BPC = {  # cell label (and grid point) -> per seed, the test BPC at the end of epochs 1 and 2
    "GRU": [[2.16, 2.05], [2.17, 2.06], [2.15, 2.04]],
    "CapMZU-layer_norm=True": [[2.44, 2.21], [2.54, 2.31], [2.47, 2.25]],
}


def write_run(folder: Path, cell: Dict | str, seed: int, values: List[float], grid: Dict | None = None,
              hidden: int | None = None) -> None:
    folder.mkdir(parents=True)
    (folder / "result.json").write_text(json.dumps({"cell": cell, "seed": seed, "grid": grid or {},
                                                    "hidden_size": hidden, "config": "configs/lm/ptb_char_gru.yaml"}))
    tests = [{"epoch": e, "step": 10 * (e + 1), "test/bpc": v, "test/loss": v * 0.693} for e, v in enumerate(values)]
    (folder / "curves.json").write_text(json.dumps({"validation": [], "test": tests}))


@pytest.fixture
def sweeps(tmp_path: Path) -> List[Path]:
    """Two sweep folders: the GRU's in one, capMZU's (a cell spec with options) and a clip-1.0 grid point in the
    other."""
    gru, cap = tmp_path / "gru", tmp_path / "cap"
    for seed, values in enumerate(BPC["GRU"], 1):
        write_run(gru / f"GRU-s{seed}", "GRU", seed, values)
    spec = {"class_path": "CapMZU", "init_args": {"layer_norm": True}}
    for seed, values in enumerate(BPC["CapMZU-layer_norm=True"], 1):
        write_run(cap / f"cap-s{seed}", spec, seed, values)
        write_run(cap / f"cap-clip-s{seed}", spec, seed, [v - 0.1 for v in values],
                  grid={"trainer.gradient_clip_val": "1.0"})
    return [gru, cap]


def table_rows(stdout: str) -> Dict[str, Dict[str, str]]:
    lines = [line for line in stdout.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    return {row[0]: dict(zip(header, row)) for row in
            ([cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:])}


def test_the_table_gives_each_cells_seeds_and_welchs_p_against_the_reference(sweeps, tmp_path, capsys):
    assert main(["accuracy-per-epoch", "--runs", *map(str, sweeps), "--metric", "test/bpc", "--against", "GRU",
                 "--output", str(tmp_path / "fig.png")]) == 0
    rows = table_rows(capsys.readouterr().out)
    assert sorted(rows) == ["1", "2"]
    cap = "CapMZU-layer_norm=True"
    for epoch in (0, 1):
        row = rows[str(epoch + 1)]
        gru = [seed[epoch] for seed in BPC["GRU"]]
        ours = [seed[epoch] for seed in BPC[cap]]
        assert row["GRU test/bpc"].startswith(f"{sum(gru) / 3:.3f} ± ") and row["GRU test/bpc"].endswith("(n 3)")
        p = ttest_ind(ours, gru, equal_var=False).pvalue
        assert row[f"{cap} − GRU (p)"] == f"{sum(ours) / 3 - sum(gru) / 3:+.3f} ({p:.3f})"
        clipped = [v - 0.1 for v in ours]
        p = ttest_ind(clipped, gru, equal_var=False).pvalue
        assert row[f"{cap} gradient_clip_val=1.0 − GRU (p)"] == f"{sum(clipped) / 3 - sum(gru) / 3:+.3f} ({p:.3f})"
    assert (tmp_path / "fig.png").is_file()


def test_a_unique_start_names_the_reference_and_one_seed_has_no_p(tmp_path, capsys):
    write_run(tmp_path / "runs" / "a", "GRU", 1, [2.0])
    write_run(tmp_path / "runs" / "b", "MuFuRU", 1, [2.5])
    assert main(["accuracy-per-epoch", "--runs", str(tmp_path / "runs"), "--metric", "test/bpc", "--against", "Mu",
                 "--output", str(tmp_path / "fig.png")]) == 0
    row = table_rows(capsys.readouterr().out)["1"]
    assert row["GRU − MuFuRU (p)"] == "-0.500 (–)"
    assert row["GRU test/bpc"] == "2.000 (n 1)"


@pytest.mark.parametrize("against, why", [("LSTM", "is no cell of these runs"),
                                          ("CapMZU", "starts more than one cell's label")])
def test_an_unknown_or_ambiguous_reference_is_one_error_line_before_drawing(sweeps, tmp_path, capsys, against, why):
    output = tmp_path / "fig.png"
    assert main(["accuracy-per-epoch", "--runs", *map(str, sweeps), "--metric", "test/bpc", "--against", against,
                 "--output", str(output)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --against '{against}' {why}; pass one of: CapMZU-layer_norm=True; ") and \
        err.count("\n") == 1
    assert not output.exists()


def test_labels_keep_only_the_settings_that_differ_and_a_full_label_still_names_the_reference(tmp_path, capsys):
    shared = {"layer_norm": True, "candidate_dropout": 0.0}
    specs = {"gru": {"class_path": "GRUDT", "init_args": {"transition_depth": 0, **shared}},
             "grudt": {"class_path": "GRUDT", "init_args": {"transition_depth": 1, "share_transition": True, **shared}},
             "sat": {"class_path": "SatMZU", "init_args": {"transition_depth": 1, "share_transition": True, **shared}}}
    for i, (name, spec) in enumerate(specs.items()):
        for seed in (1, 2):
            write_run(tmp_path / "runs" / f"{name}-s{seed}", spec, seed, [2.0 + i / 10 + seed / 100])
    against = "GRUDT-transition_depth=0-layer_norm=True-candidate_dropout=0.0"  # the full label names it too
    assert main(["accuracy-per-epoch", "--runs", str(tmp_path / "runs"), "--metric", "test/bpc", "--against", against,
                 "--output", str(tmp_path / "fig.png")]) == 0
    out = capsys.readouterr().out
    assert "Settings every cell shares, left out of the labels: layer_norm=True candidate_dropout=0.0" in out
    row = table_rows(out)["1"]
    assert sorted(k for k in row if k.endswith("test/bpc")) == [
        "GRUDT-transition_depth=0 test/bpc", "GRUDT-transition_depth=1-share_transition=True test/bpc",
        "SatMZU-transition_depth=1-share_transition=True test/bpc"]
    assert row["GRUDT-transition_depth=0 test/bpc"] == "2.015 ± 0.007 (n 2)"
    sat = "SatMZU-transition_depth=1-share_transition=True"
    assert row[f"{sat} − GRUDT-transition_depth=0 (p)"].startswith("+0.200 (")


def test_shortening_that_would_merge_two_cells_keeps_the_full_labels():
    from lit_rnncells.experiments.report import distinct_labels

    short, shared = distinct_labels({"GRU-a=1": ("GRU", ["a=1"], []), "GRU-a=1 x=2": ("GRU", ["a=1"], ["x=2"])})
    assert short == {"GRU-a=1": "GRU", "GRU-a=1 x=2": "GRU x=2"} and shared == ["a=1"]
    short, shared = distinct_labels({"one": ("GRU", ["a=1"], []), "two": ("GRU", ["a=1"], [])})
    assert short == {"one": "one", "two": "two"} and shared == []


def test_a_cell_at_two_hidden_sizes_is_two_rows_and_a_run_copied_into_two_folders_counts_once(tmp_path, capsys):
    """The unshared GRU+DT at hidden 255 and at the GRU's parameter count (187) are two cells, not six seeds of
    one; the GRU's runs copied into the second sweep folder are not counted twice."""
    spec = {"class_path": "GRUDT", "init_args": {"transition_depth": 1}}
    for seed in (1, 2):
        write_run(tmp_path / "a" / f"gru-s{seed}", "GRU", seed, [2.0 + seed / 100], hidden=255)
        write_run(tmp_path / "b" / f"gru-s{seed}", "GRU", seed, [2.0 + seed / 100], hidden=255)  # a copy
        write_run(tmp_path / "a" / f"wide-s{seed}", spec, seed, [1.9 + seed / 100], hidden=255)
        write_run(tmp_path / "b" / f"narrow-s{seed}", spec, seed, [2.1 + seed / 100], hidden=187)
    assert main(["accuracy-per-epoch", "--runs", str(tmp_path / "a"), str(tmp_path / "b"), "--metric", "test/bpc",
                 "--against", "GRU", "--output", str(tmp_path / "fig.png")]) == 0
    row = table_rows(capsys.readouterr().out)["1"]
    assert row["GRU test/bpc"] == "2.015 ± 0.007 (n 2)"
    assert row["GRUDT-transition_depth=1 hidden=187 test/bpc"] == "2.115 ± 0.007 (n 2)"
    assert row["GRUDT-transition_depth=1 hidden=255 − GRU (p)"].startswith("-0.100 (")


def test_only_test_accuracy_is_titled_as_carus_figure():
    from lit_rnncells.analysis.accuracy_per_epoch import figure_title

    caru = figure_title("test/acc", ["imdb (sentiment/imdb_gru.yaml)"], [])
    assert caru == "CARU Fig. 2: test/acc per epoch\nimdb (sentiment/imdb_gru.yaml)"
    bpc = figure_title("test/bpc", ["ptb_char (lm/ptb_char_gru.yaml)", "more"], ["layer_norm=True"])
    assert bpc == "test/bpc per epoch\nptb_char (lm/ptb_char_gru.yaml), more\nevery cell: layer_norm=True"
