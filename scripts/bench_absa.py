"""Restaurants DS (SemEval-2014 Task 4): GRU+DT against capMZU+DT, mean ± std over seeds (MZU Table 6).

Runs each config through :mod:`run_seeds` (every seed keeps its best-validation-accuracy checkpoint and
tests it, as the paper does) at a size that trains on 2 CPU cores in minutes, then prints accuracy and
macro-F1 (mean ± sample std) and says whether the paper's ordering (capMZU+DT above GRU+DT:
79.40 ± 0.23 vs 78.25 ± 0.51 accuracy) shows, and whether the gap exceeds the spread over seeds.

    python scripts/bench_absa.py      # 3 seeds; embedding 100, hidden 64, batch 64, 6 epochs, no pretrained vectors
    python scripts/bench_absa.py --seeds 1 --epochs 1 --limit-batches 5 --hidden 8   # a quick check
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import List, Optional

from run_seeds import run_all, summary_table

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = {"GRU+DT": ROOT / "configs/classification/absa_restaurants_gru_dt.yaml",
           "capMZU+DT": ROOT / "configs/classification/absa_restaurants_capmzu_dt.yaml"}
PAPER = {"GRU+DT": (78.25, 0.51), "capMZU+DT": (79.40, 0.23)}


def main(argv: Optional[List[str]] = None) -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=64, help="hidden size of each direction")
    ap.add_argument("--embedding", type=int, default=100)
    ap.add_argument("--limit-batches", type=int, default=0, help="train/validate/test on N batches (quick check)")
    ap.add_argument("--gru-config", type=Path, default=CONFIGS["GRU+DT"])
    ap.add_argument("--mzu-config", type=Path, default=CONFIGS["capMZU+DT"])
    ap.add_argument("--out", default="runs/bench_absa")
    args, passthrough = ap.parse_known_args(argv)
    configs = {"GRU+DT": str(args.gru_config), "capMZU+DT": str(args.mzu_config)}
    for path in configs.values():
        if not Path(path).is_file():
            raise SystemExit(f"{path} does not exist; pass --gru-config / --mzu-config.")
    extra = ["--trainer.max_epochs", str(args.epochs), "--model.init_args.hidden_size", str(args.hidden),
             "--model.init_args.embedding_size", str(args.embedding),
             "--data.init_args.batch_size", str(args.batch_size), "--trainer.logger", "false",
             "--trainer.enable_progress_bar", "false", "--trainer.enable_model_summary", "false"]
    if args.limit_batches:
        extra += [f"--trainer.limit_{s}_batches={args.limit_batches}" for s in ("train", "val", "test")]
    extra += passthrough
    seeds = list(range(1, args.seeds + 1))
    start = time.perf_counter()
    runs = run_all(list(configs.values()), seeds, "val/acc", "max", Path(args.out), extra)
    names = {path: name for name, path in configs.items()}
    print(f"\nRestaurants DS, best-val/acc checkpoint of each run tested; seeds {seeds}; embedding {args.embedding}, "
          f"hidden {args.hidden} per direction, batch {args.batch_size}, {args.epochs} epochs"
          f"{f', {args.limit_batches} batches per split' if args.limit_batches else ''}; "
          f"{(time.perf_counter() - start) / 60:.1f} min in all\n")
    print(summary_table(runs, names))
    acc = {name: [r["metrics"]["test/acc"] * 100 for r in runs if r["config"] == path]
           for name, path in configs.items()}
    mean = {k: statistics.fmean(v) for k, v in acc.items()}
    std = {k: statistics.stdev(v) if len(v) > 1 else None for k, v in acc.items()}
    print("\n| model | paper accuracy (%) | ours (%) |\n|---|---|---|")
    for name in configs:
        spread = "" if std[name] is None else f" ± {std[name]:.2f}"
        print(f"| {name} | {PAPER[name][0]:.2f} ± {PAPER[name][1]:.2f} | {mean[name]:.2f}{spread} |")
    gap = mean["capMZU+DT"] - mean["GRU+DT"]
    verdict = "shows" if gap > 0 else "does NOT show"
    if std["GRU+DT"] is None:
        detail = "one seed, so no spread to compare with"
    else:
        beyond = abs(gap) > std["capMZU+DT"] + std["GRU+DT"]
        detail = f"{'beyond' if beyond else 'within'} the two standard deviations summed"
    print(f"\nPaper's ordering (capMZU+DT > GRU+DT) {verdict}: {gap:+.2f} points, {detail}.")


if __name__ == "__main__":
    sys.exit(main())
