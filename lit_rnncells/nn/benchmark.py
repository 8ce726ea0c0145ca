"""Measuring helpers the benchmark scripts share: MAC counts from shapes, round-robin timing,
and the allocator setting they measure under."""
from __future__ import annotations

import ctypes
import os
import random
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import torch
from torch.utils.flop_counter import FlopCounterMode

from ..cells.base import CellFactory, RecurrentCell
from .compiled import MODE_VARIABLE, compile_mode
from . import Recurrent


def step_macs(cell: RecurrentCell) -> int:
    """Multiply-accumulates of one ``cell.step`` and its ``output`` at batch 1, from the matmul shapes."""
    device = next(cell.parameters()).device
    x_proj = cell.project_input(torch.zeros(1, cell.input_size, device=device))
    state = cell.initial_state(1, device=device)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        cell.output(cell.step(x_proj, state))
    return counter.get_total_flops() // 2


def input_macs(cell: RecurrentCell) -> int:
    """Multiply-accumulates of ``cell.project_input`` for one token (hoisted out of the time loop)."""
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        cell.project_input(torch.zeros(1, cell.input_size, device=next(cell.parameters()).device))
    return counter.get_total_flops() // 2


ANCHORS_ENV = "LIT_RNNCELLS_ANCHORS"
"""The folder holding the plain-PyTorch reference programs the side-by-side benchmarks run (not shipped)."""


def reference_program(name: str, given: Optional[Path] = None) -> Path:
    """The reference program ``name`` to run side by side: ``given`` (a script's ``--reference`` option), or
    ``$LIT_RNNCELLS_ANCHORS/<name>``. Exits with one line naming both ways when neither is a file."""
    folder = os.environ.get(ANCHORS_ENV)
    path = given if given is not None else (Path(folder) / name if folder else None)
    if path is None or not path.is_file():
        where = f"{path} does not exist" if path is not None else f"no reference program {name} was given"
        raise SystemExit(f"error: {where}; pass --reference <{name}> or set {ANCHORS_ENV} to the folder holding it "
                         "(the reference programs are not shipped with lit_rnncells).")
    return path


GLIBC_KEEP_FREED = "glibc.malloc.mmap_threshold=1073741824:glibc.malloc.trim_threshold=1073741824"
"""The ``GLIBC_TUNABLES`` value with the effect of :func:`keep_freed_memory`, for another process."""


def keep_freed_memory() -> bool:
    """Ask glibc's malloc to keep freed memory for reuse (no trimming, no mmap below 1 GiB).

    By default glibc hands every large freed block back to the OS, so each training step
    page-faults its activations in again; on this project's (virtual) machine that cost up to
    30% of a CPU step and varied with the host's load. The benchmark scripts call this first
    (``--system-malloc`` turns it off) so they measure the cells, not the page faults. For
    your own CPU training, the same setting without code: ``GLIBC_TUNABLES=`` :data:`GLIBC_KEEP_FREED`.
    Returns whether it took effect (False off Linux/glibc).
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3  # <malloc.h>
    return bool(libc.mallopt(m_mmap_threshold, 1 << 30)) and bool(libc.mallopt(m_trim_threshold, 1 << 30))


SYSTEM_MALLOC_HELP = ("keep glibc's default of returning freed memory to the OS "
                      "(see lit_rnncells.nn.benchmark.keep_freed_memory)")


def allocator_setting(system_malloc: bool) -> str:
    """Apply :func:`keep_freed_memory` unless ``system_malloc``; a phrase for the printed header."""
    if not system_malloc and keep_freed_memory():
        return "malloc keeps freed memory"
    return "system malloc defaults"


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[object]], text_columns: int = 2) -> str:
    """A Markdown table: the first ``text_columns`` columns left-aligned, the (numeric) rest right-aligned."""
    align = "|" + "|".join(["---"] * text_columns + ["---:"] * (len(header) - text_columns)) + "|"
    return "\n".join(["| " + " | ".join(header) + " |", align,
                      *("| " + " | ".join(str(cell) for cell in row) + " |" for row in rows)])


def train_step(module: torch.nn.Module, x: torch.Tensor) -> Callable[[], None]:
    """One forward + backward of ``module`` on ``x`` (its output's sum), gradients cleared; on a GPU it
    waits for the device, so the step's time is measured."""
    def run() -> None:
        module(x)[0].sum().backward()
        module.zero_grad(set_to_none=True)
        if x.device.type == "cuda":
            torch.cuda.synchronize(x.device)
    return run


def compile_mode_header() -> str:
    """The compile mode a benchmark's compiled runs use, for its header: ``compile mode reduce-overhead
    ($LIT_RNNCELLS_COMPILE_MODE)`` or ``compile mode default``. When the variable holds no mode, prints one
    ``error:`` line naming the choices and exits with status 2, before the script runs anything."""
    try:
        mode = compile_mode()
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    return f"compile mode {mode} (${MODE_VARIABLE})" if mode else "compile mode default"


def compiled_twin(cell: Union[str, CellFactory], input_size: int, hidden_size: int,
                  x: torch.Tensor) -> Tuple[torch.nn.Module, torch.nn.Module, float]:
    """A batch-first ``Recurrent`` around ``cell`` (a name or factory) on ``x``'s device, its ``backend='compiled'``
    twin with the same weights, and the seconds the twin's first two training steps on ``x`` took (the
    forward and backward graphs, then the dynamic-batch one if any: mostly compiling)."""
    eager = Recurrent(cell, input_size, hidden_size, batch_first=True).to(x.device)
    compiled = Recurrent(cell, input_size, hidden_size, batch_first=True, backend="compiled").to(x.device)
    compiled.load_state_dict(eager.state_dict())
    start = time.perf_counter()
    for _ in range(2):
        train_step(compiled, x)()
    return eager, compiled, time.perf_counter() - start


def seconds(fn: Callable[[], None]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def interleaved_times(jobs: Dict[str, Callable[[], None]], repeats: int, warmup: int = 1,
                      seed: int = 0) -> Dict[str, List[float]]:
    """Seconds of each job in each of ``repeats`` rounds. Every round runs every job once, in a
    fresh (seeded) random order, so a change of machine load hits every job alike and no job
    always follows the same one (a job that frees much memory slows the next one's allocations)."""
    for fn in jobs.values():
        for _ in range(warmup):
            fn()
    order = list(jobs)
    rng = random.Random(seed)
    times: Dict[str, List[float]] = {name: [] for name in jobs}
    for _ in range(repeats):
        rng.shuffle(order)
        for name in order:
            times[name].append(seconds(jobs[name]))
    return times


def round_robin(jobs: Dict[str, Callable[[], None]], repeats: int, warmup: int = 1) -> Dict[str, float]:
    """Median seconds of each job over :func:`interleaved_times` rounds."""
    return {name: statistics.median(t) for name, t in interleaved_times(jobs, repeats, warmup).items()}


def run_reference(script: Path, args: Sequence[str], system_malloc: bool) -> Tuple[str, Dict[str, str]]:
    """Run a plain-PyTorch reference program (see :func:`reference_program`) under the allocator setting our side
    uses (:data:`GLIBC_KEEP_FREED` unless ``system_malloc``); echo its output and return it with the
    ``key=value`` fields of its last line starting with ``ANCHOR``. One clear error if it fails."""
    command = [sys.executable, str(script), *args]
    env = dict(os.environ)
    if not system_malloc:
        env["GLIBC_TUNABLES"] = GLIBC_KEEP_FREED
    print("reference:", " ".join(command), flush=True)
    proc = subprocess.run(command, capture_output=True, text=True, env=env)
    sys.stdout.write(proc.stdout)
    found = re.findall(r"^ANCHOR \S+ (.*)$", proc.stdout, re.M)
    if proc.returncode != 0 or not found:
        raise SystemExit(f"The reference {script.name} failed (exit code {proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc.stdout, dict(kv.split("=", 1) for kv in found[-1].split())


class RowCounter:
    """A ``Seq2Seq`` as beam search sees it (pass it to ``search``), counting the decoder rows (hypotheses)
    every ``decode_step`` computes: the work a decoder does."""

    def __init__(self, model: Any) -> None:
        self.model, self.rows = model, 0

    def decode_step(self, prev_tokens: torch.Tensor, state: Any, enc: Any) -> Any:
        self.rows += prev_tokens.numel()
        return self.model.decode_step(prev_tokens, state, enc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)
