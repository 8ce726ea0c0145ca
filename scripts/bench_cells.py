"""Training speed of every registered cell against torch.nn.GRU / nn.LSTM, measured in one run.

For each cell, forward + backward of a one-layer ``Recurrent`` over a random
batch (median of ``--repeats`` rounds, each running every cell once in a shuffled
order, so machine load hits every cell alike), at B=32 T=100 I=128 H=256 and at
a larger size. Printed per cell:
training tokens/s, time ratio to torch.nn.GRU (LSTM also to torch.nn.LSTM), the
multiply-accumulates per token counted from the shapes (hoisted input map +
one step, via FlopCounterMode), the MAC ratio to GRU, and time ratio / MAC
ratio (how much slower than its arithmetic predicts). Then the MZU section
(scripts/bench_mzu.py, ratios to GRU+DT at hidden 800) and the MC-RNN section
(scripts/bench_mcrnn.py, at the base size and at the paper's B=64, 256-unit setting) unless
skipped.

    python scripts/bench_cells.py                 # everything (~10 min on 2 cores)
    python scripts/bench_cells.py --skip-mzu --skip-mcrnn
    python scripts/bench_cells.py --quick         # tiny sizes, checks the script runs
"""
from __future__ import annotations

import argparse
import importlib.util
import inspect
import sys
from pathlib import Path
from typing import Callable, Dict, List, Sequence, Tuple

import torch
from torch import nn

from lit_rnncells.benchmark import SYSTEM_MALLOC_HELP, allocator_setting, input_macs, round_robin, step_macs
from lit_rnncells.cells import available_cells, get_cell
from lit_rnncells.nn import Recurrent

SIZES = {"base": (32, 100, 128, 256), "large": (64, 100, 256, 512), "quick": (4, 6, 8, 8)}


def default_constructible(name: str) -> bool:
    params = list(inspect.signature(get_cell(name).__init__).parameters.values())[3:]
    return all(p.default is not inspect.Parameter.empty or p.kind is p.VAR_KEYWORD for p in params)


def train_step(module: nn.Module, x: torch.Tensor) -> Callable[[], None]:
    def run() -> None:
        out = module(x)[0]
        out.sum().backward()
        module.zero_grad(set_to_none=True)
    return run


def bench_size(cells: Sequence[str], size: Tuple[int, int, int, int], repeats: int) -> List[dict]:
    batch, steps, inp, hidden = size
    torch.manual_seed(0)
    x = torch.randn(batch, steps, inp)
    modules: Dict[str, nn.Module] = {
        "torch.nn.GRU": nn.GRU(inp, hidden, batch_first=True),
        "torch.nn.LSTM": nn.LSTM(inp, hidden, batch_first=True),
    }
    for name in cells:
        modules[name] = Recurrent(name, inp, hidden, batch_first=True)
    median = round_robin({name: train_step(m, x) for name, m in modules.items()}, repeats)
    gru_macs = None
    rows = []
    for name, module in modules.items():
        if isinstance(module, Recurrent):
            cell = module.cell()
            macs = input_macs(cell) + step_macs(cell)
        else:
            macs = (3 if "GRU" in name else 4) * hidden * (inp + hidden)
        if name == "GRU":
            gru_macs = macs
        rows.append({"cell": name, "size": f"B{batch} T{steps} I{inp} H{hidden}", "ms": median[name] * 1e3,
                     "tokens_per_s": batch * steps / median[name], "macs": macs,
                     "vs_nn_gru": median[name] / median["torch.nn.GRU"],
                     "vs_nn_lstm": median[name] / median["torch.nn.LSTM"]})
    for r in rows:
        r["mac_ratio"] = r["macs"] / gru_macs if gru_macs else float("nan")
        ours_gru = median.get("GRU")
        r["vs_gru"] = median[r["cell"]] / ours_gru if ours_gru else float("nan")
        r["time_per_mac"] = r["vs_gru"] / r["mac_ratio"]
    return rows


def format_rows(rows: Sequence[dict]) -> str:
    out = ["| cell | size | tokens/s | time / nn.GRU | time / nn.LSTM | MACs/token | MAC ratio to GRU | "
           "time ratio to GRU / MAC ratio |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['cell']} | {r['size']} | {r['tokens_per_s']:,.0f} | {r['vs_nn_gru']:.2f} | "
                   f"{r['vs_nn_lstm']:.2f} | {r['macs']:,} | {r['mac_ratio']:.2f} | {r['time_per_mac']:.2f} |")
    return "\n".join(out)


def load_script(name: str):
    path = Path(__file__).with_name(f"{name}.py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", nargs="+", default=None, help="registered names (default: all constructible "
                        "as Cell(input_size, hidden_size))")
    parser.add_argument("--sizes", nargs="+", default=["base", "large"], choices=list(SIZES))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one repeat, no MZU/MC-RNN sections")
    parser.add_argument("--skip-mzu", action="store_true")
    parser.add_argument("--skip-mcrnn", action="store_true")
    parser.add_argument("--system-malloc", action="store_true", help=SYSTEM_MALLOC_HELP)
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.repeats, args.skip_mzu, args.skip_mcrnn = ["quick"], 1, True, True
    cells = args.cells or [n for n in available_cells() if default_constructible(n)]
    malloc = allocator_setting(args.system_malloc)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; forward+backward, median of "
          f"{args.repeats} rounds in shuffled order; {malloc}\n")
    for size in args.sizes:
        print(format_rows(bench_size(cells, SIZES[size], args.repeats)) + "\n", flush=True)
    if not args.skip_mzu:
        mzu = load_script("bench_mzu")
        print("MZU cells at the paper's PTB size (ratios to GRU+DT):")
        print(mzu.format_table(mzu.run()) + "\n", flush=True)
    if not args.skip_mcrnn:
        mc = load_script("bench_mcrnn")
        for label, argv in (("the base size", []),
                            ("the paper's 256-unit setting", ["--batch", "64", "--input-size", "256"])):
            args = mc.parse_args(argv)
            print(f"MC-RNN at {label} (B={args.batch} T={args.steps} I={args.input_size} H={args.hidden_size}):")
            print(mc.format_table(mc.run(args)) + "\n", flush=True)


if __name__ == "__main__":
    main()
