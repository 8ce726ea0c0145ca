"""Per-paper reproduction reports at a CPU-sized budget: ``python -m lit_rnncells.reproduce <paper>``.

Each paper's experiments are comparisons (:func:`lit_rnncells.experiments.compare.compare`) at a stated budget; the
command runs them, or reads them when the runs have finished (the runner skips finished runs, so a rerun
only writes the report), and writes a markdown page with the paper's figure beside ours, the settings
and the budget, and whether the paper's ordering of the cells shows. Reading (``--read-only``) never replaces
the results an existing report holds with "Not run yet": an experiment without finished runs keeps its section.
The papers and their experiments are :mod:`.papers`; the paper-size runs (``--scale paper``) :mod:`.paper_scale`.

    python -m lit_rnncells.reproduce mzu --out runs/reproduce --report runs/reproduce/mzu.md
    python -m lit_rnncells.reproduce mufuru --experiments logic_fig1a --read-only
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..utils.arguments import OneLineParser
from ..utils.paths import check_output_file, check_writable_folder
from . import paper_scale, report_page
from .compare import (CompareError, Interrupted, Launch, Launcher, LocalLauncher, Matching, RunOptions,
                      compare, parse_vary)
from .compare.launchers import check_local_launcher, launcher_from
from .compare.slurm_settings import add_slurm_options
from .papers import COMPILED, GRU_PTB, LM_SMALL, MZU_PTB, NOTES, PAPERS, Experiment  # noqa: F401  (importable here)
from .papers import with_seeds
from .report import CURVES_FILE, RESULT_FILE, curve_groups, load_result, plot_validation_curves, row_of
from .seed_spread import ALPHA, SeedResult, holm, p_text, p_value, separated, welch_p

ROOT = Path(__file__).resolve().parents[2]


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
    point_order = grid_order(exp)
    return in_cell_order(sorted(out, key=lambda e: point_order(e["grid"])), exp)


def grid_order(exp: Experiment) -> Callable[[Dict[str, Any]], Tuple[int, ...]]:
    """Sort key of a grid point (``{key: value}``): each value's place in the experiment's ``vary`` list, so that
    hidden sizes 2, 4, ..., 128 read in that order, not as text (128 before 16 before 2)."""
    places = {key: {str(v): i for i, v in enumerate(values)} for key, values in parse_vary(exp.vary)}
    return lambda grid: tuple(places[k].get(str(grid.get(k)), len(places[k])) for k in places)


def in_cell_order(entries: List[Dict[str, Any]], exp: Experiment) -> List[Dict[str, Any]]:
    """``entries`` in the order the experiment lists its cells (a stable sort: grid points keep theirs), whether
    the rows came from a run (plan order) or from the finished runs' folders (name order)."""
    order = {name: i for i, name in enumerate(exp.cells.values())}
    return sorted(entries, key=lambda e: order.get(e["cell"], len(order)))


def spec_label(spec: str) -> str:
    """The runner's label of a ``--cells`` spec (as it appears in runs.csv)."""
    from .compare import cell_label, check_cell

    return cell_label(check_cell(spec))


def best_first(entries: List[Dict[str, Any]], key: str, lower_is_better: bool) -> List[Dict[str, Any]]:
    """The entries best first by ``key`` (entries without a value left out)."""
    known = [e for e in entries if e[key] is not None]
    return sorted(known, key=lambda e: e[key], reverse=not lower_is_better)


def ordering(entries: List[Dict[str, Any]], key: str, lower_is_better: bool) -> List[str]:
    """Cell names best first by ``key`` (entries without a value left out)."""
    return [e["cell"] for e in best_first(entries, key, lower_is_better)]


def seeds_of(entry: Dict[str, Any]) -> SeedResult:
    return SeedResult(entry["mean"], entry["std"], entry["n"])


def pair_status(ahead: Dict[str, Any], behind: Dict[str, Any], lower_is_better: bool) -> Tuple[str, Optional[float]]:
    """How our runs order two cells the paper puts ``ahead`` of ``behind``: ``agrees``, ``reversed`` or ``level``
    (equal as printed, or within the seeds' spread), with Welch's p (``None``: under two seeds, by the means)."""
    p = welch_p(seeds_of(ahead), seeds_of(behind))
    if fmt(ahead["mean"]) == fmt(behind["mean"]) or (p is not None and p >= ALPHA):
        return "level", p
    better = ahead["mean"] < behind["mean"] if lower_is_better else ahead["mean"] > behind["mean"]
    return ("agrees" if better else "reversed"), p


def ours_text(ours: List[Dict[str, Any]], lower_is_better: bool) -> str:
    """Our order best first: ``a < b ≈ c``, with ``=`` for means equal as printed and ``≈`` for an order the
    seeds do not separate."""
    sign = " < " if lower_is_better else " > "
    text = ours[0]["cell"] if ours else ""
    for a, b in zip(ours, ours[1:]):
        level = fmt(a["mean"]) == fmt(b["mean"])
        within = not level and separated(seeds_of(a), seeds_of(b)) is False
        text += (" = " if level else " ≈ " if within else sign) + b["cell"]
    if " ≈ " in text:
        text += f" (≈: within the seeds' spread, Welch's t-test p ≥ {ALPHA:g})"
    return text


def named_pairs(pairs: List[Tuple[str, str, Optional[float], Optional[float]]], what: str, total: int) -> str:
    """A few pairs by name with their p-values (and the Holm-adjusted one, where given and different), or their
    count among ``total`` pairs."""
    if len(pairs) > 2:
        return f"{len(pairs)} of its {total} pairs"
    named = []
    for a, b, p, adjusted in pairs:
        holm_text = "" if p is None or adjusted is None or adjusted == p else (
            f"; {p_value(adjusted)} after Holm's correction over {total} pairs")
        named.append(f"{what.format(a=a, b=b)} ({p_text(p)}{holm_text})")
    return "; ".join(named)


def claim_verdict(ours: List[Dict[str, Any]], claimed: str, lower_is_better: bool) -> str:
    """Whether our best cell is the paper's ``claimed`` best, beyond the seeds' spread: ``**shows** at this
    budget``, ``does **not** show ...`` or ``is **not resolved** ...``, with the deciding pair's p-value."""
    by_name = {e["cell"]: e for e in ours}
    if claimed not in by_name:
        return f"does **not** show at this budget ({claimed} has no finished run)"
    if ours[0]["cell"] == claimed:
        if len(ours) == 1:
            return "**shows** at this budget (the only cell run)"
        status, p = pair_status(ours[0], ours[1], lower_is_better)
        verdict = "**shows**" if status == "agrees" else "is **not resolved**"
        return f"{verdict} at this budget ({claimed} ahead of {ours[1]['cell']}: {p_text(p)})"
    status, p = pair_status(by_name[claimed], ours[0], lower_is_better)
    verdict = "does **not** show" if status == "reversed" else "is **not resolved**"
    return f"{verdict} at this budget ({ours[0]['cell']} ahead of {claimed}: {p_text(p)})"


def ordering_verdict(entries: List[Dict[str, Any]], exp: Experiment) -> str:
    """Whether our ordering of the cells the paper reports agrees with the paper's, pair by pair beyond the seeds'
    spread (:mod:`.seed_spread`): it **shows** when every pair the paper orders is ordered the same way by our
    seeds, does **not** show when one is reversed beyond the spread after Holm's correction over the pairs, and
    is **not resolved** otherwise: some pair within the spread (or equal as printed), or reversed only before the
    correction. With one seed a pair rests on the means."""
    paper_order = ordering(entries, "paper", exp.lower_is_better)
    ours = best_first(entries, "mean", exp.lower_is_better)
    if len(paper_order) < 2:
        if exp.claimed_best is None:
            return "The paper gives no numbers to order here; see the setting above for its claim."
        return (f"Paper: {exp.claimed_best} best (no numbers in the text). Ours, best first: "
                f"{ours_text(ours, exp.lower_is_better)}. The paper's claim "
                f"{claim_verdict(ours, exp.claimed_best, exp.lower_is_better)}.")
    by_name = {e["cell"]: e for e in ours}
    compared = [e for e in ours if e["cell"] in paper_order]
    sign = " < " if exp.lower_is_better else " > "
    head = f"Paper: {sign.join(paper_order)}. Ours: {ours_text(compared, exp.lower_is_better)}. "
    missing = [c for c in paper_order if c not in by_name]
    if missing:
        return head + f"The paper's ordering does **not** show at this budget ({', '.join(missing)}: no finished run)."
    pairs = [(a, b, *pair_status(by_name[a], by_name[b], exp.lower_is_better))
             for i, a in enumerate(paper_order) for b in paper_order[i + 1:]]
    adjusted = holm([p for *_, p in pairs])
    # a reversal counts only where it survives Holm's correction over the pairs; an agreement needs p < ALPHA on
    # its own (every pair must agree: an intersection-union test, see seed_spread)
    reversed_ = [(b, a, p, q) for (a, b, status, p), q in zip(pairs, adjusted)
                 if status == "reversed" and (q is None or q < ALPHA)]
    level = [(a, b, p, None if status == "level" else q) for (a, b, status, p), q in zip(pairs, adjusted)
             if status == "level" or (status == "reversed" and q is not None and q >= ALPHA)]
    untested = sum(p is None for *_, p in pairs)
    if reversed_:
        tail = "does **not** show at this budget: reversed: " + named_pairs(reversed_, "{a} ahead of {b}",
                                                                             len(pairs))
        tail += f"; not separated: {named_pairs(level, '{a} and {b}', len(pairs))}" if level else ""
    elif level:
        tail = ("is **not resolved** at this budget: no pair is reversed; not separated: "
                + named_pairs(level, "{a} and {b}", len(pairs)))
    else:
        tail = "**shows** at this budget"
        if untested:
            tail += f" ({untested} of its {len(pairs)} pairs by the means alone: under 2 seeds, no spread to test)"
    return head + "The paper's ordering " + tail + "."


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
    return in_cell_order([{"cell": cell, "monitor": monitor, "change": statistics.fmean(c for c, _ in values),
                           "share": statistics.fmean(s for _, s in values)} for cell, values in by_cell.items()], exp)


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
        point_order = grid_order(exp)
        for point in sorted({tuple(e["grid"].items()) for e in entries}, key=lambda p: point_order(dict(p))):
            members = [e for e in entries if tuple(e["grid"].items()) == point]
            ordered = best_first(members, "mean", exp.lower_is_better)
            gap = abs(members[0]["mean"] - members[-1]["mean"]) if len(members) == 2 and all(
                m["mean"] is not None for m in members) else None
            where = ", ".join(f"{k.rsplit('.', 1)[-1]} {v}" for k, v in point)
            claim = "" if exp.claimed_best is None else (
                f"; the paper's claim ({exp.claimed_best} ahead) "
                + claim_verdict(ordered, exp.claimed_best, exp.lower_is_better))
            lines.append(f"- {where}: best first {', '.join(m['cell'] for m in ordered)}"
                         + (f" (gap {gap:.1f})" if gap is not None else "") + claim)
        lines.append("")
    lines += [f"![{Path(f).stem}]({Path(f).name})" for f in figures] + ([""] if figures else [])
    return "\n".join(lines)


NOT_RUN = "Not run yet"


def run_experiment(exp: Experiment, folder: Path, log: Any, launcher: Optional[Launcher] = None,
                   dry_run: bool = False) -> List[Dict[str, Any]]:
    """Run (or reuse the finished runs of) one experiment's comparison in ``folder``; the rows of its runs.csv
    (``dry_run``: only plan and check its runs, printing their commands; no rows)."""
    return compare(str(ROOT / exp.config) if not Path(exp.config).is_absolute() else exp.config, list(exp.cells),
                   seeds=exp.seeds, budget=exp.budget, out=folder, vary=list(exp.vary),
                   matching=Matching(match_params=exp.match_params, hidden_size=exp.hidden_size),
                   runs=RunOptions(extra=list(exp.extra), test_every_epoch=exp.test_every_epoch, no_wandb=True),
                   launch=Launch(launcher=launcher, dry_run=dry_run), log=log)


def cpu_header(paper: str, title: str) -> List[str]:
    """The CPU-scale report's title and how it was made."""
    return [f"# Reproducing {title} at a CPU budget", "",
            f"Written by `python -m lit_rnncells.reproduce {paper} --out <runs folder> --report <this page>`, which runs "
            "the experiments below (or reads them where they finished: the comparison runner skips finished runs). "
            "Every number of ours was measured on this project's 2-core CPU machine at the budget given; the paper's "
            "numbers come from full-size GPU training, so compare the orderings, not the values.", ""]


def reproduce(paper: str, out: Path, report: Optional[Path], experiments: Optional[Sequence[str]] = None,
              read_only: bool = False, log: Any = None, launcher: Optional[Launcher] = None,
              seeds: Optional[int] = None) -> str:
    """Run (or read) a paper's experiments and return its markdown report (progress on ``log``, default the
    current ``sys.stderr``); ``launcher`` runs the runs (default one at a time on this machine); ``seeds``: seeds
    1 to ``seeds`` of each experiment instead of its own number (:func:`.papers.with_seeds`). With ``report``
    the page there is updated (:func:`.report_page.merge`: only its generated blocks change, whatever a person
    wrote around them stays) and returned."""
    log = sys.stderr if log is None else log
    if paper not in PAPERS:
        raise CompareError(f"Unknown paper {paper!r}; use one of {', '.join(PAPERS)}.")
    title, exps = PAPERS[paper]
    chosen = with_seeds([e for e in exps if experiments is None or e.name in experiments], seeds)
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


def draw_curves(exp: Experiment, folder: Path) -> None:
    """The experiment's figures (validation against steps and against seconds) from its finished runs, each curve
    named as the report's table names it (``satMZU+DT``, not the cell's whole specification)."""
    labels = {spec_label(spec): name for spec, name in exp.cells.items()}
    results = [load_result(path.parent) for path in sorted(folder.glob(f"*/{RESULT_FILE}"))]
    results = [{**r, "cell": labels.get(r["cell"], r["cell"])} for r in results]
    if results:
        monitor = results[0]["monitor"]
        plot_validation_curves(curve_groups(results, [v.split("=", 1)[0] for v in exp.vary]), monitor,
                               f"{exp.config}, budget {exp.budget}: validation {monitor}", folder)


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
    if read_only:  # the runs that finished, nothing new
        rows = [row_of(load_result(path.parent)) for path in finished]
    else:
        rows = run_experiment(exp, folder, log, launcher)
    draw_curves(exp, folder)
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
    draw_curves(exp, folder)
    files = sorted(folder.glob(f"*/{RESULT_FILE}"))
    return experiment_markdown(exp, summarise(rows, exp), figures, last_quarter_change(files, exp)), rows


def dry_run(paper: str, out: Path, chosen: Optional[Sequence[str]], scale: str, log: Any = None,
            seeds: Optional[int] = None) -> int:
    """``--dry-run``: each experiment's runs (at ``scale``) planned and their arguments parsed, their commands
    printed on ``log``; nothing runs or is written. A mistake is the one line of the run it would stop."""
    log = sys.stderr if log is None else log
    title, exps = PAPERS[paper]
    if scale == "paper":
        exps = paper_scale.experiments(paper, exps)
    unknown = sorted(set(chosen or ()) - {e.name for e in exps})
    if unknown:
        raise CompareError(f"Unknown experiment(s) {', '.join(unknown)} of {paper}"
                           f"{' at the paper' + chr(39) + 's size' if scale == 'paper' else ''}; use "
                           f"{', '.join(e.name for e in exps)}.")
    for exp in with_seeds([e for e in exps if chosen is None or e.name in chosen], seeds):
        print(f"reproduce: {paper} {exp.name} ({scale} scale), config {exp.config}, budget {exp.budget}:", file=log,
              flush=True)
        run_experiment(exp, out / exp.name, log, dry_run=True)
    return 0


def run_paper_scale(args: argparse.Namespace, results: Path, time_limit: Optional[float]) -> int:
    """``main`` for ``--scale paper`` (:func:`.paper_scale.reproduce_at_paper_scale`), its options checked by
    :func:`.paper_scale.check_options` (the results folder and each run's time limit)."""
    text = paper_scale.reproduce_at_paper_scale(args.paper, *PAPERS[args.paper], Path(args.out), results,
                                                args.experiments, time_limit, paper_section, jobs=args.jobs,
                                                seeds=args.seeds)
    if args.report:  # beside what the page holds (the CPU report, a person's sections): its own block
        path = Path(args.report)
        existing = path.read_text(encoding="utf-8") if path.is_file() else None
        block = figures_beside(text if not existing else report_page.demote(text), results, path.parent,
                               f"{args.paper}_paper_")
        path.write_text(report_page.merge(existing, [("paper_scale", block)]), encoding="utf-8")
    return 0


def figures_beside(block: str, results: Path, folder: Path, prefix: str) -> str:
    """``block`` with each figure it shows from ``results`` copied into ``folder`` (the report's, so the page's
    links work) as ``prefix`` + its name, apart from the CPU report's figures of the same experiments."""
    folder.mkdir(parents=True, exist_ok=True)
    for figure in sorted(results.glob("*.png")):
        if f"]({figure.name})" in block:
            shutil.copyfile(figure, folder / f"{prefix}{figure.name}")
            block = block.replace(f"]({figure.name})", f"]({prefix}{figure.name})")
    return block


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = OneLineParser(allow_abbrev=False, prog="python -m lit_rnncells.reproduce",
                       description=__doc__.split("\n\n")[0])
    ap.add_argument("paper", choices=sorted(PAPERS))
    ap.add_argument("--out", help="folder of the runs, one subfolder per experiment (default runs/reproduce, "
                                  "runs/reproduce-paper with --scale paper)")
    ap.add_argument("--report", help="write the markdown here (default: print it)")
    ap.add_argument("--experiments", nargs="+", help="only these experiments of the paper")
    ap.add_argument("--read-only", action="store_true", help="report the runs that finished; run nothing new")
    ap.add_argument("--dry-run", action="store_true",
                    help="plan every run, parse its arguments as the run would, print its command line and stop: "
                         "nothing runs or is written (a check before spending a GPU's time)")
    ap.add_argument("--jobs", type=int, metavar="N",
                    help="runs at once, as compare --jobs: each its own GPU or share of the CPU cores (default 1; "
                         "with --scale paper: every run of an experiment at once on one GPU, at most N with this)")
    ap.add_argument("--seeds", type=int, metavar="N",
                    help="run seeds 1 to N of each experiment (default: its own, 3 at the CPU scale, 1 at the paper's "
                         "size except where its section says); finished seeds are kept, so a report rerun with "
                         "more seeds adds only the new ones")
    paper_scale.add_options(ap)
    add_slurm_options(ap)
    args = ap.parse_args(argv)
    args.out = args.out or ("runs/reproduce-paper" if args.scale == "paper" else "runs/reproduce")
    try:
        check_writable_folder(args.out, "--out")
        if args.report:
            check_output_file(args.report, "--report")
    except OSError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:
        if args.seeds is not None and args.seeds < 1:
            raise CompareError(f"--seeds {args.seeds}: give 1 or more seeds.")
        if args.jobs is not None and args.jobs < 1:
            raise CompareError(f"--jobs {args.jobs} is not a positive number of runs at once; use e.g. --jobs 2, or "
                               "leave it out (one at a time; with --scale paper, every run of an experiment at once).")
        paper = args.scale == "paper" or any(v is not None for v in (args.time_budget, args.total_minutes,
                                                                      args.startup_allowance, args.results))
        if paper and args.launcher == "slurm":
            raise CompareError("--scale paper runs every run at once on this machine's GPU; on a Slurm cluster "
                               "drop --launcher slurm and submit the command as one job, or drop --scale paper.")
        check_local_launcher(args)
        checked = paper_scale.check_options(args) if paper else None  # a dry run refuses what the command would
        if args.dry_run:
            return dry_run(args.paper, Path(args.out), args.experiments, args.scale, seeds=args.seeds)
        if checked is not None:
            return run_paper_scale(args, *checked)
        jobs = 1 if args.jobs is None else args.jobs
        launcher = launcher_from(args, Path(args.out)) or LocalLauncher(jobs)
        text = reproduce(args.paper, Path(args.out), Path(args.report) if args.report else None, args.experiments,
                         args.read_only, launcher=launcher, seeds=args.seeds)
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
