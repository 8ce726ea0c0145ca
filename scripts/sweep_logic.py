"""Reproduce Weissenborn & Rocktäschel, arXiv:1606.03002, Figure 1a: test accuracy on long formulas by hidden size, GRU vs MuFuRU.

A thin use of the comparison runner (:mod:`lit_rnncells.experiments.compare`, docs/compare.md): trains LogicEvaluator
as configs/logic/gru.yaml (embedding 32, Adam lr 1e-3 with betas (0, 0.999), gradient clip 5, batch 32;
train 1,000 formulas of 5-10 gates, test 1,000 unseen formulas of 11-20 gates) for every hidden size x
cell x seed, each run in a fresh process that tests its best-validation-accuracy checkpoint, and prints
mean ± std test accuracy. Resumable: rerunning skips finished runs in ``--out``. Arguments after ``--``
go to the CLI unchanged, e.g. ``-- --data.init_args.test_gates [21,40]`` for longer test formulas.

    python scripts/sweep_logic.py                       # the full sweep (4 x 2 x 3 runs, 100 epochs)
    python scripts/sweep_logic.py --hidden 8 --epochs 20 --seeds 0

The same sweep with the runner directly (plus its CSV, summary and learning curves):

    python -m lit_rnncells.compare --config configs/logic/gru.yaml --cells GRU MuFuRU --seed-list 0 1 2 \\
        --budget epochs=100 --vary model.init_args.hidden_size=8,16,32,64 --out runs/sweep_logic
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lit_rnncells.experiments.compare import RunOptions, Selection, compare  # noqa: E402

HIDDEN = "model.init_args.hidden_size"


def main() -> None:
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", nargs="+", default=["GRU", "MuFuRU"])
    parser.add_argument("--hidden", nargs="+", type=int, default=[8, 16, 32, 64])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--data-seed", type=int, default=1234, help="formula generation seed (fixed across runs)")
    parser.add_argument("--out", default="runs/sweep_logic", help="the runner's folder (runs, CSV, curves)")
    parser.add_argument("--no-wandb", action="store_true", help="the runs log nothing")
    args = parser.parse_args(argv)

    rows = compare(str(ROOT / "configs" / "logic" / "gru.yaml"), args.cells, seeds=args.seeds,
                   budget=f"epochs={args.epochs}", out=args.out, vary=[f"{HIDDEN}={','.join(map(str, args.hidden))}"],
                   selection=Selection(monitor="val/acc", mode="max"),
                   runs=RunOptions(extra=["--data.init_args.seed", str(args.data_seed), *extra], no_wandb=args.no_wandb))
    results: dict[tuple[str, int], list[float]] = {}
    for row in rows:
        results.setdefault((row["cell"], int(row[HIDDEN])), []).append(float(row["test/acc"]))

    print(f"\nTest accuracy of the best-validation checkpoint, {args.epochs} epochs, mean ± std over seeds "
          f"{args.seeds} (runs in {args.out}; extra CLI args: {' '.join(extra) or 'none'}):\n")
    print("| hidden | " + " | ".join(args.cells) + " |")
    print("|---|" + "---|" * len(args.cells))
    for hidden in args.hidden:
        cells = []
        for cell in args.cells:
            accs = results.get((cell, hidden), [])
            std = statistics.stdev(accs) if len(accs) > 1 else 0.0
            cells.append(f"{statistics.mean(accs):.3f} ± {std:.3f}" if accs else "failed")
        print(f"| {hidden} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
