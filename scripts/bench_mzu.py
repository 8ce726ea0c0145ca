"""Speed of satMZU+DT, gcnMZU+DT and capMZU+DT against GRU+DT, as time and as multiply-accumulates.

For each cell: forward+backward time of ``lit_rnncells.nn.Recurrent`` on a
``(T, B, input)`` batch (median of ``--repeats``), and the multiply-accumulates
(MACs) of one ``cell.step`` at batch 1 counted from the shapes by
``torch.utils.flop_counter.FlopCounterMode`` (MACs = flops / 2; the hoisted
``project_input`` is excluded for every cell alike). Both are printed as ratios
to GRU+DT of the same hidden size, and ``time_ratio / mac_ratio`` (the bar:
≤ 1.3 at hidden 800)::

    python scripts/bench_mzu.py                  # hidden 800, input 256, batch 32, T 50
    python scripts/bench_mzu.py --profile        # plus a torch.profiler table per cell

``run(args)`` returns the rows as dicts, for scripts/bench_cells.py.
"""
from __future__ import annotations

import argparse
import statistics
import time
from functools import partial
from typing import Callable, Dict, List, Optional, Sequence

import torch
from torch import Tensor

from lit_rnncells.nn.benchmark import SYSTEM_MALLOC_HELP, allocator_setting, step_macs
from lit_rnncells.cells import GRUDT, CapMZU, GcnMZU, RecurrentCell, SatMZU
from lit_rnncells.nn import Recurrent

BASELINE = "GRU+DT"


def cell_factories(args: argparse.Namespace) -> Dict[str, Callable[[int, int], RecurrentCell]]:
    """The benchmarked cells in the paper's PTB setting (4 zones, L = 1 shared, J = 2, T = 3)."""
    mzu = dict(zones=args.zones, filter_size=args.filter_size, transition_depth=args.transition_depth,
               share_transition=not args.unshared, layer_norm=args.layer_norm,
               disagreement_weight=args.disagreement_weight)
    return {
        BASELINE: partial(GRUDT, transition_depth=args.transition_depth, share_transition=not args.unshared),
        "satMZU+DT": partial(SatMZU, **mzu),
        "gcnMZU+DT": partial(GcnMZU, **mzu),
        "capMZU+DT": partial(CapMZU, capsules=2, routing_iterations=3, **mzu),
    }


def fwd_bwd_seconds(layer: Recurrent, x: Tensor, clock: Callable[[], float] = time.perf_counter) -> float:
    """Seconds of one forward + backward (with the auxiliary loss, as in training)."""
    start = clock()
    out, _, aux = layer(x, return_aux=True)
    (out.sum() + aux).backward()
    elapsed = clock() - start
    layer.zero_grad(set_to_none=True)
    return elapsed


def profile(layer: Recurrent, x: Tensor, name: str, rows: int = 15) -> None:
    from torch.profiler import ProfilerActivity, profile as torch_profile

    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        out, _, aux = layer(x, return_aux=True)
        (out.sum() + aux).backward()
    layer.zero_grad(set_to_none=True)
    print(f"\n== {name}")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows))


def run(args: Optional[argparse.Namespace] = None) -> List[dict]:
    """Benchmark every cell; rows with ``cell, ms, macs_per_step, time_ratio, mac_ratio, time_per_mac``."""
    defaults = parse_args([])
    if args is not None:  # a caller's namespace may carry only some of our options
        defaults.__dict__.update({k: v for k, v in vars(args).items() if k in vars(defaults)})
    args = defaults
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    x = torch.randn(args.steps, args.batch, args.input_size)
    layers = {name: Recurrent(factory, args.input_size, args.hidden_size)
              for name, factory in cell_factories(args).items()}
    times: Dict[str, List[float]] = {name: [] for name in layers}
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    for name, layer in layers.items():
        fwd_bwd_seconds(layer, x, clock)  # warm-up
    for _ in range(args.repeats):  # round-robin, so a change of machine load hits every cell alike
        for name, layer in layers.items():
            times[name].append(fwd_bwd_seconds(layer, x, clock))
    results = []
    for name, layer in layers.items():
        results.append(dict(cell=name, hidden=args.hidden_size, params=sum(p.numel() for p in layer.parameters()),
                            ms=statistics.median(times[name]) * 1e3, macs_per_step=step_macs(layer.cell(0))))
        if args.profile:
            profile(layer, x, name)
    base = next(r for r in results if r["cell"] == BASELINE)
    for r in results:
        r["time_ratio"] = r["ms"] / base["ms"]
        r["mac_ratio"] = r["macs_per_step"] / base["macs_per_step"]
        r["time_per_mac"] = r["time_ratio"] / r["mac_ratio"]
    return results


def format_table(rows: Sequence[dict]) -> str:
    lines = [f"{'cell':<11} {'params':>10} {'ms fwd+bwd':>11} {'MACs/step':>11} {'time ratio':>10} "
             f"{'MAC ratio':>9} {'time/MAC':>8}"]
    for r in rows:
        lines.append(f"{r['cell']:<11} {r['params']:>10,} {r['ms']:>11.1f} {r['macs_per_step']:>11,} "
                     f"{r['time_ratio']:>10.2f} {r['mac_ratio']:>9.2f} {r['time_per_mac']:>8.2f}")
    return "\n".join(lines)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("--hidden-size", type=int, default=800)
    p.add_argument("--input-size", type=int, default=256)
    p.add_argument("--filter-size", type=int, default=1000)
    p.add_argument("--zones", type=int, default=4)
    p.add_argument("--transition-depth", type=int, default=1)
    p.add_argument("--unshared", action="store_true", help="separate M-functions per depth (paper: shared on PTB)")
    p.add_argument("--layer-norm", action="store_true")
    p.add_argument("--disagreement-weight", type=float, default=1.0)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: leave the default)")
    p.add_argument("--system-malloc", action="store_true", help=SYSTEM_MALLOC_HELP)
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="wall time, or process CPU time (robust on a shared machine, best with --threads 1)")
    p.add_argument("--profile", action="store_true", help="print a torch.profiler table per cell")
    return p.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_args(argv)
    malloc = allocator_setting(args.system_malloc)
    rows = run(args)
    print(f"hidden {args.hidden_size}, input {args.input_size}, batch {args.batch}, T {args.steps}, "
          f"threads {torch.get_num_threads()}, {args.clock} clock, median of {args.repeats}, {malloc}")
    print(format_table(rows))


if __name__ == "__main__":
    main()
