"""``Recurrent``: runs any cell over time with the torch.nn.GRU / LSTM interface."""
from __future__ import annotations

import contextlib
import functools
import inspect
import time
import warnings
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.nn.utils.prune import BasePruningMethod
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence
from torch.nn.utils.spectral_norm import SpectralNorm
from torch.nn.utils.weight_norm import WeightNorm

from ..utils.arguments import check_positive, check_probability
from ..cells.base import CellFactory, RecurrentCell, State
from ..cells.registry import cell_options, get_cell, no_cell_option_message
from .backend import Plan, check_backend, check_cell, entry, resolve, say_choice
from .compiled import compile_mode, compiled_calls, compiled_step, report_compiled_forward
from .graphs import run_graphed
from .loop import run_loop
from .step import _as_dtype_of, _step, map_state  # map_state kept importable from here
from .torch_rnn import cell_for, rename_torch_keys, torch_name


def _reverse_index(lengths: Tensor, steps: int) -> Tensor:
    """(T, B) time index that reverses each sequence within its own length."""
    t = torch.arange(steps, device=lengths.device).unsqueeze(1)
    rev = lengths.unsqueeze(0) - 1 - t
    return torch.where(rev >= 0, rev, t)


def _gather_time(x: Tensor, index: Tensor) -> Tensor:
    """x (T, B, ...) reordered along time by index (T, B)."""
    return x.gather(0, index.view(*index.shape, *([1] * (x.dim() - 2))).expand_as(x))


WEIGHT_HOOKS = (BasePruningMethod, WeightNorm, SpectralNorm)
"""The forward pre-hooks that recompute a module's weight from the parameters behind it: ``torch.nn.utils.prune``
(Lightning's ``ModelPruning``) and the hook-based ``weight_norm`` / ``spectral_norm``."""


def refresh_hooked_weights(cells: Iterable[nn.Module]) -> bool:
    """Run the :data:`WEIGHT_HOOKS` of every module of ``cells``, as calling the module runs them before its
    ``forward``. A layer steps its cells through ``project_input`` and ``step`` and reads their blocks' weights
    as attributes, calling neither, so these hooks never ran: the weight they manage, computed once, went stale
    (its graph freed by the first backward: "Trying to backward through the graph a second time"; a changed mask
    never reached the loop). Called once per layer call. Other pre-hooks are left alone: a cell is never called,
    so there is no input to hand them. Returns whether any such hook ran."""
    ran = False
    for cell in cells:
        for module in cell.modules():
            for hook in list(module._forward_pre_hooks.values()):
                if isinstance(hook, WEIGHT_HOOKS):
                    hook(module, ())
                    ran = True
    return ran


def check_hooked_weights_not_graphed(hooked: bool, plans: Sequence[Plan]) -> None:
    """A weight recomputed by a hook is a new tensor at each call, while a captured CUDA graph reads the tensors
    it was captured with: refuse the two together, before any capture, rather than replay stale weights."""
    if hooked and any(plan.step == "graphs" for plan in plans):
        raise ValueError("A cell's weight is recomputed by a pruning or weight-norm hook at each call, which a "
                         "captured CUDA graph cannot follow; run it with backend 'compiled' or 'loop' "
                         "(--model.init_args.backend compiled), or make the pruning permanent first "
                         "(torch.nn.utils.prune.remove).")


def run_cell(cell: RecurrentCell, x: Tensor, state: State, mask: Optional[Tensor] = None,
             want_aux: bool = False, compiled: bool = False, lengths: Optional[Tensor] = None,
             plan: Optional[Plan] = None) -> Tuple[Tensor, State, Optional[Tensor]]:
    """Run one cell over a time-major input ``(T, B, input_size)``.

    ``mask`` (T, B) marks real steps; a padded step leaves the state untouched. ``lengths`` (B,), when
    given, says ``mask`` is each sequence's first ``lengths`` steps, so where the plan allows it
    (:data:`~lit_rnncells.nn.backend.FUSED_PACKED_DEVICES`) a cell's fused kernel may take the padded batch
    packed (not when a sequence is empty). ``plan`` says how the loop runs (:func:`~lit_rnncells.nn.backend.resolve`;
    without one, the table's ``auto``, or ``compiled`` with ``compiled``).
    Returns the outputs ``(T, B, H)`` (zero at padded steps), the final state,
    and the summed auxiliary loss over real steps (``None`` unless ``want_aux``
    and the cell has one). Every backend gives the eager loop's values.
    """
    if plan is None:
        plan = resolve(type(cell), "compiled" if compiled else "auto", x.device.type)
    use_aux = want_aux and cell.has_aux_loss
    # Under mixed precision the matmuls run in half precision, but the state stays in the precision it came
    # in (float32): a half-precision state would lose the small updates of long sequences (fp16 has 10 bits).
    keep_precision = torch.is_autocast_enabled(x.device.type)
    if not use_aux and x.shape[0] > 0 and plan.fused:
        fused = None
        if mask is None:
            fused = cell.fused_sequence(x, state)
        elif lengths is not None and plan.packed and bool((lengths > 0).all()):
            fused = cell.fused_sequence(x, state, lengths=lengths)
        if fused is not None:
            if not keep_precision:
                return fused[0], fused[1], None
            # As from the step loop: outputs and state in the state's precision, not the kernel's half precision.
            return _as_dtype_of(fused[0], cell.output(state)), map_state(_as_dtype_of, fused[1], state), None
    if plan.step == "graphs" and x.shape[0] > 0:
        return run_graphed(cell, x, state, mask, use_aux, keep_precision, plan.defer, plan.captured == "compiled")
    compiled = plan.step == "compiled" and x.shape[0] > 0
    return run_loop(cell, x, state, mask, use_aux, keep_precision, compiled_step(cell) if compiled else None,
                    defer=plan.defer)


_EAGER_STEPS = [False]  # inside eager_steps(): step_cell runs the cell's eager step whatever the plan


@contextlib.contextmanager
def eager_steps() -> Iterator[None]:
    """Within the block, :func:`step_cell` runs each cell's eager step, not the compiled one: what a CUDA graph
    captures around whole decoding steps (:mod:`.decode_graphs`), where a compiled function's guards and
    first-call compilation have no place."""
    saved = _EAGER_STEPS[0]
    _EAGER_STEPS[0] = True
    try:
        yield
    finally:
        _EAGER_STEPS[0] = saved


def step_cell(cell: RecurrentCell, x_proj_t: Tensor, state: State, plan: Plan, mask_t: Optional[Tensor] = None,
              want_aux: bool = False) -> Tuple[State, Optional[Tensor]]:
    """One step of ``cell`` from its projected input ``(B, P)``, as ``plan`` runs steps (a decoder's call).

    Returns the new state and the step's auxiliary loss (``None`` unless ``want_aux`` and the cell has one):
    summed over the rows ``mask_t`` (B,) marks real when given, else per example. Through the compiled step
    (``plan.step`` compiled or graphs, where it compiles) the rows ``mask_t`` marks padded keep their state
    and the loss comes summed; the eager step computes every row."""
    use_aux = want_aux and cell.has_aux_loss
    if plan.step in ("compiled", "graphs") and entry(type(cell), plan.device).compiled_pays and not _EAGER_STEPS[0]:
        return compiled_step(cell)(cell, x_proj_t, state, mask_t, use_aux, False)
    if not use_aux:
        return cell.step(x_proj_t, state), None
    new_state, aux = cell.step_with_aux(x_proj_t, state)
    if aux is not None and mask_t is not None:
        aux = (aux * mask_t.to(aux.dtype)).sum()
    return new_state, aux


def check_input_dtype(x: Tensor, layer: nn.Module) -> None:
    """Floating-point input of the layer's own dtype (under autocast any float: the cast is autocast's), as
    ``torch.nn.GRU`` asks; otherwise one sentence, not a matmul's "mat1 and mat2 must have the same dtype"."""
    weight = next(layer.parameters(), None)
    if weight is None or x.dtype == weight.dtype:
        return
    if not x.is_floating_point():
        raise TypeError(f"Recurrent expects floating-point features, got {x.dtype}; embed token ids first (e.g. "
                        "torch.nn.Embedding) or convert the input with .float().")
    if not torch.is_autocast_enabled(x.device.type):
        raise TypeError(f"Recurrent's parameters are {weight.dtype} but the input is {x.dtype}; convert one to the "
                        f"other (x.to({weight.dtype}) or layer.to({x.dtype})), or run under torch.autocast.")


def _check_factory(factory: Callable[..., RecurrentCell]) -> None:
    """One sentence, before any cell is built, for a cell factory that cannot build: a cell instance where its class
    belongs (it was "Module [GRU] is missing the required forward function"), an option the cell does not have
    given through ``functools.partial`` (it was the TypeError of whichever part of the cell it reached), and a
    keyword-only option it requires left out (``MultiChannel`` without the cell it wraps)."""
    if isinstance(factory, nn.Module):
        name = type(factory).__name__
        raise TypeError(f"cell is a built {name} module; pass its class ({name}) or a factory such as "
                        f"functools.partial({name}, ...): Recurrent builds one cell per layer and direction.")
    cls = getattr(factory, "func", None) if isinstance(factory, functools.partial) else None
    if isinstance(cls, type) and issubclass(cls, RecurrentCell) and cls.__module__.startswith("lit_rnncells."):
        accepted = cell_options(cls)  # ours: their **options all reach a base class (a user's may read its own)
        unknown = [k for k in factory.keywords if k not in accepted]
        if unknown:
            raise ValueError(no_cell_option_message(cls, unknown[0]))
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):  # no signature to read: the call itself says what is wrong
        return
    missing = [p.name for p in parameters if p.kind is p.KEYWORD_ONLY and p.default is p.empty]
    if missing:
        name = getattr(getattr(factory, "func", factory), "__name__", repr(factory))
        given = ", ".join(f"{m}=..." for m in missing)
        raise ValueError(f"The cell {name} needs the option{'s' if len(missing) > 1 else ''} {', '.join(missing)}; "
                         f"pass functools.partial({name}, {given}) in Python, or give "
                         f"{' and '.join(missing)} under the cell's init_args in a config.")


class Recurrent(nn.Module):
    """A multi-layer, optionally bidirectional recurrent layer around any cell.

    Mirrors torch.nn.GRU: ``forward(x, state=None, lengths=None)`` returns
    ``(output, state)`` with output ``(B, T, D*H)`` when ``batch_first`` else
    ``(T, B, D*H)``, and state ``(L*D, B, H)`` (each leaf of a tuple state,
    e.g. LSTM's ``(h, c)``, stacked the same way). ``lengths`` (B,) marks real
    steps: padded steps leave the state untouched and give zero outputs, and the
    backward direction reverses each sequence within its own length. A
    ``PackedSequence`` input (as torch.nn.GRU takes) carries its lengths; its
    output is packed the same way.

    ``cell`` is a cell factory ``(input_size, hidden_size) -> RecurrentCell``
    (any cell class, or a ``functools.partial`` of one) or a registered name.
    With ``return_aux=True`` the forward also returns the auxiliary loss of the
    cells (mean over real tokens, summed over layers and directions; zero when
    no cell has one), which tasks add to their loss.

    ``dropout`` drops each layer's output before the next layer reads it, in training (not after the last
    layer: with one layer it warns and does nothing, as torch.nn.GRU's does).

    ``device`` and ``dtype`` place and type the parameters as torch.nn.GRU's do (``dtype``: a floating type).

    ``backend`` says how the time loop runs: ``auto`` (what docs/measured.md measured fastest for the cell
    on the device), ``loop``, ``compiled``, ``graphs`` or ``fused`` (:mod:`lit_rnncells.nn.backend`, the one
    table that decides); ``None`` takes ``$LIT_RNNCELLS_BACKEND``, else ``auto``. Values and gradients are
    the eager loop's under every backend. ``compile=True`` is the deprecated spelling of ``backend='compiled'``.
    """

    def __init__(self, cell: Union[CellFactory, str], input_size: int, hidden_size: int,
                 num_layers: int = 1, bidirectional: bool = False, dropout: float = 0.0,
                 batch_first: bool = False, compile: bool = False, backend: Optional[str] = None, *,
                 device: Optional[Union[torch.device, str]] = None, dtype: Optional[torch.dtype] = None) -> None:
        super().__init__()
        check_positive(input_size=input_size, hidden_size=hidden_size, num_layers=num_layers)
        check_probability(dropout=dropout)
        if dtype is not None and not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
            raise TypeError(f"dtype must be a floating torch dtype (torch.float32, torch.float64, torch.bfloat16, "
                            f"...), got {dtype!r}.")
        if dropout > 0 and num_layers == 1:  # torch.nn.GRU warns the same: nothing to drop between
            warnings.warn(f"Recurrent's dropout={dropout} drops between stacked layers only, so with num_layers=1 "
                          "it does nothing; stack layers (num_layers >= 2) or drop the outputs yourself.",
                          UserWarning, stacklevel=2)
        factory = get_cell(cell) if isinstance(cell, str) else cell
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bidirectional = bidirectional
        self.num_directions = 2 if bidirectional else 1
        self.dropout = dropout
        self.batch_first = batch_first
        self._plans: Dict[str, List[Plan]] = {}
        self._said_compile = bool(compile) and backend is None  # the deprecated spelling, kept in the repr
        self.backend = check_backend(backend, compile)
        if self.backend == "graphs":
            check_cell(RecurrentCell, "graphs")  # before building cells: CUDA first
        if self.backend == "compiled":
            compile_mode()  # an unknown $LIT_RNNCELLS_COMPILE_MODE is refused here, before any training
        _check_factory(factory)
        cells = []
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else hidden_size * self.num_directions
            for _ in range(self.num_directions):
                built = factory(layer_input, hidden_size)
                if not isinstance(built, RecurrentCell):
                    raise TypeError(f"The cell factory returned {type(built).__name__}, not a RecurrentCell; "
                                    "pass a cell class from lit_rnncells.cells or a factory building one.")
                cells.append(built)
        self.cells = nn.ModuleList(cells)
        for built in cells:
            check_cell(type(built), self.backend)  # fused without a kernel, graphs without CUDA: refused at start
        if device is not None or dtype is not None:  # torch.nn.GRU's factory arguments
            self.to(device=device, dtype=dtype)

    @classmethod
    def from_torch(cls, module: nn.RNNBase, backend: Optional[str] = None) -> "Recurrent":
        """The layer that runs a ``torch.nn.RNN`` (tanh), ``GRU`` or ``LSTM`` exactly: the same cell equations,
        sizes, layers, directions, dropout and ``batch_first``, a copy of its weights on their device and dtype,
        and its training mode. Outputs, states and gradients equal the module's (tested). A configuration no
        cell here runs (ReLU, ``proj_size``, ``bias=False``) is a ``ValueError`` naming it."""
        cell = cell_for(module)
        weight = module.weight_ih_l0
        layer = cls(cell, module.input_size, module.hidden_size, num_layers=module.num_layers,
                    bidirectional=module.bidirectional, dropout=module.dropout if module.num_layers > 1 else 0.0,
                    batch_first=module.batch_first, backend=backend, device=weight.device, dtype=weight.dtype)
        layer.load_state_dict(module.state_dict())
        return layer.train(module.training)

    def __getattr__(self, name: str) -> Any:
        """torch.nn.GRU's parameter names, ``layer.weight_hh_l0`` or ``layer.bias_ih_l1_reverse``, read the
        parameter of that layer's and direction's cell (code written for torch, e.g. an orthogonal initialisation
        of ``weight_hh_l0``, runs unchanged), for any cell that has a parameter of that name."""
        try:
            return super().__getattr__(name)
        except AttributeError:
            parsed = torch_name(name)
            if parsed is not None and "cells" in self._modules:
                parameter, layer, direction = parsed
                index = layer * self.num_directions + direction
                if direction < self.num_directions and index < len(self.cells) \
                        and parameter in self.cells[index]._parameters:
                    return self.cells[index]._parameters[parameter]
            raise

    @property
    def all_weights(self) -> List[List[nn.Parameter]]:
        """torch.nn.GRU's ``all_weights``: each cell's parameters, one list per layer and direction, in order."""
        return [list(cell.parameters()) for cell in self.cells]

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs) -> None:
        """torch.nn.RNN / GRU / LSTM's names (``weight_ih_l0``, ``bias_hh_l1_reverse``, ...) load into the cells
        that run their equations (Elman, GRU, LSTM), so ``load_state_dict(torch_gru.state_dict())`` works."""
        rename_torch_keys(state_dict, prefix, self.cells, self.num_directions)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    @property
    def backend(self) -> str:
        """How the time loop runs (see the class docstring); setting it drops the plans resolved so far."""
        return self._backend

    @backend.setter
    def backend(self, value: str) -> None:
        self._backend = check_backend(value)
        self._plans = {}

    @property
    def compiled(self) -> bool:
        """Whether ``backend`` is ``compiled`` (the attribute ``compile=True`` used to set; kept one release)."""
        return self.backend == "compiled"

    @compiled.setter
    def compiled(self, value: bool) -> None:
        self.backend = "compiled" if value else "auto"

    @contextlib.contextmanager
    def using(self, backend: str) -> Iterator["Recurrent"]:
        """Run with ``backend`` inside the block, then go back (the figure hooks record with ``loop``)."""
        saved = self.backend
        self.backend = backend
        try:
            yield self
        finally:
            self.backend = saved

    def plans(self, device_type: str) -> List[Plan]:
        """Each cell's plan on ``device_type``, resolved from the table on first use and said once."""
        plans = self._plans.get(device_type)
        if plans is None:
            plans = [resolve(type(c), self.backend, device_type) for c in self.cells]
            for plan in plans:
                say_choice(plan)
            self._plans[device_type] = plans
        return plans

    def cell_step(self, x_proj_t: Tensor, state: State, layer: int = 0, direction: int = 0,
                  mask_t: Optional[Tensor] = None, want_aux: bool = False) -> Tuple[State, Optional[Tensor]]:
        """One step of one cell (layer, direction) from its projected input ``(B, P)``, run as this layer's
        backend runs steps: :func:`step_cell`."""
        index = layer * self.num_directions + direction
        cell = self.cells[index]
        return step_cell(cell, x_proj_t, state, self.plans(x_proj_t.device.type)[index], mask_t, want_aux)

    @property
    def has_aux_loss(self) -> bool:
        return any(c.has_aux_loss for c in self.cells)

    @property
    def aux_loss_name(self) -> str:
        """The name tasks log the auxiliary loss under (e.g. ``zone_disagreement``)."""
        names = sorted({c.aux_loss_name for c in self.cells if c.has_aux_loss})
        return names[0] if len(names) == 1 else "aux_loss"

    def cell(self, layer: int = 0, direction: int = 0) -> RecurrentCell:
        """The cell of one layer and direction (0 forward, 1 backward)."""
        return self.cells[layer * self.num_directions + direction]  # type: ignore[return-value]

    def initial_state(self, batch_size: int, *, device=None, dtype=None) -> State:
        """The stacked zero state ``(L*D, B, ...)`` for a batch."""
        return self._stack([c.initial_state(batch_size, device=device, dtype=dtype) for c in self.cells])

    @staticmethod
    def _stack(states: Sequence[State]) -> State:
        return map_state(lambda *leaves: torch.stack(leaves), *states)

    def _unstack(self, state: State, batch: int) -> List[State]:
        n = len(self.cells)

        def leaf(i: int):
            return lambda s: s[i]

        def check(s: Tensor) -> Tensor:
            if s.dim() < 2 or s.shape[0] != n:
                raise ValueError(f"The initial state has shape {tuple(s.shape)} but this layer needs "
                                 f"num_layers * num_directions = {n} entries on dim 0, then the batch.")
            if s.shape[1] != batch:
                raise ValueError(f"The initial state has shape {tuple(s.shape)}, for a batch of {s.shape[1]}, but the "
                                 f"input is a batch of {batch}; pass a state of shape ({n}, {batch}, ...).")
            return s

        map_state(check, state)
        return [map_state(leaf(i), state) for i in range(n)]

    def forward(self, x: Union[Tensor, PackedSequence], state: Optional[State] = None,
                lengths: Optional[Tensor] = None, *, return_aux: bool = False, hx: Optional[State] = None):
        """``torch.nn.GRU``'s call: ``x`` of shape ``(T, B, input_size)`` (``(B, T, ...)`` with ``batch_first``), a
        ``PackedSequence``, or one unbatched sequence ``(T, input_size)``; ``state`` (or torch's name ``hx``) the
        initial state, ``(num_layers * num_directions, B, hidden_size)`` for ``h`` (without ``B`` for an unbatched
        input); ``lengths`` the real length of each padded sequence. Returns ``(output, state)``, and the auxiliary
        loss third with ``return_aux``."""
        if hx is not None:
            if state is not None:
                raise ValueError("Pass the initial state once: as state or as hx (torch.nn.GRU's name), not both.")
            state = hx
        if isinstance(x, PackedSequence):
            return self._forward_packed(x, state, lengths, return_aux)
        if x.dim() == 2:
            return self._forward_unbatched(x, state, lengths, return_aux)
        plans = self.plans(x.device.type)
        if self.backend != "compiled" and not any(p.step == "compiled" for p in plans):
            return self._forward(x, state, lengths, return_aux)
        started, calls = time.perf_counter(), compiled_calls()
        result = self._forward(x, state, lengths, return_aux)
        report_compiled_forward(self.cells, x.device, time.perf_counter() - started, compiled_calls() > calls,
                                padded=lengths is not None)
        return result

    def _forward_packed(self, packed: PackedSequence, state: Optional[State], lengths: Optional[Tensor],
                        return_aux: bool):
        """``torch.nn.GRU``'s PackedSequence input: the padded batch and its lengths run as above; the output comes
        back packed as the input was (its batch sizes and sorting), the state in the input's batch order."""
        if lengths is not None:
            raise ValueError("A PackedSequence carries its own lengths; pass lengths only with a padded tensor.")
        padded, lengths = pad_packed_sequence(packed, batch_first=self.batch_first)  # the batch's own order
        result = self.forward(padded, state, lengths.to(padded.device), return_aux=return_aux)
        output, order = result[0], packed.sorted_indices
        batch_dim = 0 if self.batch_first else 1
        if order is not None:  # into the packed order, which the batch sizes describe
            output, lengths = output.index_select(batch_dim, order), lengths[order.cpu()]
        data = pack_padded_sequence(output, lengths, batch_first=self.batch_first).data
        return (PackedSequence(data, packed.batch_sizes, packed.sorted_indices, packed.unsorted_indices),
                *result[1:])

    def _forward_unbatched(self, x: Tensor, state: Optional[State], lengths: Optional[Tensor], return_aux: bool):
        """``torch.nn.GRU``'s unbatched input: one sequence ``(T, input_size)`` (with ``batch_first`` too) and a
        state without the batch dimension, run as a batch of one and returned without it."""
        if x.shape[-1] != self.input_size:
            self._shape_error(x)
        if lengths is not None:
            raise ValueError("An unbatched input (T, input_size) is one sequence of its full length; pass lengths "
                             "only with a batch.")
        if state is not None:
            def one(s: Tensor, batched: Tensor) -> Tensor:  # batched: a cell's own state for a batch of one
                if s.shape != (len(self.cells), *batched.shape[1:]):
                    want = ", ".join(str(n) for n in (len(self.cells), *batched.shape[1:]))
                    raise ValueError(f"For an unbatched input (T, input_size) the initial state has no batch "
                                     f"dimension: shape ({want}), got {tuple(s.shape)}.")
                return s.unsqueeze(1)
            state = map_state(one, state, self.cells[0].initial_state(1, device=x.device, dtype=x.dtype))
        batch_dim = 0 if self.batch_first else 1
        result = self.forward(x.unsqueeze(batch_dim), state, return_aux=return_aux)
        return (result[0].squeeze(batch_dim), map_state(lambda s: s.squeeze(1), result[1]), *result[2:])

    def _shape_error(self, x: Tensor) -> None:
        raise ValueError(f"Recurrent expects input of shape ({'B, T' if self.batch_first else 'T, B'}, "
                         f"{self.input_size}), or one unbatched sequence (T, {self.input_size}), got {tuple(x.shape)}.")

    def _forward(self, x: Tensor, state: Optional[State], lengths: Optional[Tensor], return_aux: bool):
        if x.dim() != 3 or x.shape[-1] != self.input_size:
            self._shape_error(x)
        check_input_dtype(x, self)
        hooked = refresh_hooked_weights(self.cells)
        if self.batch_first:
            x = x.transpose(0, 1)
        steps, batch = x.shape[0], x.shape[1]
        mask = None
        if lengths is not None:
            lengths = torch.as_tensor(lengths, device=x.device)
            if lengths.shape != (batch,):
                raise ValueError(f"lengths must have shape ({batch},), got {tuple(lengths.shape)}.")
            if bool((lengths < 0).any()) or bool((lengths > steps).any()):
                raise ValueError(f"lengths must lie in [0, {steps}] (the padded length).")
            mask = torch.arange(steps, device=x.device).unsqueeze(1) < lengths.unsqueeze(0)
            if bool(mask.all()):
                mask = None
        if state is None:
            states = [c.initial_state(batch, device=x.device, dtype=x.dtype) for c in self.cells]
        else:
            states = self._unstack(state, batch)
        plans = self.plans(x.device.type)
        check_hooked_weights_not_graphed(hooked, plans)
        rev_index = None
        if self.bidirectional and lengths is not None and mask is not None:
            rev_index = _reverse_index(lengths, steps)
        final: List[State] = []
        aux_total = x.new_zeros(())
        layer_input = x
        for layer in range(self.num_layers):
            outs = []
            for direction in range(self.num_directions):
                i = layer * self.num_directions + direction
                cell = self.cells[i]
                inp = layer_input
                if direction == 1:
                    inp = inp.flip(0) if rev_index is None else _gather_time(inp, rev_index)
                # reversed within each length, real steps still come first: the same mask applies
                out, st, aux = run_cell(cell, inp, states[i], mask, want_aux=return_aux, plan=plans[i],
                                        lengths=None if mask is None else lengths)
                if direction == 1:
                    out = out.flip(0) if rev_index is None else _gather_time(out, rev_index)
                outs.append(out)
                final.append(st)
                if aux is not None:
                    aux_total = aux_total + aux
            layer_input = outs[0] if len(outs) == 1 else torch.cat(outs, dim=-1)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                layer_input = F.dropout(layer_input, self.dropout, training=True)
        output = layer_input.transpose(0, 1) if self.batch_first else layer_input
        stacked = self._stack(final)
        if not return_aux:
            return output, stacked
        if self.has_aux_loss:
            tokens = mask.sum() if mask is not None else torch.tensor(steps * batch, device=x.device)
            aux_total = aux_total / tokens.clamp_min(1).to(aux_total.dtype)
        return output, stacked, aux_total

    def flatten_parameters(self) -> None:
        """Nothing to do, so code written for torch.nn.GRU / LSTM that calls it runs unchanged: each cell keeps its
        own parameters (what DropConnect replaces and a user's cell defines), and the fused GRU, LSTM and Elman
        kernels read them as they are, so there is no single weight buffer to compact."""

    def extra_repr(self) -> str:
        return (f"{self.input_size}, {self.hidden_size}, num_layers={self.num_layers}, "
                f"bidirectional={self.bidirectional}, dropout={self.dropout}, batch_first={self.batch_first}"
                + (f", backend={self.backend}" if self.backend != "auto" else "")
                + (", compile=True" if self._said_compile and self.compiled else ""))
