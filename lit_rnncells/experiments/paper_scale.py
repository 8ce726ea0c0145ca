"""The papers' sizes for ``python -m lit_rnncells.reproduce <paper> --scale paper``, beside the CPU-scale settings of
:data:`lit_rnncells.experiments.papers.PAPERS`.

Each experiment runs from the paper-size config its cells are written for (``configs/lm/ptb_char_*.yaml`` and so
on), with every cell and seed of it **at once on one GPU**, as separate processes sharing it
(:class:`~lit_rnncells.experiments.compare.LocalLauncher` with every run on the same device). A time limit per run
(Lightning's ``max_time``, :func:`time_limit_seconds`) makes the whole experiment fit one command of a few minutes;
a run it stops keeps its checkpoint, and the same command again goes on from it. Without a time limit the runs go
to the paper's full budget. :func:`write_results` copies the report, each experiment's ``runs.csv`` and its
curves into one small folder to copy off a remote machine (checkpoints stay in the run folders).
"""
from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..utils.paths import check_output_folder
from .compare import CompareError, LocalLauncher, parse_vary
from .compare.runner import visible_gpus
from .papers import with_seeds

MZU_DT = "zones=4,filter_size=1000,transition_depth=1,share_transition=true,layer_norm=true,candidate_dropout=0.5," \
         "disagreement_weight=1.0"
"""The MZU cells of Table 1 as the paper trains them on PTB (the options of configs/lm/ptb_char_*mzu_dt.yaml)."""
GRU_DT = "layer_norm=true,candidate_dropout=0.5"
"""The GRU baselines of Table 1 as the paper trains them on PTB: "with the same settings to our MZUs", dropout and
layer normalisation included (its footnote 3)."""


@dataclasses.dataclass(frozen=True)
class PaperScale:
    """What an experiment changes at the paper's sizes: the paper-size config, its full budget and cells; ``fields``
    are further :class:`~lit_rnncells.experiments.papers.Experiment` fields to replace."""

    config: str
    budget: str
    setting: str
    cells: Optional[Dict[str, str]] = None
    fields: Dict[str, object] = dataclasses.field(default_factory=dict)


SCALES: Dict[str, Dict[str, PaperScale]] = {
    "mzu": {"ptb_char": PaperScale(
        config="configs/lm/ptb_char_gru.yaml", budget="epochs=60",
        cells={f"GRUDT(transition_depth=0,{GRU_DT})": "GRU",
               f"GRUDT(transition_depth=1,share_transition=true,{GRU_DT})": "GRU+DT",
               f"SatMZU({MZU_DT})": "satMZU+DT", f"GcnMZU({MZU_DT})": "gcnMZU+DT",
               f"CapMZU({MZU_DT},capsules=2,routing_iterations=3)": "capMZU+DT"},
        fields={"paper": {"GRU": 1.269, "GRU+DT": 1.208, "satMZU+DT": 1.189, "gcnMZU+DT": 1.183, "capMZU+DT": 1.181},
                "seeds": 1, "match_params": None, "hidden_size": 800,
                "extra": ("--model.init_args.regularization.dropout", "0.0")},
        setting="the paper's sizes (configs/lm/ptb_char_gru.yaml): embedding 256, hidden 800 for every cell, batch "
                "256, BPTT 150, Adam 1e-3, clip 5; MZU cells with 4 zones, filter 1000, layer norm, candidate "
                "dropout 0.5, λ = 1, M shared across depth (capMZU: 2 capsules, 3 routing iterations); GRU and "
                "GRU+DT (one shared transition GRU) with layer norm and candidate dropout 0.5 as the paper's "
                "footnote 3 says (`GRUDT`, `transition_depth=0` for the GRU; where, as in the MZU: each "
                "pre-activation, the candidate); no other dropout: the config's locked dropout on the RNN output "
                "is set to 0, the paper stating none; 60 epochs (the paper gives none)")},
    "mcrnn": {"ptb_word": PaperScale(
        config="configs/lm/ptb_word_awd_lstm.yaml", budget="epochs=500",
        fields={"seeds": 1, "match_params": None, "hidden_size": 1150, "extra": ()},
        setting="AWD-LSTM's sizes (configs/lm/ptb_word_awd_lstm.yaml): 3 layers, 1150 hidden, 400 embedding, "
                "weight drop 0.5, NT-ASGD, 500 epochs")},
    "mufuru": {"logic_fig1a": PaperScale(
        config="configs/logic/gru.yaml", budget="epochs=100",
        fields={"vary": ("model.init_args.hidden_size=2,4,8,16,32,64,128",),
                "extra": ("--trainer.accelerator", "auto")},
        setting="the paper's data, operations, Adam (β1 = 0) and 100 epochs; the figure's hidden sizes are not in "
                "the text, so ours are 2 to 128 in powers of two, to see both of its claims: the MuFuRU near 100 % "
                "from size 8 where the GRU is lower, and the GRU overfitting at larger sizes where the MuFuRU does "
                "not; embedding 32, batch 32, learning rate 1e-3, clip 5 as at the CPU scale")},
    "caru": {"multi30k_de_en": PaperScale(
        config="configs/seq2seq/multi30k_de_en_gru.yaml", budget="epochs=20",
        fields={"seeds": 1, "hidden_size": 2048, "extra": ()},
        setting="the paper's sizes (configs/seq2seq/multi30k_de_en_gru.yaml): embedding 256, hidden 2048 for every "
                "cell, batch 100, Adam 1e-3 halved on a validation plateau; 20 epochs (the paper gives none), beam 5 "
                "at test")},
}
"""Paper-size settings of the CPU experiments of the same name; experiments without one are left out at this
scale (their section says so)."""


def experiments(paper: str, cpu_experiments: Sequence[Any]) -> List[Any]:
    """The paper's experiments at its sizes: each CPU experiment with a :data:`SCALES` entry, changed by it."""
    scaled = []
    for exp in cpu_experiments:
        scale = SCALES.get(paper, {}).get(exp.name)
        if scale is None:
            continue
        changes = dict(scale.fields, config=scale.config, budget=scale.budget, our_setting=scale.setting)
        if scale.cells is not None:
            changes["cells"] = scale.cells
        scaled.append(dataclasses.replace(exp, **changes))
    return scaled


STARTUP_ALLOWANCE = 60.0
"""Default seconds of ``--total-minutes`` kept for each run's start, before its first step: process start, imports,
model build, data loading (``--startup-allowance``). Measured by ``scripts/measure_startup.py`` on the project's
2-core CPU machine under a load average of 4.5-8 (docs/compare.md): a paper-size MZU PTB char child had
imported, built its model and loaded the data 13.6-19.9 s after its process started (the 5 cells of Table 1,
median of 2). The default adds a margin for 5 such processes starting at once and for what a GPU adds: the CUDA
context, compiling the step, the sanity validation. Together with :data:`TEST_SHARE` it held on an H200 (below)."""
TEST_SHARE = 0.15
"""The share of ``--total-minutes`` kept for each run's test of its best checkpoint and for writing the report, after
training. On one H200 (2026-11-27, docs/measured.md) the five MZU Table 1 runs of ``--total-minutes 8`` (348 s of
training each) ended 398-464 s after the command began, 50-116 s beyond their training for start, compile, the last
validation and the test, inside the 132 s kept; with ``--total-minutes 4.6`` (174 s) they ended after 215-265 s."""


def time_limit_seconds(time_budget: Optional[float], total_minutes: Optional[float],
                       startup_allowance: float = STARTUP_ALLOWANCE) -> Optional[float]:
    """Each run's seconds of training: ``time_budget`` minutes, or what ``total_minutes`` leaves after
    ``startup_allowance`` seconds of start and :data:`TEST_SHARE` for the test and the report (every run trains at
    once, so each gets all of it); ``None``: no limit (the paper's full budget)."""
    if time_budget is not None and total_minutes is not None:
        raise CompareError("--time-budget and --total-minutes both set the runs' time; give one of them.")
    if startup_allowance < 0:
        raise CompareError(f"--startup-allowance {startup_allowance:g} is not 0 or more seconds; use e.g. "
                           f"{STARTUP_ALLOWANCE:g}.")
    if time_budget is not None:
        if time_budget <= 0:
            raise CompareError(f"--time-budget {time_budget:g} is not a positive number of minutes; use e.g. 5.")
        return time_budget * 60.0
    if total_minutes is None:
        return None
    if total_minutes <= 0:
        raise CompareError(f"--total-minutes {total_minutes:g} is not a positive number of minutes; use e.g. 8.")
    seconds = total_minutes * 60.0
    reserve = startup_allowance + TEST_SHARE * seconds
    if seconds <= reserve:
        raise CompareError(f"--total-minutes {total_minutes:g} leaves no time to train after {reserve:.0f} s of "
                           "start, data loading and testing; give more minutes, or --time-budget for the runs alone.")
    return seconds - reserve


MAX_FILES = 8
MAX_BYTES = 16 * 1024 * 1024
RESULT_FILES = ("runs.csv", "curves_steps.png", "curves_seconds.png")


def write_results(results: Path, report: str, paper: str, run_folders: Dict[str, Path]) -> List[Path]:
    """The small folder to copy off the machine: ``<paper>.md`` and each experiment's ``runs.csv`` and curves
    (``<experiment>_<file>``), at most :data:`MAX_FILES` files of at most 16 MB each; the files written. The
    seconds-curves go first when the count would pass the limit."""
    wanted = [(name, folder / f) for name, folder in run_folders.items() for f in RESULT_FILES
              if (folder / f).is_file()]
    while len(wanted) + 1 > MAX_FILES and any(src.name == "curves_seconds.png" for _, src in wanted):
        last = max(i for i, (_, src) in enumerate(wanted) if src.name == "curves_seconds.png")
        wanted.pop(last)
    wanted = wanted[:MAX_FILES - 1]
    results.mkdir(parents=True, exist_ok=True)
    page = results / f"{paper}.md"
    page.write_text(report, encoding="utf-8")
    written = [page]
    for name, src in wanted:
        if src.stat().st_size >= MAX_BYTES:
            continue  # never the case for a CSV or a curve; kept out rather than filling the folder
        target = results / f"{name}_{src.name}"
        shutil.copyfile(src, target)
        written.append(target)
    return written


def reached(rows: Sequence[Dict[str, object]], time_limit: Optional[float], grid_keys: Sequence[str] = ()) -> str:
    """The full epochs, steps and minutes of training each run reached (over every command that trained it), for
    the report: one phrase when every run reached the same, else each run by cell, grid point and seed."""
    if not rows:
        return ""
    limit = f" in a time limit of {time_limit / 60:.1f} min per run" if time_limit is not None else ""
    reach = [(run_name(r, grid_keys), f"{r['epochs']} epochs, {r['steps']} steps"
              + (f", {float(r['seconds']) / 60:.1f} min of training in all" if r.get("seconds") else ""))
             for r in rows]
    if len({what for _, what in reach}) == 1:
        return f"Reached{limit}: every run ({len(rows)}) {reach[0][1]}.\n"
    return f"Reached{limit}: " + "; ".join(f"{name}: {what}" for name, what in reach) + ".\n"


def run_name(row: Dict[str, object], grid_keys: Sequence[str]) -> str:
    """``GRU seed 1``, or ``GRU (hidden_size 8) seed 1`` in a grid."""
    point = ", ".join(f"{k.rsplit('.', 1)[-1]} {row.get(k)}" for k in grid_keys)
    return f"{row['cell']}{f' ({point})' if point else ''} seed {row['seed']}"


def runs_of(exp: Any) -> int:
    """How many runs an experiment has: cells x seeds x grid points."""
    points = 1
    for _, values in parse_vary(exp.vary):
        points *= len(values)
    return len(exp.cells) * exp.seeds * points


Section = Callable[[Any, Path, LocalLauncher, List[str], Any], Tuple[str, List[Dict[str, Any]]]]
"""Runs one experiment through a launcher; its report section and rows (:func:`..reproduce.paper_section`)."""


def reproduce_at_paper_scale(paper: str, title: str, cpu_experiments: Sequence[Any], out: Path, results: Path,
                             chosen: Optional[Sequence[str]], time_limit: Optional[float], section: Section,
                             log: Any = None, jobs: Optional[int] = None, seeds: Optional[int] = None) -> str:
    """Each of the paper's experiments at its sizes (:func:`experiments`; ``chosen``: only these), all its runs at
    once on one GPU (the first visible; without one, sharing the CPU cores), or ``jobs`` at a time, each allowed
    ``time_limit`` seconds of training (``None``: the paper's full budget); the report, runs.csv and curves go to
    ``results``; ``seeds``: seeds 1 to ``seeds`` of each instead of its own number."""
    log = sys.stderr if log is None else log
    exps = with_seeds(experiments(paper, cpu_experiments), seeds)
    unknown = sorted(set(chosen or ()) - {e.name for e in exps})
    if unknown:
        raise CompareError(f"Unknown experiment(s) {', '.join(unknown)} of {paper} at the paper's size; use "
                           f"{', '.join(e.name for e in exps)}.")
    budget = "no time limit: each run goes to the paper's full budget" if time_limit is None else \
        f"each run limited to {time_limit / 60:.1f} min of training in this command (the same command goes on)"
    device = visible_gpus()[:1]
    where = "one GPU" if device else "this machine's CPU cores (no GPU visible)"
    at_once = "at once" if jobs is None else f"{jobs} at a time (`--jobs {jobs}`)"
    command = f"python -m lit_rnncells.reproduce {paper} --scale paper" + ("" if jobs is None else f" --jobs {jobs}")
    parts = [f"# Reproducing {title} at the paper's size", "",
             f"Written by `{command}`: every cell and seed of an experiment {at_once} on {where}; {budget}. Epochs "
             "reached are listed under each table.", ""]
    folders: Dict[str, Path] = {}
    for exp in [e for e in exps if chosen is None or e.name in chosen]:
        folder = folders[exp.name] = out / exp.name
        launcher = LocalLauncher(runs_of(exp) if jobs is None else min(jobs, runs_of(exp)), devices=device,
                                 time_limit=time_limit)
        figures = [str(results / f"{exp.name}_curves_steps.png")]
        text, rows = section(exp, folder, launcher, figures, log)
        parts += [text, reached(rows, time_limit, [key for key, _ in parse_vary(exp.vary)])]
    text = "\n".join(parts).rstrip() + "\n"
    written = write_results(results, text, paper, folders)
    print(f"reproduce: wrote {len(written)} files to {results} (copy that folder off the machine; the checkpoints "
          f"stay in {out})", file=log, flush=True)
    return text


def add_options(ap: argparse.ArgumentParser) -> None:
    """``--scale``, ``--time-budget``, ``--total-minutes`` and ``--results`` of ``python -m lit_rnncells.reproduce``."""
    ap.add_argument("--scale", choices=("cpu", "paper"), default="cpu",
                    help="cpu (default): the CPU-sized settings; paper: the papers' sizes, every run of an "
                         "experiment at once on one GPU")
    ap.add_argument("--time-budget", type=float, metavar="MINUTES",
                    help="with --scale paper: minutes of training per run in this command (default: none, the "
                         "paper's full budget); the same command again goes on from the checkpoints")
    ap.add_argument("--total-minutes", type=float, metavar="MINUTES",
                    help="with --scale paper: the whole command's minutes, start, data loading and testing included; "
                         "each run's time budget is what is left after an allowance for those")
    ap.add_argument("--startup-allowance", type=float, metavar="SECONDS",
                    help="with --total-minutes: seconds kept for each run's start before its first step (process "
                         f"start, imports, model build, data loading; default {STARTUP_ALLOWANCE:g}, measured on CPU "
                         "plus a margin: docs/compare.md); a further "
                         f"{TEST_SHARE * 100:.0f} %% of the minutes is kept for the test and the report")
    ap.add_argument("--results", help="with --scale paper: the small folder of the report, runs.csv and curves "
                                      "(default <out>/results)")


def check_options(args: argparse.Namespace) -> Tuple[Path, Optional[float]]:
    """The results folder and each run's time limit of ``--scale paper``; a :class:`CompareError` for options that
    do not fit it."""
    if args.scale != "paper":
        raise CompareError("--time-budget, --total-minutes, --startup-allowance and --results are options of "
                           "--scale paper (the runs' time and the small results folder); add --scale paper.")
    if args.read_only:
        raise CompareError("--scale paper runs the runs of an experiment and writes their results; drop --read-only.")
    results = Path(args.results) if args.results else Path(args.out) / "results"
    try:
        check_output_folder(str(results), "--results")
    except OSError as error:
        raise CompareError(str(error)) from None
    startup = STARTUP_ALLOWANCE if args.startup_allowance is None else args.startup_allowance
    return results, time_limit_seconds(args.time_budget, args.total_minutes, startup)
