"""Reproduce mufuru.md Figure 1a: test accuracy on long formulas by hidden size, GRU vs MuFuRU.

Trains LogicEvaluator exactly as configs/logic/{gru,mufuru}.yaml (embedding 32,
Adam lr 1e-3 with betas (0, 0.999), gradient clip 5, batch 32, 100 epochs;
train 1,000 formulas of 5-10 gates, test 1,000 unseen formulas of 11-20 gates)
for every hidden size x cell x seed, and prints mean ± std test accuracy.

    python scripts/sweep_logic.py                       # the full sweep (4 x 2 x 3 runs)
    python scripts/sweep_logic.py --hidden 8 --epochs 20 --seeds 0
"""
from __future__ import annotations

import argparse
import logging
import statistics
import time
import warnings
from functools import partial

import lightning as L
import torch

from lit_rnncells.data import LogicDataModule
from lit_rnncells.tasks import LogicEvaluator


def run_one(cell: str, hidden: int, seed: int, epochs: int, data_seed: int) -> float:
    L.seed_everything(seed, verbose=False)
    dm = LogicDataModule(seed=data_seed)
    model = LogicEvaluator(cell=cell, vocab_size=dm.vocab_size, hidden_size=hidden, embedding_size=32,
                           optimizer=partial(torch.optim.Adam, lr=1e-3, betas=(0.0, 0.999)))
    trainer = L.Trainer(max_epochs=epochs, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, gradient_clip_val=5.0,
                        num_sanity_val_steps=0, limit_val_batches=0)
    trainer.fit(model, dm)
    return trainer.test(model, dm, verbose=False)[0]["test/acc"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", nargs="+", default=["GRU", "MuFuRU"])
    parser.add_argument("--hidden", nargs="+", type=int, default=[8, 16, 32, 64])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--data-seed", type=int, default=1234, help="formula generation seed (fixed across runs)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    logging.getLogger("lightning").setLevel(logging.ERROR)
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    torch.set_num_threads(1)

    results: dict[tuple[str, int], list[float]] = {}
    for hidden in args.hidden:
        for cell in args.cells:
            for seed in args.seeds:
                start = time.perf_counter()
                acc = run_one(cell, hidden, seed, args.epochs, args.data_seed)
                results.setdefault((cell, hidden), []).append(acc)
                print(f"{cell:8s} hidden={hidden:<3d} seed={seed} test_acc={acc:.4f} "
                      f"({time.perf_counter() - start:.0f}s)", flush=True)

    print(f"\nTest accuracy on 1,000 unseen formulas of 11-20 gates, {args.epochs} epochs, "
          f"mean ± std over seeds {args.seeds}:\n")
    print("| hidden | " + " | ".join(args.cells) + " |")
    print("|---|" + "---|" * len(args.cells))
    for hidden in args.hidden:
        cells = []
        for cell in args.cells:
            accs = results[(cell, hidden)]
            std = statistics.stdev(accs) if len(accs) > 1 else 0.0
            cells.append(f"{statistics.mean(accs):.3f} ± {std:.3f}")
        print(f"| {hidden} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
