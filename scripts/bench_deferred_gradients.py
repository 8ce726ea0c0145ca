"""Trial: the deferred weight gradients (lit_rnncells/cells/deferred.py) against the plain step loop.

Forward + backward of one ``Recurrent`` layer at T100 I128 H256, one thread, the same module with the
deferral on and off in interleaved rounds; the ratio is taken within each round.

    python scripts/bench_deferred_gradients.py --cells GRUDT SatMZU GcnMZU CapMZU --batch 4 32
"""
from __future__ import annotations

import argparse
import statistics

import torch

from lit_rnncells.benchmark import interleaved_times, train_step
from lit_rnncells.cells import deferred
from lit_rnncells.nn import Recurrent


def switched(step, on: bool):
    def run() -> None:
        deferred.enabled = on
        try:
            step()
        finally:
            deferred.enabled = True
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", nargs="+", default=["GRUDT", "SatMZU", "GcnMZU", "CapMZU"])
    parser.add_argument("--batch", nargs="+", type=int, default=[4, 32])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print("| cell | batch | plain ms | deferred ms | deferred ÷ plain (median of rounds) | best round |")
    print("|---|---:|---:|---:|---:|---:|")
    for batch in args.batch:
        torch.manual_seed(0)
        x = torch.randn(batch, 100, 128)
        jobs = {}
        for name in args.cells:
            step = train_step(Recurrent(name, 128, 256, batch_first=True), x)
            jobs[f"{name} plain"], jobs[f"{name} deferred"] = switched(step, False), switched(step, True)
        times = interleaved_times(jobs, args.repeats)
        for name in args.cells:
            ratios = [d / p for d, p in zip(times[f"{name} deferred"], times[f"{name} plain"])]
            print(f"| {name} | {batch} | {statistics.median(times[f'{name} plain']) * 1e3:.1f} | "
                  f"{statistics.median(times[f'{name} deferred']) * 1e3:.1f} | {statistics.median(ratios):.2f} | "
                  f"{min(ratios):.2f} |", flush=True)


if __name__ == "__main__":
    main()
