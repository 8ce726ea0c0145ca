"""Nothing in the repository points outside it: no path of the machine it was developed on, no sibling
folder a user does not have (reference programs, paper files, the data folder), no design notes that are
not shipped, and every relative link in the docs opens a file of the repository."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator, List, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ("README.md", "pyproject.toml", "docs", "configs", "lit_rnncells", "scripts", "tests")
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".cfg", ".ini", ".json"}
THIS = Path(__file__).resolve()

# Anywhere (code, docs, configs, tests): a user's clone has no such path.
OUTSIDE = re.compile(r"\.\./shared|shared/anchors|/work/|/home/\w|/Users/\w|/tmp/bash_jobs")
# In what a user reads (everything but tests, which may assert these are absent): files they cannot open.
UNSHIPPED = re.compile(r"DESIGN\.md|runs were in|(?<![\w/.-])`?(caru|mufuru|mzu|mc-rnn)\.md")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def shipped_files() -> Iterator[Path]:
    for name in SHIPPED:
        path = ROOT / name
        candidates = [path] if path.is_file() else sorted(path.rglob("*"))
        for file in candidates:
            if file.is_file() and file.suffix in TEXT_SUFFIXES and file.resolve() != THIS \
                    and "__pycache__" not in file.parts:
                yield file


def hits(pattern: re.Pattern, files: List[Path]) -> List[Tuple[str, int, str]]:
    found = []
    for file in files:
        for number, line in enumerate(file.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if pattern.search(line):
                found.append((str(file.relative_to(ROOT)), number, line.strip()[:160]))
    return found


def test_the_scan_sees_the_repository():
    files = list(shipped_files())
    assert ROOT / "README.md" in files and any(f.suffix == ".yaml" for f in files) and len(files) > 50


def test_nothing_points_to_a_path_outside_the_repository():
    assert hits(OUTSIDE, list(shipped_files())) == []


def test_docs_configs_and_code_name_no_file_a_user_cannot_open():
    files = [f for f in shipped_files() if "tests" not in f.relative_to(ROOT).parts]
    assert hits(UNSHIPPED, files) == []


@pytest.mark.parametrize("pattern,line", [(OUTSIDE, "run ../shared/anchors/imdb_gru.py"),
                                          (OUTSIDE, "(the runs were in `/work/bench`)"),
                                          (UNSHIPPED, "Decisions beyond DESIGN.md"),
                                          (UNSHIPPED, "MC-RNN (Xu et al., `mc-rnn.md` §5.4)"),
                                          (UNSHIPPED, "# Target: MZU paper (mzu.md) Table 1")])
def test_the_patterns_catch_what_the_issue_found(pattern, line):
    assert pattern.search(line)


def test_a_link_to_our_own_reproduction_page_is_not_a_paper_file():
    assert not UNSHIPPED.search("learning curves: [reproduction/mufuru.md](reproduction/mufuru.md)")


def test_every_relative_markdown_link_opens_a_file_of_the_repository():
    broken = []
    for file in shipped_files():
        if file.suffix != ".md":
            continue
        for target in LINK.findall(file.read_text(encoding="utf-8")):
            path = target.split("#", 1)[0]
            if not path or re.match(r"^[a-z]+:", path):  # a same-page anchor or a URL
                continue
            resolved = (file.parent / path).resolve()
            if not resolved.is_relative_to(ROOT) or not resolved.exists():
                broken.append(f"{file.relative_to(ROOT)}: {target}")
    assert broken == []
