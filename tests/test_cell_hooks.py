"""Forward pre-hooks on cells run once per layer call: the layer steps its cells without calling them, so the
hooks that ``torch.nn.utils.prune`` (Lightning's ``ModelPruning``) and the hook-based ``weight_norm`` register
never ran, and the weight they manage went stale ("Trying to backward through the graph a second time")."""
from __future__ import annotations

import copy
import warnings

import pytest
import torch
from torch.nn.utils import prune

from lit_rnncells.nn import Recurrent
from lit_rnncells.tasks import Seq2Seq

from .test_seq2seq import make, pairs


def _loss(layer: Recurrent, x: torch.Tensor) -> torch.Tensor:
    return layer(x)[0].square().sum()


@pytest.mark.parametrize("cell,owner,name", [("GRU", "", "weight_hh"), ("MuFuRU", "", "bias"),
                                             ("CapMZU", "blocks.0", "bias"), ("CapMZU", "blocks.1", "weight_hh")])
def test_a_pruned_cell_weight_is_masked_in_every_call_and_trains(cell: str, owner: str, name: str) -> None:
    """Lightning's ``ModelPruning`` prunes every module's ``weight`` and ``bias``: MuFuRU's ``bias``, an MZU
    block's (read as an attribute in the step, like every weight of a cell)."""
    torch.manual_seed(0)
    layer = Recurrent(cell, 4, 8, batch_first=True)
    x = torch.randn(2, 5, 4)
    zeroed = copy.deepcopy(layer)
    getattr(zeroed.cell().get_submodule(owner), name).data.zero_()
    prune.l1_unstructured(layer.cell().get_submodule(owner), name, amount=1.0)  # all masked: that weight zero
    for _ in range(2):  # the second backward failed: the masked weight was computed once, at pruning
        loss = _loss(layer, x)
        loss.backward()
        torch.testing.assert_close(loss, _loss(zeroed, x), rtol=0, atol=0)


def test_a_mask_changed_between_calls_reaches_the_next_call() -> None:
    torch.manual_seed(0)
    layer = Recurrent("GRU", 4, 8, batch_first=True)
    x = torch.randn(2, 5, 4)
    zeroed = copy.deepcopy(layer)
    zeroed.cell().weight_hh.data.zero_()
    before = _loss(layer, x).item()
    prune.identity(layer.cell(), "weight_hh")
    assert _loss(layer, x).item() == before  # an all-ones mask
    layer.cell().weight_hh_mask.zero_()
    assert _loss(layer, x).item() == _loss(zeroed, x).item() != before


def test_the_hook_based_weight_norm_follows_its_magnitude_and_direction() -> None:
    torch.manual_seed(0)
    layer = Recurrent("LSTM", 4, 8, batch_first=True)
    x = torch.randn(2, 5, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch deprecates it for the parametrization
        torch.nn.utils.weight_norm(layer.cell(), "weight_hh")
    before = _loss(layer, x)
    before.backward()
    assert layer.cell().weight_hh_g.grad is not None
    with torch.no_grad():
        layer.cell().weight_hh_g.mul_(0.0)
    plain = Recurrent("LSTM", 4, 8, batch_first=True)
    plain.load_state_dict({k: v for k, v in layer.state_dict().items() if not k.endswith(("_g", "_v"))}, strict=False)
    with torch.no_grad():
        plain.cell().weight_hh.zero_()
    torch.testing.assert_close(_loss(layer, x), _loss(plain, x))


def test_a_pruned_decoder_cell_is_masked_when_training_and_decoding() -> None:
    model: Seq2Seq = make(cell="GRU", num_layers=2)
    zeroed = copy.deepcopy(model)
    zeroed.decoder_cells[1].weight_hh.data.zero_()
    prune.l1_unstructured(model.decoder_cells[1], "weight_hh", amount=1.0)
    batch = pairs([5, 3], [4, 2])
    for _ in range(2):
        logits, _ = model(batch["source"], batch["source_lengths"], batch["target"])
        logits.sum().backward()
        torch.testing.assert_close(logits, zeroed(batch["source"], batch["source_lengths"], batch["target"])[0])
    got = [h[0].tokens for h in model.translate(batch["source"], batch["source_lengths"])]
    assert got == [h[0].tokens for h in zeroed.translate(batch["source"], batch["source_lengths"])]


def test_other_pre_hooks_of_a_cell_are_not_run_without_an_input() -> None:
    layer = Recurrent("GRU", 4, 8)
    calls = []
    layer.cell().register_forward_pre_hook(lambda module, args: calls.append(args[0]))
    layer(torch.randn(5, 2, 4))
    assert calls == []


def test_hooked_weights_with_cuda_graphs_are_refused_by_name() -> None:
    """A captured CUDA graph reads the tensors it was captured with; a pruned weight is a new tensor each call."""
    from dataclasses import replace

    from lit_rnncells.nn.backend import resolve
    from lit_rnncells.nn.recurrent import check_hooked_weights_not_graphed, refresh_hooked_weights

    layer = Recurrent("GRU", 4, 8)
    assert refresh_hooked_weights(layer.cells) is False
    prune.random_unstructured(layer.cell(), "weight_hh", amount=0.5)
    assert refresh_hooked_weights(layer.cells) is True
    loop = resolve(type(layer.cell()), "loop", "cpu")
    graphs = replace(loop, backend="graphs", step="graphs")  # as resolved on CUDA
    check_hooked_weights_not_graphed(True, [loop])
    check_hooked_weights_not_graphed(False, [graphs])
    with pytest.raises(ValueError, match="recomputed by a pruning or weight-norm hook at each call, which a captured "
                                         "CUDA graph cannot follow; run it with backend 'compiled' or 'loop'"):
        check_hooked_weights_not_graphed(True, [loop, graphs])
