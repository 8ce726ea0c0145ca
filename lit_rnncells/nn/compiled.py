"""The compiled time step of ``Recurrent(..., backend='compiled')`` (:mod:`.backend` decides where it runs).

``Recurrent`` runs every cell as: the input maps for all steps at once (``project_input``), a
Python loop over ``step``, then the outputs (``output_sequence``). With ``backend='compiled'`` the loop
body (:func:`~lit_rnncells.nn.step._step`: the cell's step, the padding mask, the precision
kept and the auxiliary loss) runs through ``torch.compile``: Inductor fuses the step's pointwise
ops around its matmuls into a few kernels, and AOTAutograd does the same for its backward. Any
cell compiles, unchanged: the graph is traced from its ``step``.

One compiled function per cell class (a copy of the step's code object, so each class has its own
compiler cache and recompilation limit, and layers and directions of one class share the graphs).
The batch dimension is marked dynamic from the first call and the step never sees the sequence
length, so batches of any length and size reuse one graph per variant (training or not, with or
without the auxiliary loss, autocast or not). See docs/measured.md ("Why the step is compiled") for why
the step and not the whole loop is compiled.
"""
from __future__ import annotations

import os
import types
from typing import Callable, Dict, Iterable, Optional, Set, Tuple

import torch
from torch import Tensor

from ..cells.base import RecurrentCell, State
from .backend import entry
from .step import _step, map_state

StepFn = Callable[[RecurrentCell, Tensor, State, Optional[Tensor], bool, bool], Tuple[State, Optional[Tensor]]]

_COMPILED: Dict[Tuple[type, Optional[str]], StepFn] = {}  # keyed by cell class and compile mode
_CODE: Dict[Tuple[type, Optional[str]], types.CodeType] = {}
_calls = 0  # compiled steps run in this process: a forward that ran none compiled nothing
_reported: Set[str] = set()  # what was said already ("compile time", and each cell class kept eager)

MODE_VARIABLE = "LIT_RNNCELLS_COMPILE_MODE"
MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")  # the modes that record the step as CUDA graphs


def compile_mode() -> Optional[str]:
    """``torch.compile``'s mode for the step: ``$LIT_RNNCELLS_COMPILE_MODE`` if set (``reduce-overhead`` records
    the step's kernels as CUDA graphs on a GPU), else torch's default. Read when a cell class first compiles
    in a mode; docs/measured.md, "On a GPU", has what each mode measured."""
    mode = os.environ.get(MODE_VARIABLE) or None
    if mode is not None and mode not in MODES:
        raise ValueError(f"{MODE_VARIABLE}={mode!r} is not a torch.compile mode; set it to one of "
                         f"{', '.join(MODES)}, or unset it for the default")
    return mode


def _fresh_copy(fn: Callable, name: str) -> Callable:
    """``fn`` with its own code object: the compiler keys its cache (and recompilation limit) on it."""
    code = fn.__code__.replace(co_name=name, co_qualname=name) if hasattr(fn.__code__, "co_qualname") \
        else fn.__code__.replace(co_name=name)
    return types.FunctionType(code, fn.__globals__, name, fn.__defaults__, fn.__closure__)


def use_compiled(cell: RecurrentCell, device: torch.device) -> bool:
    """Whether a ``compiled`` request compiles ``cell``'s step on ``device``: the backend table's
    ``compiled_pays`` for the cell and device type (:mod:`lit_rnncells.nn.backend`; other devices: always)."""
    return entry(type(cell), torch.device(device).type).compiled_pays


def compiled_step(cell: RecurrentCell, in_capture: bool = False) -> StepFn:
    """The compiled loop body for ``cell``'s class (built on first use, shared by all its instances).
    ``in_capture``: for a loop that ``backend: graphs`` captures whole (:mod:`.graphs`), compiled in torch's
    default mode whatever ``$LIT_RNNCELLS_COMPILE_MODE`` says: a mode that records its own CUDA graphs cannot
    record inside another capture."""
    cls = type(cell)
    mode = None if in_capture else compile_mode()
    fn = _COMPILED.get((cls, mode))
    if fn is None:
        body = _fresh_copy(_step, f"step_{cls.__name__}")
        _CODE[(cls, mode)] = body.__code__
        compiled = torch.compile(body, dynamic=None, mode=mode)
        graphs = mode in CUDA_GRAPH_MODES

        def fn(cell, x_t, state, mask_t, use_aux, keep_precision, _compiled=compiled, _graphs=graphs):
            global _calls
            _calls += 1
            for leaf in (x_t, mask_t, *(state if isinstance(state, tuple) else (state,))):
                if leaf is not None:
                    torch._dynamo.maybe_mark_dynamic(leaf, 0)
            new_state, aux_t = _compiled(cell, x_t, state, mask_t, use_aux, keep_precision)
            if _graphs and not torch.is_grad_enabled():
                # Without gradients a CUDA graph replays into the same output memory, so the next step would
                # overwrite this one's state, which the loop keeps for the outputs (and decoding for its
                # hypotheses). A copy per step keeps it; training keeps outputs alive for the backward anyway.
                new_state = map_state(torch.clone, new_state)
                aux_t = None if aux_t is None else aux_t.clone()
            return new_state, aux_t

        _COMPILED[(cls, mode)] = fn
    return fn


def compiled_graph_count(cls: type) -> int:
    """How many graphs the compiler holds for ``cls``'s step in the current compile mode (one per variant; more
    means recompilations)."""
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    code = _CODE.get((cls, compile_mode()))
    return 0 if code is None else len(_debug_get_cache_entry_list(code))


def compiled_calls() -> int:
    """How many compiled steps this process has run (the layer compares it before and after a forward)."""
    return _calls


def report_compiled_forward(cells: Iterable[RecurrentCell], device: torch.device, seconds: float,
                            ran_compiled: bool, padded: bool = False) -> None:
    """Print, once per process, how long the first forward that ran a compiled step took (mostly compiling);
    once per cell class whose step stays eager on ``device`` (the backend table's ``compiled_pays`` False),
    that it does; and once, when CUDA graphs ran a padded batch, that they suit fixed-length batches only."""
    if ran_compiled and "compile time" not in _reported:
        _reported.add("compile time")
        print(f"lit_rnncells: compiled the recurrent step in {seconds:.1f} s (first forward; the backward compiles "
              "on its first call; torch's compiler cache makes later runs faster)", flush=True)
    if ran_compiled and padded and device.type == "cuda" and "padded graphs" not in _reported \
            and compile_mode() in CUDA_GRAPH_MODES:
        _reported.add("padded graphs")
        print(f"lit_rnncells: {MODE_VARIABLE}={compile_mode()} records CUDA graphs for each sequence length, and this "
              "task's batches are padded: lengths that vary between batches keep it recording (a Multi30k fit ran 6x "
              f"slower than eager); unset {MODE_VARIABLE} for this task, or use backend graphs with the data's "
              "length_buckets (docs/measured.md, \"On a GPU\")", flush=True)
    for cell in cells:
        name = type(cell).__name__
        if not use_compiled(cell, device) and name not in _reported:
            _reported.add(name)
            print(f"lit_rnncells: backend compiled: {name} keeps its eager step on {device.type} (compiled, its step "
                  "measured slower there; docs/measured.md, \"Compiled recurrence\")", flush=True)
