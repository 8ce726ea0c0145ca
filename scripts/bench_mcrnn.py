"""Benchmark MC-RNN (MultiChannel) against the cell it wraps and against the literal reference.

For each wrapped cell and block size n: forward + backward time of one batch
through ``lit_rnncells.nn.Recurrent`` for the wrapped cell alone and for
MC-RNN-(n−1) (the fast, channels-in-the-batch cell), and of the slow
one-channel-at-a-time reference (``lit_rnncells.cells.mcrnn_reference``) on the
same parameters; and the multiply-accumulates (MACs) per time step, counted with
``torch.utils.flop_counter.FlopCounterMode`` around one ``step`` and its ``output``
(for the reference: over whole blocks of steps, divided by the steps). The variants
run in turns, one call each per round in a shuffled order, after a warm-up round
(``lit_rnncells.nn.benchmark.interleaved_times``); the table gives the
best and the median time of ``--repeats`` rounds, and the fast version's speed-up
over the reference as the median of the per-round ratios (a round's two variants
ran under the same machine load) with their range.

    python scripts/bench_mcrnn.py                       # MC-RNN-3 (n = 4) around GRU and LSTM
    python scripts/bench_mcrnn.py --batch 64 --input-size 256   # the paper's 256-unit setting
    python scripts/bench_mcrnn.py --block-sizes 2 3 4 5 --threads 2

``run(args) -> list[dict]`` is importable (scripts/bench_cells.py uses it); ``args`` may be
any namespace or dict, missing fields take the defaults below.

Cost per step and example (c = n − 1 channels, G gate blocks of the wrapped cell: GRU 3,
LSTM 4; H×H "products" are H² MACs): in the time loop, the wrapped cell's h-matmul on c
channels, G·c, and eq. 2 on only the slots that need each W_j, c(c + 1)/2, in c matmuls;
after the loop, V_h on c channels, c, in one matmul over all steps, plus O(c·H) for
rᵀ tanh(·) and the α-mix. V_x x and the wrapped cell's input maps are hoisted out of the
loop. MC-RNN-3 (c = 3): GRU 9 + 6 + 3 = 18 H² vs 3 H² (6×), LSTM 12 + 6 + 3 = 21 vs 4
(5.25×). The reference does the same products plus V_x x_t in every channel and step (the
literal V [h; x]), in c·(G + (c + 1)/2 + 1) matmuls of B rows per step.
"""
from __future__ import annotations

import argparse
import statistics
import time
from functools import partial
from typing import Callable, Dict, List, Optional, Sequence, Union

import torch
from torch import Tensor, nn
from torch.utils.flop_counter import FlopCounterMode

from lit_rnncells.nn.benchmark import SYSTEM_MALLOC_HELP, allocator_setting, interleaved_times
from lit_rnncells.cells import MultiChannel, get_cell
from lit_rnncells.cells.mcrnn_reference import reference_forward
from lit_rnncells.nn import Recurrent


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cells", nargs="+", default=["GRU", "LSTM"], help="wrapped cells (registered names)")
    p.add_argument("--block-sizes", nargs="+", type=int, default=[4], help="n; MC-RNN-3 is n = 4")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--input-size", type=int, default=128)
    p.add_argument("--hidden-size", type=int, default=256)
    p.add_argument("--repeats", type=int, default=7, help="timed rounds after one warm-up round")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: leave torch's default)")
    p.add_argument("--system-malloc", action="store_true", help=SYSTEM_MALLOC_HELP)
    p.add_argument("--no-reference", action="store_true", help="skip the slow reference")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def _fwd_bwd(fn: Callable[[], Tensor], params: List[nn.Parameter]) -> Callable[[], None]:
    def go() -> None:
        for q in params:
            q.grad = None
        fn().sum().backward()
    return go


def step_macs(cell: nn.Module, batch: int) -> int:
    """MACs of one ``step`` and its ``output`` from the initial state (FlopCounterMode counts 2
    flops per MAC); for MC-RNN the output is the attention, computed after the time loop."""
    with torch.no_grad():
        state = cell.initial_state(batch)
        x_proj = cell.project_input(torch.randn(batch, cell.input_size))
        with FlopCounterMode(display=False) as counter:
            cell.output(cell.step(x_proj, state))
    return counter.get_total_flops() // 2


def reference_step_macs(mc: MultiChannel, batch: int) -> float:
    """MACs per step of the reference, over two whole blocks, without the hoisted input maps."""
    steps = 2 * mc.channels
    x = torch.randn(batch, steps, mc.input_size)
    with torch.no_grad():
        with FlopCounterMode(display=False) as total:
            reference_forward(mc, x)
        with FlopCounterMode(display=False) as hoisted:
            mc.cell.project_input(x)
    return (total.get_total_flops() - hoisted.get_total_flops()) / 2 / steps


def run(args: Optional[Union[argparse.Namespace, Dict[str, object]]] = None) -> List[Dict[str, object]]:
    """One row per variant: cell, block_size, impl (wrapped / fast / reference), fwd+bwd ms,
    tokens/s, ratio to the wrapped cell, the fast cell's speed-up over the reference, MACs/step."""
    defaults = vars(parse_args([]))
    given = args if isinstance(args, dict) else (vars(args) if args is not None else {})
    args = argparse.Namespace(**{**defaults, **{k: v for k, v in given.items() if k in defaults}})
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    b, t, i, h = args.batch, args.steps, args.input_size, args.hidden_size
    x = torch.randn(b, t, i)
    rows: List[Dict[str, object]] = []
    for name in args.cells:
        inner = get_cell(name)
        plain = Recurrent(inner, i, h, batch_first=True)
        for n in args.block_sizes:
            layer = Recurrent(partial(MultiChannel, cell=inner, block_size=n), i, h, batch_first=True)
            mc: MultiChannel = layer.cell(0)  # type: ignore[assignment]
            fns = {"wrapped": _fwd_bwd(lambda: plain(x)[0], list(plain.parameters())),
                   "fast": _fwd_bwd(lambda: layer(x)[0], list(layer.parameters()))}
            if not args.no_reference:
                fns["reference"] = _fwd_bwd(lambda: reference_forward(mc, x)[0], list(layer.parameters()))
            times = interleaved_times(fns, args.repeats)
            macs = {"wrapped": step_macs(plain.cell(0), b), "fast": step_macs(mc, b)}
            if not args.no_reference:
                macs["reference"] = reference_step_macs(mc, b)
                # per-round ratios: both variants of a round ran under the same machine load
                speedups = [r / f for r, f in zip(times["reference"], times["fast"])]
            base = min(times["wrapped"])
            for impl, tm in times.items():
                rows.append({
                    "cell": f"MC-RNN-{n - 1}({name})" if impl != "wrapped" else name,
                    "wrapped": name, "block_size": n if impl != "wrapped" else None, "impl": impl,
                    "batch": b, "steps": t, "input_size": i, "hidden_size": h, "threads": torch.get_num_threads(),
                    "fwd_bwd_ms": 1e3 * min(tm), "median_ms": 1e3 * statistics.median(tm),
                    "tokens_per_s": b * t / min(tm), "vs_wrapped": min(tm) / base,
                    "fast_speedup_over_reference": (statistics.median(speedups)
                                                    if impl == "fast" and not args.no_reference else None),
                    "speedup_range": ((min(speedups), max(speedups))
                                      if impl == "fast" and not args.no_reference else None),
                    "macs_per_step": macs[impl], "macs_per_step_vs_wrapped": macs[impl] / macs["wrapped"],
                })
    return rows


def format_table(rows: List[Dict[str, object]]) -> str:
    head = (f"{'variant':<20} {'impl':<10} {'fwd+bwd ms':>11} {'median ms':>10} {'tok/s':>9} "
            f"{'x wrapped':>9} {'fast/ref (range)':>18} {'MMAC/step':>10} {'MAC x':>6}")
    lines = [head, "-" * len(head)]
    for r in rows:
        speed, span = r["fast_speedup_over_reference"], r["speedup_range"]
        shown = f"{speed:.2f}x ({span[0]:.2f}-{span[1]:.2f})" if speed else ""
        lines.append(f"{r['cell']:<20} {r['impl']:<10} {r['fwd_bwd_ms']:>11.1f} {r['median_ms']:>10.1f} "
                     f"{r['tokens_per_s']:>9.0f} {r['vs_wrapped']:>9.2f} "
                     f"{shown:>18} {r['macs_per_step'] / 1e6:>10.2f} "
                     f"{r['macs_per_step_vs_wrapped']:>6.2f}")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_args(argv)
    malloc = allocator_setting(args.system_malloc)
    start = time.perf_counter()
    rows = run(args)
    print(f"B={args.batch} T={args.steps} I={args.input_size} H={args.hidden_size}, "
          f"threads={torch.get_num_threads()}, {args.repeats} interleaved rounds, forward+backward, {malloc}")
    print(format_table(rows))
    print(f"total {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
