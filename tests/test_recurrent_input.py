"""What ``Recurrent`` refuses in one sentence before any step: a wrong shape, lengths outside the padded length,
input of another dtype than its parameters (torch's matmul said "mat1 and mat2 must have the same dtype")."""
from __future__ import annotations

import pytest
import torch

from lit_rnncells.cells import GRU, Elman, SatMZU
from lit_rnncells.nn import Recurrent


@pytest.fixture
def layer() -> Recurrent:
    torch.manual_seed(0)
    return Recurrent(GRU, 4, 8)


def test_a_wrong_shape_names_the_expected_one(layer):
    with pytest.raises(ValueError, match=r"Recurrent expects input of shape \(T, B, 4\), or one unbatched sequence "
                                         r"\(T, 4\), got \(2, 5, 3\)\.$"):
        layer(torch.randn(2, 5, 3))
    with pytest.raises(ValueError, match=r"unbatched sequence \(T, 4\), got \(7, 3\)\.$"):  # its own shape named
        layer(torch.randn(7, 3))


def test_a_state_for_another_batch_is_refused_naming_both_batches(layer):
    """It was a matmul's shape error from inside the first step (torch.nn.GRU refuses it before any step too)."""
    with pytest.raises(ValueError, match=r"initial state has shape \(1, 3, 8\), for a batch of 3, but the input is "
                                         r"a batch of 2; pass a state of shape \(1, 2, \.\.\.\)"):
        layer(torch.randn(5, 2, 4), torch.zeros(1, 3, 8))
    with pytest.raises(ValueError, match=r"initial state has shape \(8,\) but this layer needs num_layers \* "
                                         r"num_directions = 1 entries on dim 0, then the batch"):
        layer(torch.randn(5, 2, 4), torch.zeros(8))


def test_lengths_outside_the_padded_length_are_refused(layer):
    with pytest.raises(ValueError, match=r"lengths must lie in \[0, 5\]"):
        layer(torch.randn(5, 2, 4), lengths=torch.tensor([7, 3]))


@pytest.mark.parametrize("cell", [GRU, SatMZU])
def test_input_of_another_float_dtype_than_the_parameters_is_one_sentence(cell):
    layer = Recurrent(cell, 4, 8)
    with pytest.raises(TypeError, match=r"Recurrent's parameters are torch.float32 but the input is torch.float64; "
                                        r"convert one to the other"):
        layer(torch.randn(5, 2, 4, dtype=torch.float64))
    layer.double()  # the fix it names works
    assert layer(torch.randn(5, 2, 4, dtype=torch.float64))[0].dtype == torch.float64


def test_token_ids_are_refused_with_the_embedding_named(layer):
    with pytest.raises(TypeError, match="Recurrent expects floating-point features, got torch.int64; embed token ids"):
        layer(torch.ones(5, 2, 4, dtype=torch.long))


def test_under_autocast_another_float_dtype_is_autocasts_to_cast(layer):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, _ = layer(torch.randn(5, 2, 4, dtype=torch.bfloat16))
    assert out.shape == (5, 2, 8)


def test_a_cell_without_an_option_it_requires_names_the_option_and_how_to_give_it():
    """``MultiChannel`` wraps a cell it must be given (it was the constructor's TypeError, "missing 1 required
    keyword-only argument"); given through functools.partial it builds."""
    import functools

    from lit_rnncells.cells import MultiChannel

    with pytest.raises(ValueError, match=r"^The cell MultiChannel needs the option cell; pass "
                                         r"functools.partial\(MultiChannel, cell=...\) in Python, or give cell under "
                                         r"the cell's init_args in a config\.$"):
        Recurrent("MultiChannel", 4, 8)
    layer = Recurrent(functools.partial(MultiChannel, cell="GRU", block_size=2), 4, 8)
    assert layer(torch.randn(5, 2, 4))[0].shape == (5, 2, 8)


def test_a_built_cell_or_an_option_the_cell_lacks_is_one_sentence_before_any_cell_is_built():
    """A cell instance where its class belongs (was "Module [GRU] is missing the required forward function"), and
    an option the cell lacks given through functools.partial (was the TypeError of ZoneFunctions, a part of the
    cell the option reached)."""
    import functools

    with pytest.raises(TypeError, match=r"^cell is a built GRU module; pass its class \(GRU\) or a factory such as "
                                        r"functools.partial\(GRU, ...\): Recurrent builds one cell per layer"):
        Recurrent(GRU(4, 8), 4, 8)
    with pytest.raises(ValueError, match=r"^SatMZU has no option 'zone'. Did you mean 'zones'\? SatMZU accepts: zones,"):
        Recurrent(functools.partial(SatMZU, zone=2), 4, 8)
    assert Recurrent(functools.partial(SatMZU, zones=2), 4, 8).cells[0].zones == 2
    # a cell without options says so, and names the cells that have the one given (it said "Elman accepts: .")
    with pytest.raises(ValueError, match=r"^Elman has no option 'zones'. Elman takes no options. 'zones' is an "
                                         r"option of CapMZU, GcnMZU, SatMZU\.$"):
        Recurrent(functools.partial(Elman, zones=2), 4, 8)


def test_device_and_dtype_place_and_type_the_parameters_as_torch_nn_gru_does():
    """``Recurrent(..., dtype=torch.float64)`` was "unexpected keyword argument 'dtype'"; it equals ``.double()``
    of the same layer, and ``device='meta'`` builds one without memory."""
    torch.manual_seed(0)
    typed = Recurrent("SatMZU", 4, 8, num_layers=2, bidirectional=True, dtype=torch.float64)
    torch.manual_seed(0)
    converted = Recurrent("SatMZU", 4, 8, num_layers=2, bidirectional=True).double()
    assert {p.dtype for p in typed.parameters()} == {torch.float64}
    x = torch.randn(5, 3, 4, dtype=torch.float64)
    assert torch.equal(typed(x)[0], converted(x)[0])
    assert {p.device.type for p in Recurrent("GRU", 4, 8, device="meta").parameters()} == {"meta"}
    assert {p.device.type for p in Recurrent("GRU", 4, 8, device=torch.device("cpu")).parameters()} == {"cpu"}
    with pytest.raises(TypeError, match=r"^dtype must be a floating torch dtype \(torch.float32, torch.float64, "
                                        r"torch.bfloat16, \.\.\.\), got torch.int64\.$"):
        Recurrent("GRU", 4, 8, dtype=torch.int64)


def test_flatten_parameters_as_code_written_for_torch_gru_calls_it_changes_nothing():
    layer = Recurrent(GRU, 3, 4, num_layers=2, bidirectional=True, batch_first=True)
    before = {n: p.detach().clone() for n, p in layer.named_parameters()}
    ids = {n: id(p) for n, p in layer.named_parameters()}
    x = torch.randn(2, 5, 3)
    out = layer(x)[0]
    assert layer.flatten_parameters() is None
    assert {n: id(p) for n, p in layer.named_parameters()} == ids  # the same Parameter objects an optimiser holds
    assert all(torch.equal(p, before[n]) for n, p in layer.named_parameters())
    torch.testing.assert_close(layer(x)[0], out, rtol=0, atol=0)
