"""How big a model is, for the start line, the parameter matching and the comparison tables."""
from __future__ import annotations

import torch


def count_parameters(model: torch.nn.Module) -> int:
    """Every parameter of the model (trainable or frozen), shared tensors once."""
    return sum(p.numel() for p in model.parameters())
