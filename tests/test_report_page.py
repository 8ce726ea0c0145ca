"""Regenerating a reproduction report keeps what a person wrote in it: only the parts between the generated
markers change; a report without markers gets them around its generated lines, and no other text is lost."""
from __future__ import annotations

from pathlib import Path

import pytest

from lit_rnncells import reproduce
from lit_rnncells.experiments.report_page import END, blocks, merge, start

ROOT = Path(__file__).resolve().parents[1]


def _outside_markers(text: str) -> str:
    """The text outside every generated block (the hand-written parts), markers removed."""
    kept, inside = [], False
    for line in text.splitlines(keepends=True):
        if line.startswith("<!-- generated: "):
            inside = True
        elif line.strip() == END:
            inside = False
        elif not inside:
            kept.append(line)
    return "".join(kept)


def test_a_marked_report_keeps_its_hand_written_text_byte_for_byte():
    old = ("Intro a person wrote.\n\n" + start("header") + "# Old title\n" + END + "\n\nNotes  with  odd   spacing\n"
           + start("exp") + "## Exp\n\nold table\n" + END + "\n### Hand-written subsection\n\ntext\n")
    new = merge(old, [("header", "# New title\n"), ("exp", "## Exp\n\nnew table\n")])
    assert _outside_markers(new) == _outside_markers(old)
    assert blocks(new) == {"header": "# New title\n", "exp": "## Exp\n\nnew table\n"}
    assert "old table" not in new and new.index("Notes  with") < new.index("new table") < new.index("### Hand")


def test_a_part_not_regenerated_keeps_its_block_and_a_new_part_goes_after_its_predecessor():
    old = start("header") + "# T\n" + END + "\n" + start("a") + "## A\n\nkept\n" + END + "\nmine\n"
    new = merge(old, [("header", "# T2\n"), ("a", None), ("b", "## B\n")])
    assert blocks(new)["a"] == "## A\n\nkept\n" and new.index("## A") < new.index("## B")
    assert "mine\n" in new


def test_an_unmarked_report_gets_markers_around_its_generated_lines_only():
    old = ("# Reproducing X at a CPU budget\n\nWritten by `python -m lit_rnncells.reproduce x`, which runs.\n\n"
           "## Exp\n\n- Config `c.yaml`, budget `epochs=1`.\n- Paper setting: p.\n- Our setting: o.\n\n"
           "### A person's subsection\n\n| their | table |\n|---|---|\n\nTheir words.\n")
    new = merge(old, [("header", "# Reproducing X at a CPU budget\n\nWritten by new.\n"),
                      ("exp", "## Exp\n\n- Config `c.yaml`, budget `epochs=2`.\n")])
    assert "### A person's subsection\n\n| their | table |\n|---|---|\n\nTheir words.\n" in new
    assert "epochs=1" not in new and "Written by new." in new
    assert new.index("budget `epochs=2`") < new.index("### A person's")


def test_regenerating_the_shipped_mzu_report_keeps_every_hand_written_section(tmp_path):
    shipped = (ROOT / "docs" / "reproduction" / "mzu.md").read_text()
    report = tmp_path / "mzu.md"
    report.write_text(shipped)
    assert reproduce.main(["mzu", "--out", str(tmp_path / "runs"), "--report", str(report), "--read-only"]) == 0
    text = report.read_text()
    for written_by_hand in ("## Why MZU trailed GRU at small sizes", "### The equations: implemented as the paper",
                            "### The settings and the hidden size: an ablation", "### What explains the gap",
                            "### The run above, and the GRU at the MZUs' hidden size"):
        assert written_by_hand in text
    assert _outside_markers(text) == _outside_markers(shipped)
    assert text == shipped  # nothing new to report: the page is unchanged, byte for byte


def test_the_shipped_report_without_its_markers_loses_no_line_when_read_again(tmp_path):
    unmarked = "".join(ln for ln in (ROOT / "docs" / "reproduction" / "mzu.md").read_text().splitlines(keepends=True)
                       if not ln.startswith("<!-- "))
    report = tmp_path / "mzu.md"
    report.write_text(unmarked)
    assert reproduce.main(["mzu", "--out", str(tmp_path / "runs"), "--report", str(report), "--read-only"]) == 0
    text = report.read_text()
    assert "".join(ln for ln in text.splitlines(keepends=True) if not ln.startswith("<!-- ")) == unmarked
    assert set(blocks(text)) == {"header", "ptb_char", "absa_restaurants"}
    assert blocks(text)["ptb_char"].startswith("## PTB character LM") and "### The run above" not in blocks(text)["ptb_char"]


def test_the_paper_scale_report_goes_beside_the_cpu_one(tmp_path, monkeypatch):
    """``--scale paper --report`` adds (or replaces) its own block of the page; the CPU sections stay."""
    from lit_rnncells.experiments import paper_scale

    shipped = (ROOT / "docs" / "reproduction" / "mzu.md").read_text()
    report = tmp_path / "mzu.md"
    report.write_text(shipped)
    runs = iter(["# Reproducing MZU at the paper's size\n\n## PTB\n\nrun-one-xyz\n",
                 "# Reproducing MZU at the paper's size\n\n## PTB\n\nsecond\n"])
    monkeypatch.setattr(paper_scale, "reproduce_at_paper_scale", lambda *a, **k: next(runs))
    argv = ["mzu", "--scale", "paper", "--out", str(tmp_path / "runs"), "--report", str(report)]
    assert reproduce.main(argv) == 0 and reproduce.main(argv) == 0
    text = report.read_text()
    assert text.startswith(shipped) and "run-one-xyz" not in text
    assert blocks(text)["paper_scale"] == "## Reproducing MZU at the paper's size\n\n### PTB\n\nsecond\n"


@pytest.mark.parametrize("paper", ["caru", "mcrnn", "mufuru"])
def test_the_other_shipped_reports_lose_no_line_and_repeat_none_when_read_again(paper, tmp_path):
    """Each as it was before the markers: its notes (a fixed text) are marked where the page holds them whole, so
    are not written a second time; with its markers, it is left as it is."""
    def bare(text: str) -> str:
        return "".join(ln for ln in text.splitlines(keepends=True) if not ln.startswith("<!-- "))

    shipped = (ROOT / "docs" / "reproduction" / f"{paper}.md").read_text()
    for page in (bare(shipped), shipped):
        report = tmp_path / f"{paper}.md"
        report.write_text(page)
        assert reproduce.main([paper, "--out", str(tmp_path / "runs"), "--report", str(report), "--read-only"]) == 0
        assert bare(report.read_text()) == bare(shipped)
    assert report.read_text() == shipped
