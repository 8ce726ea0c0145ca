"""Peak memory of one training step of every registered cell, as a ratio to torch.nn.GRU's.

Each variant runs in its own fresh process (so one variant's freed memory cannot hide another's
peak): build a one-layer ``Recurrent`` (or torch.nn.GRU / nn.LSTM), run one small warm-up step, read
the process's peak resident memory, run one forward + backward at B×T×I → H, read the peak again.
The difference is the step's peak: activations kept for the backward pass, the gradients and any
workspace. Memory does not depend on machine load, so this is fair to run on a busy machine.

    python scripts/bench_memory.py                       # B=64 T=150 I=128 H=512, every cell
    python scripts/bench_memory.py --cells GRU CARU --quick

With ``--fit`` it measures peak memory over a long fit instead: a PTB char LM fit through the command
line (``configs/lm/ptb_char_gru.yaml`` with the cell and sizes overridden; the corpus from
``$LIT_RNNCELLS_DATA/ptb`` or ``--data-dir``) per cell and per ``--fit-steps`` count, each fit its own
process, whose peak resident memory the kernel reports (``wait4``). A fit of 0 steps is the baseline
(Python, Lightning, data and model loaded, nothing trained); "training memory" is a fit's peak above it.
Printed: whether the peak grows with the steps (the last count ÷ the first count above 0; memory held
after a step must not grow) and the training memory per multiply-add of a token (the cell's input
projection plus step, :func:`lit_rnncells.nn.benchmark.step_macs`) as a ratio to GRU's (bar: 1.3×).

    python scripts/bench_memory.py --fit MuFuRU GRU --fit-steps 0 50 500   # hidden 256, B=32, bptt 100
"""
from __future__ import annotations

import argparse
import inspect
import json
import resource
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import torch
from torch import nn

from lit_rnncells.nn.benchmark import input_macs, step_macs
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


ROOT = Path(__file__).resolve().parents[1]
FIT_CONFIG = ROOT / "configs" / "lm" / "ptb_char_gru.yaml"
FIT_BAR = 1.3  # the bar: MuFuRU's training memory per MAC at most 1.3x GRU's
GROWTH_BAR = 1.10  # memory held after a step must not grow: the longest fit's peak within 10% of the shortest's


def fit_command(cell: str, steps: int, run_dir: Path, args: argparse.Namespace) -> List[str]:
    """The command line of one PTB char fit of ``steps`` training steps."""
    command = [sys.executable, "-m", "lit_rnncells", "fit", "--config", str(FIT_CONFIG),
               "--model.init_args.cell.class_path", f"lit_rnncells.cells.{get_cell(cell).__name__}",
               "--model.init_args.hidden_size", str(args.fit_hidden), "--model.init_args.embedding_size",
               str(args.fit_embedding),
               "--data.init_args.batch_size", str(args.fit_batch), "--data.init_args.bptt", str(args.fit_bptt),
               "--trainer.max_steps", str(steps), "--trainer.limit_val_batches", "2", "--trainer.logger", "false",
               "--trainer.enable_progress_bar", "false", "--test_after_fit", "false", "--run_dir", str(run_dir)]
    if args.data_dir:
        command += ["--data.init_args.data_dir", str(args.data_dir)]
    return command


def fit_peak_mib(command: Sequence[str], cwd: Path) -> float:
    """Run one fit in its own process and return its peak resident memory (MiB) as the kernel counted it."""
    env = {**os.environ, "WANDB_MODE": "disabled", "PYTHONPATH": str(ROOT)}
    with open(cwd / "fit.log", "w") as log:
        child = subprocess.Popen(list(command), cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        tail = (cwd / "fit.log").read_text()[-2000:]
        raise SystemExit(f"error: the fit failed (exit {child.returncode}): {' '.join(command)}\n{tail}")
    return usage.ru_maxrss / 1024  # KiB on Linux


def cell_macs(cell: str, args: argparse.Namespace) -> int:
    """Multiply-adds per token of the cell at the fit's sizes: its input projection plus one step."""
    built = get_cell(cell)(args.fit_embedding, args.fit_hidden)
    return input_macs(built) + step_macs(built)


def fit_peaks(args: argparse.Namespace) -> Dict[str, Dict[int, float]]:
    """Peak MiB of each cell's fit at each step count, each in a fresh process under a temporary folder."""
    if not args.data_dir and not os.environ.get("LIT_RNNCELLS_DATA"):
        raise SystemExit("error: --fit trains on PTB char; set LIT_RNNCELLS_DATA (the folder holding ptb/) "
                         "or pass --data-dir <folder holding ptb.char.train.txt>.")
    peaks: Dict[str, Dict[int, float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench_memory_fit_") as tmp:
        for cell in args.fit:
            peaks[cell] = {}
            for steps in args.fit_steps:
                work = Path(tmp) / f"{cell}-{steps}"
                work.mkdir()
                peaks[cell][steps] = fit_peak_mib(fit_command(cell, steps, work / "run", args), work)
                print(f"{cell}, {steps} steps: peak {peaks[cell][steps]:.0f} MiB", file=sys.stderr, flush=True)
    return peaks


def report_fits(peaks: Dict[str, Dict[int, float]], args: argparse.Namespace) -> None:
    """Print the peaks, their growth with the steps, and training memory per MAC against GRU's."""
    counts = sorted(args.fit_steps)
    short, long = next((c for c in counts if c > 0), counts[0]), counts[-1]
    macs = {cell: cell_macs(cell, args) for cell in peaks}
    per_mac = {cell: (p[long] - p.get(0, 0.0)) / macs[cell] for cell, p in peaks.items()}
    base = per_mac.get("GRU")
    print(f"Peak resident memory of a PTB char LM fit through the command line ({FIT_CONFIG.relative_to(ROOT)}: "
          f"hidden {args.fit_hidden}, embedding {args.fit_embedding}, batch {args.fit_batch}, bptt "
          f"{args.fit_bptt}, float32, CPU); each fit in a fresh process. Baseline: the 0-step fit.\n")
    print("| cell | MACs / token | " + " | ".join(f"peak at {c} steps (MiB)" for c in counts)
          + f" | {long} ÷ {short} steps | training MiB per MMAC | ÷ GRU's |")
    print("|---|---:|" + "---:|" * len(counts) + "---:|---:|---:|")
    for cell, p in peaks.items():
        growth = p[long] / p[short]
        bars = f"{growth:.3f} ({'met' if growth <= GROWTH_BAR else 'MISSED'} ≤ {GROWTH_BAR})"
        mac_bar = "n/a (no GRU fit)"
        if base:
            ratio = per_mac[cell] / base
            mac_bar = f"{ratio:.2f}×" + (f" ({'met' if ratio <= FIT_BAR else 'MISSED'} ≤ {FIT_BAR}×)"
                                         if cell != "GRU" else "")
        print(f"| {cell} | {macs[cell]:,} | " + " | ".join(f"{p[c]:.0f}" for c in counts)
              + f" | {bars} | {per_mac[cell] * 1e6:.1f} | {mac_bar} |")


def main(argv: Optional[List[str]] = None) -> Dict[str, Dict[str, float]]:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", nargs="*", help="registered cells (default: every default-constructible one)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--input-size", type=int, default=128)
    parser.add_argument("--hidden-size", type=int, default=512)
    parser.add_argument("--quick", action="store_true", help="tiny sizes: checks the script runs")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--fit", nargs="+", metavar="CELL", help="peak memory over PTB char fits of these cells")
    parser.add_argument("--fit-steps", nargs="+", type=int, default=[0, 50, 500], help="training steps of each fit")
    parser.add_argument("--fit-hidden", type=int, default=256)
    parser.add_argument("--fit-embedding", type=int, default=64)
    parser.add_argument("--fit-batch", type=int, default=32)
    parser.add_argument("--fit-bptt", type=int, default=100)
    parser.add_argument("--data-dir", help="folder holding ptb.char.{train,valid,test}.txt (default: "
                                           "$LIT_RNNCELLS_DATA/ptb)")
    args = parser.parse_args(argv)
    if args.fit:
        report_fits(fit_peaks(args), args)
        return {}
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
