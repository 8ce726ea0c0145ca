"""The whole time loop compiled with torch's ``scan`` higher-order op, against the layer's loops.

Issue 18 names three ways to compile a recurrence: the step (what ``Recurrent(compile=True)`` does), the
whole time loop with ``scan``, or chunks of unrolled steps. This script measures the second for any cell:
``scan`` runs the cell's ``step`` over its projected inputs inside one ``torch.compile``d function, so one
compiled call (forward and backward) covers the whole sequence instead of one per step. Printed per cell,
forward + backward at T100 I128 H256 (one thread, interleaved rounds, ratios within each round): the
``scan`` loop's and the compiled step's time ÷ the eager loop's, their compile times, and the largest
difference of the ``scan`` loop's outputs from the eager loop's.

    python scripts/bench_scan.py --cells GRU MuFuRU SatMZU --batch 4 32
    python scripts/bench_scan.py --quick
    python scripts/bench_scan.py --device cuda   # on a GPU (scripts/gpu_check.sh runs it)

Unpadded batches only, no auxiliary loss: a measurement, not a layer option. Inductor lowers ``scan`` through
a while loop whose counter it reads as a number, so the script sets
``torch._dynamo.config.capture_scalar_outputs`` (without it the compile fails on torch 2.13), and raises the
recompile limit: every cell and batch size is a graph of its own for the one ``_loop`` function, and past the
limit torch would run the rest uncompiled.
"""
from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable, Dict, Sequence, Tuple

import torch
from torch import Tensor, nn

from lit_rnncells.nn.backend import let_compile
from lit_rnncells.nn.benchmark import compiled_twin, interleaved_times, markdown_table, train_step
from lit_rnncells.cells import get_cell
from lit_rnncells.cells.base import RecurrentCell, State


class ScanLoop(nn.Module):
    """One cell run over a batch-first input by ``scan`` inside ``torch.compile`` (returns ``(outputs, None)``
    like a layer's first element)."""

    def __init__(self, cell: RecurrentCell) -> None:
        super().__init__()
        self.cell = cell
        self.loop = torch.compile(self._loop, dynamic=False)

    def _loop(self, x_proj: Tensor, state: State) -> Tuple[State, Tensor]:
        from torch._higher_order_ops.scan import scan

        def combine(carry: State, x_t: Tensor) -> Tuple[State, Tensor]:
            new = self.cell.step(x_t, carry)
            return new, self.cell.output(new).clone()  # scan's outputs may not alias its carry

        return scan(combine, state, x_proj)

    def forward(self, x: Tensor) -> Tuple[Tensor, None]:
        x = x.transpose(0, 1)
        state = self.cell.initial_state(x.shape[1], device=x.device, dtype=x.dtype)
        _, outputs = self.loop(self.cell.project_input(x), state)
        return outputs.transpose(0, 1), None


def bench(cells: Sequence[str], batches: Sequence[int], size: Tuple[int, int, int], repeats: int,
          device: torch.device) -> None:
    """Print the table (module docstring) for ``cells`` at each batch size."""
    steps, inp, hidden = size
    rows = []
    for batch in batches:
        torch.manual_seed(0)
        x = torch.randn(batch, steps, inp, device=device)
        jobs: Dict[str, Callable[[], None]] = {}
        info: Dict[str, Tuple[float, float, float]] = {}
        for name in cells:
            eager, compiled, step_compile_s = compiled_twin(name, inp, hidden, x)
            scanned = ScanLoop(eager.cell())
            started = time.perf_counter()
            train_step(scanned, x)()
            scan_compile_s = time.perf_counter() - started
            with torch.no_grad():
                difference = (scanned(x)[0] - eager(x)[0]).abs().max().item()
            info[name] = (scan_compile_s, step_compile_s, difference)
            jobs[f"{name} eager"] = train_step(eager, x)
            jobs[f"{name} scan"] = train_step(scanned, x)
            jobs[f"{name} step"] = train_step(compiled, x)
        times = interleaved_times(jobs, repeats)
        for name in cells:
            def ratio(mode: str) -> float:
                return statistics.median(t / e for t, e in zip(times[f"{name} {mode}"], times[f"{name} eager"]))
            scan_s, step_s, difference = info[name]
            rows.append([name, batch, f"{statistics.median(times[f'{name} eager']) * 1e3:.1f}", f"{ratio('scan'):.2f}",
                         f"{ratio('step'):.2f}", f"{scan_s:.1f}", f"{step_s:.1f}", f"{difference:.1e}"])
    print(markdown_table(["cell", "batch", "eager ms", "scan loop ÷ eager", "compiled step ÷ eager", "scan compile s",
                          "step compile s", "scan max abs difference"], rows, text_columns=1), flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", nargs="+", default=["GRU", "MuFuRU", "SatMZU"])
    parser.add_argument("--batch", nargs="+", type=int, default=[4, 32])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one round (checks the script runs)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch._dynamo.config.capture_scalar_outputs = True
    torch._dynamo.config.recompile_limit = 64  # one graph per cell and batch size, all on the one ``_loop`` code
    for name in args.cells:
        let_compile(get_cell(name), "cpu")  # the compiled-step column compiles every cell
    size = (6, 8, 8) if args.quick else (100, 128, 256)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("error: --device cuda needs a CUDA GPU and a CUDA build of torch; none is visible here")
    print(f"torch {torch.__version__}, {args.device}, {torch.get_num_threads()} thread(s); forward+backward, "
          f"{1 if args.quick else args.repeats} interleaved rounds; T{size[0]} I{size[1]} H{size[2]}\n")
    bench(args.cells, [4] if args.quick else args.batch, size, 1 if args.quick else args.repeats,
          torch.device(args.device))


if __name__ == "__main__":
    main()
