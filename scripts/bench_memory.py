"""Peak memory of one training step of every registered cell, as a ratio to torch.nn.GRU's.

Each variant runs in its own fresh process (so one variant's freed memory cannot hide another's
peak): build a one-layer ``Recurrent`` (or torch.nn.GRU / nn.LSTM), run one small warm-up step, read
the process's peak resident memory, run one forward + backward at B×T×I → H, read the peak again.
The difference is the step's peak: activations kept for the backward pass, the gradients and any
workspace. Memory does not depend on machine load, so this is fair to run on a busy machine.

    python scripts/bench_memory.py                       # B=64 T=150 I=128 H=512, every cell
    python scripts/bench_memory.py --cells GRU CARU --quick
"""
from __future__ import annotations

import argparse
import inspect
import json
import resource
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

import torch
from torch import nn

from lit_rnncells.cells import available_cells, get_cell
from lit_rnncells.nn import Recurrent

GRU_CLASS = ("GRU", "MGU", "CARU")  # the bar: at most 1.3x torch.nn.GRU
BAR = 1.3


def default_constructible(name: str) -> bool:
    params = list(inspect.signature(get_cell(name).__init__).parameters.values())[3:]
    return all(p.default is not inspect.Parameter.empty or p.kind is p.VAR_KEYWORD for p in params)


def build(name: str, input_size: int, hidden: int) -> nn.Module:
    if name == "torch.nn.GRU":
        return nn.GRU(input_size, hidden)
    if name == "torch.nn.LSTM":
        return nn.LSTM(input_size, hidden)
    return Recurrent(name, input_size, hidden)


def peak_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux


def one_variant(name: str, batch: int, steps: int, input_size: int, hidden: int) -> Dict[str, float]:
    """Runs in the child process: the step's peak memory in MiB."""
    torch.manual_seed(0)
    torch.set_num_threads(1)
    module = build(name, input_size, hidden)
    x = torch.randn(steps, batch, input_size)

    def step(inputs: torch.Tensor) -> None:
        module.zero_grad(set_to_none=False)
        output, _ = module(inputs)
        output.float().sum().backward()

    step(x[:2])  # load kernels and allocate parameter gradients
    before = peak_kib()
    step(x)
    after = peak_kib()
    params = sum(p.numel() for p in module.parameters())
    return {"mib": (after - before) / 1024, "params": params}


def run_child(name: str, args: argparse.Namespace) -> Dict[str, float]:
    command = [sys.executable, __file__, "--child", name, "--batch", str(args.batch), "--steps", str(args.steps),
               "--input-size", str(args.input_size), "--hidden-size", str(args.hidden_size)]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv: Optional[List[str]] = None) -> Dict[str, Dict[str, float]]:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", nargs="*", help="registered cells (default: every default-constructible one)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--input-size", type=int, default=128)
    parser.add_argument("--hidden-size", type=int, default=512)
    parser.add_argument("--quick", action="store_true", help="tiny sizes: checks the script runs")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.batch, args.steps, args.input_size, args.hidden_size = 4, 6, 8, 16
    if args.child:
        print(json.dumps(one_variant(args.child, args.batch, args.steps, args.input_size, args.hidden_size)))
        return {}
    cells = args.cells or [c for c in available_cells() if default_constructible(c)]
    variants = ["torch.nn.GRU", "torch.nn.LSTM", *cells]
    results = {name: run_child(name, args) for name in variants}
    base = results["torch.nn.GRU"]["mib"]
    print(f"Peak memory of one training step (forward + backward), B={args.batch} T={args.steps} "
          f"I={args.input_size} H={args.hidden_size}, one layer, float32, CPU; each variant in a fresh process.\n")
    print("| variant | parameters | step peak (MiB) | ratio to torch.nn.GRU | bar |")
    print("|---|---:|---:|---:|---|")
    for name, r in results.items():
        ratio = r["mib"] / base if base > 0 else float("nan")
        bar = (f"≤ {BAR}×: {'met' if ratio <= BAR else 'MISSED'}" if name in GRU_CLASS else "")
        print(f"| {name} | {int(r['params']):,} | {r['mib']:.1f} | {ratio:.2f}× | {bar} |")
    return results


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    main()
