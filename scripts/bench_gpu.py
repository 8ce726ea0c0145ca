"""Every cell at its paper's size on a GPU (or ``--device cpu``): eager and compiled, beside cuDNN's GRU.

For each cell, forward + backward of a one-layer ``Recurrent`` (eager and ``backend="compiled"``, same
weights) and of ``torch.nn.GRU`` at the same size (cuDNN on a GPU), in interleaved rounds (median).
Printed per cell and mode: ms per time step, time ÷ torch.nn.GRU's, MACs per token (hoisted input
map + one step, counted from the shapes), time ratio ÷ MAC ratio (how much slower than its
arithmetic predicts; 1.0 = as fast per multiply-add as cuDNN's GRU), peak memory (CUDA only), and
the compile time of the compiled mode (first two calls, apart from the timing). With
``LIT_RNNCELLS_COMPILE_MODE=reduce-overhead`` (CUDA graphs) the compiled row's peak memory leaves out the
graphs' memory pool, allocated while recording, before the peak is reset: not comparable with eager's.

    python scripts/bench_gpu.py                         # on cuda:0, every cell, the papers' sizes
    python scripts/bench_gpu.py --cells SatMZU GRU --repeats 20
    python scripts/bench_gpu.py --device cpu --tiny     # tiny sizes on CPU: checks the script runs
    LIT_RNNCELLS_COMPILE_MODE=reduce-overhead python scripts/bench_gpu.py   # the compiled step as CUDA graphs
    python scripts/bench_gpu.py --backends eager graphs  # the whole loop as one CUDA graph (backend graphs)
    python scripts/bench_gpu.py --backends graphs graphs-deferred  # inside the graph, the recurrent maps'
                                # weight gradients as one product after the loop (the backend table's `defer`)
    python scripts/bench_gpu.py --backends graphs graphs-compiled  # inside the graph, the compiled step's fused
                                # kernels instead of the eager step's (the table's `capture_compiled`)
    python scripts/bench_gpu.py --device cpu --size 32 100 128 256 --backends eager loop-deferred --cells GRUDT
                                # the same deferral in the eager loop, here on CPU

The graphs rows' capture time (first call) is apart from the timing, and their peak memory is measured after
the capture, so it includes nothing of the capture itself but the graphs' own pool is counted while it is in use.

Sizes (B, T, I, H): the MZU cells and GRU+DT as in the MZU paper's PTB-char setting (shared deep
transition L = 1, batch 128 of the config's 256 to fit beside the others), CARU and MGU as in the
CARU paper's IMDB setting, MuFuRU as in its SST setting, MC-RNN (around LSTM) as in its PTB-word
setting, the classic cells at a common LM size.
"""
from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from functools import partial
from typing import Callable, Dict, List, Sequence, Tuple

import torch
from torch import nn

from lit_rnncells.nn.benchmark import (compile_mode_header, compiled_twin, input_macs, interleaved_times, step_macs,
                                       train_step)
from lit_rnncells.cells import get_cell
from lit_rnncells.nn import Recurrent, backend

Size = Tuple[int, int, int, int]
MZU_PTB: Size = (128, 150, 256, 800)
CELLS: Dict[str, Tuple[Callable, Size]] = {
    "GRU": (get_cell("GRU"), (64, 100, 256, 512)),
    "LSTM": (get_cell("LSTM"), (64, 100, 256, 512)),
    "Elman": (get_cell("Elman"), (64, 100, 256, 512)),
    "MGU": (get_cell("MGU"), (100, 200, 100, 256)),
    "CARU": (get_cell("CARU"), (100, 200, 100, 256)),
    "MuFuRU": (get_cell("MuFuRU"), (25, 50, 300, 100)),
    "GRUDT": (partial(get_cell("GRUDT"), transition_depth=1, share_transition=True), MZU_PTB),
    "SatMZU": (partial(get_cell("SatMZU"), transition_depth=1, share_transition=True), MZU_PTB),
    "GcnMZU": (partial(get_cell("GcnMZU"), transition_depth=1, share_transition=True), MZU_PTB),
    "CapMZU": (partial(get_cell("CapMZU"), transition_depth=1, share_transition=True), MZU_PTB),
    "MultiChannel(LSTM)": (partial(get_cell("MultiChannel"), cell="LSTM", block_size=4), (20, 70, 400, 1150)),
}
TINY: Size = (4, 6, 8, 8)


def peak_memory_mb(fn: Callable[[], None], device: torch.device) -> float:
    """Peak CUDA memory of one call, MiB (NaN on CPU)."""
    if device.type != "cuda":
        return float("nan")
    torch.cuda.reset_peak_memory_stats(device)
    fn()
    return torch.cuda.max_memory_allocated(device) / 2 ** 20


def twin_job(eager: nn.Module, x: torch.Tensor, name: str, defer: bool, capture_compiled: bool = False
             ) -> Tuple[Callable[[], None], float]:
    """A copy of ``eager`` under ``backend: name``, its recurrent weight gradients deferred or not, capturing the
    compiled step or the eager one (its plan resolved while the backend table says so), and the seconds of its
    first call (graphs: the capture, and with the compiled step its compile too)."""
    twin = copy.deepcopy(eager)
    twin.backend = name
    cls, device = type(twin.cell()), x.device.type
    saved = backend.entry(cls, device)
    backend.let_defer(cls, device, defer)
    backend.let_capture(cls, device, capture_compiled)
    try:
        twin.plans(device)
    finally:
        backend.let_defer(cls, device, saved.defer)
        backend.let_capture(cls, device, saved.capture_compiled)
    job = train_step(twin, x)
    started = time.perf_counter()
    job()
    if x.is_cuda:
        torch.cuda.synchronize(x.device)
    return job, time.perf_counter() - started


def bench_cell(name: str, factory: Callable, size: Size, device: torch.device, repeats: int,
               modes: Sequence[str] = ("eager", "compiled")) -> List[dict]:
    batch, steps, inp, hidden = size
    torch.manual_seed(0)
    x = torch.randn(batch, steps, inp, device=device)
    gru = nn.GRU(inp, hidden, batch_first=True).to(device)
    if "compiled" in modes:
        eager, compiled, compile_s = compiled_twin(factory, inp, hidden, x)
    else:  # nothing to compile
        eager, compiled, compile_s = Recurrent(factory, inp, hidden, batch_first=True).to(device), None, float("nan")
    jobs = {"gru": train_step(gru, x), "eager": train_step(eager, x)}
    if compiled is not None:
        jobs["compiled"] = train_step(compiled, x)
    setup_s = {"eager": float("nan"), "compiled": compile_s}
    failed: Dict[str, str] = {}
    twins = {"graphs": ("graphs", False, False), "graphs-deferred": ("graphs", True, False),
             "graphs-compiled": ("graphs", False, True), "loop-deferred": ("loop", True, False)}
    for mode, (backend_name, defer, capture_compiled) in twins.items():  # graphs: captured first, timed apart
        if mode not in modes:
            continue
        try:
            jobs[mode], setup_s[mode] = twin_job(eager, x, backend_name, defer, capture_compiled)
        except RuntimeError as err:  # e.g. a capture CUDA refuses: that row says so, the others are timed
            failed[mode] = str(err).strip().splitlines()[0][:160]
            print(f"bench_gpu: {name} {mode} failed: {failed[mode]}", file=sys.stderr, flush=True)
    if "loop-deferred" in setup_s:
        setup_s["loop-deferred"] = float("nan")
    jobs = {k: v for k, v in jobs.items() if k == "gru" or k in modes}
    times = interleaved_times(jobs, repeats)
    cell = eager.cell().cpu()
    macs = input_macs(cell) + step_macs(cell)
    eager.to(device)
    gru_macs = 3 * hidden * (inp + hidden)
    rows = []
    for mode in modes:
        if mode in failed:
            rows.append({"cell": name, "mode": mode, "size": f"B{batch} T{steps} I{inp} H{hidden}",
                         "failed": failed[mode]})
            continue
        ratio = statistics.median([t / g for t, g in zip(times[mode], times["gru"])])
        rows.append({"cell": name, "mode": mode, "size": f"B{batch} T{steps} I{inp} H{hidden}",
                     "ms_per_step": statistics.median(times[mode]) / steps * 1e3, "vs_cudnn_gru": ratio,
                     "macs": macs, "time_per_mac": ratio / (macs / gru_macs),
                     "peak_mb": peak_memory_mb(jobs[mode], device),
                     "compile_s": setup_s[mode]})
    return rows


def format_rows(rows: Sequence[dict], baseline: str) -> str:
    out = [f"| cell | mode | size | ms / step | time ÷ {baseline} | MACs/token | time ratio ÷ MAC ratio | "
           "peak MiB | compile / capture s |", "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if "failed" in r:
            out.append(f"| {r['cell']} | {r['mode']} | {r['size']} | failed: {r['failed']} | | | | | |")
            continue
        peak = "n/a" if r["peak_mb"] != r["peak_mb"] else f"{r['peak_mb']:,.0f}"
        comp = "" if r["compile_s"] != r["compile_s"] else f"{r['compile_s']:.1f}"
        out.append(f"| {r['cell']} | {r['mode']} | {r['size']} | {r['ms_per_step']:.3f} | {r['vs_cudnn_gru']:.2f} | "
                   f"{r['macs']:,} | {r['time_per_mac']:.2f} | {peak} | {comp} |")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", help="cuda (default), cuda:1, cpu, ...")
    parser.add_argument("--cells", nargs="+", default=list(CELLS), choices=list(CELLS))
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--backends", nargs="+", default=["eager", "compiled"],
                        choices=["eager", "compiled", "graphs", "graphs-deferred", "graphs-compiled",
                                 "loop-deferred"],
                        help="what to time beside cuDNN's GRU: eager (the layer's auto backend), compiled, graphs "
                             "(the whole loop as CUDA graphs; CUDA only), graphs-deferred (graphs with the recurrent "
                             "maps' weight gradients as one product after the loop), graphs-compiled (graphs of the "
                             "compiled step's fused kernels), loop-deferred (the eager step loop with deferred "
                             "weight gradients; any device); default eager compiled")
    parser.add_argument("--tiny", action="store_true", help=f"every cell at B, T, I, H = {TINY}, 1 round")
    parser.add_argument("--size", nargs=4, type=int, metavar=("B", "T", "I", "H"),
                        help="every cell at this batch, length, input and hidden size (default: each its paper's)")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("error: no CUDA device is visible to torch; pass --device cpu to run on the CPU", file=sys.stderr)
        return 2
    if any(b.startswith("graphs") for b in args.backends) and device.type != "cuda":
        print("error: --backends graphs, graphs-deferred and graphs-compiled need a CUDA device; drop them or use "
              "--device cuda",
              file=sys.stderr)
        return 2
    mode = compile_mode_header()  # or one error line and exit 2
    repeats = 1 if args.tiny else args.repeats
    baseline = "cuDNN GRU" if device.type == "cuda" else "torch.nn.GRU"
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    print(f"torch {torch.__version__} on {where}; forward+backward, median of {repeats} interleaved rounds; {mode}\n")
    rows = []
    for name in args.cells:
        factory, size = CELLS[name]
        rows += bench_cell(name, factory, TINY if args.tiny else tuple(args.size or size), device, repeats,
                           args.backends)
        print(format_rows(rows[-len(args.backends):], baseline).split("\n", 2)[2], flush=True)
    print("\n" + format_rows(rows, baseline))
    return 0


if __name__ == "__main__":
    sys.exit(main())
