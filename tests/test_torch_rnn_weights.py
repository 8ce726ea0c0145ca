"""torch.nn.RNN / GRU / LSTM weights in a ``Recurrent``: ``Recurrent.from_torch`` and ``load_state_dict`` of
torch's names. The layers run ``backend='loop'``, our cells' own step equations, not torch's kernel, so equal
outputs and gradients say the equations are torch's."""
from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from lit_rnncells.cells import GRU, LSTM, MGU, Elman
from lit_rnncells.nn import Recurrent
from lit_rnncells.nn.torch_rnn import torch_name

TORCH = {"RNN": nn.RNN, "GRU": nn.GRU, "LSTM": nn.LSTM}
OURS = {"RNN": Elman, "GRU": GRU, "LSTM": LSTM}


def _leaves(state):
    return list(state) if isinstance(state, tuple) else [state]


def _loss(output, state) -> torch.Tensor:
    return output.square().sum() + sum(leaf.square().sum() for leaf in _leaves(state))


@pytest.mark.parametrize("kind", list(TORCH))
@pytest.mark.parametrize("num_layers,bidirectional,batch_first", [(1, False, False), (2, True, True)])
def test_from_torch_runs_the_modules_equations_with_its_weights(kind, num_layers, bidirectional, batch_first):
    torch.manual_seed(0)
    ref = TORCH[kind](5, 7, num_layers=num_layers, bidirectional=bidirectional, batch_first=batch_first)
    ours = Recurrent.from_torch(ref, backend="loop")
    assert type(ours.cell()) is OURS[kind] and ours.backend == "loop"
    assert (ours.num_layers, ours.bidirectional, ours.batch_first) == (num_layers, bidirectional, batch_first)
    assert ours.training
    x = torch.randn(4, 9, 5) if batch_first else torch.randn(9, 4, 5)
    packed = pack_padded_sequence(x, torch.tensor([9, 3, 6, 1]), batch_first=batch_first, enforce_sorted=False)
    for inputs in (x, packed):
        ref.zero_grad()
        ours.zero_grad()
        got, want = ours(inputs), ref(inputs)
        if inputs is packed:
            got = (pad_packed_sequence(got[0], batch_first=batch_first)[0], got[1])
            want = (pad_packed_sequence(want[0], batch_first=batch_first)[0], want[1])
        for a, b in zip([got[0], *_leaves(got[1])], [want[0], *_leaves(want[1])]):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
        _loss(*got).backward()
        _loss(*want).backward()
        theirs = dict(ref.named_parameters())
        for name, p in ours.named_parameters():
            _, index, parameter = name.split(".")
            layer, direction = divmod(int(index), ours.num_directions)
            twin = theirs[f"{parameter}_l{layer}{'_reverse' if direction else ''}"]
            torch.testing.assert_close(p.grad, twin.grad, atol=1e-4, rtol=1e-5, msg=lambda m, n=name: f"{n}: {m}")


def test_from_torch_keeps_dtype_training_mode_and_dropout() -> None:
    ref = nn.LSTM(3, 4, num_layers=2, dropout=0.25, dtype=torch.float64).eval()
    ours = Recurrent.from_torch(ref)
    assert ours.cell().weight_ih.dtype == torch.float64 and not ours.training and ours.dropout == 0.25
    assert ours.cell(1).weight_hh.data_ptr() != ref.weight_hh_l1.data_ptr()  # a copy: training ours leaves ref be
    torch.testing.assert_close(ours.cell(1).weight_hh, ref.weight_hh_l1, rtol=0, atol=0)


def test_torch_names_load_into_a_layer_and_into_a_model_holding_one() -> None:
    ref = nn.GRU(3, 4, num_layers=2, bidirectional=True)
    ours = Recurrent("GRU", 3, 4, num_layers=2, bidirectional=True)
    assert not ours.load_state_dict(ref.state_dict()).missing_keys
    torch.testing.assert_close(ours.cell(1, 1).bias_hh, ref.bias_hh_l1_reverse, rtol=0, atol=0)

    model = nn.Sequential(nn.Linear(3, 3), Recurrent("GRU", 3, 4, num_layers=2, bidirectional=True))
    theirs = nn.Sequential(nn.Linear(3, 3), ref)
    model.load_state_dict(theirs.state_dict())
    torch.testing.assert_close(model[1].cell(0, 1).weight_ih, ref.weight_ih_l0_reverse, rtol=0, atol=0)
    assert "1.cells.3.weight_hh" in model.state_dict()  # saving keeps our own names


def test_torch_names_a_layer_lacks_or_a_cell_without_torchs_equations_are_unexpected() -> None:
    with pytest.raises(RuntimeError, match=r"Unexpected key\(s\) in state_dict: \"weight_ih_l1\""):
        Recurrent("GRU", 3, 4).load_state_dict(nn.GRU(3, 4, num_layers=2).state_dict())
    with pytest.raises(RuntimeError, match=r"Unexpected key\(s\) in state_dict: \"weight_ih_l0_reverse\""):
        Recurrent("GRU", 3, 4).load_state_dict(nn.GRU(3, 4, bidirectional=True).state_dict())
    with pytest.raises(RuntimeError, match="Unexpected key.*weight_ih_l0"):
        Recurrent(MGU, 3, 4).load_state_dict(nn.GRU(3, 4).state_dict(), strict=True)
    with pytest.raises(RuntimeError, match="size mismatch for cells.0.weight_ih"):
        Recurrent("GRU", 3, 4).load_state_dict(nn.LSTM(3, 4).state_dict())


@pytest.mark.parametrize("module,message", [
    (nn.RNN(3, 4, nonlinearity="relu"), r"nonlinearity='relu'\) has no cell here"),
    (nn.LSTM(3, 4, proj_size=2), "proj_size=2"),
    (nn.GRU(3, 4, bias=False), "bias=False"),
])
def test_from_torch_refuses_what_no_cell_here_runs(module, message) -> None:
    with pytest.raises(ValueError, match=message):
        Recurrent.from_torch(module)


def test_from_torch_refuses_a_module_that_is_not_torchs_rnn() -> None:
    with pytest.raises(TypeError, match="takes a torch.nn.RNN, GRU or LSTM, got Linear"):
        Recurrent.from_torch(nn.Linear(3, 4))


@pytest.mark.parametrize("key,parsed", [("weight_ih_l0", ("weight_ih", 0, 0)),
                                        ("bias_hh_l12_reverse", ("bias_hh", 12, 1)),
                                        ("weight_hr_l0", None), ("cells.0.weight_ih", None)])
def test_torch_name(key, parsed) -> None:
    assert torch_name(key) == parsed


def test_torchs_parameter_names_read_the_cells_parameters() -> None:
    """Code written for torch.nn.GRU reads ``weight_hh_l0`` (an orthogonal initialisation) and ``all_weights``."""
    ours = Recurrent("GRU", 3, 4, num_layers=2, bidirectional=True)
    ref = nn.GRU(3, 4, num_layers=2, bidirectional=True)
    assert ours.weight_hh_l1_reverse is ours.cell(1, 1).weight_hh and ours.bias_ih_l0 is ours.cell(0).bias_ih
    assert [[p.shape for p in cell] for cell in ours.all_weights] == [[p.shape for p in w] for w in ref.all_weights]
    nn.init.orthogonal_(ours.weight_hh_l0)
    w = ours.cell(0).weight_hh.detach()
    torch.testing.assert_close(w.t() @ w, torch.eye(4), atol=1e-5, rtol=0)  # the cell's own weight changed
    assert Recurrent("CARU", 3, 4).weight_hh_l0.shape == (8, 4)  # any cell's parameter of that name
    for missing in ("weight_hh_l2", "weight_hh_l0_reverse", "weight_hr_l0", "no_such_thing"):
        with pytest.raises(AttributeError, match=f"'Recurrent' object has no attribute '{missing}'"):
            getattr(Recurrent("GRU", 3, 4), missing)
