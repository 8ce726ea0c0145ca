"""Run a config over several seeds, test each run's best-validation checkpoint, print mean ± std.

A thin use of the comparison runner (:mod:`lit_rnncells.experiments.compare`, docs/compare.md) for configs compared as
they are (their own cell and sizes): as the papers report (MZU Table 6: mean and standard deviation of five
trainings), every seed trains in a fresh process with a ModelCheckpoint on the monitored validation metric,
the best checkpoint is tested, and the test metrics are summarised as a markdown table (one row per
config). Runs are resumable: a seed whose ``<out>/<config>/seed_<n>/result.json`` exists is not run again
(an interrupted seed resumes from its checkpoint, see docs/compare.md). Arguments after ``--`` go to the CLI unchanged.

    python scripts/run_seeds.py --config configs/classification/absa_restaurants_gru_dt.yaml --seeds 3 \\
        -- --trainer.max_epochs 5
    python scripts/run_seeds.py --config a.yaml --config b.yaml --seed-list 1 2 3 --monitor val/acc --mode max

To compare cells on one config (matched parameters, budgets, curves) use ``python -m lit_rnncells.compare``.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lit_rnncells.experiments.compare import CompareError, RunSpec, check_arguments, run_specs  # noqa: E402


def record(result: Dict[str, Any]) -> Dict[str, Any]:
    """A runner result as this script's record: config, seed, test metrics and the best validation value."""
    metrics = dict(result["test"])
    metrics[f"best {result['monitor']}"] = result[f"best {result['monitor']}"]
    return {"config": result["config"], "seed": result["seed"], "metrics": metrics,
            "checkpoint": result["checkpoint"], "epochs": result["epochs"], "fit_seconds": result["seconds"]}


def is_percent(metric: str) -> bool:
    name = metric.rsplit("/", 1)[-1]
    return name.startswith(("acc", "f1"))


def fmt(metric: str, values: List[float]) -> str:
    scale, digits = (100.0, 2) if is_percent(metric) else (1.0, 4)
    mean = statistics.fmean(values) * scale
    std = statistics.stdev(values) * scale if len(values) > 1 else math.nan
    return f"{mean:.{digits}f} ± {std:.{digits}f}" if len(values) > 1 else f"{mean:.{digits}f}"


def summary_table(runs: List[Dict[str, Any]], names: Optional[Dict[str, str]] = None) -> str:
    """Markdown: one row per config, mean ± std (sample std over seeds) of every metric; acc/F1 in %."""
    names = names or {}
    configs = list(dict.fromkeys(r["config"] for r in runs))
    metrics = list(dict.fromkeys(m for r in runs for m in r["metrics"]))
    metrics = [m for m in metrics if m.startswith("test/")] + [m for m in metrics if not m.startswith("test/")]
    header = ["config", "seeds", *[m + (" (%)" if is_percent(m) else "") for m in metrics], "epochs",
              "fit s / run"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for config in configs:
        rows = [r for r in runs if r["config"] == config]
        cells = [names.get(config, Path(config).stem), ", ".join(str(r["seed"]) for r in rows)]
        for m in metrics:
            values = [r["metrics"][m] for r in rows if m in r["metrics"]]
            cells.append(fmt(m, values) if values else "")
        cells.append(", ".join(str(r["epochs"]) for r in rows))
        cells.append(f"{statistics.fmean(r['fit_seconds'] for r in rows):.0f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def run_all(configs: Sequence[str], seeds: Sequence[int], monitor: str, mode: str, out: Path,
            extra: Sequence[str], env: Optional[Dict[str, str]] = None) -> List[Dict[str, Any]]:
    """Every config x seed through the runner (``<out>/<config stem>/seed_<n>``), each config's arguments parsed
    first (a wrong one is one error line before any run); stops at a failed run."""
    specs = [RunSpec(run_id=f"{Path(c).stem}/seed_{s}", folder=str(out / Path(c).stem / f"seed_{s}"), config=c,
                     cell=None, seed=s, grid={}, hidden_size=None, budget=None, monitor=monitor, mode=mode,
                     extra=list(extra)) for c in configs for s in seeds]
    failed: List[str] = []
    try:
        check_arguments(specs)
        results = run_specs(specs, env, failed=failed)
    except CompareError as error:  # a folder in use, or an unfinished run started with other settings
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    if failed:
        log = out / failed[0] / "log.txt"
        sys.stdout.write("\n".join(log.read_text().splitlines()[-40:]) + "\n")
        raise SystemExit(f"run_seeds: {failed[0]} failed; its log ({log}) ends above.")
    return [record(r) for r in results]


def parse(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: List[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1:]
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", action="append", required=True, help="a CLI config (repeat for several)")
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--seeds", type=int, default=3, help="run seeds 1..N (default 3)")
    group.add_argument("--seed-list", type=int, nargs="+", help="run exactly these seeds")
    ap.add_argument("--monitor", default="val/acc", help="validation metric the kept checkpoint is best at")
    ap.add_argument("--mode", choices=("max", "min"), default="max")
    ap.add_argument("--out", default="runs/seeds", help="folder for the runs' checkpoints and logs")
    ap.add_argument("--json", help="also write every run's result to this JSON file")
    args = ap.parse_args(argv)
    if args.seeds < 1:
        ap.error("--seeds must be 1 or more")
    for config in args.config:
        if not Path(config).is_file():
            ap.error(f"config {config!r} does not exist")
    args.seed_list = args.seed_list or list(range(1, args.seeds + 1))
    args.extra = extra
    return args


def main(argv: Optional[Sequence[str]] = None) -> List[Dict[str, Any]]:
    args = parse(argv)
    runs = run_all(args.config, args.seed_list, args.monitor, args.mode, Path(args.out), args.extra)
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=1))
    print(f"\nBest-{args.monitor} checkpoint of each run, tested; mean ± sample std over seeds "
          f"{args.seed_list}; extra CLI args: {' '.join(args.extra) or 'none'}\n")
    print(summary_table(runs))
    return runs


if __name__ == "__main__":
    main()
