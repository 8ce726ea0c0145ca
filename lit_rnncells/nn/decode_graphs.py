"""Greedy and beam-search decoding steps replayed as CUDA graphs (``backend: graphs`` on a GPU).

A search calls the model's ``decode_step`` once per target position, on one row per live hypothesis. Each call
launches every kernel of the step (embedding, the decoder cells, attention, the output layer, log-softmax)
from Python; on a GPU, at decoding's small row counts, those launches are most of its time.
:class:`GraphedDecoding` wraps a model (anything :func:`~lit_rnncells.nn.beam_search.search` decodes) so that
each ``decode_step`` replays one captured CUDA graph of the model's own step instead.

A graph has fixed shapes, and a search's rows shrink as sentences finish. So the rows are fixed per batch:
every step of a batch runs on as many rows as the batch's largest step so far (the sources at a greedy search's
first step, sources × beam after a beam search's first), and the finished rows' places keep stale but finite
values whose results are dropped. A batch thus records at most two graphs (greedy: one), keyed by the rows
and the shapes of the state and encoder outputs past the batch dimension (the source length: the
DataModules' ``length_buckets`` keep those few); at most :data:`MAX_DECODE_GRAPHS` are kept, the least
recently used dropped first. The encoder outputs are copied into the graph's inputs only when the search
hands a different tensor (after a reorder), the state and tokens every step.

Values are the model's step's: the graph replays the same kernels on the same values (the step runs its
cells' eager step inside the capture: :func:`~lit_rnncells.nn.recurrent.eager_steps`). With ``capture=False``
the same wrapper runs the step on its fixed-row buffers without a graph: the check of everything but the
capture itself on a machine without a GPU.
"""
from __future__ import annotations

import sys
import time
import weakref
from collections import OrderedDict
from typing import Any, Callable, List, Optional, Tuple

import torch
from torch import Tensor

from .recurrent import eager_steps
from .step import map_leaves, tensor_leaves

MAX_DECODE_GRAPHS = 16
"""At most this many captured decoding steps are kept per wrapped model."""

StepFn = Callable[[Tensor, Any, Any], Tuple[Tensor, Any, Tensor]]


def shape_key(obj: Any) -> Tuple:
    """What a graph's inputs must share besides the rows: structure, and each tensor's shape past the batch
    dimension, dtype and device."""
    if isinstance(obj, Tensor):
        return ("tensor", tuple(obj.shape[1:]), obj.dtype, str(obj.device))
    if isinstance(obj, (tuple, list)):
        return (type(obj).__name__, *(shape_key(o) for o in obj))
    if isinstance(obj, dict):
        return ("dict", *((k, shape_key(v)) for k, v in obj.items()))
    return ("value", obj)


def _rows(x: Tensor, rows: int) -> Tensor:
    """``x`` with ``rows`` rows: the first ones ``x``'s, the rest copies of its first row."""
    if x.shape[0] == rows:
        return x.clone()
    return torch.cat([x, x[:1].expand(rows - x.shape[0], *x.shape[1:])])


class _StepGraph:
    """One decode step captured at a fixed number of rows: its input buffers and its outputs."""

    def __init__(self, step: StepFn, prev: Tensor, state: Any, enc: Any, rows: int, capture: bool) -> None:
        self.prev = _rows(prev, rows)
        self.state = map_leaves(lambda t: _rows(t, rows), state)
        self.enc = map_leaves(lambda t: _rows(t, rows), enc)
        self._enc_from: List[Callable[[], Optional[Tensor]]] = [weakref.ref(t) for t in tensor_leaves(enc)]
        self.step = step
        self.graph: Optional[torch.cuda.CUDAGraph] = None
        self.out: Any = None
        if capture:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(2):  # lazy initialisation (cuBLAS workspaces, kernels' first loads) off the capture
                    step(self.prev, self.state, self.enc)
            torch.cuda.current_stream().wait_stream(side)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.out = step(self.prev, self.state, self.enc)

    def _copy_in(self, prev: Tensor, state: Any, enc: Any) -> None:
        n = prev.shape[0]
        self.prev[:n].copy_(prev)
        for static, given in zip(tensor_leaves(self.state), tensor_leaves(state)):
            static[:n].copy_(given)
        leaves = list(tensor_leaves(enc))
        if any(ref() is not leaf for ref, leaf in zip(self._enc_from, leaves)):
            for static, given in zip(tensor_leaves(self.enc), leaves):
                static[:n].copy_(given)
            self._enc_from = [weakref.ref(t) for t in leaves]

    def run(self, prev: Tensor, state: Any, enc: Any) -> Tuple[Tensor, Any, Tensor]:
        """The step's results for the ``prev.shape[0]`` rows given (copies: the next replay overwrites)."""
        self._copy_in(prev, state, enc)
        if self.graph is not None:
            self.graph.replay()
            out = self.out
        else:
            out = self.step(self.prev, self.state, self.enc)
        n = prev.shape[0]
        return map_leaves(lambda t: t[:n].clone(), out)


class GraphedDecoding:
    """``model`` as :func:`~lit_rnncells.nn.beam_search.search` sees it, each ``decode_step`` replaying a CUDA
    graph of ``model.decode_step`` (see the module docstring). ``capture=False`` runs the same fixed-row
    buffers without a graph (CPU). Everything else is ``model``'s."""

    def __init__(self, model: Any, capture: bool = True) -> None:
        self.model, self.capture = model, capture
        self._graphs: "OrderedDict[Tuple, _StepGraph]" = OrderedDict()
        self._rows = 0

    def __getstate__(self) -> dict:  # copies and pickles of the model take no graphs along
        return {"model": self.model, "capture": self.capture}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["model"], state["capture"])

    def __getattr__(self, name: str) -> Any:
        if name == "model" or name.startswith("__"):  # not set yet (unpickling); copy's and pickle's own hooks
            raise AttributeError(name)
        return getattr(self.model, name)

    def encode(self, source: Tensor, source_lengths: Tensor) -> Any:
        """The model's encoding; a new batch, so the rows start again from its first step's."""
        self._rows = 0
        return self.model.encode(source, source_lengths)

    def graph_count(self) -> int:
        """How many decoding steps this wrapper holds captured."""
        return len(self._graphs)

    def decode_step(self, prev_tokens: Tensor, state: Any, enc: Any) -> Tuple[Tensor, Any, Tensor]:
        stop = getattr(self.model, "stop_if_terminated", None)
        if stop is not None:  # the captured step would not read it: read here, between steps
            stop()
        self._rows = max(self._rows, prev_tokens.shape[0])
        key = (self._rows, shape_key((prev_tokens, state, enc)), torch.is_inference_mode_enabled(),
               torch.is_autocast_enabled("cuda") and torch.get_autocast_dtype("cuda"))
        graph = self._graphs.get(key)
        if graph is None:
            graph = self._record(key, prev_tokens, state, enc)
        else:
            self._graphs.move_to_end(key)
        return graph.run(prev_tokens, state, enc)

    def _record(self, key: Tuple, prev_tokens: Tensor, state: Any, enc: Any) -> _StepGraph:
        while len(self._graphs) >= MAX_DECODE_GRAPHS:
            self._graphs.popitem(last=False)
        started = time.perf_counter()
        with eager_steps():
            graph = _StepGraph(self.model.decode_step, prev_tokens, state, enc, self._rows, self.capture)
        self._graphs[key] = graph
        if self.capture:
            print(f"decoding graphs: captured a step of {self._rows} rows in {time.perf_counter() - started:.2f} s; "
                  f"{len(self._graphs)} held (at most {MAX_DECODE_GRAPHS})", file=sys.stderr, flush=True)
        return graph
