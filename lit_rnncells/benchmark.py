"""Measuring helpers the benchmark scripts share: MAC counts from shapes, round-robin timing."""
from __future__ import annotations

import random
import statistics
import time
from typing import Callable, Dict, List

import torch
from torch.utils.flop_counter import FlopCounterMode

from .cells.base import RecurrentCell


def step_macs(cell: RecurrentCell) -> int:
    """Multiply-accumulates of one ``cell.step`` and its ``output`` at batch 1, from the matmul shapes."""
    x_proj = cell.project_input(torch.zeros(1, cell.input_size))
    state = cell.initial_state(1)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        cell.output(cell.step(x_proj, state))
    return counter.get_total_flops() // 2


def input_macs(cell: RecurrentCell) -> int:
    """Multiply-accumulates of ``cell.project_input`` for one token (hoisted out of the time loop)."""
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        cell.project_input(torch.zeros(1, cell.input_size))
    return counter.get_total_flops() // 2


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
