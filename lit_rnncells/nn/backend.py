"""The one place that chooses how ``Recurrent`` runs its time loop: the ``backend`` option and its table.

``backend`` is one of:

- ``loop``: the eager Python loop over the cell's ``step`` (the reference every other backend equals);
- ``compiled``: the same loop with its body through ``torch.compile`` (:mod:`.compiled`), where the table
  says the compiled step measured no slower than the loop on that device (elsewhere the loop, said once);
- ``graphs``: the whole forward over all T steps, and its backward, captured as one CUDA graph per batch
  size and length (:mod:`.graphs`); CUDA only;
- ``fused``: the cell's own fused kernel over whole sequences (Elman, GRU, LSTM: cuDNN on a GPU, oneDNN on
  CPU); a cell without one is refused at start;
- ``auto`` (the default): what :data:`TABLE` says was measured fastest for the cell on the device.

``compiled`` and ``graphs`` keep the fused kernel first for the cells ``auto`` runs fused (a whole sequence
in one kernel beats any step loop); their loop then runs only what the kernel cannot (an auxiliary loss,
an empty sequence, a decoder's single steps). The choice is resolved once per layer and device type
(:func:`resolve`) and printed once per process (:func:`say_choice`). The same row says whether the eager
step defers its recurrent maps' weight gradients to one product after the loop (``Entry.defer``).
``$LIT_RNNCELLS_BACKEND`` gives the default where no config names a backend; it never overrides one.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, replace
from typing import Dict, Optional, Set, Tuple

import torch

from ..cells.base import RecurrentCell

BACKENDS = ("auto", "loop", "compiled", "graphs", "fused")
VARIABLE = "LIT_RNNCELLS_BACKEND"


@dataclass(frozen=True)
class Entry:
    """One row of :data:`TABLE`: what ``auto`` runs, whether a ``compiled`` request compiles the step, and
    whether the eager step (``loop``, and ``graphs``, which captures it) defers the recurrent maps' weight
    gradients to one product after the loop (:mod:`lit_rnncells.cells.deferred`). ``defer`` is off everywhere:
    eagerly on CPU it measured 0.97-1.07 of the plain loop's time (commit 130bf2d), and inside a CUDA graph
    it waits for ``scripts/bench_gpu.py --backends graphs graphs-deferred`` (docs/measured.md).
    ``capture_compiled``: ``graphs`` captures the compiled step (Inductor's fused kernels, in torch's default
    mode) instead of the eager one, where ``compiled_pays`` too. Off everywhere until ``scripts/bench_gpu.py
    --backends graphs graphs-compiled`` measures it faster: the eager capture is the one checked exact on a GPU."""

    auto: str
    compiled_pays: bool = True
    defer: bool = False
    capture_compiled: bool = False


# (cell class name, device type) -> Entry. Every figure cited is in docs/measured.md.
TABLE: Dict[Tuple[str, str], Entry] = {
    # CPU. Elman, GRU, LSTM: torch's fused kernel (oneDNN) for unpadded batches ("Cell speed"); padded ones take
    # the step loop, which beat the packed kernels (1.6-2.2x the loop's time). Their compiled step took
    # 1.05-2.61x the loop's ("Compiled recurrence", runs 1-5), so `compiled` keeps their loop (LSTM's compiled
    # row is the fused kernel either way: compiled where its padded batches need a step).
    ("Elman", "cpu"): Entry("fused", compiled_pays=False),
    ("GRU", "cpu"): Entry("fused", compiled_pays=False),
    ("LSTM", "cpu"): Entry("fused"),
    # MGU 1.08-1.47x, CARU 1.06-1.46x, MuFuRU 0.97-1.22x the loop's time compiled (runs 1-7): the loop.
    ("MGU", "cpu"): Entry("loop", compiled_pays=False),
    ("CARU", "cpu"): Entry("loop", compiled_pays=False),
    ("MuFuRU", "cpu"): Entry("loop", compiled_pays=False),
    # The MZU cells, GRU+DT, MC-RNN compile faster per step on CPU only within noise (satMZU 0.85-0.99,
    # GRU+DT 0.74-1.06, gcnMZU 0.76-0.98, MC-RNN 0.90-0.99; capMZU alone at 0.50-0.64), and their cold compile
    # (3-97 s per class) outweighs that in a CPU run of minutes: `auto` runs the loop; `compiled` opts in.
    ("SatMZU", "cpu"): Entry("loop"),
    ("GcnMZU", "cpu"): Entry("loop"),
    ("CapMZU", "cpu"): Entry("loop"),
    ("GRUDT", "cpu"): Entry("loop"),
    ("MultiChannel", "cpu"): Entry("loop"),
    # CUDA (one H200, "On a GPU"). Elman, GRU, LSTM: cuDNN, padded batches packed (0.8-1.1x cuDNN GRU; the
    # step loop took 2.7-11.4x). Elman's compiled step took 3.41x eager; GRU's compiled decoder 1.10-1.17x.
    ("Elman", "cuda"): Entry("fused", compiled_pays=False),
    ("GRU", "cuda"): Entry("fused", compiled_pays=False),
    ("LSTM", "cuda"): Entry("fused"),
    # torch's default compile mode: GRU+DT 0.56, gcnMZU 0.53, capMZU 0.58, CARU 0.76, MC-RNN 0.81, satMZU 0.84
    # of eager per layer; end to end 1.82x (PTB satMZU+DT) and 2.04x (IMDB CARU): `auto` compiles them.
    # The whole-sequence graphs (`graphs`) are not measured yet; auto switches to them once scripts/gpu_check.sh
    # stages `whole-cells` and `whole-fits` show them faster (docs/measured.md, "Waiting for a GPU").
    ("GRUDT", "cuda"): Entry("compiled"),
    ("SatMZU", "cuda"): Entry("compiled"),
    ("GcnMZU", "cuda"): Entry("compiled"),
    ("CapMZU", "cuda"): Entry("compiled"),
    ("CARU", "cuda"): Entry("compiled"),
    ("MultiChannel", "cuda"): Entry("compiled"),
    # MGU 0.95 and MuFuRU 0.99 of eager compiled (default mode): no gain worth a compile; the loop.
    ("MGU", "cuda"): Entry("loop"),
    ("MuFuRU", "cuda"): Entry("loop"),
}

DEFAULT: Dict[str, Entry] = {"cpu": Entry("loop"), "cuda": Entry("loop")}
"""A cell the table does not name (a user's): the loop, its compiled step when asked. Nothing was measured for it."""
OTHER_DEVICE = Entry("loop")
"""Devices other than CPU and CUDA (e.g. ``mps``): nothing measured; the loop, compiled when asked."""

FUSED_PACKED_DEVICES: Tuple[str, ...] = ("cuda",)
"""Device types on which padded batches of a cell with ``fused_takes_lengths`` run its fused kernel packed
instead of the masked step loop: on an H200 the step loop took 11x ``torch.nn.GRU``'s time on packed input;
on CPU the packed kernels took 1.6-2.2x the step loop's (docs/measured.md, "Cell speed", "On a GPU")."""

_said: Set[str] = set()


def _row_name(cls: type) -> str:
    """The table's name for ``cls``: the nearest class in its ancestry the table names, unless a class on the
    way defines its own ``step`` (then it is a new cell, under its own name)."""
    named = {name for name, _ in TABLE}
    for klass in cls.__mro__:
        if klass is RecurrentCell:
            break
        if klass.__name__ in named:
            return klass.__name__
        if "step" in klass.__dict__:
            break
    return cls.__name__


def entry(cls: type, device_type: str) -> Entry:
    """The table's row for a cell class on a device type (the defaults where it names none)."""
    if device_type not in DEFAULT:
        return OTHER_DEVICE
    return TABLE.get((_row_name(cls), device_type), DEFAULT[device_type])


def let_compile(cls: type, device_type: str = "cpu") -> None:
    """Let a ``compiled`` request compile ``cls``'s step on ``device_type`` although the table says it measured
    slower (benchmark scripts' ``--force-compile``, to show why)."""
    row = entry(cls, device_type)
    TABLE[(_row_name(cls), device_type)] = replace(row, compiled_pays=True)


def let_defer(cls: type, device_type: str = "cuda", defer: bool = True) -> None:
    """Set whether the eager step (``loop``, ``graphs``) defers ``cls``'s recurrent weight gradients on
    ``device_type`` (benchmarks time both; a layer keeps the plans it resolved first)."""
    row = entry(cls, device_type)
    TABLE[(_row_name(cls), device_type)] = replace(row, defer=defer)


def let_capture(cls: type, device_type: str = "cuda", compiled: bool = True) -> None:
    """Set whether ``graphs`` captures ``cls``'s compiled step on ``device_type`` rather than its eager one
    (benchmarks time both; a layer keeps the plans it resolved first)."""
    row = entry(cls, device_type)
    TABLE[(_row_name(cls), device_type)] = replace(row, capture_compiled=compiled)


def has_fused_kernel(cls: type) -> bool:
    """Whether ``cls`` implements :meth:`~lit_rnncells.cells.base.RecurrentCell.fused_sequence`."""
    return getattr(cls, "fused_sequence", None) is not RecurrentCell.fused_sequence


def check_backend(backend: Optional[str], compile: bool = False) -> str:
    """The backend a layer or task runs: ``backend`` as given; else ``compiled`` for the deprecated
    ``compile=True``; else ``$LIT_RNNCELLS_BACKEND``; else ``auto``. An unknown name, or ``compile=True`` beside
    another backend, is refused in one sentence with the fix."""
    if backend is not None and backend not in BACKENDS:
        raise ValueError(f"backend={backend!r} is not a recurrence backend; use one of {', '.join(BACKENDS)} "
                         "(--model.init_args.backend; docs/tasks.md)")
    if compile:
        if backend not in (None, "compiled"):
            raise ValueError(f"compile=True and backend={backend!r} disagree; drop compile (deprecated) and keep "
                             "backend")
        say_once("deprecated compile", "lit_rnncells: `compile: true` is deprecated and goes in the next release; "
                 "use `backend: compiled` (--model.init_args.backend compiled)")
        return "compiled"
    if backend is not None:
        return backend
    default = os.environ.get(VARIABLE) or "auto"
    if default not in BACKENDS:
        raise ValueError(f"{VARIABLE}={default!r} is not a recurrence backend; set it to one of "
                         f"{', '.join(BACKENDS)}, or unset it")
    return default


def check_cell(cls: type, backend: str) -> None:
    """Refuse at start a backend the cell cannot run: ``fused`` without a fused kernel, ``graphs`` without CUDA."""
    if backend == "fused" and not has_fused_kernel(cls):
        raise ValueError(f"backend='fused' needs a cell with a fused kernel (Elman, GRU, LSTM); {cls.__name__} has "
                         "none: use backend auto, compiled, graphs or loop")
    if backend == "graphs" and not torch.cuda.is_available():
        raise ValueError("backend='graphs' captures the time loop as CUDA graphs and needs a CUDA device; torch "
                         "finds none here: use backend auto, loop or compiled on this machine")


@dataclass(frozen=True)
class Plan:
    """How one cell runs on one device type, resolved from the table."""

    cell: str
    device: str
    backend: str  # what ran: loop, compiled, graphs or fused
    fused: bool  # unpadded sequences through the cell's fused kernel
    packed: bool  # padded ones too, packed
    step: str  # the loop's body: "loop", "compiled" or "graphs"
    note: str = ""
    defer: bool = False  # the eager step's recurrent weight gradients as one product after the loop
    captured: str = "loop"  # what a graphs step captures: the eager step ("loop") or the compiled one


def resolve(cls: type, backend: str, device_type: str) -> Plan:
    """The plan for a cell class under ``backend`` (as :func:`check_backend` returned it) on a device type.
    Device types need no device: ``resolve(GRU, "auto", "cuda")`` answers on a machine without a GPU."""
    row = entry(cls, device_type)
    wanted = row.auto if backend == "auto" else backend
    fused_kernel = has_fused_kernel(cls)
    packed_ok = bool(getattr(cls, "fused_takes_lengths", False)) and device_type in FUSED_PACKED_DEVICES
    if wanted == "fused":
        if not fused_kernel:
            check_cell(cls, "fused")
        return Plan(cls.__name__, device_type, "fused", True, packed_ok, "loop", defer=row.defer)
    if wanted == "loop":
        return Plan(cls.__name__, device_type, "loop", False, False, "loop", defer=row.defer)
    kernel_first = row.auto == "fused" and fused_kernel
    if wanted == "graphs":
        if device_type != "cuda":
            raise ValueError(f"backend='graphs' needs a CUDA device; this layer runs on {device_type}: use "
                             "backend auto, loop or compiled there")
        compiled = row.capture_compiled and row.compiled_pays
        return Plan(cls.__name__, device_type, "graphs", kernel_first, kernel_first and packed_ok, "graphs",
                    defer=row.defer and not compiled, captured="compiled" if compiled else "loop")
    if not row.compiled_pays:
        return Plan(cls.__name__, device_type, "fused" if kernel_first else "loop", kernel_first,
                    kernel_first and packed_ok, "loop", defer=row.defer,
                    note=f"{cls.__name__}'s compiled step measured slower than its loop on {device_type}")
    return Plan(cls.__name__, device_type, "compiled", kernel_first, kernel_first and packed_ok, "compiled")


def describe(plan: Plan, detail: str = "") -> str:
    """``recurrence: SatMZU on cuda: graphs (whole sequence, 4 length buckets)``."""
    what = plan.backend
    if plan.backend == "fused" and plan.step == "loop" and not plan.packed:
        what += " (unpadded batches; padded ones the step loop)" if plan.device == "cpu" else ""
    if plan.step == "graphs":
        what += (" (whole sequence: one CUDA graph per batch size and length, a capped number kept; the DataModules'"
                 " length_buckets bound the lengths)") if not plan.fused else " (the fused kernel where it applies)"
        if plan.captured == "compiled":
            what += " (the compiled step inside the capture)"
    if plan.defer:
        what += " (recurrent weight gradients as one product after the loop)"
    if plan.note:
        what += f" ({plan.note})"
    if detail:
        what += f" ({detail})"
    return f"recurrence: {plan.cell} on {plan.device}: {what}"


def _rank() -> int:
    """This process's rank as Lightning set it (0 outside Lightning, which this module does not import)."""
    module = sys.modules.get("lightning_utilities.core.rank_zero")
    return getattr(getattr(module, "rank_zero_only", None), "rank", 0) or 0


def say_once(key: str, line: str) -> None:
    """Print ``line`` once per process (``key`` names it), to standard error (predictions keep standard output),
    from rank 0 only under Lightning's DDP: every rank resolves the same plans, and two ranks' lines ran into one.
    One write per line, so lines of processes sharing the stream do not interleave mid-line."""
    if key not in _said:
        _said.add(key)
        if _rank() == 0:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()


def say_choice(plan: Plan, detail: str = "") -> None:
    """Print the plan once per process and (cell, device, backend)."""
    say_once(f"plan {plan.cell} {plan.device} {plan.backend}", describe(plan, detail))
