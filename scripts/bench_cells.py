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
    python scripts/bench_cells.py --padded --cells GRU LSTM Elman CARU   # padded: our step loop vs torch packed
    python scripts/bench_cells.py --padded --device cuda --cells GRU LSTM Elman CARU   # against cuDNN (our GRU,
                                                        # LSTM, Elman run cuDNN's packed kernels there too)
    python scripts/bench_cells.py --compile       # only compiled ÷ eager per cell, B32 and B4 (T100 I128 H256)
    python scripts/bench_cells.py --compile --quick
    python scripts/bench_cells.py --compile --parameter-gradients   # where the step's time goes
    python scripts/bench_cells.py --compile --breakdown   # products, call overhead, fused kernels

``--compile``: each cell's ``Recurrent(backend="compiled")`` beside the same weights eager, forward +
backward, in interleaved rounds (one thread unless ``--threads``); the ratio is taken within each
round and the median and the best round are printed, with the compile time (first two calls)
apart. ``--parameter-gradients`` instead times each step beside the same step with the parameters
frozen (the gradient still runs back through every step): the share of the step the weight
gradients take, eager and compiled, compiled ÷ eager both ways, and the compiled frozen step ÷ the
eager step (the most that computing the weight gradients outside the time loop could give a compiled
step). ``--breakdown`` puts beside compiled ÷ eager where the time goes, from torch's profiler (self
times in a profiled step ÷ the unprofiled eager step): the eager step's matrix products (``mm``,
``addmm``, ``bmm``, ``baddbmm``; fusing the other ops cannot take compiled ÷ eager below that share
unless the products get faster), and the compiled step's products, its calls' own overhead (guards,
the autograd wrappers around the compiled forward and backward) and its fused kernels. ``--end-to-end`` runs
scripts/bench_compile_tasks.py (tokens/s of whole training steps).
"""
from __future__ import annotations

import argparse
import copy
import importlib.util
import inspect
import statistics
import sys
from functools import partial
from pathlib import Path
from typing import Callable, Dict, List, Sequence, Tuple

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

from lit_rnncells.nn.backend import let_compile
from lit_rnncells.nn.benchmark import (SYSTEM_MALLOC_HELP, allocator_setting, compiled_twin, input_macs, interleaved_times,
                                       markdown_table, round_robin, step_macs, train_step)
from lit_rnncells.cells import available_cells, get_cell
from lit_rnncells.nn import Recurrent
from lit_rnncells.nn.compiled import use_compiled

SIZES = {"base": (32, 100, 128, 256), "large": (64, 100, 256, 512), "quick": (4, 6, 8, 8)}
COMPILE_SIZES = {"B32": (32, 100, 128, 256), "B4": (4, 100, 128, 256)}
COMPILE_QUICK = {"B4": (4, 6, 8, 8)}
COMPILE_EXTRA = {"MultiChannel(LSTM)": partial(get_cell("MultiChannel"), cell="LSTM", block_size=4)}
"""Zoo cells that need options, in the --compile table beside the default-constructible ones."""


def default_constructible(name: str) -> bool:
    params = list(inspect.signature(get_cell(name).__init__).parameters.values())[3:]
    return all(p.default is not inspect.Parameter.empty or p.kind is p.VAR_KEYWORD for p in params)


def padded_train_step(module: nn.Module, x: torch.Tensor, lengths: torch.Tensor) -> Callable[[], None]:
    """One forward + backward over a padded batch: ``lengths`` to our layer, a packed sequence to torch's (cuDNN's
    packed kernels on a GPU); on a GPU it waits for the device, so the step's time is measured."""
    if isinstance(module, Recurrent):
        def forward() -> torch.Tensor:
            return module(x, lengths=lengths)[0].sum()
    else:
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)

        def forward() -> torch.Tensor:
            return module(packed)[0].data.sum()

    def run() -> None:
        forward().backward()
        module.zero_grad(set_to_none=True)
        if x.device.type == "cuda":
            torch.cuda.synchronize(x.device)
    return run


def bench_size(cells: Sequence[str], size: Tuple[int, int, int, int], repeats: int, padded: bool = False,
               device: torch.device = torch.device("cpu")) -> List[dict]:
    batch, steps, inp, hidden = size
    torch.manual_seed(0)
    x = torch.randn(batch, steps, inp, device=device)
    modules: Dict[str, nn.Module] = {
        "torch.nn.GRU": nn.GRU(inp, hidden, batch_first=True).to(device),
        "torch.nn.LSTM": nn.LSTM(inp, hidden, batch_first=True).to(device),
    }
    for name in cells:
        modules[name] = Recurrent(name, inp, hidden, batch_first=True).to(device)
    if padded:  # lengths spread evenly over [T/2, T], the longest first (on CPU, as packing wants them)
        lengths = torch.linspace(steps, (steps + 1) // 2, batch).round().long()
        jobs = {name: padded_train_step(m, x, lengths) for name, m in modules.items()}
    else:
        jobs = {name: train_step(m, x) for name, m in modules.items()}
    median = round_robin(jobs, repeats)
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
        tokens = int(lengths.sum()) if padded else batch * steps
        rows.append({"cell": name, "size": f"B{batch} T{steps} I{inp} H{hidden}" + (" padded" if padded else ""),
                     "ms": median[name] * 1e3, "tokens_per_s": tokens / median[name], "macs": macs,
                     "vs_nn_gru": median[name] / median["torch.nn.GRU"],
                     "vs_nn_lstm": median[name] / median["torch.nn.LSTM"]})
    for r in rows:
        r["mac_ratio"] = r["macs"] / gru_macs if gru_macs else float("nan")
        ours_gru = median.get("GRU")
        r["vs_gru"] = median[r["cell"]] / ours_gru if ours_gru else float("nan")
        r["time_per_mac"] = r["vs_gru"] / r["mac_ratio"]
    return rows


def bench_compile(cells: Sequence[str], sizes: Dict[str, Tuple[int, int, int, int]], repeats: int) -> List[dict]:
    """Compiled ÷ eager time of forward + backward per cell and size, ratios within each round."""
    rows = []
    for label, (batch, steps, inp, hidden) in sizes.items():
        torch.manual_seed(0)
        x = torch.randn(batch, steps, inp)
        jobs: Dict[str, Callable[[], None]] = {}
        compile_s: Dict[str, float] = {}
        steps_compiled: Dict[str, str] = {}
        for name in cells:
            cell = COMPILE_EXTRA.get(name, name)
            eager, compiled, compile_s[name] = compiled_twin(cell, inp, hidden, x)
            steps_compiled[name] = "yes" if use_compiled(compiled.cell(), x.device) else "no (eager)"
            jobs[f"{name} eager"], jobs[f"{name} compiled"] = train_step(eager, x), train_step(compiled, x)
        times = interleaved_times(jobs, repeats)
        for name in cells:
            ratios = [c / e for c, e in zip(times[f"{name} compiled"], times[f"{name} eager"])]
            rows.append({"cell": name, "size": f"{label} T{steps} I{inp} H{hidden}", "steps": steps_compiled[name],
                         "eager_ms": statistics.median(times[f"{name} eager"]) * 1e3,
                         "compiled_ms": statistics.median(times[f"{name} compiled"]) * 1e3,
                         "ratio": statistics.median(ratios), "best_ratio": min(ratios),
                         "compile_s": compile_s[name]})
    return rows


def frozen_copy(module: nn.Module) -> nn.Module:
    """A copy of ``module`` whose parameters take no gradient: its backward runs through the recurrence
    (the input needs a gradient) but computes no weight gradient."""
    twin = copy.deepcopy(module)
    twin.requires_grad_(False)
    return twin


def bench_parameter_gradients(cells: Sequence[str], sizes: Dict[str, Tuple[int, int, int, int]],
                              repeats: int) -> List[dict]:
    """How much of a training step the parameter gradients take, eager and compiled: forward + backward with
    every parameter's gradient beside the same step with the parameters frozen (the gradient still flows back
    through all steps to the input), ratios within each round."""
    rows = []
    for label, (batch, steps, inp, hidden) in sizes.items():
        torch.manual_seed(0)
        x = torch.randn(batch, steps, inp, requires_grad=True)
        jobs: Dict[str, Callable[[], None]] = {}
        for name in cells:
            eager, compiled, _ = compiled_twin(COMPILE_EXTRA.get(name, name), inp, hidden, x)
            frozen_eager, frozen_compiled = frozen_copy(eager), frozen_copy(compiled)
            for _ in range(2):  # the frozen twin has graphs of its own: compiled before the timing
                train_step(frozen_compiled, x)()
            for mode, module in (("eager", eager), ("compiled", compiled), ("eager frozen", frozen_eager),
                                 ("compiled frozen", frozen_compiled)):
                jobs[f"{name} {mode}"] = train_step(module, x)
        times = interleaved_times(jobs, repeats)
        for name in cells:
            def ratio(a: str, b: str) -> float:
                return statistics.median(t / u for t, u in zip(times[f"{name} {a}"], times[f"{name} {b}"]))
            rows.append({"cell": name, "size": f"{label} T{steps} I{inp} H{hidden}",
                         "eager_ms": statistics.median(times[f"{name} eager"]) * 1e3,
                         "eager_share": 1.0 - ratio("eager frozen", "eager"),
                         "compiled_share": 1.0 - ratio("compiled frozen", "compiled"),
                         "compiled_ratio": ratio("compiled", "eager"),
                         "frozen_ratio": ratio("compiled frozen", "eager frozen"),
                         "bound_ratio": ratio("compiled frozen", "eager")})
    return rows


PRODUCT_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")
"""The matrix products, whose time fusing a step's other ops does not remove."""
CALL_OVERHEAD_EVENTS = ("CompiledFunction", "CompiledFunctionBackward", "TorchDynamo Cache Lookup", "Pregraph bytecode",
                        "AOTDispatcher Runtime Wrapper Prologue")
"""torch's profiler events of a compiled call's own work around its kernels (guards, autograd wrappers)."""
CALL_OVERHEAD_PREFIXES = ("Torch-Compiled Region", "autograd::engine::evaluate_function: CompiledFunction")
FUSED_KERNEL_PREFIX = "## Call CompiledFxGraph"
"""The event of Inductor's generated code (its fused kernels) running."""


def step_breakdown(step: Callable[[], None]) -> Dict[str, float]:
    """Seconds of one profiled run of ``step`` in matrix products, in compiled calls' own work around their
    kernels, and in Inductor's generated code (self times, so nothing is counted twice)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
    parts = {"products": 0.0, "call_overhead": 0.0, "fused_kernels": 0.0}
    for event in prof.key_averages():
        if event.key in PRODUCT_OPS:
            parts["products"] += event.self_cpu_time_total / 1e6
        elif event.key in CALL_OVERHEAD_EVENTS or event.key.startswith(CALL_OVERHEAD_PREFIXES):
            parts["call_overhead"] += event.self_cpu_time_total / 1e6
        elif event.key.startswith(FUSED_KERNEL_PREFIX):
            parts["fused_kernels"] += event.self_cpu_time_total / 1e6
    return parts


def bench_breakdown(cells: Sequence[str], sizes: Dict[str, Tuple[int, int, int, int]], repeats: int) -> List[dict]:
    """Compiled ÷ eager per cell and size (ratios within each round, as ``--compile``), then where the time
    goes, each part ÷ the unprofiled eager step (medians of ``repeats`` profiled steps): the matrix products
    of the eager step (the floor for fusing everything else), and of the compiled step its products, its
    calls' own overhead and its fused kernels."""
    rows = []
    for row in bench_compile(cells, sizes, repeats):
        name, label = row["cell"], row["size"].split()[0]
        batch, steps, inp, hidden = sizes[label]
        torch.manual_seed(0)
        x = torch.randn(batch, steps, inp)
        eager, compiled, _ = compiled_twin(COMPILE_EXTRA.get(name, name), inp, hidden, x)
        parts = {}
        for mode, module in (("eager", eager), ("compiled", compiled)):
            step = train_step(module, x)
            step()
            runs = [step_breakdown(step) for _ in range(repeats)]
            parts[mode] = {k: statistics.median(r[k] for r in runs) * 1e3 / row["eager_ms"] for k in runs[0]}
        rows.append({**row, "eager_products": parts["eager"]["products"],
                     **{f"compiled_{k}": v for k, v in parts["compiled"].items()}})
    return rows


def format_breakdown_rows(rows: Sequence[dict]) -> str:
    return markdown_table(
        ["cell", "size", "step compiled", "eager ms", "compiled ÷ eager", "eager: matrix products",
         "compiled: matrix products", "compiled: calls' overhead", "compiled: fused kernels"],
        ([r["cell"], r["size"], r["steps"], f"{r['eager_ms']:.1f}", f"{r['ratio']:.2f}", f"{r['eager_products']:.2f}",
          f"{r['compiled_products']:.2f}", f"{r['compiled_call_overhead']:.2f}", f"{r['compiled_fused_kernels']:.2f}"]
         for r in rows), text_columns=3)


def format_parameter_gradient_rows(rows: Sequence[dict]) -> str:
    return markdown_table(
        ["cell", "size", "eager ms", "parameter gradients' share, eager", "same, compiled", "compiled ÷ eager",
         "compiled ÷ eager, parameters frozen", "compiled frozen ÷ eager"],
        ([r["cell"], r["size"], f"{r['eager_ms']:.1f}", f"{r['eager_share']:.0%}", f"{r['compiled_share']:.0%}",
          f"{r['compiled_ratio']:.2f}", f"{r['frozen_ratio']:.2f}", f"{r['bound_ratio']:.2f}"] for r in rows))


def format_compile_rows(rows: Sequence[dict]) -> str:
    return markdown_table(
        ["cell", "size", "step compiled", "eager ms", "compiled ms", "compiled ÷ eager (median of rounds)",
         "best round", "compile s (first 2 calls)"],
        ([r["cell"], r["size"], r["steps"], f"{r['eager_ms']:.1f}", f"{r['compiled_ms']:.1f}", f"{r['ratio']:.2f}",
          f"{r['best_ratio']:.2f}", f"{r['compile_s']:.1f}"] for r in rows), text_columns=3)


def format_rows(rows: Sequence[dict]) -> str:
    return markdown_table(
        ["cell", "size", "tokens/s", "time / nn.GRU", "time / nn.LSTM", "MACs/token", "MAC ratio to GRU",
         "time ratio to GRU / MAC ratio"],
        ([r["cell"], r["size"], f"{r['tokens_per_s']:,.0f}", f"{r['vs_nn_gru']:.2f}", f"{r['vs_nn_lstm']:.2f}",
          f"{r['macs']:,}", f"{r['mac_ratio']:.2f}", f"{r['time_per_mac']:.2f}"] for r in rows))


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
    parser.add_argument("--padded", action="store_true",
                        help="padded batches (lengths T/2..T: our cells step with a mask, except GRU, LSTM and "
                             "Elman on CUDA, which run packed; torch's modules get a packed sequence); no MZU/MC-RNN "
                             "sections")
    parser.add_argument("--device", default="cpu",
                        help="cpu or cuda, for the cell tables (with --padded: against cuDNN's packed kernels); "
                             "no MZU/MC-RNN sections on a GPU (scripts/bench_gpu.py has them)")
    parser.add_argument("--compile", action="store_true", help="only the compiled ÷ eager table")
    parser.add_argument("--threads", type=int, default=1, help="torch threads for --compile (default 1)")
    parser.add_argument("--force-compile", action="store_true",
                        help="with --compile: also compile the cells the backend table keeps eager on CPU")
    parser.add_argument("--parameter-gradients", action="store_true",
                        help="with --compile: the share of each training step the parameter gradients take, "
                             "eager and compiled (the step beside the same step with the parameters frozen)")
    parser.add_argument("--breakdown", action="store_true",
                        help="with --compile: also where the time goes (matrix products eager and compiled, the "
                             "compiled calls' overhead, the fused kernels), each ÷ the eager step")
    parser.add_argument("--end-to-end", nargs="*", default=None, metavar="ARG",
                        help="run scripts/bench_compile_tasks.py (tokens/s with compile ÷ without) with these args")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("error: --device cuda needs a CUDA GPU and a CUDA build of torch; none is visible here")
    if device.type != "cpu" and args.compile:
        raise SystemExit("error: --compile measures on CPU; on a GPU run scripts/bench_gpu.py (its compiled columns)")
    if args.end_to_end is not None:
        load_script("bench_compile_tasks").main(args.end_to_end + (["--quick"] if args.quick else []))
        return
    if args.compile:
        torch.set_num_threads(args.threads)
        cells = args.cells or [n for n in available_cells() if default_constructible(n)] + list(COMPILE_EXTRA)
        if args.force_compile:  # the cells left eager on CPU (the backend table's compiled_pays False) compile too
            for n in available_cells():
                let_compile(get_cell(n), "cpu")
        repeats = 1 if args.quick else args.repeats
        malloc = allocator_setting(args.system_malloc)
        print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s); forward+backward, {repeats} "
              f"interleaved rounds; {malloc}\n")
        sizes = COMPILE_QUICK if args.quick else COMPILE_SIZES
        if args.parameter_gradients:
            print(format_parameter_gradient_rows(bench_parameter_gradients(cells, sizes, repeats)), flush=True)
        elif args.breakdown:
            print(format_breakdown_rows(bench_breakdown(cells, sizes, repeats)), flush=True)
        else:
            print(format_compile_rows(bench_compile(cells, sizes, repeats)), flush=True)
        return
    if args.quick:
        args.sizes, args.repeats, args.skip_mzu, args.skip_mcrnn = ["quick"], 1, True, True
    if args.padded or device.type != "cpu":
        args.skip_mzu = args.skip_mcrnn = True
    cells = args.cells or [n for n in available_cells() if default_constructible(n)]
    malloc = allocator_setting(args.system_malloc)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; forward+backward, median of "
          f"{args.repeats} rounds in shuffled order; {malloc}\n")
    for size in args.sizes:
        print(format_rows(bench_size(cells, SIZES[size], args.repeats, args.padded, device)) + "\n", flush=True)
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
