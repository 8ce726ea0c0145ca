"""AWD-LSTM regularisers for any cell (Merity, Keskar & Socher 2018, "Regularizing and
Optimizing LSTM Language Models", §4): DropConnect on the recurrent weights, locked
(variational) dropout, embedding dropout, and activation / temporal activation
regularisation (AR / TAR).

DropConnect lives on *our own* parameters: :class:`WeightDrop` runs the wrapped
module with ``torch.func.functional_call`` and dropped copies of the named
hidden-to-hidden weights, computed once per forward, so one mask holds for every
time step of the sequence (as in the paper) and the gradient reaches the raw
weight. Nothing is deleted or re-registered, the failure mode of the original
``weight_drop.py`` on recent PyTorch (salesforce/awd-lstm-lm issues #86, #119).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from torch import Tensor, nn
from torch.func import functional_call
from torch.nn import functional as F

from ..utils.arguments import check_probability


def _check_p(p: float, name: str = "p") -> float:
    check_probability(**{name: p})
    return float(p)


def recurrent_weight_names(module: nn.Module) -> List[str]:
    """Dotted names (relative to ``module``) of the hidden-to-hidden weights of every cell inside.

    A cell declares them with a class attribute, e.g. ``recurrent_weights = ("weight_hh",)``;
    wrappers such as MC-RNN are searched recursively. Modules that declare nothing fall
    back to parameters whose own name contains ``weight_hh``.
    """
    declared: List[str] = []
    covered: List[str] = []
    for prefix, sub in module.named_modules():
        names = getattr(type(sub), "recurrent_weights", None)
        if names is None:
            continue
        covered.append(prefix)
        for n in names:
            full = f"{prefix}.{n}" if prefix else n
            if getattr(sub, n, None) is None or not isinstance(getattr(sub, n), nn.Parameter):
                raise ValueError(f"{type(sub).__name__}.recurrent_weights names {n!r}, which is not a parameter.")
            declared.append(full)

    def under_declared(name: str) -> bool:
        return any(c == "" or name.startswith(c + ".") for c in covered)

    fallback = [n for n, _ in module.named_parameters()
                if "weight_hh" in n.rsplit(".", 1)[-1] and not under_declared(n)]
    return declared + fallback


class WeightDrop(nn.Module):
    """DropConnect (Wan et al. 2013) on the recurrent weights of a module, AWD-LSTM §4.1.

    In training, each forward draws one Bernoulli mask per named weight (scaled by
    ``1/(1-p)``) and runs ``module`` with the dropped copies; the mask is therefore
    fixed across all time steps of that forward and new on the next one. In eval
    the raw weights are used. ``names`` defaults to :func:`recurrent_weight_names`.
    The wrapped module stays reachable as ``.module`` (its parameters keep their names).
    """

    def __init__(self, module: nn.Module, p: float, names: Optional[Sequence[str]] = None) -> None:
        super().__init__()
        self.module = module
        self.p = _check_p(p, "weight_drop")
        self.names = list(names) if names is not None else recurrent_weight_names(module)
        params = dict(module.named_parameters())
        missing = [n for n in self.names if n not in params]
        if missing:
            raise ValueError(f"WeightDrop: no parameter(s) {missing} in {type(module).__name__}.")
        if self.p > 0 and not self.names:
            raise ValueError(f"{type(module).__name__} declares no recurrent weights to drop: add a class attribute "
                             "recurrent_weights = ('weight_hh', ...) to its cell, or set weight_drop to 0.")

    def dropped_weights(self) -> Dict[str, Tensor]:
        """Fresh dropped copies of the recurrent weights (one mask each)."""
        params = dict(self.module.named_parameters())
        return {n: F.dropout(params[n], self.p, training=True) for n in self.names}

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        if not self.training or self.p == 0.0:
            return self.module(*args, **kwargs)
        return functional_call(self.module, self.dropped_weights(), args, kwargs)

    def extra_repr(self) -> str:
        return f"p={self.p}, names={self.names}"


class LockedDropout(nn.Module):
    """Variational (locked) dropout, Gal & Ghahramani 2016 / AWD-LSTM §4.2: one mask per
    sequence and feature, shared by every time step. Input ``(B, T, D)`` (``batch_first``)
    or ``(T, B, D)``."""

    def __init__(self, p: float = 0.5, batch_first: bool = True) -> None:
        super().__init__()
        self.p = _check_p(p)
        self.batch_first = batch_first

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        shape = (x.shape[0], 1, x.shape[2]) if self.batch_first else (1, x.shape[1], x.shape[2])
        mask = x.new_empty(shape).bernoulli_(1.0 - self.p) / (1.0 - self.p)
        return x * mask

    def extra_repr(self) -> str:
        return f"p={self.p}"


def embedding_dropout(embedding: nn.Embedding, tokens: Tensor, p: float, training: bool = True) -> Tensor:
    """Embedding dropout (Gal & Ghahramani 2016, AWD-LSTM §4.3): drop whole rows (word types)
    of the embedding matrix, scaling the rest by ``1/(1-p)``, then look ``tokens`` up."""
    weight = embedding.weight
    if training and p > 0.0:
        mask = weight.new_empty(weight.shape[0], 1).bernoulli_(1.0 - p) / (1.0 - p)
        weight = weight * mask
    return F.embedding(tokens, weight, embedding.padding_idx, embedding.max_norm, embedding.norm_type,
                       embedding.scale_grad_by_freq, embedding.sparse)


def activation_regularization(dropped_output: Tensor, alpha: float) -> Tensor:
    """AR (AWD-LSTM §4.6): ``alpha * mean(h_t²)`` on the (dropped) last-layer outputs."""
    if alpha == 0.0:
        return dropped_output.new_zeros(())
    return alpha * dropped_output.float().pow(2).mean()


def temporal_activation_regularization(output: Tensor, beta: float, batch_first: bool = True) -> Tensor:
    """TAR (AWD-LSTM §4.6): ``beta * mean((h_t − h_{t+1})²)`` on the undropped last-layer outputs."""
    steps = output.shape[1] if batch_first else output.shape[0]
    if beta == 0.0 or steps < 2:
        return output.new_zeros(())
    diff = output[:, 1:] - output[:, :-1] if batch_first else output[1:] - output[:-1]
    return beta * diff.float().pow(2).mean()
