"""``backend: graphs``: a cell's whole time loop, forward and backward, replayed as CUDA graphs.

The input projection (one large matmul before the loop, as in every backend), the step loop over all T steps,
the masks, the outputs and the auxiliary loss run inside one captured graph per (cell, batch size, length,
dtype, training or not, gradients or not, autocast), built by ``torch.cuda.make_graphed_callables`` when
gradients are on (it captures the backward too) and by one ``torch.cuda.CUDAGraph`` without them. Later
batches of that shape replay it: one launch for what the eager loop launches per step. Padded tasks keep the
shapes few with the DataModules' ``length_buckets``. Graphs are kept in a capped cache (:data:`MAX_GRAPHS`,
least recently used dropped first); each capture prints the count and the memory the graphs hold.

Inside the capture runs the eager loop (:func:`~lit_rnncells.nn.loop.run_loop`), so values are the loop's
exactly; or, where the backend table's row says ``capture_compiled``, the same loop through the compiled step
(:mod:`.compiled`, torch's default mode): Inductor's fused kernels, a few per step instead of one per operation,
replayed without a launch from Python each. The capture's warm-up runs (three, on a side stream) compile it, so
no compiling happens while capturing. The loop reads no value back to the host (the mask is a tensor, every step
masked), so it captures.
No parameter is used outside the capture: a parameter both the projection and the step use (a shared deep
transition's bias, GRUDT's and the MZUs') would get gradients from the default stream and the capture's, which
torch 2.11 refused on an H200 (``cudaErrorStreamCaptureImplicit``, docs/measured.md).
Needs CUDA; parameters must stay the same tensors between calls (DropConnect, which swaps in dropped copies
of a weight each step, does not suit it).
"""
from __future__ import annotations

import sys
import time
from collections import OrderedDict
from typing import Callable, Dict, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

from ..cells.base import RecurrentCell, State
from .compiled import compiled_step
from .loop import run_loop

MAX_GRAPHS = 32
"""At most this many captured loops are kept per process (each holds its own activation memory)."""

_GRAPHS: "OrderedDict[tuple, Tuple[Callable, int]]" = OrderedDict()  # key -> (replay function, bytes held)


class _WholeLoop(nn.Module):
    """The projection and the step loop as a module of tensors only: ``(x, mask, *state leaves) -> (out, aux,
    *final)``."""

    def __init__(self, cell: RecurrentCell, tuple_state: bool, use_aux: bool, keep_precision: bool,
                 defer: bool, compiled: bool = False) -> None:
        super().__init__()
        self.cell = cell
        self.tuple_state, self.use_aux, self.keep_precision, self.defer = tuple_state, use_aux, keep_precision, defer
        self.step = compiled_step(cell, in_capture=True) if compiled else None

    def forward(self, x: Tensor, mask: Tensor, *leaves: Tensor) -> Tuple[Tensor, ...]:
        state: State = tuple(leaves) if self.tuple_state else leaves[0]
        out, final, aux = run_loop(self.cell, x, state, mask, self.use_aux, self.keep_precision, self.step,
                                   defer=self.defer)
        aux = out.new_zeros(()) if aux is None else aux
        return (out, aux, *(final if isinstance(final, tuple) else (final,)))


def _capture_forward(loop: _WholeLoop, args: Tuple[Tensor, ...]) -> Callable:
    """A forward-only graph of ``loop`` (no gradients): static inputs copied in, outputs cloned out."""
    static_in = tuple(a.clone() for a in args)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        loop(*static_in)  # warm up (lazy initialisation, cuBLAS workspaces) off the capture
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = loop(*static_in)

    def replay(*inputs: Tensor) -> Tuple[Tensor, ...]:
        for static, given in zip(static_in, inputs):
            static.copy_(given)
        graph.replay()
        return static_out

    replay.graph = graph  # type: ignore[attr-defined]  (kept alive with the function)
    return replay


def _key(cell: RecurrentCell, args: Tuple[Tensor, ...], use_aux: bool, keep_precision: bool, defer: bool,
         compiled: bool) -> tuple:
    autocast = torch.is_autocast_enabled("cuda")
    return (id(cell), cell.training, torch.is_grad_enabled(), use_aux, keep_precision, defer, compiled,
            autocast and torch.get_autocast_dtype("cuda"),
            tuple((tuple(a.shape), a.dtype, a.requires_grad, a.device) for a in args))


def _graphed(cell: RecurrentCell, args: Tuple[Tensor, ...], tuple_state: bool, use_aux: bool,
             keep_precision: bool, defer: bool, compiled: bool) -> Callable:
    """The cached replay function for this call's shape, captured on first sight."""
    key = _key(cell, args, use_aux, keep_precision, defer, compiled)
    hit = _GRAPHS.get(key)
    if hit is not None:
        _GRAPHS.move_to_end(key)
        return hit[0]
    while len(_GRAPHS) >= MAX_GRAPHS:
        _GRAPHS.popitem(last=False)
    torch.cuda.synchronize()
    before, started = torch.cuda.memory_reserved(), time.perf_counter()
    loop = _WholeLoop(cell, tuple_state, use_aux, keep_precision, defer, compiled).train(cell.training)
    if torch.is_grad_enabled():
        # Fresh tensors become the graph's static inputs (the real ones are copied in at each call), so the
        # capture and its warm-up runs stay out of the caller's autograd graph.
        sample = tuple(a.detach().clone().requires_grad_(a.requires_grad) for a in args)
        fn = torch.cuda.make_graphed_callables(loop, sample, allow_unused_input=True)
    else:
        fn = _capture_forward(loop, args)
    torch.cuda.synchronize()
    held = max(torch.cuda.memory_reserved() - before, 0)
    _GRAPHS[key] = (fn, held)
    what = f"{type(cell).__name__}{' (compiled step)' if compiled else ''}"
    print(f"recurrence graphs: captured {what} at batch {args[0].shape[1]}, length {args[0].shape[0]}"
          f"{'' if torch.is_grad_enabled() else ', no gradients'} in "
          f"{time.perf_counter() - started:.1f} s; {len(_GRAPHS)} held (at most {MAX_GRAPHS}), "
          f"{sum(h for _, h in _GRAPHS.values()) / 2**20:.0f} MiB", file=sys.stderr, flush=True)
    return fn


def copy_gradients_out(outputs: Sequence[Tensor]) -> None:
    """The replayed backward hands its inputs and the parameters their gradients in the graph's static buffers,
    which the next replay overwrites (pytorch/pytorch#181723): autograd kept such a buffer as a parameter's
    ``.grad``, so two backward passes before an optimiser step (``accumulate_grad_batches``) gave twice the second's
    gradient, and a second replay in one backward pass could overwrite an input's gradient before the layer below
    read it. A hook on this call's node copies them as they leave it."""
    node = next((t.grad_fn for t in outputs if t.grad_fn is not None), None)
    if node is not None:
        node.register_hook(lambda grad_inputs, _: tuple(None if g is None else g.clone() for g in grad_inputs))


def graph_stats() -> Dict[str, int]:
    """How many captured loops this process holds and the memory they took when captured (bytes)."""
    return {"graphs": len(_GRAPHS), "bytes": sum(h for _, h in _GRAPHS.values())}


def clear_graphs() -> None:
    """Drop every captured loop (their memory goes back to torch's allocator)."""
    _GRAPHS.clear()


def graph_inputs(x: Tensor, state: State, mask: Optional[Tensor]) -> Tuple[Tensor, ...]:
    """The captured loop's inputs: the layer's input itself (the projection runs inside the graph), the mask
    (all true for an unpadded batch: one graph for padded and unpadded batches of a shape) and the state's
    leaves. None of them is computed from a parameter."""
    if mask is None:
        mask = torch.ones(x.shape[:2], dtype=torch.bool, device=x.device)
    return (x, mask, *(state if isinstance(state, tuple) else (state,)))


def run_graphed(cell: RecurrentCell, x: Tensor, state: State, mask: Optional[Tensor], use_aux: bool,
                keep_precision: bool, defer: bool = False, compiled: bool = False
                ) -> Tuple[Tensor, State, Optional[Tensor]]:
    """:func:`~lit_rnncells.nn.recurrent.run_cell`'s loop as a replayed CUDA graph; the same values.
    ``defer``: inside the capture the recurrent maps' weight gradients are one product after the loop
    (:mod:`lit_rnncells.cells.deferred`), whose Python autograd nodes run once, at capture. ``compiled``: the
    capture holds the compiled step's kernels (equal to the loop's values within float rounding)."""
    if x.device.type != "cuda":
        raise ValueError(f"backend='graphs' needs a CUDA device; this layer runs on {x.device.type}: use backend "
                         "auto, loop or compiled there")
    args = graph_inputs(x, state, mask)
    tuple_state = isinstance(state, tuple)
    autocast = torch.is_autocast_enabled("cuda")
    # Autocast's cache of cast weights would hand the graph tensors freed after the outer region: none inside.
    context = torch.autocast("cuda", dtype=torch.get_autocast_dtype("cuda"), cache_enabled=False) if autocast \
        else torch.autocast("cuda", enabled=False)
    with context:
        fn = _graphed(cell, args, tuple_state, use_aux, keep_precision, defer, compiled)
        # Each replay writes into the same memory: clone, so a later replay leaves this call's results alone.
        replayed = fn(*args)
        copy_gradients_out(replayed)
        out, aux, *final = (t.clone() for t in replayed)
    final_state: State = tuple(final) if tuple_state else final[0]
    return out, final_state, aux if use_aux and cell.has_aux_loss else None
