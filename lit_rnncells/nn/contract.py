"""The cell contract, as checks anyone can run on a cell: the package's own cells (``tests/test_cell_contract.py``
runs every check on every registered cell) and a user's cell defined outside the package::

    from lit_rnncells.nn import check_cell
    check_cell(MyCell)                       # a class, a factory (input_size, hidden_size) -> cell, or a name

Each check builds the cell through :class:`~lit_rnncells.nn.Recurrent`, the layer every task uses, and raises
:class:`CellContractError` naming the check and what went wrong. See docs/cells.md, "The cell contract in full".
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Tuple, Union

import torch
from torch.func import functional_call

from .recurrent import Recurrent

CellLike = Union[str, type, Callable[[int, int], Any]]
INPUT, HIDDEN = 6, 8


class CellContractError(AssertionError):
    """A cell broke the contract; the message names the check and the difference found."""


def leaves(state: Any) -> List[torch.Tensor]:
    return list(state) if isinstance(state, tuple) else [state]


def _layer(cell: CellLike, input_size: int = INPUT, hidden_size: int = HIDDEN, **options: Any) -> Recurrent:
    return Recurrent(cell, input_size, hidden_size, batch_first=True, **options)


def _expect(condition: bool, check: str, why: str) -> None:
    if not condition:
        raise CellContractError(f"cell contract, {check}: {why}")


def _close(got: torch.Tensor, want: torch.Tensor, check: str, what: str, **tolerance: float) -> None:
    try:
        torch.testing.assert_close(got, want, **tolerance)
    except AssertionError as error:
        raise CellContractError(f"cell contract, {check}: {what} differ ({str(error).splitlines()[0]})") from None


def check_shapes(cell: CellLike, bidirectional: bool = False) -> None:
    """Two layers: outputs (B, T, directions·H), every state leaf (layers·directions, B, ...), finite."""
    out, state = _layer(cell, num_layers=2, bidirectional=bidirectional)(torch.randn(3, 5, INPUT))
    d = 2 if bidirectional else 1
    _expect(out.shape == (3, 5, d * HIDDEN), "shapes",
            f"output shape {tuple(out.shape)}, expected {(3, 5, d * HIDDEN)}")
    for leaf in leaves(state):
        _expect(leaf.shape[:2] == (2 * d, 3), "shapes", f"a state leaf of shape {tuple(leaf.shape)} does not start "
                                                        f"with (layers x directions, batch) = {(2 * d, 3)}")
    _expect(bool(torch.isfinite(out).all()), "shapes", "the outputs are not finite")


def check_length_one_and_zero(cell: CellLike) -> None:
    """A one-step sequence works; a zero-step one gives no outputs and the initial state."""
    layer = _layer(cell)
    out, _ = layer(torch.randn(2, 1, INPUT))
    _expect(out.shape == (2, 1, HIDDEN), "length 1", f"output shape {tuple(out.shape)}")
    out0, state0 = layer(torch.randn(2, 0, INPUT))
    _expect(out0.shape == (2, 0, HIDDEN), "length 0", f"output shape {tuple(out0.shape)}")
    for a, b in zip(leaves(state0), leaves(layer.initial_state(2))):
        _expect(torch.equal(a, b), "length 0", "the final state of an empty sequence is not the initial state")


def check_state_carries(cell: CellLike) -> None:
    """Running 6 steps at once equals 3 steps, then 3 more from the returned state."""
    layer = _layer(cell).eval()
    x = torch.randn(2, 6, INPUT)
    full, full_state = layer(x)
    first, mid = layer(x[:, :3])
    second, end = layer(x[:, 3:], mid)
    _close(torch.cat([first, second], 1), full, "state carried across calls", "the outputs")
    for a, b in zip(leaves(end), leaves(full_state)):
        _close(a, b, "state carried across calls", "the final states")


def check_padding_invariance(cell: CellLike, bidirectional: bool = False) -> None:
    """Each sequence gives the same outputs and final state alone as inside a padded batch (zeros past its end)."""
    layer = _layer(cell, num_layers=2, bidirectional=bidirectional).eval()
    lengths = torch.tensor([5, 2, 3])
    x = torch.randn(3, 7, INPUT)  # two extra padding steps beyond the longest
    out, state = layer(x, lengths=lengths)
    for b, n in enumerate(lengths.tolist()):
        alone, alone_state = layer(x[b: b + 1, :n])
        _close(out[b, :n], alone[0], "padding invariance", f"the outputs of sequence {b}", atol=1e-5, rtol=1e-4)
        _expect(bool(torch.all(out[b, n:] == 0)), "padding invariance", f"outputs past the end of sequence {b} are "
                                                                        "not zero")
        for got, want in zip(leaves(state), leaves(alone_state)):
            _close(got[:, b], want[:, 0], "padding invariance", f"the final states of sequence {b}", atol=1e-5,
                   rtol=1e-4)


def check_gradients_reach_every_parameter(cell: CellLike) -> None:
    """Outputs, float state leaves and the auxiliary loss give every parameter a finite, non-zero gradient."""
    layer = _layer(cell, num_layers=2, bidirectional=True)
    out, state, aux = layer(torch.randn(3, 4, INPUT), lengths=torch.tensor([4, 3, 1]), return_aux=True)
    loss = out.pow(2).sum() + sum(s.float().pow(2).sum() for s in leaves(state) if s.is_floating_point()) + aux
    loss.backward()
    missing = [n for n, p in layer.named_parameters() if p.grad is None or not torch.isfinite(p.grad).all()
               or p.grad.abs().sum() == 0]
    _expect(not missing, "gradients", f"no finite, non-zero gradient reaches {missing}")


def check_float64_gradcheck(cell: CellLike) -> None:
    """``torch.autograd.gradcheck`` in float64 over the input and every parameter (padded lengths)."""
    layer = _layer(cell, 3, 4).double()
    names = [n for n, _ in layer.named_parameters()]
    params = tuple(p.detach().clone().requires_grad_(True) for p in layer.parameters())
    x = torch.randn(2, 3, 3, dtype=torch.float64, requires_grad=True)
    lengths = torch.tensor([3, 2])

    def run(x: torch.Tensor, *ps: torch.Tensor) -> torch.Tensor:
        return functional_call(layer, dict(zip(names, ps)), (x,), {"lengths": lengths})[0]

    try:
        torch.autograd.gradcheck(run, (x, *params), eps=1e-6, atol=1e-5)
    except RuntimeError as error:  # gradcheck's "Jacobian mismatch ..." report
        raise CellContractError(f"cell contract, float64 gradcheck: {str(error).splitlines()[0]}") from None


def check_bf16_autocast(cell: CellLike) -> None:
    """Under CPU bfloat16 autocast the forward and backward stay finite."""
    layer = _layer(cell, num_layers=2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, _, aux = layer(torch.randn(2, 5, INPUT), lengths=torch.tensor([5, 3]), return_aux=True)
        loss = out.float().sum() + aux.float()
    _expect(bool(torch.isfinite(out.float()).all()), "bf16 autocast", "the outputs are not finite")
    loss.backward()
    _expect(all(torch.isfinite(p.grad).all() for p in layer.parameters() if p.grad is not None), "bf16 autocast",
            "a gradient is not finite")


def check_mixed_precision(cell: CellLike, dtype: torch.dtype = torch.bfloat16, padded: bool = False) -> None:
    """Under autocast (``16-mixed`` / ``bf16-mixed``) every float state leaf stays float32 and the outputs stay
    near the float32 run."""
    layer = _layer(cell, num_layers=2)
    x = torch.randn(3, 12, INPUT)
    lengths = torch.tensor([12, 7, 4]) if padded else None
    full, _ = layer(x, lengths=lengths)
    with torch.autocast("cpu", dtype=dtype):
        out, state = layer(x, lengths=lengths)
    _expect(all(s.dtype == torch.float32 for s in leaves(state) if s.is_floating_point()), "mixed precision",
            f"a state leaf is not float32 under {dtype} autocast")
    _expect(bool(torch.isfinite(out.float()).all()), "mixed precision", "the outputs are not finite")
    _close(out.float(), full, "mixed precision", f"the {dtype} and float32 outputs", atol=0.05, rtol=0.05)


CHECKS: Dict[str, Tuple[Callable[..., None], Dict[str, Any]]] = {
    "shapes": (check_shapes, {}), "shapes, bidirectional": (check_shapes, {"bidirectional": True}),
    "length 0 and 1": (check_length_one_and_zero, {}), "state carried across calls": (check_state_carries, {}),
    "padding invariance": (check_padding_invariance, {}),
    "padding invariance, bidirectional": (check_padding_invariance, {"bidirectional": True}),
    "gradients reach every parameter": (check_gradients_reach_every_parameter, {}),
    "float64 gradcheck": (check_float64_gradcheck, {}), "bf16 autocast": (check_bf16_autocast, {}),
    **{f"mixed precision {str(t).split('.')[-1]}{', padded' if p else ''}": (check_mixed_precision,
                                                                             {"dtype": t, "padded": p})
       for t in (torch.float16, torch.bfloat16) for p in (False, True)},
}
"""Every check of the contract, by name, with the options it runs with."""


def check_cell(cell: CellLike, seed: int = 0) -> List[str]:
    """Run every check of the cell contract on ``cell`` (a :class:`RecurrentCell` subclass, a factory
    ``(input_size, hidden_size) -> cell`` such as ``functools.partial(MyCell, option=1)``, or a registered
    name); returns the names of the checks passed, or raises :class:`CellContractError` at the first failure."""
    passed = []
    for name, (check, options) in CHECKS.items():
        torch.manual_seed(seed)
        check(cell, **options)
        passed.append(name)
    return passed


__all__ = ["CHECKS", "CellContractError", "check_cell"]
