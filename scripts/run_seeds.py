"""Run a config over several seeds, test each run's best-validation checkpoint, print mean ± std.

As the papers report (MZU Table 6: mean and standard deviation of five trainings): every seed trains
with a ModelCheckpoint on the monitored validation metric, the best checkpoint is tested, and the
test metrics are summarised as a markdown table (one row per config). Each run is a fresh process
(``python -m lit_rnncells``-equivalent through :func:`lit_rnncells.cli.main`), so runs share no state
and DDP works; arguments after ``--`` go to the CLI unchanged.

    python scripts/run_seeds.py --config configs/classification/absa_restaurants_gru_dt.yaml --seeds 3 \\
        -- --trainer.max_epochs 5
    python scripts/run_seeds.py --config a.yaml --config b.yaml --seed-list 1 2 3 --monitor val/acc --mode max
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

RESULT = "RUN_SEEDS_RESULT "
ROOT = Path(__file__).resolve().parents[1]


def child(config: str, seed: int, monitor: str, mode: str, out_dir: str, extra: Sequence[str]) -> None:
    """One run in this process: fit with a best-``monitor`` checkpoint, test that checkpoint, print the result."""
    from lightning.pytorch.callbacks import ModelCheckpoint

    from lit_rnncells.cli import main

    args = ["--config", config, "--seed_everything", str(seed), "--trainer.default_root_dir", out_dir,
            *extra]
    cli = main(args, run=False)
    best = ModelCheckpoint(dirpath=str(Path(out_dir) / "best"), filename="best", monitor=monitor, mode=mode,
                           save_top_k=1, auto_insert_metric_name=False)
    cli.trainer.callbacks.append(best)
    start = time.perf_counter()
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    fit_seconds = time.perf_counter() - start
    if not best.best_model_path:
        raise RuntimeError(f"No checkpoint was kept: the metric {monitor!r} was never logged; pass --monitor with "
                           "a validation metric the model logs (e.g. val/acc).")
    results = cli.trainer.test(cli.model, datamodule=cli.datamodule, ckpt_path=best.best_model_path)
    if cli.trainer.global_rank == 0:
        metrics = {k: float(v) for k, v in results[0].items()}
        metrics[f"best {monitor}"] = float(best.best_model_score)
        record = {"config": config, "seed": seed, "metrics": metrics, "checkpoint": best.best_model_path,
                  "epochs": cli.trainer.current_epoch, "fit_seconds": fit_seconds}
        print(RESULT + json.dumps(record), flush=True)


def run_one(config: str, seed: int, monitor: str, mode: str, out_dir: Path, extra: Sequence[str],
            env: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    """Run :func:`child` in a fresh process; the training log goes to stderr, the result is returned."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--config", config, "--seed-list", str(seed),
           "--monitor", monitor, "--mode", mode, "--out", str(out_dir), "--", *extra]
    full_env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", **(env or {})}
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=full_env)
    lines = proc.stdout.splitlines()
    found = [json.loads(line[len(RESULT):]) for line in lines if line.startswith(RESULT)]
    if proc.returncode != 0 or not found:
        sys.stdout.write("\n".join(lines[-40:]) + "\n")
        raise SystemExit(f"run_seeds: {config} with seed {seed} failed (exit code {proc.returncode}); "
                         "its log is above.")
    return found[-1]


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
    runs = []
    for config in configs:
        for seed in seeds:
            print(f"run_seeds: {Path(config).stem} seed {seed} ...", file=sys.stderr, flush=True)
            runs.append(run_one(config, seed, monitor, mode, out / Path(config).stem / f"seed_{seed}", extra, env))
    return runs


def parse(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: List[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1:]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", action="append", required=True, help="a CLI config (repeat for several)")
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--seeds", type=int, default=3, help="run seeds 1..N (default 3)")
    group.add_argument("--seed-list", type=int, nargs="+", help="run exactly these seeds")
    ap.add_argument("--monitor", default="val/acc", help="validation metric the kept checkpoint is best at")
    ap.add_argument("--mode", choices=("max", "min"), default="max")
    ap.add_argument("--out", default="runs/seeds", help="folder for the runs' checkpoints and logs")
    ap.add_argument("--json", help="also write every run's result to this JSON file")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
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
    if args.child:
        child(args.config[0], args.seed_list[0], args.monitor, args.mode, args.out, args.extra)
        return []
    runs = run_all(args.config, args.seed_list, args.monitor, args.mode, Path(args.out), args.extra)
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=1))
    print(f"\nBest-{args.monitor} checkpoint of each run, tested; mean ± sample std over seeds "
          f"{args.seed_list}; extra CLI args: {' '.join(args.extra) or 'none'}\n")
    print(summary_table(runs))
    return runs


if __name__ == "__main__":
    main()
