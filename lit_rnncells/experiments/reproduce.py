"""Per-paper reproduction reports at a CPU-sized budget: ``python -m lit_rnncells.reproduce <paper>``.

Each paper's experiments are comparisons (:func:`lit_rnncells.experiments.compare.compare`) at a stated budget; the
command runs them, or reads them when the runs have finished (the runner skips finished runs, so a rerun
only writes the report), and writes a markdown page with the paper's figure beside ours, the settings
and the budget, and whether the paper's ordering of the cells shows. Reading (``--read-only``) never replaces
the results an existing report holds with "Not run yet": an experiment without finished runs keeps its section.

    python -m lit_rnncells.reproduce mzu --out runs/reproduce --report runs/reproduce/mzu.md
    python -m lit_rnncells.reproduce mufuru --experiments logic_fig1a --read-only
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..paths import check_output_file, check_output_folder
from . import paper_scale, report_page
from .compare import CompareError, Interrupted, Launcher, LocalLauncher, compare
from .compare.launchers import slurm_launcher
from .compare.slurm_settings import add_slurm_options
from .report import CURVES_FILE, RESULT_FILE, curve_groups, plot_curves, row_of

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Experiment:
    """One comparison of a paper at a CPU budget, and the paper's figure for each cell.

    ``cells`` maps the runner's cell spec to the paper's name for it; ``paper`` maps the paper's names to
    its reported value (``None``: not reported); ``metric`` is the runs.csv column compared, shown times
    ``scale``; ``lower_is_better`` orders the cells."""

    name: str
    title: str
    config: str
    cells: Dict[str, str]
    paper: Dict[str, Optional[float]]
    metric: str
    lower_is_better: bool
    budget: str
    seeds: int = 3
    scale: float = 1.0
    match_params: Optional[str] = None
    hidden_size: Optional[int] = None
    vary: Tuple[str, ...] = ()
    extra: Tuple[str, ...] = ()
    test_every_epoch: bool = False
    paper_setting: str = ""
    our_setting: str = ""
    claimed_best: Optional[str] = None
    """Where the paper gives no numbers: the cell it reports best (the verdict checks ours against it)."""


LM_SMALL = ("--model.init_args.embedding_size", "64", "--model.init_args.dropout", "0.0",
            "--data.init_args.batch_size", "32", "--data.init_args.bptt", "100",
            "--trainer.val_check_interval", "100", "--trainer.limit_val_batches", "40")
MZU_PTB = "transition_depth=1,share_transition=true,layer_norm=true,candidate_dropout=0.5"
"""The MZU paper's PTB settings beyond the cells' defaults (4 zones, 2 capsules, 3 routing iterations, λ = 1):
one shared t-MZU, layer normalisation, dropout 0.5 on the candidate activation."""
GRU_PTB = "layer_norm=true,candidate_dropout=0.5"
"""The paper's GRU baselines on PTB: "we also apply dropout and layer normalization to GRUs, and build models with
the same settings to our MZUs" (its footnote 3): :class:`~lit_rnncells.cells.GRUDT` (``transition_depth=0``: a GRU)
with layer norm and dropout 0.5 on the candidate, as the MZUs."""
COMPILED = ("--model.init_args.compile", "true")
"""The compiled recurrence (``Recurrent(compile=True)``): the same values as eager, faster for the MZU cells."""

PAPERS: Dict[str, Tuple[str, List[Experiment]]] = {
    "mzu": ("MZU: Multi-Zone Unit "
             "(Meng, Zhang, Liu & Zhou, *Multi-Zone Unit for Recurrent Neural Networks*, AAAI 2020)", [
        Experiment(
            name="ptb_char", title="PTB character LM, test BPC (Table 1)",
            config="configs/lm/ptb_char_gru.yaml",
            cells={f"GRUDT(transition_depth=0,{GRU_PTB})": "GRU",
                   f"GRUDT(transition_depth=1,share_transition=true,{GRU_PTB})": "GRU+DT",
                   f"SatMZU({MZU_PTB})": "satMZU+DT", f"GcnMZU({MZU_PTB})": "gcnMZU+DT",
                   f"CapMZU({MZU_PTB})": "capMZU+DT"},
            paper={"GRU": 1.269, "GRU+DT": 1.208, "satMZU+DT": 1.189, "gcnMZU+DT": 1.183, "capMZU+DT": 1.181},
            metric="test/bpc", lower_is_better=True, budget="epochs=1", match_params="GRU@256",
            extra=LM_SMALL + COMPILED,
            paper_setting="embedding 256, hidden 800, filter 1000, batch 256, BPTT 150, Adam 1e-3, clip 5; MZUs "
                          "with 4 zones, 2 capsules, 3 routing iterations, λ = 1, one t-MZU sharing the "
                          "M-functions, layer normalisation and dropout 0.5 on the candidate activation; GRUs "
                          "also with dropout and layer normalisation (footnote 3; where, not said); epochs not given",
            our_setting="the paper's cell settings (MZUs: 4 zones, 2 capsules, 3 routing iterations, λ = 1, "
                        "`share_transition`, `layer_norm`, `candidate_dropout=0.5`; GRU+DT with one shared "
                        "transition GRU; GRU and GRU+DT, as the paper's footnote 3 says, with layer norm and "
                        "candidate dropout 0.5 too: `GRUDT` (`transition_depth=0` for the GRU) with `layer_norm`, "
                        "`candidate_dropout=0.5`, where the paper does not say where, as in the MZU: on each "
                        "pre-activation, and on the candidate; no other dropout on any cell), Adam 1e-3, clip "
                        "5; at the CPU budget: parameters matched to a GRU of 256 (≈263k), filter size = hidden "
                        "size, embedding 64, batch 32, BPTT 100, one epoch (1,568 steps), validation every 100 "
                        "steps on 40 batches, the best tested; `compile: true` (on CPU the MZU cells compile, the "
                        "others keep their eager step: docs/measured.md; values are eager's either way)"),
        Experiment(
            name="absa_restaurants", title="SemEval-2014 Restaurants (DS), test accuracy % (Table 6)",
            config="configs/classification/absa_restaurants_gru_dt.yaml",
            cells={f"GRUDT(transition_depth=1,{GRU_PTB})": "GRU+DT",
                   "CapMZU(transition_depth=1,layer_norm=true,candidate_dropout=0.5)": "capMZU+DT"},
            paper={"GRU+DT": 78.25, "capMZU+DT": 79.40}, metric="test/acc", scale=100.0,
            lower_is_better=False, budget="epochs=8", match_params="GRUDT@64",
            extra=("--model.init_args.embedding_size", "100", "--model.init_args.pretrained_embeddings", "null",
                   "--data.init_args.batch_size", "32"),
            paper_setting="capMZU+DT (4 zones, 2 capsules, 3 routing iterations, λ = 1) against GRU+DT, Bi-RNN, "
                          "mean pooling, aspect embedding concatenated, 5 runs; layer normalisation and candidate "
                          "dropout are stated for the language models only; no ABSA sizes, dropout rates or schedule "
                          "given",
            our_setting="capMZU+DT with the paper's cell settings and, our choice where the paper is silent, "
                        "layer normalisation and candidate dropout 0.5 (the PTB rate), unshared transition (the "
                        "paper shares on PTB only); GRU+DT likewise with layer normalisation and candidate dropout 0.5 (as "
                        "the paper's footnote 3 does for its PTB GRUs); "
                        "dropout 0.5, Adam 1e-3, batch 32, clip 5 from the config; no pretrained vectors (none "
                        "on this machine), embedding 100, parameters matched to a GRU+DT of 64, 8 epochs, best "
                        "validation accuracy tested"),
    ]),
    "mufuru": ("MuFuRU: Multi-Function Recurrent Unit "
             "(Weissenborn & Rocktäschel, *MuFuRU: The Multi-Function Recurrent Unit*, arXiv:1606.03002)", [
        Experiment(
            name="logic_fig1a", title="Propositional logic, test accuracy % on 11-20 gates (Fig. 1a)",
            config="configs/logic/gru.yaml", cells={"GRU": "GRU", "MuFuRU": "MuFuRU"},
            paper={"GRU": None, "MuFuRU": None}, metric="test/acc", scale=100.0, lower_is_better=False,
            budget="epochs=100", vary=("model.init_args.hidden_size=4,8",), claimed_best="MuFuRU",
            paper_setting="1,000 training formulas of 5-10 gates, 1,000 test formulas of 11-20 gates, 100 epochs, "
                          "Adam with β1 = 0, β2 = 0.999 (all its experiments), the 7 operations of its Table 1; "
                          "the figure shows MuFuRU of size 8 near 100% and the GRU lower at small sizes "
                          "(no numbers in the text); no embedding size, batch size or learning rate given",
            our_setting="the paper's data, epochs, operations and Adam (β1 = 0, β2 = 0.999); where it is silent, "
                        "our choice: embedding 32, batch 32, learning rate 1e-3, clip 5, 200 validation formulas; "
                        "hidden 4 and 8, 3 seeds; compared at equal hidden size as in the paper's figure, where "
                        "MuFuRU has about twice the GRU's parameters"),
        Experiment(
            name="logic_regime", title="Propositional logic, harder regime: test accuracy % on 21-40 gates",
            config="configs/logic/gru.yaml", cells={"GRU": "GRU", "MuFuRU": "MuFuRU"},
            paper={"GRU": None, "MuFuRU": None}, metric="test/acc", scale=100.0, lower_is_better=False,
            budget="epochs=100", seeds=3,
            vary=("data.init_args.train_size=100,1000", "data.init_args.test_gates=[21,40]",
                  "model.init_args.hidden_size=2,4,8"),
            paper_setting="not in the paper: our search for the regime where the cells differ",
            our_setting="100 or 1,000 training formulas of 5-10 gates, test on 21-40 gates, hidden 2/4/8, 3 seeds"),
    ]),
    "caru": ("CARU: Content-Adaptive Recurrent Unit "
             "(Chan, Ke & Im, *CARU: A Content-Adaptive Recurrent Unit for the Transition of Hidden State in NLP*, ICONIP 2020)", [
        Experiment(
            name="imdb", title="IMDB, test accuracy % (Fig. 2)", config="configs/classification/imdb_gru.yaml",
            cells={"GRU": "GRU", "MGU": "MGU", "CARU": "CARU"}, paper={"GRU": None, "MGU": None, "CARU": None}, claimed_best="CARU",
            metric="test/acc", scale=100.0, lower_is_better=False, budget="epochs=3", seeds=1, hidden_size=128,
            test_every_epoch=True,
            extra=("--model.init_args.embedding_size", "64", "--data.init_args.max_length", "200",
                   "--data.init_args.truncation", "head", "--trainer.limit_test_batches", "100"),
            paper_setting="embedding 100 (pretrained), hidden 256, batch 100 shuffled, Adam 1e-3, a linear layer and "
                          "softmax on the last hidden state, no other layers, 100 epochs; Fig. 2 shows CARU highest "
                          "(values only in the plot); no review length, vocabulary or dropout given",
            our_setting="the paper's training settings (batch 100 shuffled, Adam 1e-3, the last hidden state read "
                        "out, no dropout or other layers); where it is silent, our choice: every word of the training "
                        "reviews in the vocabulary, no gradient clipping; at the CPU budget embedding 64 (random: no pretrained "
                        "vectors on this machine), hidden 128, reviews cut to their first 200 tokens, 3 epochs, "
                        "test on the first 10,000 test reviews, 1 seed"),
    ]),
    "mcrnn": ("MC-RNN: multi-channel multi-block RNN "
             "(Xu, Huang, Wang, Wang & Liu, *Modeling Local Dependence in Natural Language with Multi-Channel Recurrent Neural Networks*, AAAI 2019)", [
        Experiment(
            name="ptb_word", title="PTB word LM, test perplexity (Table 4, AWD-LSTM setup)",
            config="configs/lm/ptb_word_awd_lstm.yaml",
            cells={"LSTM": "AWD-LSTM", "MultiChannel(cell=LSTM,block_size=4)": "MC-RNN-3"},
            paper={"AWD-LSTM": 58.8, "MC-RNN-3": 56.9}, metric="test/ppl", lower_is_better=True,
            budget="epochs=6", seeds=3, match_params="LSTM@128",
            extra=("--model.init_args.num_layers", "1", "--model.init_args.tie_weights", "false",
                   "--model.init_args.embedding_size", "128", "--trainer.val_check_interval", "100",
                   "--trainer.limit_val_batches", "40") + COMPILED,
            paper_setting="AWD-LSTM's setup (Merity et al. 2018): 3 layers, 1150 hidden, 400 embedding, tied "
                          "weights, DropConnect 0.5 on the hidden-to-hidden weights, dropout 0.4 / 0.25 / 0.4 / 0.1 "
                          "(output / between layers / input / embedding), AR 2, TAR 1, SGD lr 30 with NT-ASGD, "
                          "weight decay 1.2e-6, clip 0.25, batch 20, variable BPTT around 70, 750+ epochs; MC-RNN-3 "
                          "is block size 4 (3 channels); the paper names no other MC-RNN setting",
            our_setting="AWD-LSTM's regularisers and optimiser as above (configs/lm/ptb_word_awd_lstm.yaml: "
                        "DropConnect 0.5, dropouts 0.4 / 0.4 / 0.1, AR 2, TAR 1, SGD 30, NT-ASGD, weight decay, "
                        "clip 0.25, batch 20, variable BPTT 70); at the CPU budget one layer, untied (tying fixes "
                        "the one layer's size to the embedding's, which parameter matching needs free), "
                        "parameters matched to an LSTM of 128, embedding 128, six epochs (about 4,000 steps), "
                        "validation every 100 steps on 40 batches, 3 seeds; the recurrence compiled (MC-RNN; the "
                        "LSTM runs fused)"),
    ]),
}


NOTES: Dict[str, str] = {
    "caru": """## Multi30k De→En, test BLEU (Tables 1–2), measured by `scripts/bench_seq2seq.py`

Not a runner experiment: `LIT_RNNCELLS_DATA=<data folder> python scripts/bench_seq2seq.py --epochs 1 --cells GRU
MGU CARU` trains each cell one epoch at embedding 128 / hidden 256 beside the plain-PyTorch reference
(settings and the full table in [../measured.md](../measured.md)). One seed.

| cell | paper (test BLEU-4 ×100) | ours, 1 epoch (greedy sacreBLEU) | parameters |
|---|---|---|---|
| GRU | 29.21 | 13.08 | 10,835,008 |
| MGU | 28.49 | 12.40 | 10,407,488 |
| CARU | 31.99 | **13.28** | 10,407,488 |

Paper: CARU > GRU > MGU. Ours: CARU > GRU > MGU. The paper's ordering **shows** (one seed, one epoch: the
gaps are within what a seed can move).
""",
    "mcrnn": """## IWSLT14 De-En (Table 2) and Gigaword (Table 3)

Not run at a CPU budget: the configs (`configs/seq2seq/iwslt14_de_en_{lstm,mcrnn3}.yaml`,
`gigaword_{lstm,mcrnn3}.yaml`) train at the paper's sizes, which need GPUs; this machine's copies of the
training sets are samples. Paper: IWSLT14 test BLEU LSTM 31.03, MC-RNN-3 32.23; Gigaword ROUGE-1/2/L LSTM
34.65/16.13/32.24.
""",
    "mufuru": """## PTB word LM (§4.3) and SST (Fig. 1c)

Not run at a CPU budget yet: `configs/lm/ptb_word_{gru,mufuru}.yaml` (paper: test perplexity GRU 123.0,
MuFuRU 119.7) and `configs/classification/sst2_{gru,mufuru}.yaml` (this machine has no SST copy).
""",
}


def summarise(rows: List[Dict[str, Any]], exp: Experiment) -> List[Dict[str, Any]]:
    """Per cell (and grid point): the paper's value, our mean, std and n, parameters and hidden size."""
    groups: Dict[Tuple[Any, ...], List[Dict[str, Any]]] = {}
    grid_keys = [v.split("=", 1)[0] for v in exp.vary]
    for row in rows:
        groups.setdefault((row["cell"], *[row.get(k) for k in grid_keys]), []).append(row)
    labels = {spec_label(spec): name for spec, name in exp.cells.items()}
    out = []
    for key, members in groups.items():
        values = [float(r[exp.metric]) * exp.scale for r in members if r.get(exp.metric) not in (None, "")]
        name = labels.get(key[0], key[0])
        out.append({"cell": name, "grid": dict(zip(grid_keys, key[1:])), "paper": exp.paper.get(name),
                    "mean": statistics.fmean(values) if values else None,
                    "std": statistics.stdev(values) if len(values) > 1 else None, "n": len(values),
                    "params": members[0]["params"], "hidden": members[0]["hidden_size"]})
    return out


def spec_label(spec: str) -> str:
    """The runner's label of a ``--cells`` spec (as it appears in runs.csv)."""
    from .compare import cell_label, check_cell

    return cell_label(check_cell(spec))


def ordering(entries: List[Dict[str, Any]], key: str, lower_is_better: bool) -> List[str]:
    """Cell names best first by ``key`` (entries without a value left out)."""
    known = [e for e in entries if e[key] is not None]
    return [e["cell"] for e in sorted(known, key=lambda e: e[key], reverse=not lower_is_better)]


def ordering_verdict(entries: List[Dict[str, Any]], exp: Experiment) -> str:
    """Whether our ordering of the cells the paper reports agrees with the paper's."""
    paper_order = ordering(entries, "paper", exp.lower_is_better)
    if len(paper_order) < 2:
        if exp.claimed_best is None:
            return "The paper gives no numbers to order here; see the setting above for its claim."
        ours = ordering(entries, "mean", exp.lower_is_better)
        verdict = "**shows**" if ours and ours[0] == exp.claimed_best else "does **not** show"
        return (f"Paper: {exp.claimed_best} best (no numbers in the text). Ours, best first: {', '.join(ours)}. "
                f"The paper's claim {verdict} at this budget.")
    ours = ordering([e for e in entries if e["cell"] in paper_order], "mean", exp.lower_is_better)
    sign = " < " if exp.lower_is_better else " > "
    verdict = "**shows**" if ours == paper_order else "does **not** show"
    return (f"Paper: {sign.join(paper_order)}. Ours: {sign.join(ours)}. The paper's ordering {verdict} at this "
            "budget.")


def fmt(value: Optional[float], std: Optional[float] = None) -> str:
    if value is None:
        return "–"
    return f"{value:.3f}" + (f" ± {std:.3f}" if std is not None else "") if abs(value) < 10 else \
        f"{value:.2f}" + (f" ± {std:.2f}" if std is not None else "")


def last_quarter_change(result_files: Sequence[Path], exp: Experiment) -> List[Dict[str, Any]]:
    """Per cell, how much its validation curve still moved in the last quarter of the budget: the change of the
    monitored metric from the validation nearest 3/4 of the run's steps to its last one, and that change as a
    share of the whole change since the first validation (mean over seeds). Near 0 %: the curve has flattened."""
    labels = {spec_label(spec): name for spec, name in exp.cells.items()}
    by_cell: Dict[str, List[Tuple[float, float]]] = {}
    monitor = ""
    for path in result_files:
        result = json.loads(path.read_text())
        monitor = result["monitor"]
        curves = path.parent / CURVES_FILE
        points = [(p["step"], p[monitor]) for p in json.loads(curves.read_text()).get("validation", [])
                  if monitor in p] if curves.is_file() else []
        if len(points) < 3:
            continue
        last_step, last = points[-1]
        quarter = min(points, key=lambda p: abs(p[0] - 0.75 * last_step))[1]
        whole = last - points[0][1]
        by_cell.setdefault(labels.get(result["cell"], result["cell"]), []).append(
            (last - quarter, (last - quarter) / whole if whole else float("nan")))
    return [{"cell": cell, "monitor": monitor, "change": statistics.fmean(c for c, _ in values),
             "share": statistics.fmean(s for _, s in values)} for cell, values in by_cell.items()]


def experiment_markdown(exp: Experiment, entries: List[Dict[str, Any]], figures: Sequence[str],
                        flattening: Sequence[Dict[str, Any]] = ()) -> str:
    grid_keys = [v.split("=", 1)[0] for v in exp.vary]
    short = [k.rsplit(".", 1)[-1] for k in grid_keys]
    lines = [f"## {exp.title}", "",
             f"- Config `{exp.config}`, budget `{exp.budget}`, "
             f"{exp.seeds} seed{'s' if exp.seeds != 1 else ''} (n: the runs finished), metric `{exp.metric}` "
             f"({'lower' if exp.lower_is_better else 'higher'} is better).",
             f"- Paper setting: {exp.paper_setting}.", f"- Our setting: {exp.our_setting}.", "",
             "| cell | " + "".join(f"{k} | " for k in short) + "paper | ours (mean ± std) | n | hidden | params |",
             "|---|" + "---|" * (len(short) + 5)]
    for e in entries:
        grid = "".join(f"{e['grid'][k]} | " for k in grid_keys)
        lines.append(f"| {e['cell']} | {grid}{fmt(e['paper'])} | {fmt(e['mean'], e['std'])} | {e['n']} | "
                     f"{e['hidden']} | {int(e['params']):,} |")
    lines.append("")
    if not exp.vary:
        lines += [ordering_verdict(entries, exp), ""]
        if flattening:
            lines += ["Validation " + flattening[0]["monitor"] + " over the last quarter of the budget (mean over seeds; "
                      "the share is of the whole change since the first validation, near 0 % when the curve has "
                      "flattened): " + "; ".join(f"{f['cell']} {f['change']:+.3f} ({f['share']:.0%})"
                                               for f in flattening) + ".", ""]
    else:
        for point in sorted({tuple(e["grid"].items()) for e in entries}):
            members = [e for e in entries if tuple(e["grid"].items()) == point]
            order = ordering(members, "mean", exp.lower_is_better)
            gap = abs(members[0]["mean"] - members[-1]["mean"]) if len(members) == 2 and all(
                m["mean"] is not None for m in members) else None
            where = ", ".join(f"{k.rsplit('.', 1)[-1]} {v}" for k, v in point)
            claim = "" if exp.claimed_best is None else (
                f"; the paper's claim ({exp.claimed_best} ahead) " + ("**shows**" if order and order[0] ==
                                                                      exp.claimed_best else "does **not** show"))
            lines.append(f"- {where}: best first {', '.join(order)}" + (f" (gap {gap:.1f})" if gap is not None
                                                                         else "") + claim)
        lines.append("")
    lines += [f"![{Path(f).stem}]({Path(f).name})" for f in figures] + ([""] if figures else [])
    return "\n".join(lines)


NOT_RUN = "Not run yet"


def run_experiment(exp: Experiment, folder: Path, log: Any,
                   launcher: Optional[Launcher] = None) -> List[Dict[str, Any]]:
    """Run (or reuse the finished runs of) one experiment's comparison in ``folder``; the rows of its runs.csv."""
    return compare(str(ROOT / exp.config) if not Path(exp.config).is_absolute() else exp.config, list(exp.cells),
                   seeds=exp.seeds, budget=exp.budget, out=folder, match_params=exp.match_params,
                   hidden_size=exp.hidden_size, vary=list(exp.vary), extra=list(exp.extra),
                   test_every_epoch=exp.test_every_epoch, no_wandb=True, log=log, launcher=launcher)


def cpu_header(paper: str, title: str) -> List[str]:
    """The CPU-scale report's title and how it was made."""
    return [f"# Reproducing {title} at a CPU budget", "",
            f"Written by `python -m lit_rnncells.reproduce {paper} --out <runs folder> --report <this page>`, which runs "
            "the experiments below (or reads them where they finished: the comparison runner skips finished runs). "
            "Every number of ours was measured on this project's 2-core CPU machine at the budget given; the paper's "
            "numbers come from full-size GPU training, so compare the orderings, not the values.", ""]


def reproduce(paper: str, out: Path, report: Optional[Path], experiments: Optional[Sequence[str]] = None,
              read_only: bool = False, log: Any = None, launcher: Optional[Launcher] = None) -> str:
    """Run (or read) a paper's experiments and return its markdown report (progress on ``log``, default the
    current ``sys.stderr``); ``launcher`` runs the runs (default one at a time on this machine). With ``report``
    the page there is updated (:func:`.report_page.merge`: only its generated blocks change, whatever a person
    wrote around them stays) and returned."""
    log = sys.stderr if log is None else log
    if paper not in PAPERS:
        raise CompareError(f"Unknown paper {paper!r}; use one of {', '.join(PAPERS)}.")
    title, exps = PAPERS[paper]
    chosen = [e for e in exps if experiments is None or e.name in experiments]
    unknown = sorted(set(experiments or ()) - {e.name for e in exps})
    if unknown:
        raise CompareError(f"Unknown experiment(s) {', '.join(unknown)} of {paper}; use "
                           f"{', '.join(e.name for e in exps)}.")
    header = "\n".join(cpu_header(paper, title))
    headings = {"header": header.splitlines()[0], **{e.name: f"## {e.title}" for e in exps},
                "notes": NOTES.get(paper, "").split("\n", 1)[0]}
    existing = report.read_text(encoding="utf-8") if report is not None and report.is_file() else None
    earlier = report_page.current_blocks(existing, headings, {"notes": NOTES.get(paper, "")})
    parts: List[report_page.Part] = [("header", header)]
    for exp in chosen:
        parts.append((exp.name, experiment_part(paper, exp, out, report, read_only, earlier.get(exp.name), log,
                                                launcher)))
    if experiments is None and paper in NOTES:
        parts.append(("notes", NOTES[paper]))
    if report is None:
        return "\n".join(text for _, text in parts if text is not None).rstrip() + "\n"
    page = report_page.merge(existing, parts, headings)
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(page, encoding="utf-8")
    return page


def experiment_part(paper: str, exp: Experiment, out: Path, report: Optional[Path], read_only: bool,
                    kept: Optional[str], log: Any, launcher: Optional[Launcher]) -> Optional[str]:
    """One experiment's section of the report: run (or read) it; ``None`` keeps the results ``kept`` (the
    report's block) when there is nothing new to show."""
    folder = out / exp.name
    finished = sorted(folder.glob(f"*/{RESULT_FILE}"))
    if read_only and not finished and kept and NOT_RUN not in kept:
        print(f"reproduce: {folder} holds no finished run of {exp.name}; kept the results already in {report}.",
              file=log)
        return None  # never replace finished results with "not run"
    if read_only and not finished:
        return "\n".join([f"## {exp.title}", "", f"{NOT_RUN}: `python -m lit_rnncells.reproduce {paper} "
                          f"--experiments {exp.name}` runs it.", ""])
    if read_only:  # the runs that finished, nothing new; their curves drawn again
        results = [json.loads(path.read_text()) for path in finished]
        rows = [row_of(r) for r in results]
        grid_keys = [v.split("=", 1)[0] for v in exp.vary]
        plot_curves(curve_groups(results, grid_keys), "step", results[0]["monitor"],
                    f"{exp.config}, budget {exp.budget} (finished runs): validation {results[0]['monitor']}",
                    folder / "curves_steps.png")
    else:
        rows = run_experiment(exp, folder, log, launcher)
    if not rows and kept and NOT_RUN not in kept:  # every run failed: keep what the report had
        print(f"reproduce: no run of {exp.name} finished; kept the results already in {report}.", file=log)
        return None
    figures = []
    if report is not None and (folder / "curves_steps.png").exists():
        target = report.parent / f"{paper}_{exp.name}_curves_steps.png"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(folder / "curves_steps.png", target)
        figures.append(str(target))
    return experiment_markdown(exp, summarise(rows, exp), figures,
                               last_quarter_change(sorted(folder.glob(f"*/{RESULT_FILE}")), exp))


def paper_section(exp: Experiment, folder: Path, launcher: Launcher, figures: List[str],
                  log: Any) -> Tuple[str, List[Dict[str, Any]]]:
    """Run one experiment (``--scale paper``) and its report section, as at CPU scale; the section and the rows."""
    rows = run_experiment(exp, folder, log, launcher)
    files = sorted(folder.glob(f"*/{RESULT_FILE}"))
    return experiment_markdown(exp, summarise(rows, exp), figures, last_quarter_change(files, exp)), rows


def run_paper_scale(args: argparse.Namespace) -> int:
    """``main`` for ``--scale paper`` (:func:`.paper_scale.reproduce_at_paper_scale`)."""
    results, time_limit = paper_scale.check_options(args)
    text = paper_scale.reproduce_at_paper_scale(args.paper, *PAPERS[args.paper], Experiment, Path(args.out), results,
                                                args.experiments, time_limit, paper_section)
    if args.report:  # beside what the page holds (the CPU report, a person's sections): its own block
        path = Path(args.report)
        existing = path.read_text(encoding="utf-8") if path.is_file() else None
        block = text if not existing else report_page.demote(text)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(report_page.merge(existing, [("paper_scale", block)]), encoding="utf-8")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, prog="python -m lit_rnncells.reproduce", description=__doc__.split("\n\n")[0])
    ap.add_argument("paper", choices=sorted(PAPERS))
    ap.add_argument("--out", help="folder of the runs, one subfolder per experiment (default runs/reproduce, "
                                  "runs/reproduce-paper with --scale paper)")
    ap.add_argument("--report", help="write the markdown here (default: print it)")
    ap.add_argument("--experiments", nargs="+", help="only these experiments of the paper")
    ap.add_argument("--read-only", action="store_true", help="report the runs that finished; run nothing new")
    ap.add_argument("--jobs", type=int, default=1, metavar="N",
                    help="runs at once (default 1), as compare --jobs: each its own GPU or share of the CPU cores")
    paper_scale.add_options(ap)
    add_slurm_options(ap)
    args = ap.parse_args(argv)
    args.out = args.out or ("runs/reproduce-paper" if args.scale == "paper" else "runs/reproduce")
    try:
        check_output_folder(args.out, "--out")
        if args.report:
            check_output_file(args.report, "--report")
    except OSError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:
        if args.scale == "paper" or any(v is not None for v in (args.time_budget, args.total_minutes,
                                                                  args.startup_allowance)):
            if args.launcher == "slurm":
                raise CompareError("--scale paper runs every run at once on this machine's GPU; on a Slurm cluster "
                                   "drop --launcher slurm and submit the command as one job, or drop --scale paper.")
            return run_paper_scale(args)
        launcher = slurm_launcher(args, Path(args.out)) if args.launcher == "slurm" else LocalLauncher(args.jobs)
        text = reproduce(args.paper, Path(args.out), Path(args.report) if args.report else None, args.experiments,
                         args.read_only, launcher=launcher)
    except CompareError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except Interrupted as stop:
        print(f"reproduce: {stop.signal_name}: stopped {', '.join(stop.run_ids) or 'before the next run'}; rerun the "
              "same command to go on: finished runs are kept, unfinished ones resume from their checkpoints.",
              file=sys.stderr, flush=True)
        return stop.code
    if not args.report:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
